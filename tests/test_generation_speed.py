"""benchmarks/generation_speed.py, the benchmark against onnxruntime-genai (issue 49, item 1):
its quick mode end to end — a random Llama checkpoint with a WordLevel tokenizer, fxport's
``--task text-generation`` file and genai's builder (fp32 and int4) built from it, each decoded
in a process of its own — and what the table says: fxport's file and genai's fp32 file give
eager ``generate()``'s ids, the int4 file a share of them.

The end-to-end test needs onnxruntime-genai (``pip install onnxruntime-genai``) and skips with
that reason without it: the benchmark is not part of what fxport needs.
"""

from __future__ import annotations

import importlib.util

import pytest

from benchmarks import generation_speed

pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

HAS_GENAI = importlib.util.find_spec("onnxruntime_genai") is not None


def test_agreement_counts_equal_ids_and_a_shape_mismatch_as_none():
    assert generation_speed.agreement([[1, 2, 3, 4]], [[1, 2, 0, 4]]) == 0.75
    assert generation_speed.agreement([[1, 2]], [[1, 2, 3]]) == 0.0


def test_the_checkpoint_has_a_tokenizer_the_builder_can_load(tmp_path):
    """genai's builder loads the tokenizer with AutoTokenizer: token ``t{i}`` is id ``i``."""
    import transformers

    config = dict(generation_speed.QUICK_CONFIG, layers=1)
    folder = generation_speed.write_checkpoint(str(tmp_path / "ckpt"), config)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    assert tokenizer("t5 t7 t1023 </s>")["input_ids"] == [5, 7, 1023, 2]
    lm = transformers.AutoModelForCausalLM.from_pretrained(folder)
    assert (lm.config.num_hidden_layers, lm.config.num_key_value_heads, lm.config.vocab_size) == (1, 2, 1024)


@pytest.mark.slow
@pytest.mark.skipif(not HAS_GENAI, reason="onnxruntime-genai is not installed (pip install onnxruntime-genai): "
                                          "the benchmark's genai columns need it")
def test_quick_benchmark_end_to_end():
    decoding, building = generation_speed.run(1, generation_speed.QUICK_CONFIG, generation_speed.QUICK_ROWS,
                                              log=lambda *_: None)
    assert [row[:3] for row in decoding.rows] == [[str(b), str(p), str(n)] for b, p, n in generation_speed.QUICK_ROWS]
    for row in decoding.rows:
        same = row[-1].split(" / ")
        assert same[:2] == ["yes", "yes"], row  # fxport's file and genai fp32 give eager's ids
        assert same[2] == "yes" or same[2].endswith("of ids"), row  # int4: a share of them
        assert all(float(cell) > 0 for cell in row[3:8]), row  # five tokens/s
        assert row[12].startswith("yes / ") and row[12].endswith("of ids"), row  # fxport int4: its eager reference's ids
    commands = [row[0] for row in building.rows]
    assert len(commands) == 4 and "fxport convert" in commands[0] and "--precision int4" in commands[1]
    assert "-p fp32" in commands[2] and "-p int4" in commands[3]
    assert all(float(row[1]) > 0 and float(row[3]) > 0 for row in building.rows)  # seconds, peak RSS


def test_convert_time_table_puts_nested_phases_under_their_rows_and_the_rest_in_other():
    """benchmarks/generation_convert_time.py (issue 49, item 4): the phases before the pipeline,
    the stages, the parts of lower under it, and what no timer covers."""
    from benchmarks import generation_convert_time as convert_time

    phases = {"load checkpoint": 2.0, "input sets": 5.0, "  of which: search for stopping prompts": 4.0,
              "check against generate()": 7.0, "  exporter (translation + optimize)": 3.0}
    result = {"wall": 30.0, "phases": phases, "calls": {}, "stages": {"capture": 4.0, "lower": 6.0},
              "peak_rss_mb": 100.0, "weights_mb": 50.0}
    rows = {row[0]: row[1] for row in convert_time.render({(2, 8): result}).rows}
    assert rows["  of which: search for stopping prompts"] == "4.0"
    assert rows["  exporter (translation + optimize)"] == "3.0"
    assert list(rows).index("  exporter (translation + optimize)") > list(rows).index("stage `lower`")
    assert rows["other: imports, the exporter's registry, the CLI"] == "6.0"  # 30 - (2 + 5 + 7) - (4 + 6)
    assert rows["peak RSS MB (÷ weights)"] == "100 (2.0×)"
