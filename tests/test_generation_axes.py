"""Generation along its two axes (issue 48, item 3): one settings table from which the settings
class, the CLI options, the range checks, the refusals and ``generate()``'s keywords are derived;
the logits processors in ``generate()``'s order; the mode table (greedy, sample, beam, and the
modes refused); the family table (decoder-only, encoder–decoder, Whisper).

A processor ``generate()`` has and fxport lacked, ``no_repeat_ngram_size``, added as one table
row and one processor: equal to ``generate()`` eagerly in every mode and family, and in the file
``--task text-generation --no-repeat-ngram-size`` writes."""

import dataclasses
import json
import pathlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import typer

import fxport
import fxport.load.tasks
from fxport.cli import app
from fxport.errors import UsageError
from fxport.generation import processors
from fxport.generation.settings import CONVERTED, FLAGS, SETTINGS, GenerationSettings, check_setting_ranges
from tests.conftest import op_counts, run_cli

ROOT = pathlib.Path(__file__).resolve().parents[1]
VOCAB = 64
SHAPES = [(1, 1), (1, 2), (3, 5), (4, 9), (2, 3), (5, 4), (1, 4), (1, 6)]


def tiny_gpt2(seed=0):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=128, n_embd=32, n_layer=2, n_head=2,
                                     bos_token_id=0, eos_token_id=5)
    return transformers.GPT2LMHeadModel(config).eval()


def tiny_t5(seed=0):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    return transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
        decoder_start_token_id=0, eos_token_id=1, pad_token_id=0, initializer_factor=8.0)).eval()


def prompts(seed_base=0, shapes=SHAPES):
    return [fxport.load.tasks.left_padded_prompts(batch, length, VOCAB, seed) for seed, (batch, length)
            in enumerate(shapes, start=seed_base)]


def generate(lm, ids, mask, **settings):
    with torch.no_grad():
        return lm.generate(input_ids=ids, attention_mask=mask, **settings)


# --- the settings table ---------------------------------------------------------------------

def test_the_settings_class_the_cli_options_and_generates_keywords_come_from_the_table():
    assert [field.name for field in dataclasses.fields(GenerationSettings)] == [row.attribute for row in CONVERTED]
    command = typer.main.get_command(app).commands["convert"]
    options = {name for parameter in command.params for name in parameter.opts}
    assert {row.flag for row in FLAGS} | {"--no-do-sample"} <= options
    settings = GenerationSettings(max_new_tokens=4, do_sample=True, top_k=5, cache_implementation="static")
    assert set(settings.generate_kwargs()) == {row.name for row in CONVERTED}
    without_sampling = dataclasses.replace(settings, do_sample=False, cache_implementation=None)
    assert set(without_sampling.generate_kwargs()) == {row.name for row in CONVERTED
                                                        if not row.sampling and row.kind != "text"}
    for row in CONVERTED:
        if row.within is not None:
            with pytest.raises(UsageError, match=f"^{row.flag} nan is out of range"):
                check_setting_ranges({row.name: float("nan")}, as_flags=True)


def test_every_flag_is_documented():
    cli, generation = (ROOT / "docs" / "cli.md").read_text(), (ROOT / "docs" / "generation.md").read_text()
    for row in FLAGS:
        assert f"`{row.flag}" in cli or f", {row.flag}" in cli, row.flag
        assert f"`{row.flag}" in generation, row.flag


def test_a_setting_the_table_does_not_convert_is_refused_in_one_line():
    from fxport.generation.resolve import generation_settings

    lm = tiny_gpt2()
    for setting, said in [(dict(do_sample=True, epsilon_cutoff=0.1), "epsilon_cutoff=0.1"),
                          (dict(sequence_bias={(3,): 1.0}), "sequence_bias"),
                          (dict(cache_implementation="quantized"), "cache_implementation='quantized'")]:
        with pytest.raises(UsageError) as refused:
            generation_settings(lm, max_new_tokens=4, **setting)
        assert said in str(refused.value) and "\n" not in str(refused.value)


# --- the processors, in generate()'s order --------------------------------------------------

def test_the_processors_are_in_the_order_generate_applies_them():
    """transformers' own list for a config that turns every processor on, read back as settings."""
    from transformers import GenerationConfig

    lm = tiny_gpt2()
    config = GenerationConfig(repetition_penalty=1.3, no_repeat_ngram_size=2, min_new_tokens=2, forced_eos_token_id=3,
                              eos_token_id=5, max_new_tokens=4)
    lm._prepare_special_tokens(config, device="cpu")
    built = lm._get_logits_processor(config, input_ids_seq_length=3, encoder_input_ids=torch.ones(1, 3, dtype=torch.long),
                                     device="cpu")
    by_class = {"RepetitionPenaltyLogitsProcessor": "repetition_penalty",
                "NoRepeatNGramLogitsProcessor": "no_repeat_ngram_size",
                "MinNewTokensLengthLogitsProcessor": "min_new_tokens",
                "ForcedEOSTokenLogitsProcessor": "forced_eos_token_id"}
    assert [by_class[type(processor).__name__] for processor in built] == [name for name, _ in processors.PROCESSORS]
    assert all(name in SETTINGS for name, _ in processors.PROCESSORS)


@pytest.mark.parametrize("size", [1, 2, 3])
def test_no_repeat_ngram_matches_transformers_processor_on_random_ids(size):
    """Rows of random ids (few distinct ones, so n-grams repeat), some filled only part way
    (a beam buffer): the same -inf as ``NoRepeatNGramLogitsProcessor`` on the filled part."""
    from transformers.generation.logits_process import NoRepeatNGramLogitsProcessor

    draw = torch.Generator().manual_seed(size)
    settings = GenerationSettings(max_new_tokens=4, no_repeat_ngram_size=size)
    for length in (1, 2, 3, 7, 12):
        ids = torch.randint(0, 4, (5, length), generator=draw)
        scores = torch.randn(5, 6, generator=draw)
        expected = NoRepeatNGramLogitsProcessor(size)(ids, scores.clone())
        padding = torch.zeros(5, dtype=torch.int64)
        assert torch.equal(processors.no_repeat_ngram(scores, settings, ids, padding, 0, None), expected)
        buffer = torch.cat([ids, torch.randint(0, 4, (5, 3), generator=draw)], 1)  # 3 ids not written yet
        filled = torch.tensor(length)
        assert torch.equal(processors.no_repeat_ngram(scores, settings, buffer, padding, 0, filled), expected)


# --- the mode table and the family table ----------------------------------------------------

def test_every_generation_mode_of_transformers_has_a_row_and_the_unconverted_ones_are_refused():
    from transformers.generation.configuration_utils import GenerationMode

    from fxport.generation.modes import MODES
    from fxport.generation.resolve import generation_settings

    assert set(MODES) == {mode.value for mode in GenerationMode}
    lm = tiny_gpt2()
    for setting, said in [(dict(num_beams=2, force_words_ids=[[3]]), "constrained beam search (force_words_ids=[[3]])"),
                          (dict(do_sample=True, num_beams=2), "beam sampling (do_sample=True, num_beams=2)")]:
        with pytest.raises(UsageError) as refused:
            generation_settings(lm, max_new_tokens=4, **setting)
        assert said in str(refused.value) and "\n" not in str(refused.value)


def test_one_function_picks_the_family_for_the_task_and_for_generate():
    from fxport.generation.architectures import build_generator, family_of

    gpt2, t5 = tiny_gpt2(), tiny_t5()
    assert (family_of(gpt2).name, family_of(t5).name) == ("decoder-only", "encoder-decoder")
    assert type(build_generator(gpt2, max_new_tokens=3, num_beams=2)).__name__ == "BeamSearchDecoderOnlyGenerator"
    assert type(build_generator(t5, max_new_tokens=3, do_sample=True)).__name__ == "SamplingEncoderDecoderGenerator"


# --- no_repeat_ngram_size end to end --------------------------------------------------------

@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
@pytest.mark.parametrize("build", [tiny_gpt2, tiny_t5])
@pytest.mark.parametrize("settings", [dict(no_repeat_ngram_size=2), dict(no_repeat_ngram_size=3, num_beams=3),
                                      dict(no_repeat_ngram_size=2, num_beams=2, repetition_penalty=1.05,
                                           num_return_sequences=2),
                                      dict(no_repeat_ngram_size=1, do_sample=True, top_k=10)],
                         ids=["greedy-2", "beams-3", "beams-2-penalty", "sample-1"])
def test_no_repeat_ngram_size_equals_generate(build, settings):
    """The generator with ``no_repeat_ngram_size`` gives ``generate()``'s ids, which differ from
    those without it (the processor changes what these models generate)."""
    from fxport.generation.architectures import build_generator
    from fxport.generation.sampling import sampling_draws

    lm = build()
    settings = dict(settings, max_new_tokens=7)
    generator = build_generator(lm, **settings)
    changed = 0
    for ids, mask in prompts():
        draws = torch.rand(ids.shape[0], 7, generator=torch.Generator().manual_seed(ids.shape[1]))
        arguments = (ids, mask, draws) if settings.get("do_sample") else (ids, mask)
        with sampling_draws(draws):
            expected = generate(lm, ids, mask, **settings)
        with sampling_draws(draws):
            without = generate(lm, ids, mask, **dict(settings, no_repeat_ngram_size=0))
        with torch.no_grad():
            assert torch.equal(generator(*arguments), expected), (ids.tolist(), expected.tolist())
        changed += expected.shape != without.shape or not torch.equal(expected, without)
    assert changed, "no_repeat_ngram_size changed no output: the test cannot fail"


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_cli_no_repeat_ngram_size_writes_a_file_equal_to_generate(tmp_path):
    """``--no-repeat-ngram-size 2`` on a tiny GPT-2 checkpoint: one Loop, verified, and equal to
    ``generate(no_repeat_ngram_size=2)`` on prompts the export never saw."""
    lm = tiny_gpt2(seed=1)
    lm.save_pretrained(tmp_path / "gpt2")
    out = tmp_path / "gen.onnx"
    result = run_cli("convert", str(tmp_path / "gpt2"), "--task", "text-generation", "--max-new-tokens", "8",
                     "--no-repeat-ngram-size", "2", "-o", str(out), "--json", timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["verified"] and "no repeated 2-gram" in data["task"]["built"], data["task"]
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    assert op_counts(onnx.load(out)).get("Loop") == 1
    changed = 0
    for ids, mask in prompts(100, [(1, 3), (4, 7), (1, 5), (2, 1), (3, 12)]):
        (produced,) = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
        expected = generate(lm, ids, mask, max_new_tokens=8, do_sample=False, no_repeat_ngram_size=2)
        np.testing.assert_array_equal(produced, expected.numpy())
        without = generate(lm, ids, mask, max_new_tokens=8, do_sample=False)
        changed += expected.shape != without.shape or not torch.equal(expected, without)
    assert changed
    bad = run_cli("convert", str(tmp_path / "gpt2"), "--task", "text-generation", "--no-repeat-ngram-size", "-1",
                  "-o", str(out))
    assert bad.returncode == 2 and "--no-repeat-ngram-size -1 is out of range" in bad.stderr


class GenerateInForward(torch.nn.Module):
    def __init__(self, lm, **settings):
        super().__init__()
        self.lm, self.settings = lm, settings

    def forward(self, input_ids, attention_mask):
        return self.lm.generate(input_ids=input_ids, attention_mask=attention_mask, **self.settings)


@pytest.mark.slow
def test_generate_with_beams_and_no_repeat_ngram_size_in_forward_converts_and_equals_generate():
    """``generate(num_beams=3, no_repeat_ngram_size=3)`` in forward: the n-grams read from the
    beam buffer, filled to the step, inside the one Loop; equal to eager ``generate()``."""
    from fxport.generation.generator import Generator

    lm = tiny_gpt2(seed=2)
    settings = dict(max_new_tokens=6, num_beams=3, no_repeat_ngram_size=3, do_sample=False)
    sets = prompts()
    result = fxport.convert(GenerateInForward(lm, **settings).eval(), sets[2], dynamic_shapes=Generator.dynamic_shapes,
                            verify_inputs=[sets[i] for i in (0, 1, 3, 6, 7)])
    assert result.verified and "Loop" in result.op_counts()
    session = ort.InferenceSession(result.model.SerializeToString(), providers=["CPUExecutionProvider"])
    for ids, mask in prompts(60, [(1, 3), (4, 7), (2, 1)]):
        (produced,) = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
        np.testing.assert_array_equal(produced, generate(lm, ids, mask, **settings).numpy())
