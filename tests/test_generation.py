"""Text generation (issue 27): fxport's greedy generator equals transformers' ``generate()`` token
for token, ``fxport convert CHECKPOINT --task text-generation`` writes one ONNX file that does,
and settings it cannot convert are refused in one line naming them."""

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import fxport
import fxport.load.tasks
from fxport.errors import UsageError
from fxport.generation.architectures import build_generator
from fxport.generation.generator import Generator
from fxport.generation.resolve import generation_settings
from fxport.generation.sampling import drawn_tokens, sampling_draws
from tests.conftest import line_of, op_counts, run_cli

transformers = pytest.importorskip("transformers")
VOCAB = 64


def tiny_llama(seed=0, **config):
    torch.manual_seed(seed)
    settings = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**{**settings, **config})).eval()


def tiny_gpt2(seed=0):
    torch.manual_seed(seed)
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=128, n_embd=32, n_layer=2, n_head=2,
                                     bos_token_id=0, eos_token_id=5)
    return transformers.GPT2LMHeadModel(config).eval()


def left_padded_prompts(batch, length, seed):
    """Ids inside the vocabulary; every other row left-padded by a random amount (≥ 1 real token)."""
    return fxport.load.tasks.left_padded_prompts(batch, length, VOCAB, seed)


def generate(lm, ids, mask, **settings):
    with torch.no_grad():
        return lm.generate(input_ids=ids, attention_mask=mask, do_sample=False, **settings)


SEARCHED = "searched"  # end tokens found so that single-prompt batches stop at steps 1, 2, 3, 4
SETTINGS = [
    dict(max_new_tokens=7),
    dict(max_new_tokens=6, eos_token_id=SEARCHED),
    dict(max_new_tokens=6, eos_token_id=SEARCHED, min_new_tokens=3),
    dict(max_new_tokens=6, eos_token_id=SEARCHED, pad_token_id=1, repetition_penalty=1.3),
]
SHAPES = [(1, 1), (1, 2), (3, 5), (4, 9), (2, 3), (5, 4), (1, 4), (1, 6)]


def stopping_tokens(lm, prompts):
    """End tokens that stop the single-prompt batches early, each at another step: the token
    ``lm`` generates at step k + 1 after the k-th single prompt."""
    singles = [(ids, mask) for ids, mask in prompts if ids.shape[0] == 1]
    return sorted({int(generate(lm, ids, mask, max_new_tokens=6, eos_token_id=None)[0, ids.shape[1] + step])
                   for step, (ids, mask) in enumerate(singles)})


@pytest.mark.parametrize("build", [tiny_gpt2, tiny_llama])
@pytest.mark.parametrize("settings", SETTINGS, ids=["plain", "eos", "min-new", "penalty"])
def test_generator_equals_generate_token_for_token(build, settings):
    lm = build()
    prompts = [left_padded_prompts(batch, length, seed) for seed, (batch, length) in enumerate(SHAPES)]
    if settings.get("eos_token_id") == SEARCHED:
        settings = {**settings, "eos_token_id": stopping_tokens(lm, prompts)}
    generator = build_generator(lm, **settings)
    stopped_early = 0
    for seed, (ids, mask) in enumerate(prompts):
        length = ids.shape[1]
        expected = generate(lm, ids, mask, **settings)
        with torch.no_grad():
            produced = generator(ids, mask)
        assert torch.equal(produced, expected), (seed, expected.tolist(), produced.tolist())
        stopped_early += expected.shape[1] < length + settings["max_new_tokens"]
    if "eos_token_id" in settings and "min_new_tokens" not in settings:
        assert stopped_early, "no batch stopped early: the end tokens do not exercise the early stop"


BEAM_SETTINGS = [
    dict(num_beams=2, max_new_tokens=6),
    dict(num_beams=3, max_new_tokens=6, eos_token_id=SEARCHED),
    dict(num_beams=3, max_new_tokens=5, eos_token_id=SEARCHED, num_return_sequences=2, length_penalty=0.5),
    dict(num_beams=2, max_new_tokens=6, eos_token_id=SEARCHED, early_stopping=True),
    dict(num_beams=4, max_new_tokens=6, eos_token_id=SEARCHED, early_stopping="never", length_penalty=2.0),
    dict(num_beams=3, max_new_tokens=6, eos_token_id=SEARCHED, min_new_tokens=3, repetition_penalty=1.4),
]


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
@pytest.mark.parametrize("build", [tiny_gpt2, tiny_llama])
@pytest.mark.parametrize("settings", BEAM_SETTINGS, ids=["2", "3-eos", "3-return-2", "early", "never", "penalties"])
def test_beam_search_equals_generate_token_for_token(build, settings):
    lm = build()
    prompts = [left_padded_prompts(batch, length, seed) for seed, (batch, length) in enumerate(SHAPES)]
    if settings.get("eos_token_id") == SEARCHED:
        settings = {**settings, "eos_token_id": stopping_tokens(lm, prompts)}
    generator = build_generator(lm, **settings)
    for ids, mask in prompts:
        expected = generate(lm, ids, mask, **settings)
        with torch.no_grad():
            produced = generator(ids, mask)
        assert torch.equal(produced, expected), (expected.tolist(), produced.tolist())


@pytest.mark.parametrize("setting, name", [
    (dict(do_sample=True, num_beams=2), "num_beams"), (dict(do_sample=True, epsilon_cutoff=0.1), "epsilon_cutoff"),
    (dict(num_beams=2, force_words_ids=[[3]]), "constrained beam search (force_words_ids=[[3]])"),
    (dict(num_beams=2, num_return_sequences=3), "num_return_sequences"),
    (dict(encoder_no_repeat_ngram_size=2), "encoder_no_repeat_ngram_size"), (dict(streamer=object()), "streamer"),
    (dict(logits_processor=[object()]), "logits_processor"), (dict(assistant_model=object()), "assistant_model"),
    (dict(bad_words_ids=[[3]]), "bad_words_ids"), (dict(length_of_nothing=2), "length_of_nothing"),
])
def test_settings_without_an_onnx_form_are_refused_in_one_line_naming_them(setting, name):
    with pytest.raises(UsageError) as refused:
        generation_settings(tiny_llama(), max_new_tokens=4, **setting)
    assert name in str(refused.value) and "\n" not in str(refused.value)


def test_max_new_tokens_is_needed_and_max_length_alone_is_refused():
    with pytest.raises(UsageError, match="max_new_tokens"):
        generation_settings(tiny_llama(), max_length=12)


def save_checkpoint(lm, directory):
    lm.save_pretrained(directory)
    return str(directory)


def run_file(path, ids, mask):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (sequences,) = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
    return torch.from_numpy(sequences)


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_cli_task_writes_one_file_that_generates_like_generate(tmp_path):
    """The README's generation command on a tiny Llama checkpoint; the file then meets prompts the
    export never saw: lengths 1, 3, 11, batch 1 and 5, left padding, rows stopping early."""
    lm = tiny_llama(eos_token_id=7)
    checkpoint = save_checkpoint(lm, tmp_path / "llama")
    out = tmp_path / "gen.onnx"
    result = run_cli("convert", checkpoint, "--task", "text-generation", "--max-new-tokens", "6",
                     "--eos-token-id", "7", "--eos-token-id", "9", "--eos-token-id", "13", "-o", str(out), "--json",
                     timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["verified"]
    names = [row["name"] for row in data["verification"]]
    assert any(name.startswith("rows stopping at steps") for name in names), names
    model = onnx.load(out)
    assert [i.name for i in model.graph.input] == ["input_ids", "attention_mask"]
    assert [o.name for o in model.graph.output] == ["sequences"]
    ops = op_counts(model)
    assert ops.get("Loop") == 1 and "If" not in ops, f"one Loop whose condition is the early stop, no If: {ops}"
    settings = dict(max_new_tokens=6, eos_token_id=[7, 9, 13])
    lengths_seen = set()
    for seed, (batch, length) in enumerate([(1, 1), (5, 3), (1, 11), (5, 11), (3, 2)], start=100):
        ids, mask = left_padded_prompts(batch, length, seed)
        expected = generate(lm, ids, mask, **settings)
        np.testing.assert_array_equal(run_file(out, ids, mask).numpy(), expected.numpy())
        lengths_seen.add(expected.shape[1] - length)
    assert len(lengths_seen) > 1, "every batch ran the same number of steps"


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_cli_task_usage_errors_exit_2_and_write_nothing(tmp_path):
    out = tmp_path / "gen.onnx"
    empty = tmp_path / "empty"
    empty.mkdir()
    no_config = run_cli("convert", str(empty), "--task", "text-generation", "-o", str(out))
    assert no_config.returncode == 2 and "config.json" in no_config.stderr
    vision = tmp_path / "vit"
    transformers.ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                           image_size=32, patch_size=8).save_pretrained(vision)
    wrong_class = run_cli("convert", str(vision), "--task", "text-generation", "-o", str(out))
    assert wrong_class.returncode == 2 and "'vit'" in wrong_class.stderr
    no_weights = tmp_path / "llama"
    tiny_llama().config.save_pretrained(no_weights)
    missing = run_cli("convert", str(no_weights), "--task", "text-generation", "-o", str(out))
    assert missing.returncode == 2 and "could not load" in missing.stderr
    without_task = run_cli("convert", "examples/srcnn.py:SuperResolutionNet", "--max-new-tokens", "4", "-o", str(out))
    assert without_task.returncode == 2 and "--task text-generation" in without_task.stderr
    unknown = run_cli("convert", str(empty), "--task", "summarise", "-o", str(out))
    assert unknown.returncode == 2 and "summarise" in unknown.stderr
    assert not out.exists()


class GenerateInForward(torch.nn.Module):
    """A model whose forward returns ``generate()``: the built-in rule stands in for it."""

    def __init__(self, lm, **settings):
        super().__init__()
        self.lm, self.settings = lm, settings

    def forward(self, input_ids, attention_mask):
        return self.lm.generate(input_ids=input_ids, attention_mask=attention_mask, **self.settings)


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_generate_called_in_forward_converts_to_one_loop_equal_to_generate():
    lm = tiny_llama(seed=1)
    prompts = [left_padded_prompts(batch, length, seed) for seed, (batch, length) in enumerate(SHAPES)]
    settings = dict(max_new_tokens=5, eos_token_id=stopping_tokens(lm, prompts))
    model = GenerateInForward(lm, **settings).eval()
    result = fxport.convert(model, prompts[2], dynamic_shapes=Generator.dynamic_shapes,
                            verify_inputs=[prompts[i] for i in (0, 1, 3, 6, 7)])
    assert result.verified
    assert "transformers-generate" in {r.rule for r in result.rewrites}
    assert "Loop" in result.op_counts()
    session = ort.InferenceSession(result.model.SerializeToString(), providers=["CPUExecutionProvider"])
    lengths_seen = set()
    for seed, (batch, length) in enumerate([(1, 3), (4, 7), (1, 5), (2, 1)], start=50):
        ids, mask = left_padded_prompts(batch, length, seed)
        (produced,) = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
        expected = generate(lm, ids, mask, **settings)
        np.testing.assert_array_equal(produced, expected.numpy())
        lengths_seen.add(expected.shape[1] - length)
    for ids, mask in prompts:  # the prompts searched to stop early: some batch must have
        lengths_seen.add(generate(lm, ids, mask, **settings).shape[1] - ids.shape[1])
    assert min(lengths_seen) < settings["max_new_tokens"]


def tiny_mistral(window):
    torch.manual_seed(0)
    config = transformers.MistralConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, sliding_window=window)
    return transformers.MistralForCausalLM(config).eval()


@pytest.mark.parametrize("build, cache", [(tiny_llama, "static"), (tiny_llama, "hybrid"),
                                          (lambda: tiny_mistral(4), "sliding_window")],
                         ids=["static", "hybrid", "sliding-window-4"])
def test_generate_with_a_cache_implementation_gives_the_generators_ids(build, cache):
    """generate(cache_implementation=...) with a cache that holds the model's keys and values
    (a fixed buffer, a window of 4 over prompts up to 9 tokens): the growing cache of fxport's
    generator gives the same ids, and the settings say which cache generate() was asked for."""
    lm = build()
    generator = build_generator(lm, max_new_tokens=6, cache_implementation=cache)
    settings = generator.settings
    assert settings.generate_kwargs()["cache_implementation"] == cache and cache in settings.describe()
    for seed, (batch, length) in enumerate(SHAPES):
        ids, mask = left_padded_prompts(batch, length, seed)
        expected = generate(lm, ids, mask, max_new_tokens=6, cache_implementation=cache)
        with torch.no_grad():
            assert torch.equal(generator(ids, mask), expected), seed


@pytest.mark.parametrize("cache", ["quantized", "offloaded"])
def test_caches_that_change_values_or_need_cuda_are_refused_in_one_line(cache):
    with pytest.raises(UsageError) as refused:
        generation_settings(tiny_llama(), max_new_tokens=4, cache_implementation=cache)
    assert f"cache_implementation={cache!r}" in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize("setting, said", [
    (dict(bad_words_ids=[[3]]), "bad_words_ids=[[3]]"),  # no ONNX form
    (dict(do_sample=True, top_k=5), "sampling_draws"),  # sampling without the draws as an input
], ids=["no-onnx-form", "sampling-without-draws"])
def test_generate_setting_without_onnx_form_is_refused_at_the_users_call(setting, said):
    model = GenerateInForward(tiny_llama(), max_new_tokens=4, **setting).eval()
    with pytest.raises(fxport.ConversionError) as refused:
        fxport.convert(model, left_padded_prompts(2, 4, 0), dynamic_shapes=Generator.dynamic_shapes)
    message = str(refused.value)
    assert said in message and "\n" not in message
    assert line_of(__file__, "return self.lm.generate(") in message


@pytest.mark.slow
@pytest.mark.parametrize("seed, settings", [
    (2, dict(max_new_tokens=5, num_beams=3, num_return_sequences=2)),
    (1, dict(max_new_tokens=5, cache_implementation="static")),
], ids=["beam-3-return-2", "static-cache"])
def test_generate_in_forward_converts_and_equals_generate(seed, settings):
    """generate(num_beams=3, num_return_sequences=2), and greedy generate() asked for a static
    cache, in forward: one Loop, equal to eager generate() on prompts the export never saw."""
    lm = tiny_llama(seed=seed)
    prompts = [left_padded_prompts(batch, length, seed) for seed, (batch, length) in enumerate(SHAPES)]
    settings = dict(settings, eos_token_id=stopping_tokens(lm, prompts))
    model = GenerateInForward(lm, **settings).eval()
    result = fxport.convert(model, prompts[2], dynamic_shapes=Generator.dynamic_shapes,
                            verify_inputs=[prompts[i] for i in (0, 1, 3, 6, 7)])
    assert result.verified and "Loop" in result.op_counts()
    session = ort.InferenceSession(result.model.SerializeToString(), providers=["CPUExecutionProvider"])
    for seed, (batch, length) in enumerate([(1, 3), (4, 7), (2, 1)], start=60):
        ids, mask = left_padded_prompts(batch, length, seed)
        (produced,) = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
        np.testing.assert_array_equal(produced, generate(lm, ids, mask, **settings).numpy())


@pytest.mark.slow
def test_cli_task_beam_search_flags(tmp_path):
    lm = tiny_llama(seed=3, eos_token_id=7)
    checkpoint = save_checkpoint(lm, tmp_path / "llama")
    out = tmp_path / "beams.onnx"
    result = run_cli("convert", checkpoint, "--task", "text-generation", "--max-new-tokens", "5", "--num-beams", "2",
                     "--early-stopping", "true", "--length-penalty", "0.8", "-o", str(out), timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    settings = dict(max_new_tokens=5, num_beams=2, early_stopping=True, length_penalty=0.8)
    for seed, (batch, length) in enumerate([(1, 4), (3, 9)], start=70):
        ids, mask = left_padded_prompts(batch, length, seed)
        np.testing.assert_array_equal(run_file(out, ids, mask).numpy(), generate(lm, ids, mask, **settings).numpy())
    bad = run_cli("convert", checkpoint, "--task", "text-generation", "--early-stopping", "soon", "-o", str(out))
    assert bad.returncode == 2 and "--early-stopping 'soon'" in bad.stderr


def greedy_with_step_file(path, layers, ids, mask, max_new_tokens):
    """Greedy decoding the way optimum and onnxruntime-genai run it: a Python loop over the
    one-step file, the cache fed back from its present.* outputs."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    kv_heads, head_size = session.get_inputs()[3].shape[1], session.get_inputs()[3].shape[3]
    past = {f"past_key_values.{i}.{kind}": np.zeros((ids.shape[0], kv_heads, 0, head_size), np.float32)
            for i in range(layers) for kind in ("key", "value")}
    mask = mask.numpy()
    positions = np.where(mask == 0, 0, mask.cumsum(-1) - 1)
    step_ids, sequences = ids.numpy(), ids.numpy()
    for _ in range(max_new_tokens):
        logits, *present = session.run(None, {"input_ids": step_ids, "attention_mask": mask,
                                              "position_ids": positions, **past})
        token = logits[:, -1].argmax(-1)[:, None]
        sequences = np.concatenate([sequences, token], 1)
        past = {name.replace("present", "past_key_values"): value
                for name, value in zip([o.name for o in session.get_outputs()][1:], present)}
        mask = np.concatenate([mask, np.ones_like(mask[:, :1])], 1)
        positions, step_ids = positions[:, -1:] + 1, token
    return sequences


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_cli_step_task_writes_the_one_step_model_a_python_loop_decodes_with(tmp_path):
    lm = tiny_llama(seed=4)
    checkpoint = save_checkpoint(lm, tmp_path / "llama")
    out = tmp_path / "step.onnx"
    result = run_cli("convert", checkpoint, "--task", "text-generation-step", "-o", str(out), timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    model = onnx.load(out)
    names = [i.name for i in model.graph.input]
    assert names == ["input_ids", "attention_mask", "position_ids", "past_key_values.0.key",
                     "past_key_values.0.value", "past_key_values.1.key", "past_key_values.1.value"]
    assert [o.name for o in model.graph.output] == ["logits", "present.0.key", "present.0.value",
                                                    "present.1.key", "present.1.value"]
    assert [d.dim_param for d in model.graph.input[3].type.tensor_type.shape.dim][::2] == ["batch", "past_sequence"]
    for seed, (batch, length) in enumerate([(1, 1), (3, 6), (2, 9)], start=80):
        ids, mask = left_padded_prompts(batch, length, seed)
        expected = generate(lm, ids, mask, max_new_tokens=5, eos_token_id=None)
        np.testing.assert_array_equal(greedy_with_step_file(out, 2, ids, mask, 5), expected.numpy())
    settings = run_cli("convert", checkpoint, "--task", "text-generation-step", "--num-beams", "2", "-o", str(out))
    assert settings.returncode == 2 and "--num-beams is a generation setting" in settings.stderr


def tiny_t5(seed=0):
    torch.manual_seed(seed)
    return transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
        decoder_start_token_id=0, eos_token_id=1, pad_token_id=0, initializer_factor=8.0)).eval()


def tiny_bart(seed=0):
    torch.manual_seed(seed)
    return transformers.BartForConditionalGeneration(transformers.BartConfig(
        vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
        init_std=0.5)).eval()


def seq2seq_stopping_tokens(lm, prompts):
    """End tokens that stop each single-prompt batch by its third step: the token it generates there."""
    singles = [(ids, mask) for ids, mask in prompts if ids.shape[0] == 1]
    return sorted({int(generate(lm, ids, mask, max_new_tokens=6, eos_token_id=None, forced_eos_token_id=None)[0, 3])
                   for ids, mask in singles})


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
@pytest.mark.parametrize("build", [tiny_t5, tiny_bart])
@pytest.mark.parametrize("searched_ends", [False, True], ids=["defaults", "end-tokens"])
@pytest.mark.parametrize("beams", [{}, {"num_beams": 3, "num_return_sequences": 2},
                                   {"min_new_tokens": 3, "repetition_penalty": 1.5}],
                         ids=["greedy", "beams", "greedy-penalties"])
def test_encoder_decoder_generator_equals_generate(build, searched_ends, beams):
    """The encoder runs once, the decoder loops; BART's forced_eos_token_id is applied at the
    last step as generate() applies it; the repetition penalty counts the decoder's ids
    (its start token included) and min_new_tokens counts the new ones."""
    from fxport.generation.families.encoder_decoder import EncoderDecoderGenerator

    lm = build()
    prompts = [left_padded_prompts(batch, length, seed) for seed, (batch, length) in enumerate(SHAPES)]
    settings = dict(max_new_tokens=6, **beams)
    if searched_ends:
        settings["eos_token_id"] = seq2seq_stopping_tokens(lm, prompts)
    generator = build_generator(lm, **settings)
    assert isinstance(generator, EncoderDecoderGenerator)
    lengths = set()
    for ids, mask in prompts:
        expected = generate(lm, ids, mask, **settings)
        with torch.no_grad():
            produced = generator(ids, mask)
        assert torch.equal(produced, expected), (expected.tolist(), produced.tolist())
        ends = torch.tensor(settings.get("eos_token_id") or [-1])
        lengths.add(bool(torch.isin(expected[:, 1:-1], ends).any()))  # some row stopped before the last step
    if searched_ends:
        assert True in lengths, "no row stopped early: the end tokens do not exercise the early stop"


@pytest.mark.slow
def test_cli_task_converts_an_encoder_decoder_checkpoint(tmp_path):
    lm = tiny_t5(seed=5)
    prompts = [left_padded_prompts(batch, length, seed) for seed, (batch, length) in enumerate(SHAPES)]
    ends = seq2seq_stopping_tokens(lm, prompts)
    checkpoint = save_checkpoint(lm, tmp_path / "t5")
    out = tmp_path / "t5.onnx"
    flags = [arg for end in ends for arg in ("--eos-token-id", str(end))]
    result = run_cli("convert", checkpoint, "--task", "text-generation", "--max-new-tokens", "6", *flags,
                     "-o", str(out), timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Loop" in op_counts(onnx.load(out))
    settings = dict(max_new_tokens=6, eos_token_id=ends)
    for seed, (batch, length) in enumerate([(1, 3), (4, 8), (2, 1)], start=90):
        ids, mask = left_padded_prompts(batch, length, seed)
        np.testing.assert_array_equal(run_file(out, ids, mask).numpy(), generate(lm, ids, mask, **settings).numpy())
    for ids, mask in prompts:
        np.testing.assert_array_equal(run_file(out, ids, mask).numpy(), generate(lm, ids, mask, **settings).numpy())


@pytest.mark.slow
def test_encoder_decoder_beam_search_converts_and_equals_generate():
    """T5, 2 beams through generate() in forward: the encoder once, the EncoderDecoderCache
    reordered by beam inside one Loop; equal to eager generate() on prompts the export never saw."""
    lm = tiny_t5(seed=6)
    prompts = [left_padded_prompts(batch, length, seed) for seed, (batch, length) in enumerate(SHAPES)]
    settings = dict(max_new_tokens=5, num_beams=2, eos_token_id=seq2seq_stopping_tokens(lm, prompts))
    model = GenerateInForward(lm, **settings).eval()
    result = fxport.convert(model, prompts[2], dynamic_shapes=Generator.dynamic_shapes,
                            verify_inputs=[prompts[i] for i in (0, 1, 3, 6, 7)])
    assert result.verified and "Loop" in result.op_counts()
    session = ort.InferenceSession(result.model.SerializeToString(), providers=["CPUExecutionProvider"])
    for seed, (batch, length) in enumerate([(1, 3), (3, 7), (2, 1)], start=95):
        ids, mask = left_padded_prompts(batch, length, seed)
        (produced,) = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
        np.testing.assert_array_equal(produced, generate(lm, ids, mask, **settings).numpy())


# --- sampling: the random numbers an input (fxport.generation.sampling) -------------------------

def uniform_draws(batch, steps, seed):
    return torch.rand(batch, steps, generator=torch.Generator().manual_seed(seed))


def test_drawn_tokens_follow_the_distribution_and_never_pick_an_impossible_token():
    """Evenly spaced draws give each token its probability's share; tokens of probability 0
    (filtered by top-k / top-p) are never drawn, not even by draws next to 0 and 1."""
    probabilities = torch.tensor([0.1, 0.0, 0.25, 0.0, 0.65, 0.0])
    count = 1000
    draws = (torch.arange(count) + 0.5) / count
    tokens = drawn_tokens(probabilities.expand(count, -1), draws)
    shares = torch.bincount(tokens, minlength=6).float() / count
    assert torch.allclose(shares, probabilities, atol=1.5 / count), shares.tolist()
    edges = drawn_tokens(probabilities.expand(3, -1), torch.tensor([0.0, 1.0 - 2 ** -24, 1.0]))
    assert edges.tolist() == [0, 4, 4]


SAMPLING = [dict(), dict(temperature=0.7), dict(top_k=5), dict(top_p=0.8, temperature=1.3), dict(min_p=0.05),
            dict(typical_p=0.9), dict(top_k=10, top_p=0.9, temperature=0.5, min_new_tokens=2, repetition_penalty=1.3)]


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
@pytest.mark.parametrize("build", [tiny_gpt2, tiny_llama])
@pytest.mark.parametrize("warpers", SAMPLING, ids=["plain", "temperature", "top-k", "top-p", "min-p", "typical",
                                                   "all"])
def test_sampling_equals_generate_with_the_same_draws(build, warpers):
    """generate(do_sample=True) under sampling_draws and the generator given the same draws pick
    the same tokens; other draws pick other tokens (the draws are what is random)."""
    lm = build()
    generator = build_generator(lm, max_new_tokens=6, do_sample=True, eos_token_id=[3, 4], **warpers)
    outputs = set()
    for seed, (batch, length) in enumerate([(1, 1), (3, 5), (4, 9), (2, 2)]):
        ids, mask = left_padded_prompts(batch, length, seed)
        draws = uniform_draws(batch, 6, seed)
        with torch.no_grad(), sampling_draws(draws):
            expected = lm.generate(input_ids=ids, attention_mask=mask, do_sample=True, max_new_tokens=6,
                                   eos_token_id=[3, 4], **warpers)
        with torch.no_grad():
            produced = generator(ids, mask, draws)
            outputs.add(tuple(generator(ids, mask, uniform_draws(batch, 6, seed + 100))[0].tolist()))
        assert torch.equal(produced, expected), (expected.tolist(), produced.tolist())
        outputs.add(tuple(produced[0].tolist()))
    assert len(outputs) > 4


class SampleInForward(torch.nn.Module):
    """generate(do_sample=True) in forward, its random numbers the input ``draws``."""

    def __init__(self, lm, **settings):
        super().__init__()
        self.lm, self.settings = lm, settings

    def forward(self, input_ids, attention_mask, draws):
        with sampling_draws(draws):
            return self.lm.generate(input_ids=input_ids, attention_mask=attention_mask, do_sample=True,
                                    **self.settings)


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_sampling_generate_in_forward_converts_with_the_draws_an_input():
    lm = tiny_llama(seed=2)
    settings = dict(max_new_tokens=6, eos_token_id=list(range(3, VOCAB, 5)), top_p=0.9, temperature=0.8)
    model = SampleInForward(lm, **settings).eval()
    sets = [(*left_padded_prompts(batch, length, seed), uniform_draws(batch, 6, seed))
            for seed, (batch, length) in enumerate([(2, 5), (1, 1), (3, 4), (4, 7), (1, 2)])]
    shapes = {**Generator.dynamic_shapes, "draws": {0: "batch"}}
    result = fxport.convert(model, sets[0], dynamic_shapes=shapes, verify_inputs=sets[1:])
    assert result.verified
    assert "Loop" in result.op_counts()
    session = ort.InferenceSession(result.model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["input_ids", "attention_mask", "draws"]
    lengths_seen = set()
    for seed, (batch, length) in enumerate([(1, 3), (5, 8), (2, 1), (3, 11)] * 3, start=60):
        ids, mask = left_padded_prompts(batch, length, seed)
        draws = uniform_draws(batch, 6, seed)
        (produced,) = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy(),
                                         "draws": draws.numpy()})
        with torch.no_grad():
            expected = model(ids, mask, draws)
        np.testing.assert_array_equal(produced, expected.numpy())
        lengths_seen.add(expected.shape[1] - length)
    assert min(lengths_seen) < 6, "no batch stopped early"


@pytest.mark.slow
def test_cli_task_sampling_flags_make_random_draws_an_input(tmp_path):
    """--do-sample --top-k --temperature: the file takes random_draws (batch, max new tokens) and
    picks the tokens generate() picks with the same draws, on prompts the export never saw."""
    lm = tiny_gpt2()
    checkpoint = save_checkpoint(lm, tmp_path / "gpt2")
    out = tmp_path / "sample.onnx"
    result = run_cli("convert", checkpoint, "--task", "text-generation", "--max-new-tokens", "5", "--do-sample",
                     "--top-k", "12", "--temperature", "0.9", "-o", str(out), "--json", timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    built = json.loads(result.stdout)["task"]["built"]
    assert built.startswith("sampling from random_draws (temperature 0.9, top_k 12)"), built
    assert op_counts(onnx.load(out)).get("Loop") == 1
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    assert [(i.name, i.shape) for i in session.get_inputs()][2] == ("random_draws", ["batch", 5])
    for seed, (batch, length) in enumerate([(1, 4), (3, 7), (2, 1)], start=80):
        ids, mask = left_padded_prompts(batch, length, seed)
        draws = np.random.default_rng(seed).random((batch, 5), dtype=np.float32)
        (produced,) = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy(),
                                         "random_draws": draws})
        with torch.no_grad(), sampling_draws(torch.from_numpy(draws)):
            expected = lm.generate(input_ids=ids, attention_mask=mask, do_sample=True, max_new_tokens=5,
                                   top_k=12, temperature=0.9)
        np.testing.assert_array_equal(produced, expected.numpy())


# --- a hand-written loop over a StaticCache (allocated once, written in place) ----------------

class StaticCacheLoop(torch.nn.Module):
    """Greedy decoding as users write it with a ``StaticCache``: allocated for prompt + new
    tokens, each step writes its keys and values in place (``index_copy_``) at ``cache_position``."""

    def __init__(self, lm, max_new_tokens, end_tokens):
        super().__init__()
        self.lm, self.max_new_tokens, self.end_tokens = lm, max_new_tokens, end_tokens

    def forward(self, input_ids, attention_mask):
        length = input_ids.shape[1]
        cache = transformers.StaticCache(config=self.lm.config, max_cache_len=length + self.max_new_tokens)
        positions = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        cache_position = torch.arange(length)
        out = self.lm(input_ids=input_ids, attention_mask=attention_mask, position_ids=positions,
                      past_key_values=cache, cache_position=cache_position, use_cache=True)
        logits, cache = out.logits[:, -1], out.past_key_values
        tokens, unfinished = input_ids, torch.ones(input_ids.shape[0], dtype=torch.bool)
        ends = torch.tensor(self.end_tokens)
        for _ in range(self.max_new_tokens):
            token = torch.where(unfinished, logits.argmax(-1), torch.full_like(unfinished, ends[0], dtype=torch.int64))
            tokens = torch.cat([tokens, token[:, None]], 1)
            unfinished = unfinished & ~torch.isin(token, ends)
            attention_mask = torch.cat([attention_mask, torch.ones_like(attention_mask[:, :1])], 1)
            positions, cache_position = positions[:, -1:] + 1, cache_position[-1:] + 1
            out = self.lm(input_ids=token[:, None], attention_mask=attention_mask, position_ids=positions,
                          past_key_values=cache, cache_position=cache_position, use_cache=True)
            logits, cache = out.logits[:, -1], out.past_key_values
            if not unfinished.any():
                break
        return tokens


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_hand_written_static_cache_loop_converts_and_equals_generate():
    """The cache's tensors keep their size (prompt + new tokens) and are written in place; the
    tokens and the mask grow: one Loop whose body writes the cache with ScatterND, equal to
    eager and to generate() on prompt lengths and batches the export never saw."""
    lm = tiny_llama(seed=3)
    prompts = [left_padded_prompts(batch, length, seed) for seed, (batch, length) in enumerate(SHAPES)]
    ends = stopping_tokens(lm, prompts)
    model = StaticCacheLoop(lm, 5, ends).eval()
    result = fxport.convert(model, prompts[2], dynamic_shapes=Generator.dynamic_shapes,
                            verify_inputs=[prompts[i] for i in (0, 1, 3, 6, 7)])
    assert result.verified
    ops = result.op_counts()
    assert ops.get("Loop") == 1 and "ScatterND" in ops, ops
    session = ort.InferenceSession(result.model.SerializeToString(), providers=["CPUExecutionProvider"])
    lengths_seen = set()
    for seed, (batch, length) in enumerate([(1, 3), (4, 7), (1, 5), (2, 1), (3, 12)], start=70):
        ids, mask = left_padded_prompts(batch, length, seed)
        (produced,) = session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})
        expected = generate(lm, ids, mask, max_new_tokens=5, eos_token_id=ends, pad_token_id=ends[0])
        np.testing.assert_array_equal(produced, expected.numpy())
        lengths_seen.add(expected.shape[1] - length)
    for ids, mask in prompts:
        lengths_seen.add(generate(lm, ids, mask, max_new_tokens=5, eos_token_id=ends).shape[1] - ids.shape[1])
    assert min(lengths_seen) < 5, "no batch stopped early"


def test_task_inputs_search_stopping_rows_with_several_returned_sequences():
    """With num_return_sequences the generator gives prompts × returned rows; the search for
    rows that stop early reads each prompt's best one (it failed on the row count)."""
    lm = tiny_llama(eos_token_id=7)
    generator = build_generator(lm, max_new_tokens=5, num_beams=3, num_return_sequences=2, eos_token_id=[7, 9, 13])
    sets = fxport.load.tasks.generation_inputs(generator)
    names = [input_set.name for input_set in sets]
    assert any(name.startswith("rows stopping at steps") for name in names), names
    for input_set in sets:
        ids, mask = input_set.args
        with torch.no_grad():
            assert generator(ids, mask).shape[0] == 2 * ids.shape[0]


def test_without_verification_the_task_skips_what_only_verification_reads(tmp_path, monkeypatch):
    """--no-verify: no check against generate() and no searched stopping prompts (59% of a 12-layer
    conversion's time, docs/generation.md); with verification both run as before."""
    import fxport.load.tasks as tasks

    path = save_checkpoint(tiny_llama(), tmp_path / "ckpt")
    checked = []
    monkeypatch.setattr(tasks, "check_against_generate", lambda generator, sets: checked.append(len(sets)))
    quick = tasks.load_task(path, "text-generation", {"max_new_tokens": 4, "eos_token_id": 3}, verify=False)
    assert checked == [] and len(quick.input_sets) == 5
    full = tasks.load_task(path, "text-generation", {"max_new_tokens": 4, "eos_token_id": 3})
    assert checked == [len(full.input_sets)] and len(full.input_sets) > 5
