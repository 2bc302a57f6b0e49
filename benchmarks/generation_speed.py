"""Tokens/s of text generation on CPU: fxport's one-file generator vs eager ``generate()`` vs
onnxruntime-genai (its model builder's fp32 and int4 files, decoded by its C++ loop) — the
runtime a user picks today for generation from a transformers checkpoint (issue 49).

One random-weight Llama-shaped checkpoint (12 layers, width 768, 12 heads / 4 key-value heads,
a 2048-wide MLP, vocabulary 8192; seeded) is written at run time with a ``tokenizers``
WordLevel tokenizer (the builder needs one; nothing is downloaded). Then, each in a process of
its own, one thread, same run:

- **build**: ``fxport convert CKPT --task text-generation --no-verify --max-new-tokens N`` (one
  file per ``N``: the loop's bound is in the file), the same with ``--precision int4`` (weight-only
  int4, MatMulNBits, blocks of 32: docs/precision.md) and ``python3 -m
  onnxruntime_genai.models.builder -i CKPT -o DIR -p fp32|int4 -e cpu``: wall time of the
  command and its peak RSS;
- **decode**, greedy, no row stopping early (the end token is outside the vocabulary), at batch
  1 and 4, prompt 32 and 512, 64 and 256 new tokens: tokens/s = batch × new ÷ the median of
  ``--repeats`` generations after one warm-up; time to first token (eager: ``generate()`` with
  one new token; genai: the prompt appended and the first token generated; fxport's file has no
  streaming, so its first token comes with its last: the whole call); the process's peak RSS;
  whether the ids equal eager's (int4: the share of generated ids that do); fxport's int4 file is
  also compared with eager running the same int4 weights (dequantised), which it must equal.

    python3 -m benchmarks.generation_speed            # the reference run; writes docs/generation.md
    python3 -m benchmarks.generation_speed --quick    # 2 layers, 2 rows, 1 repeat: minutes, prints only

Needs ``onnxruntime-genai`` (``pip install onnxruntime-genai``); without it the genai columns
say so and the rest runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from benchmarks.common import median_seconds, peak_rss_mb

TITLE = "Tokens/s: fxport's one-file generator vs eager generate() vs onnxruntime-genai"
CONFIG = dict(layers=12, width=768, heads=12, kv_heads=4, vocab=8192)
#: (batch, prompt, new tokens)
ROWS = [(batch, prompt, new) for new in (64, 256) for prompt in (32, 512) for batch in (1, 4)]
QUICK_CONFIG = dict(layers=2, width=128, heads=4, kv_heads=2, vocab=1024)
QUICK_ROWS = [(1, 16, 16), (4, 16, 16)]
VARIANTS = ("eager", "fxport", "fxport_int4", "genai_fp32", "genai_int4")
#: the timed generations of one variant and row stop at ``repeats`` or at about this many seconds
BUDGET_S = 40.0
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(REPO, "docs", "generation.md")
BEGIN, END = "<!-- generation speed: written by python3 -m benchmarks.generation_speed -->", "<!-- end of generation speed -->"


def genai_available() -> str | None:
    """None when onnxruntime-genai imports, else why not (one line)."""
    try:
        import onnxruntime_genai  # noqa: F401
    except Exception as exc:  # ImportError, or a shared library that does not load
        return f"onnxruntime-genai does not import ({type(exc).__name__}: {exc}); pip install onnxruntime-genai"
    return None


def write_checkpoint(folder: str, config: dict) -> str:
    """A seeded random-weight Llama checkpoint with a WordLevel tokenizer (token ``t{i}`` is id
    ``i`` from 3 on; ``<unk>``, ``<s>``, ``</s>`` are 0, 1, 2), as ``save_pretrained()`` writes
    them; the end token is id 2."""
    import torch
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    transformers.logging.disable_progress_bar()
    torch.manual_seed(0)
    settings = transformers.LlamaConfig(
        num_hidden_layers=config["layers"], hidden_size=config["width"], num_attention_heads=config["heads"],
        num_key_value_heads=config["kv_heads"], intermediate_size=config["width"] * 8 // 3,
        vocab_size=config["vocab"], max_position_embeddings=1024, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    transformers.LlamaForCausalLM(settings).eval().save_pretrained(folder)
    specials = ["<unk>", "<s>", "</s>"]  # ids 0, 1, 2 (not t0..t2: a special token is matched inside words)
    vocabulary = {token: i for i, token in enumerate(specials)} | {f"t{i}": i for i in range(3, config["vocab"])}
    tokenizer = Tokenizer(models.WordLevel(vocabulary, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>", pad_token="<unk>",
                                         bos_token="<s>", eos_token="</s>").save_pretrained(folder)
    return folder


def timed_command(args: list[str], **kwargs) -> tuple[float, subprocess.CompletedProcess]:
    """Run ``args``: (wall seconds, the finished process); a failure raises with its stderr's end."""
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, **kwargs)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"{' '.join(args[:8])} ... failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, done


def build(kind: str, checkpoint: str, folder: str, new: int | None = None) -> dict:
    """Build one file: ``kind`` "fxport" (the CLI, ``new`` tokens) or "genai_fp32" /
    "genai_int4" (the builder). Wall time and peak RSS of the command; fxport adds its stage
    times (``--json``)."""
    rss_file = os.path.join(folder, f"{kind}-{new}.rss")
    if kind.startswith("fxport"):
        output = os.path.join(folder, f"{kind}-{new}.onnx")
        command = ["fxport", "convert", checkpoint, "--task", "text-generation", "--no-verify",
                   "--max-new-tokens", str(new), "--eos-token-id", str(_outside_vocabulary(checkpoint)),
                   "-o", output, "--json"] + (["--precision", "int4"] if kind == "fxport_int4" else [])
    else:
        output = os.path.join(folder, kind)
        command = ["onnxruntime_genai.models.builder", "-i", checkpoint, "-o", output,
                   "-p", kind.split("_")[1], "-e", "cpu", "-c", os.path.join(folder, "genai-cache")]
    args = [sys.executable, "-m", "benchmarks.generation_speed", "--rss-file", rss_file, "--run-module", "--", *command]
    seconds, done = timed_command(args, cwd=REPO)
    result = {"seconds": seconds, "peak_rss_mb": float(open(rss_file).read()), "path": output}
    if kind.startswith("fxport"):
        report = json.loads(done.stdout[done.stdout.index("{"):])
        result["stages"] = report.get("timings", {})
    else:
        _one_thread_genai(output)
    return result


def _outside_vocabulary(checkpoint: str) -> int:
    """An end-token id no row produces (no row stops early): the vocabulary's size."""
    with open(os.path.join(checkpoint, "config.json")) as handle:
        return json.load(handle)["vocab_size"]


def _one_thread_genai(folder: str) -> None:
    """genai_config.json: one thread, as every variant here, and no end token (no row stops
    early, as with eager's ``eos_token_id=None``)."""
    path = os.path.join(folder, "genai_config.json")
    with open(path) as handle:
        config = json.load(handle)
    config["model"]["eos_token_id"] = []
    config["model"]["decoder"]["session_options"].update(intra_op_num_threads=1, inter_op_num_threads=1)
    with open(path, "w") as handle:
        json.dump(config, handle, indent=4)


def run_module(argv: list[str], rss_file: str) -> None:
    """``python3 -m MODULE ARGS`` in this process (``argv``: ``MODULE ARGS``), then its peak RSS
    into ``rss_file``: a build measured as the user runs it, with its own peak memory."""
    import runpy

    module, *arguments = argv
    sys.argv = [module, *arguments]
    code = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    with open(rss_file, "w") as handle:
        handle.write(f"{peak_rss_mb():.1f}")
    sys.stdout.flush()
    os._exit(code)  # skip interpreter teardown (atexit of a module run above may print)


def measure(variant: str, config: dict, folder: str, batch: int, prompt: int, new: int, repeats: int) -> dict:
    """In this process (one thread): tokens/s (batch × new ÷ the median of ``repeats`` after a
    warm-up), time to first token, peak RSS, and the ids of the warm-up."""
    import numpy as np
    import torch

    torch.set_num_threads(1)
    draw = torch.Generator().manual_seed(batch * 1000 + prompt)
    ids = torch.randint(3, config["vocab"], (batch, prompt), generator=draw)
    mask = torch.ones_like(ids)
    checkpoint = os.path.join(folder, "checkpoint")
    if variant == "eager":
        import transformers

        lm = transformers.LlamaForCausalLM.from_pretrained(checkpoint).eval()

        def generate(tokens: int):
            with torch.no_grad():
                return lm.generate(input_ids=ids, attention_mask=mask, max_new_tokens=tokens, do_sample=False,
                                   eos_token_id=None, pad_token_id=0).numpy()

        run, first = (lambda: generate(new)), (lambda: generate(1))
    elif variant.startswith("fxport"):
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads, options.log_severity_level = 1, 1, 3
        session = ort.InferenceSession(os.path.join(folder, f"{variant}-{new}.onnx"), options,
                                       providers=["CPUExecutionProvider"])
        feed = {"input_ids": ids.numpy(), "attention_mask": mask.numpy()}
        run = lambda: session.run(None, feed)[0]  # noqa: E731
        first = None  # no streaming: the first token comes with the last (the whole call)
    else:
        import onnxruntime_genai as og

        model = og.Model(os.path.join(folder, variant))
        prompt_ids = ids.numpy()

        def generator():
            params = og.GeneratorParams(model)
            params.set_search_options(max_length=prompt + new, batch_size=batch, do_sample=False)
            made = og.Generator(model, params)
            made.append_tokens(prompt_ids)
            return made

        def run():
            made = generator()
            while not made.is_done():
                made.generate_next_token()
            return np.stack([made.get_sequence(row) for row in range(batch)])

        def first():
            made = generator()
            made.generate_next_token()
            return made.get_next_tokens()

    start = time.perf_counter()
    out = np.asarray(run())  # the warm-up, and the ids compared with eager's
    once = time.perf_counter() - start
    timed = max(1, min(repeats, int(BUDGET_S / max(once, 1e-9))))  # fewer when a generation is long
    seconds = median_seconds(run, timed, warmup=0)
    first_token = median_seconds(first, repeats, warmup=1) if first is not None else seconds
    result = {"tokens_per_s": batch * new / seconds, "first_token_s": first_token, "peak_rss_mb": peak_rss_mb(),
              "ids": out[:, prompt:].tolist(), "timed": timed}
    if variant == "fxport_int4":  # after the timing (and the peak RSS): the ids it must give
        result["reference_ids"] = fake_quantized_ids(checkpoint, ids, mask, new)
    return result


def fake_quantized_ids(checkpoint: str, ids, mask, new: int) -> list:
    """The generated ids of eager ``generate()`` with the checkpoint's Linear weights int4 in
    blocks of 32, dequantised: what ``--precision int4`` puts in the file (fxport's verification
    reference, fxport/lower/weight_quantization.py)."""
    import torch
    import transformers

    from fxport.lower.weight_quantization import BlockwiseScheme, quantize_module_weights

    lm = transformers.LlamaForCausalLM.from_pretrained(checkpoint).eval()
    record = quantize_module_weights(lm, BlockwiseScheme.of("int4"))
    for weight in record.weights.values():
        weight.uses = 1
    with torch.no_grad():
        out = record.fake_quantized(lm).generate(input_ids=ids, attention_mask=mask, max_new_tokens=new,
                                                 do_sample=False, eos_token_id=None, pad_token_id=0)
    return out[:, ids.shape[1]:].tolist()


def agreement(ids: list, reference: list) -> float:
    """The share of generated ids equal to the reference's at the same place."""
    import numpy as np

    ids, reference = np.asarray(ids), np.asarray(reference)
    return float((ids == reference).mean()) if ids.shape == reference.shape else 0.0


def machine_load() -> str:
    """The 1-, 5- and 15-minute load averages, and the cores."""
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} / {five:.1f} / {fifteen:.1f} on {os.cpu_count()} cores"


def run(repeats: int = 3, config: dict | None = None, rows=None, variants=VARIANTS, log=print):
    """Write the checkpoint, build every file, then measure each row and variant in a subprocess.
    Returns the two sections (decoding, building)."""
    config = dict(CONFIG, **(config or {}))
    rows = rows or ROWS
    missing = genai_available()
    if missing:
        variants = tuple(v for v in variants if not v.startswith("genai"))
        log(f"genai columns left out: {missing}")
    load_before = machine_load()
    folder = tempfile.mkdtemp(prefix="fxport-genai-")
    try:
        checkpoint = write_checkpoint(os.path.join(folder, "checkpoint"), config)
        weights_mb = os.path.getsize(os.path.join(checkpoint, "model.safetensors")) / 2 ** 20
        builds = {}
        for new in sorted({new for _, _, new in rows}):
            for kind in [v for v in variants if v.startswith("fxport")]:
                builds[f"{kind}-{new}"] = build(kind, checkpoint, folder, new)
                log(f"{kind} convert, {new} new tokens: {builds[f'{kind}-{new}']['seconds']:.1f} s")
        for kind in [v for v in variants if v.startswith("genai")]:
            builds[kind] = build(kind, checkpoint, folder)
            log(f"{kind} build: {builds[kind]['seconds']:.1f} s")
        table = []
        for batch, prompt, new in rows:
            results = {}
            for variant in variants:
                args = [sys.executable, "-m", "benchmarks.generation_speed", "--measure", variant, "--folder", folder,
                        "--batch", str(batch), "--prompt", str(prompt), "--new", str(new), "--repeats", str(repeats),
                        "--config", json.dumps(config)]
                done = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
                if done.returncode:
                    raise RuntimeError(f"{variant} at batch {batch}, prompt {prompt}, new {new}:\n{done.stderr[-3000:]}")
                results[variant] = json.loads(done.stdout.strip().splitlines()[-1])
            log(f"batch {batch}, prompt {prompt}, new {new}: "
                + ", ".join(f"{v} {r['tokens_per_s']:.1f} tok/s" for v, r in results.items()))
            table.append(_row(batch, prompt, new, results))
        load_after = machine_load()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return _sections(config, rows, repeats, builds, table, weights_mb, load_before, load_after, variants)


def _row(batch: int, prompt: int, new: int, results: dict) -> list[str]:
    eager = results["eager"]
    tps = {v: r["tokens_per_s"] for v, r in results.items()}

    def cell(variant: str) -> str:
        return f"{tps[variant]:.1f}" if variant in tps else "—"

    def times(variant: str, of: str = "fxport") -> str:
        return f"{tps[of] / tps[variant]:.2f}×" if variant in tps and of in tps else "—"

    def same(variant: str) -> str:
        if variant not in results:
            return "—"
        share = agreement(results[variant]["ids"], eager["ids"])
        return "yes" if share == 1.0 else ("NO" if variant != "genai_int4" else f"{share:.0%} of ids")

    def int4_ids() -> str:
        if "fxport_int4" not in results:
            return "—"
        mine = results["fxport_int4"]
        same = "yes" if agreement(mine["ids"], mine["reference_ids"]) == 1.0 else "NO"
        return f"{same} / {agreement(mine['ids'], eager['ids']):.0%} of ids"

    order = [v for v in VARIANTS if v in results]
    return [str(batch), str(prompt), str(new), cell("eager"), cell("fxport"), cell("fxport_int4"), cell("genai_fp32"),
            cell("genai_int4"), times("eager"), times("genai_fp32"), times("genai_int4"),
            times("genai_int4", of="fxport_int4"), int4_ids(),
            " / ".join(f"{results[v]['first_token_s'] * 1e3:.0f}" for v in order),
            " / ".join(f"{results[v]['peak_rss_mb']:.0f}" for v in order),
            f"{same('fxport')} / {same('genai_fp32')} / {same('genai_int4')}"]


def _sections(config, rows, repeats, builds, table, weights_mb, load_before, load_after, variants):
    from benchmarks.common import Section, machine_info

    shape = (f"{config['layers']} layers, width {config['width']}, {config['heads']} heads / {config['kv_heads']} "
             f"key-value heads, vocabulary {config['vocab']}")
    order = " / ".join(v.replace("_", " ") for v in VARIANTS if v in variants)
    note = (f"Llama-shaped, random weights ({shape}; {weights_mb:.0f} MB of float32 weights); greedy, no row "
            f"stopping early; one thread per process; tokens/s = batch × new ÷ the median of {repeats} generations "
            f"after a warm-up (fewer when the warm-up took over {BUDGET_S / repeats:.0f} s; at least one); time to first token: eager `generate()` with one new token, genai the prompt appended "
            f"and one token generated, fxport's file the whole call (it returns every id at once). "
            f"{machine_info()}; {load_before} before the run, {load_after} after (other jobs were running: "
            "ratios within one run are what to read, not absolute tokens/s).")
    header = ["batch", "prompt", "new", "eager tok/s", "fxport tok/s", "fxport int4 tok/s", "genai fp32 tok/s",
              "genai int4 tok/s", "fxport ÷ eager", "fxport ÷ genai fp32", "fxport ÷ genai int4",
              "fxport int4 ÷ genai int4", "fxport int4 ids: equal to eager with the int4 weights / agree with fp32 eager",
              f"first token ms ({order})",
              f"peak RSS MB ({order})", "same ids as eager (fxport / genai fp32 / genai int4)"]
    decoding = Section(TITLE, note, header, table)
    fp32 = builds.get("genai_fp32")
    build_rows = []
    for name, result in builds.items():
        stages = ", ".join(f"{stage} {seconds:.1f}" for stage, seconds in result.get("stages", {}).items()
                           if isinstance(seconds, (int, float)))
        int4 = " --precision int4" if name.startswith("fxport_int4") else ""
        label = (f"`fxport convert CKPT --task text-generation --no-verify --max-new-tokens {name.split('-')[1]}{int4}`"
                 if name.startswith("fxport") else f"genai builder `-p {name.split('_')[1]} -e cpu`")
        build_rows.append([label, f"{result['seconds']:.1f}", f"{result['seconds'] / fp32['seconds']:.1f}×" if fp32 else "—",
                           f"{result['peak_rss_mb']:.0f}", f"{result['peak_rss_mb'] / weights_mb:.1f}×", stages or "—"])
    building = Section("Build time: fxport convert vs the onnxruntime-genai model builder",
                       "Same checkpoint, same run; wall time of the command (Python start and imports included), "
                       "its peak RSS, and fxport's stage times from `--json` (seconds).",
                       ["command", "seconds", "÷ genai fp32 build", "peak RSS MB", "÷ weights", "fxport stages (s)"],
                       build_rows)
    return decoding, building


def write_doc(sections, command: str) -> None:
    from benchmarks.common import splice_block

    body = "\n".join(section.markdown() for section in sections)
    splice_block(DOC, BEGIN, END, f"{body}\nCommand: `{command}`.", "<!-- generation sweep")


def main(argv=None) -> None:
    import argparse

    argv = sys.argv[1:] if argv is None else argv
    if "--run-module" in argv:  # a build, measured: --rss-file PATH --run-module -- MODULE ARGS
        rss_file = argv[argv.index("--rss-file") + 1]
        run_module(argv[argv.index("--") + 1:], rss_file)
        return
    parser = argparse.ArgumentParser(description=TITLE)
    parser.add_argument("--quick", action="store_true", help="2 layers, 2 rows, 1 repeat; prints, writes no doc")
    parser.add_argument("--measure", choices=VARIANTS)
    parser.add_argument("--folder")
    parser.add_argument("--batch", type=int)
    parser.add_argument("--prompt", type=int)
    parser.add_argument("--new", type=int)
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--config", default="{}")
    parser.add_argument("--no-doc", action="store_true", help="print only")
    options = parser.parse_args(argv)
    from benchmarks.run import _quiet_transformers

    _quiet_transformers()
    if options.measure:
        config = dict(CONFIG, **json.loads(options.config))
        print(json.dumps(measure(options.measure, config, options.folder, options.batch, options.prompt, options.new,
                                 options.repeats or 3)))
        return
    from benchmarks.common import print_section

    if options.quick:
        sections = run(options.repeats or 1, QUICK_CONFIG, QUICK_ROWS)
    else:
        sections = run(options.repeats or 3)
    for section in sections:
        print_section(section)
        print(section.markdown())
    if not options.quick and not options.no_doc:
        write_doc(sections, "python3 -m benchmarks.generation_speed" + (f" --repeats {options.repeats}" if options.repeats else ""))


if __name__ == "__main__":
    main()
