"""A few rows of the generation sweep (benchmarks/generation.py, docs/generation.md) in CI: the
sweep's own conversion through ``--task text-generation``, its file compared token for token
with transformers' ``generate()`` on prompts (audio for Whisper) the conversion never saw."""

import pytest

pytest.importorskip("transformers")


@pytest.mark.slow
@pytest.mark.parametrize("name, search", [("qwen2_moe", "beam 2"), ("gemma3", "greedy"), ("bart", "sample"),
                                          ("whisper", "greedy")])
def test_sweep_row_is_verified_and_equal_to_generate_on_unseen_inputs(name, search):
    from benchmarks import generation

    row = generation.one_whisper(search) if name in generation.SPEECH else generation.one(name, search)
    architecture, searched, fxport_cell, steps, wrong, stock = row
    assert fxport_cell.startswith(f"verified, {len(generation.UNSEEN)}/{len(generation.UNSEEN)} unseen sets equal"), row
    assert "Loop×1" in fxport_cell and wrong == "no", row
