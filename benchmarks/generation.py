"""Generation sweep: ``--task text-generation`` on every decoder of the real-model sweep.

For each architecture: the tiny config of ``benchmarks/real_models.py`` (2 layers, width 32,
random weights) with a causal-LM head, saved as a checkpoint directory; end tokens chosen so
that rows stop at different steps (the three ids the model generates most often, unstopped);
``fxport.load.tasks.load_task`` + ``fxport.convert`` (what the CLI runs); then the written file
against transformers' own ``generate()`` on prompts the conversion never saw (lengths 1, 4, 11,
batch 1 and 5, left-padded rows), token for token; and ``torch.onnx.export(dynamo=True)`` on the
same generator module, its file (if any) checked the same way.

    python3 -m benchmarks.generation            # all, writes the table into docs/generation.md
    python3 -m benchmarks.generation llama gpt2 # some, prints only
    python3 -m benchmarks.generation --add --search sample llama   # run these rows, merge them into docs/

Whisper (``SPEECH``) runs its own ``generate()`` on audio windows, greedy and with beams.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
import traceback

import torch

from benchmarks.common import Section, machine_info, print_section

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(REPO, "docs", "generation.md")
MARKER = "<!-- generation sweep: written by python3 -m benchmarks.generation -->"
MAX_NEW = 6
UNSEEN = [(1, 1), (5, 4), (1, 11), (5, 11), (3, 2)]
DECODERS = ["gpt2", "gpt_neox", "llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3", "olmo",
            "falcon", "opt", "bloom", "mixtral", "qwen2_moe", "qwen3_moe"]
ENCODER_DECODERS = ["t5", "bart"]
#: speech-to-text: Whisper's own generate() (greedy and beam; it samples only in its temperature fallback)
SPEECH = ["whisper"]
SPEECH_SEARCHES = ("greedy", "beam 2")


def causal_lm(name: str) -> torch.nn.Module:
    """The sweep's tiny config for ``name`` with a causal-LM head, seeded."""
    import transformers

    from benchmarks import real_models

    if name == "bloom":
        config = transformers.BloomConfig(n_layer=2, hidden_size=32, n_head=4, vocab_size=real_models.VOCAB)
    else:
        config = real_models.ARCHITECTURES[name].make().config
    torch.manual_seed(0)
    if name in ENCODER_DECODERS:
        return transformers.AutoModelForSeq2SeqLM.from_config(config).eval()
    return transformers.AutoModelForCausalLM.from_config(config).eval()


def prompts(batch: int, length: int, vocab: int, seed: int):
    from fxport.load.tasks import left_padded_prompts

    return left_padded_prompts(batch, length, vocab, seed, lowest_id=3)


def generate(lm, ids, mask, draws=None, **settings):
    """transformers' generate(); with sampling, its random numbers from ``draws``."""
    import contextlib

    from fxport.generation.sampling import sampling_draws

    settings = {"do_sample": False, **settings}
    drawing = sampling_draws(draws) if settings["do_sample"] else contextlib.nullcontext()
    with torch.no_grad(), drawing:
        return lm.generate(input_ids=ids, attention_mask=mask, **settings)


def stopping_tokens(lm, vocab: int) -> list[int]:
    """Three end tokens: the ids ``lm`` generates most often after the unseen prompts when nothing
    stops it (random weights repeat tokens, so rows reach them at different steps)."""
    skip = (lambda length: 1) if lm.config.is_encoder_decoder else (lambda length: length)  # decoder start / prompt
    generated = torch.cat([generate(lm, ids, mask, max_new_tokens=MAX_NEW, eos_token_id=None,  # greedy
                                    forced_eos_token_id=None)[:, skip(length):].flatten()
                           for ids, mask, length in unseen_prompts(vocab)])
    return torch.bincount(generated, minlength=vocab).argsort(descending=True)[:3].tolist()


def unseen_prompts(vocab: int):
    for seed, (batch, length) in enumerate(UNSEEN, start=500):
        ids, mask = prompts(batch, length, vocab, seed)
        yield ids, mask, length


def same_as_generate(run, lm, vocab: int, settings: dict) -> tuple[int, int, set]:
    """(sets equal, sets tried, numbers of steps the batches ran) of ``run(ids, mask, draws)``
    against generate() (with sampling: the same uniform draws, seeded per set)."""
    equal, steps = 0, set()
    for index, (ids, mask, length) in enumerate(unseen_prompts(vocab)):
        draws = torch.rand(ids.shape[0], MAX_NEW, generator=torch.Generator().manual_seed(900 + index))
        expected = generate(lm, ids, mask, draws, **settings)
        steps.add(expected.shape[1] - (1 if lm.config.is_encoder_decoder else length))
        produced = run(ids, mask, draws)
        equal += produced.shape == tuple(expected.shape) and (produced == expected.numpy()).all()
    return equal, len(UNSEEN), steps


def ort_runner(path_or_bytes):
    """The file on ONNX Runtime: ``(ids, mask, draws) → ids`` (the draws only where it takes them)."""
    import onnxruntime as ort

    session = ort.InferenceSession(path_or_bytes, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return lambda ids, mask, draws: session.run(None, dict(zip(names, (ids.numpy(), mask.numpy(), draws.numpy()))))[0]


SEARCHES = {"greedy": {}, "beam 2": {"num_beams": 2}, "sample": {"do_sample": True, "top_k": 20, "temperature": 0.8}}


def convert_task(directory: str, settings: dict) -> tuple:
    """``--task text-generation`` on the checkpoint in ``directory``, as the CLI runs it:
    (result, the loaded task, its example set, seconds)."""
    import fxport
    from fxport.load.tasks import load_task

    start = time.perf_counter()
    loaded = load_task(directory, "text-generation", settings)
    example, *rest = loaded.input_sets
    result = fxport.convert(loaded.module, example.args, dynamic_shapes=loaded.dynamic_shapes, verify_inputs=rest)
    return result, loaded, example, time.perf_counter() - start


def one(name: str, search: str) -> list[str]:
    lm = causal_lm(name)
    vocab = lm.config.get_text_config().vocab_size
    settings = dict(max_new_tokens=MAX_NEW, eos_token_id=stopping_tokens(lm, vocab), **SEARCHES[search])
    with tempfile.TemporaryDirectory() as directory:
        lm.save_pretrained(directory)
        try:
            result, _, _, seconds = convert_task(directory, settings)
            equal, tried, steps = same_as_generate(ort_runner(result.model.SerializeToString()), lm, vocab, settings)
            ours = (f"verified, {equal}/{tried} unseen sets equal" if result.verified else "not verified")
            loops = result.op_counts().get("Loop", 0)
            ours_cell = f"{ours}; Loop×{loops}; {seconds:.0f} s"
            wrong = equal < tried
        except Exception as exc:  # noqa: BLE001 - a sweep row says what stopped it
            ours_cell, wrong, steps = f"refused: {str(exc).splitlines()[0][:160]}", False, set()
    try:
        generator = build_generator(lm, **settings)
    except Exception as exc:  # noqa: BLE001 - fxport refuses the settings: nothing to hand the stock exporter
        return [name, search, ours_cell, ", ".join(map(str, sorted(steps))) or "-", "no", f"- ({first_cause(exc)[:60]})"]
    stock = stock_result(generator, lm, vocab, settings)
    return [name, search, ours_cell, ", ".join(map(str, sorted(steps))) or "-", "**yes**" if wrong else "no", stock]


def whisper_lm() -> torch.nn.Module:
    """A tiny multilingual Whisper (random weights, init_std 0.5 so that the ids depend on the
    audio): start 89, languages 90-92, tasks 93-94, no-timestamps 95, timestamp tokens 96-99."""
    import transformers

    torch.manual_seed(0)
    config = transformers.WhisperConfig(
        vocab_size=100, num_mel_bins=8, encoder_layers=2, decoder_layers=2, d_model=32, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_source_positions=16,
        max_target_positions=48, decoder_start_token_id=89, pad_token_id=0, eos_token_id=1, bos_token_id=1,
        suppress_tokens=[2, 3], begin_suppress_tokens=[4], init_std=0.5)
    lm = transformers.WhisperForConditionalGeneration(config).eval()
    generation = lm.generation_config
    generation.lang_to_id = {"<|en|>": 90, "<|fr|>": 91, "<|de|>": 92}
    generation.task_to_id = {"translate": 93, "transcribe": 94}
    generation.no_timestamps_token_id, generation.is_multilingual = 95, True
    generation.pad_token_id, generation._from_model_config = 1, False  # saved and read back as is
    return lm


def unseen_audio():
    """Audio windows the conversion never saw: batches 1, 5, 1, 5, 3 of log-mel-like features."""
    for seed, (batch, _) in enumerate(UNSEEN, start=500):
        yield torch.randn(batch, 8, 32, generator=torch.Generator().manual_seed(seed)) * 0.5


def whisper_generate(lm, features, **settings):
    with torch.no_grad():
        return lm.generate(features, force_unique_generate_call=True, **settings)


def one_whisper(search: str) -> list[str]:
    """A Whisper row: ``--task text-generation`` (force_unique_generate_call=True: the decoder's
    ids, the language detected per row), the file against ``generate()`` on unseen audio."""
    import onnxruntime as ort

    lm = whisper_lm()
    unstopped = torch.cat([whisper_generate(lm, features, max_new_tokens=MAX_NEW, eos_token_id=None)[:, 3:].flatten()
                           for features in unseen_audio()])
    ends = torch.bincount(unstopped, minlength=100).argsort(descending=True)[:3].tolist()
    settings = dict(max_new_tokens=MAX_NEW, eos_token_id=ends, **SEARCHES[search])

    def same_as_generate(session) -> tuple[int, set]:
        equal, steps = 0, set()
        for features in unseen_audio():
            expected = whisper_generate(lm, features, **settings)
            steps.add(expected.shape[1] - 3)
            (produced,) = session.run(None, {"input_features": features.numpy()})
            equal += produced.shape == tuple(expected.shape) and (produced == expected.numpy()).all()
        return equal, steps

    with tempfile.TemporaryDirectory() as directory:
        lm.save_pretrained(directory)
        try:
            result, loaded, example, seconds = convert_task(directory, settings)
            equal, steps = same_as_generate(ort.InferenceSession(result.model.SerializeToString(),
                                                                 providers=["CPUExecutionProvider"]))
            verdict = f"verified, {equal}/{len(UNSEEN)} unseen sets equal" if result.verified else "not verified"
            ours, wrong = f"{verdict}; Loop×{result.op_counts().get('Loop', 0)}; {seconds:.0f} s", equal < len(UNSEEN)
        except Exception as exc:  # noqa: BLE001 - a sweep row says what stopped it
            return ["whisper", search, f"refused: {str(exc).splitlines()[0][:160]}", "-", "no", "-"]
        try:
            program = torch.onnx.export(loaded.module, example.args, dynamo=True, verbose=False,
                                        dynamic_shapes={"input_features": {0: torch.export.Dim("batch")}})
            path = os.path.join(directory, "stock.onnx")
            program.save(path)
            stock_equal, _ = same_as_generate(ort.InferenceSession(path, providers=["CPUExecutionProvider"]))
            stock = f"wrote a file: {stock_equal}/{len(UNSEEN)} unseen sets equal"
        except Exception as exc:  # noqa: BLE001
            stock = f"refused ({first_cause(exc)})"
    return ["whisper", search, ours, ", ".join(map(str, sorted(steps))), "**yes**" if wrong else "no", stock]


def build_generator(lm, **settings):
    """fxport's generator for ``lm.generate(**settings)`` (its family, the settings' strategy)."""
    from fxport.generation.architectures import build_generator as build

    return build(lm, **settings)


def stock_result(generator, lm, vocab: int, settings: dict) -> str:
    """What torch.onnx.export(dynamo=True) does with the same generator module."""
    ids, mask = prompts(2, 6, vocab, seed=7)
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    example = generator.example_arguments(ids, mask, torch.Generator().manual_seed(7))
    shapes = {"input_ids": {0: batch, 1: sequence}, "attention_mask": {0: batch, 1: sequence}}
    if len(example) == 3:
        shapes["random_draws"] = {0: batch}
    try:
        program = torch.onnx.export(generator, example, dynamo=True, verbose=False, dynamic_shapes=shapes)
    except Exception as exc:  # noqa: BLE001
        return f"refused ({first_cause(exc)})"
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "stock.onnx")
        program.save(path)
        try:
            equal, tried, _ = same_as_generate(ort_runner(path), lm, vocab, settings)
        except Exception as exc:  # noqa: BLE001
            return f"wrote a file that fails to run ({type(exc).__name__})"
    return f"wrote a file: {equal}/{tried} unseen sets equal"


def documented_rows() -> list[list[str]]:
    """The rows of the table the last full run wrote into docs/generation.md."""
    text = open(DOC, encoding="utf-8").read().split(MARKER)[-1]
    lines = [line for line in text.splitlines() if line.startswith("| ")][2:]  # after the header and its rule
    return [[cell.strip() for cell in line.strip().strip("|").split(" | ")] for line in lines]


def first_cause(exc: BaseException) -> str:
    """The innermost exception's type and first line, without terminal colours."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:110] if text else ''}".replace("|", "/")


def main(argv: list[str]) -> None:
    from benchmarks.run import _quiet_transformers

    _quiet_transformers()
    torch.set_num_threads(1)
    adding = bool(argv) and argv[0] == "--add"  # run these and merge them into the table in docs/
    argv = argv[1:] if adding else argv
    searches = list(SEARCHES)
    if argv[:1] == ["--search"]:  # only this search (e.g. --add --search sample NAME...)
        searches, argv = [argv[1]], argv[2:]
    names = argv or DECODERS + ENCODER_DECODERS + SPEECH
    rows = documented_rows() if adding else []
    rows = [row for row in rows if not (row[0] in names and row[1] in searches)]
    for name in names:
        for search in searches:
            if name in SPEECH and search not in SPEECH_SEARCHES:
                continue
            try:
                rows.append(one_whisper(search) if name in SPEECH else one(name, search))
            except Exception:  # noqa: BLE001
                error = traceback.format_exc().strip().splitlines()[-1][:160]
                rows.append([name, search, "sweep error: " + error, "-", "-", "-"])
            print(" | ".join(rows[-1]), flush=True)
    order = DECODERS + ENCODER_DECODERS + SPEECH
    rows.sort(key=lambda row: (order.index(row[0]) if row[0] in order else len(order),
                               list(SEARCHES).index(row[1]) if row[1] in SEARCHES else len(SEARCHES)))
    converted = sum(row[2].startswith("verified") and row[4] == "no" for row in rows)
    section = Section(
        title="Generation sweep: greedy, beam search and sampling, fxport vs torch.onnx.export(dynamo=True)",
        note=(f"Tiny configs (2 layers, width 32, random weights) with a causal-LM head (T5, BART: their "
              f"sequence-to-sequence head; Whisper: its speech-to-text head and its own `generate()` with "
              f"`force_unique_generate_call=True`, the language detected per row, greedy and beam only, "
              f"unseen sets of log-mel-like audio windows), saved as checkpoints; "
              f"`--task text-generation`, {MAX_NEW} new tokens, end tokens chosen so that rows stop at different "
              f"steps (the three ids the model generates most often when nothing stops it); greedy search, beam "
              f"search with 2 beams, and sampling (top-k 20, temperature 0.8) with the random draws an input "
              f"(compared with `generate()` given the same draws through `sampling_draws`). \"unseen sets\": {len(UNSEEN)} prompt batches the conversion never saw (lengths 1–11, batch 1 "
              f"and 5, left-padded rows), the file's ids against transformers' `generate()`. \"steps\": how many "
              f"new tokens those batches ran (fewer than {MAX_NEW}: every row stopped early). {machine_info()}."),
        header=["architecture", "search", "fxport", "steps run", "wrong file", "torch.onnx.export(dynamo=True)"],
        rows=rows,
        footer=[f"fxport: {converted}/{len(rows)} conversions ({len({row[0] for row in rows})} architectures; "
                f"{len(SEARCHES)} searches each, Whisper {len(SPEECH_SEARCHES)}) "
                f"converted, verified and equal to `generate()` on every unseen set; "
                f"{sum(row[4] == '**yes**' for row in rows)} wrong files. One thread per process."],
    )
    print_section(section)
    if not argv or adding:
        text = open(DOC, encoding="utf-8").read()
        head = text.split(MARKER)[0]
        with open(DOC, "w", encoding="utf-8") as handle:
            handle.write(head + MARKER + "\n\n" + section.markdown())


if __name__ == "__main__":
    main(sys.argv[1:])
