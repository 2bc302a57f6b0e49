"""Whisper's ``generate()`` (issue 27, encoder–decoder generation): fxport's Whisper generator
equals transformers' on short-form audio — its prompt tokens, language detection, suppressed
tokens, greedy and beam search, and the segment output — the rule converts ``generate()`` in a
model's ``forward`` to one ONNX ``Loop``, ``--task text-generation`` converts a Whisper
checkpoint, and what is not converted is refused in one line."""

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import fxport
from fxport.errors import UsageError
from fxport.generation.families.whisper import DETECTED, whisper_generator
from tests.conftest import line_of, op_counts, run_cli

transformers = pytest.importorskip("transformers")
END = 60  # with this seed, rows of random audio produce it at several steps (and some never)
MEL, FRAMES = 8, 32


def tiny_whisper(timestamps=True, seed=0):
    """A 2-layer Whisper with random weights (init_std 0.5: the ids depend on the audio) and a
    multilingual generation config: start 3, languages 10-12, tasks 13-14, no-timestamps 15."""
    torch.manual_seed(seed)
    config = transformers.WhisperConfig(
        vocab_size=96, num_mel_bins=MEL, encoder_layers=2, decoder_layers=2, d_model=32, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_source_positions=FRAMES // 2,
        max_target_positions=48, decoder_start_token_id=3, pad_token_id=0, eos_token_id=END, bos_token_id=END,
        suppress_tokens=[5, 6], begin_suppress_tokens=[7, END], init_std=0.5)
    lm = transformers.WhisperForConditionalGeneration(config).eval()
    generation = lm.generation_config
    generation.pad_token_id = END  # as Whisper's: the end token (in the config, 0: the embedding row of
    # config.pad_token_id starts at 0, and with tied embeddings no row would ever end)
    generation.lang_to_id = {"<|en|>": 10, "<|fr|>": 11, "<|de|>": 12}
    generation.task_to_id = {"translate": 13, "transcribe": 14}
    generation.is_multilingual = True
    generation._from_model_config = False  # as a real checkpoint's: from_pretrained reads it back
    if timestamps:
        generation.no_timestamps_token_id = 15
    return lm


def audio(batch, seed):
    return torch.randn(batch, MEL, FRAMES, generator=torch.Generator().manual_seed(seed)) * 0.5


def whisper_generate(lm, features, **settings):
    with torch.no_grad():
        return lm.generate(features, **settings)


UNIQUE = dict(force_unique_generate_call=True)
SETTINGS = [
    dict(UNIQUE, max_new_tokens=7),  # the language detected per row
    dict(UNIQUE, max_new_tokens=7, language="fr"),
    dict(UNIQUE, max_new_tokens=6, language="en", task="translate", num_beams=3),
    dict(UNIQUE, max_new_tokens=6, num_beams=2, length_penalty=0.5, repetition_penalty=1.3),
    dict(max_new_tokens=7, language="de", timestamps=False),  # the segment output
    dict(max_new_tokens=7, num_beams=2, timestamps=False),
]


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
@pytest.mark.parametrize("settings", SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()))
def test_whisper_generator_equals_generate(settings):
    settings = dict(settings)
    lm = tiny_whisper(timestamps=settings.pop("timestamps", True))
    generator = whisper_generator(lm, **settings)
    stopped_early = False
    for seed, batch in enumerate([1, 2, 5, 8, 16]):
        features = audio(batch, seed)
        expected = whisper_generate(lm, features, **settings)
        with torch.no_grad():
            produced = generator(features)
        assert produced.shape == expected.shape and torch.equal(produced, expected), (seed, expected, produced)
        stopped_early |= bool((expected == END).any()) and expected.shape[1] > 0
    assert stopped_early, "no row produced the end token: the early stop was not exercised"


def test_prompt_tokens_are_whispers_with_the_language_slot_detected():
    assert whisper_generator(tiny_whisper(), **UNIQUE, max_new_tokens=4).prompt.tokens == (3, DETECTED, 15)
    assert whisper_generator(tiny_whisper(), **UNIQUE, max_new_tokens=4, language="fr").prompt.tokens == (3, 11, 14, 15)
    assert whisper_generator(tiny_whisper(timestamps=False), max_new_tokens=4, task="translate",
                             language="de").prompt.tokens == (3, 12, 13)


class Transcribe(torch.nn.Module):
    def __init__(self, lm, **settings):
        super().__init__()
        self.lm, self.settings = lm, settings

    def forward(self, input_features):
        return self.lm.generate(input_features, **self.settings)


def run_file(model, features):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (ids,) = session.run(None, {session.get_inputs()[0].name: features.numpy()})
    return ids


@pytest.mark.parametrize("settings", [dict(UNIQUE, max_new_tokens=7), dict(max_new_tokens=7, language="fr")],
                         ids=["detected-language", "segment"])
@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_generate_in_forward_converts_to_one_loop_equal_to_generate(settings):
    """The rule stands in for Whisper's generate(): one Loop; the file equals eager generate() on
    batches the export never saw, with rows that stop at different steps."""
    lm = tiny_whisper(timestamps="force_unique_generate_call" in settings)
    model = Transcribe(lm, **settings).eval()
    result = fxport.convert(model, (audio(3, 0),), dynamic_shapes={"input_features": {0: "batch"}},
                            verify_inputs=[(audio(1, 1),), (audio(6, 2),)])
    assert result.verified
    assert op_counts(result.model).get("Loop") == 1
    stopped_early = False
    for seed, batch in enumerate([1, 1, 2, 7, 12], start=50):
        features = audio(batch, seed)
        expected = whisper_generate(lm, features, **settings).numpy()
        np.testing.assert_array_equal(run_file(result.model, features), expected)
        stopped_early |= bool((expected[:, -1] == END).any())  # a row padded after its end
    assert stopped_early, "no row stopped before the longest one"


def test_segment_output_with_timestamp_tokens_is_refused_at_the_users_call():
    class Segments(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = tiny_whisper()

        def forward(self, input_features):
            return self.lm.generate(input_features, max_new_tokens=4)  # refused here

    with pytest.raises(UsageError) as refused:
        fxport.convert(Segments().eval(), (audio(2, 0),), dynamic_shapes={"input_features": {0: "batch"}})
    message = str(refused.value)
    assert "another segment" in message and "force_unique_generate_call=True" in message
    assert line_of(__file__, "# refused here") in message
    assert len(message.splitlines()) == 1


@pytest.mark.parametrize("settings, said", [
    (dict(return_timestamps=True), "return_timestamps=True"),
    (dict(temperature=(0.0, 0.2)), "temperature=(0.0, 0.2)"),
    (dict(no_speech_threshold=0.6), "no_speech_threshold="),
    (dict(prompt_ids=torch.tensor([4, 5])), "prompt_ids="),
    (dict(language=["en", "fr"]), "a language per row"),
    (dict(language="xx"), "Unsupported language"),
    (dict(num_return_sequences=2, num_beams=2), "num_return_sequences"),
])
def test_whisper_settings_without_an_onnx_form_are_refused_in_one_line(settings, said):
    with pytest.raises(UsageError) as refused:
        whisper_generator(tiny_whisper(), **UNIQUE, max_new_tokens=4, **settings)
    assert said in str(refused.value) and len(str(refused.value).splitlines()) == 1


def test_long_form_audio_is_refused_at_the_users_call():
    lm = tiny_whisper()
    model = Transcribe(lm, **UNIQUE, max_new_tokens=4).eval()
    long_audio = torch.randn(1, MEL, 2 * FRAMES)
    with pytest.raises(UsageError, match="long-form"):
        fxport.convert(model, (long_audio,))


@pytest.mark.slow
def test_cli_task_converts_a_whisper_checkpoint(tmp_path):
    """``--task text-generation`` on a saved Whisper: input_features in, the decoder's ids out
    (force_unique_generate_call=True), beams 2; equal to generate() on unseen batches."""
    lm = tiny_whisper()
    lm.save_pretrained(tmp_path / "whisper")
    out = tmp_path / "whisper.onnx"
    result = run_cli("convert", str(tmp_path / "whisper"), "--task", "text-generation", "--max-new-tokens", "6",
                     "--num-beams", "2", "-o", str(out), "--json", timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["verified"]
    assert any(row["name"].startswith("rows stopping at steps") for row in data["verification"])
    model = onnx.load(out)
    assert [i.name for i in model.graph.input] == ["input_features"]
    assert [o.name for o in model.graph.output] == ["sequences"]
    assert op_counts(model).get("Loop") == 1
    for seed, batch in enumerate([1, 5], start=70):
        features = audio(batch, seed)
        expected = whisper_generate(lm, features, **UNIQUE, max_new_tokens=6, num_beams=2).numpy()
        np.testing.assert_array_equal(run_file(model, features), expected)


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_cli_task_refuses_sampling_flags_for_whisper(tmp_path):
    tiny_whisper().save_pretrained(tmp_path / "whisper")
    out = tmp_path / "whisper.onnx"
    result = run_cli("convert", str(tmp_path / "whisper"), "--task", "text-generation", "--do-sample",
                     "-o", str(out), timeout=300)
    assert result.returncode == 2 and "--do-sample" in result.stderr and not out.exists()
