"""Tokens/s of text generation: fxport's one-file generator on ONNX Runtime CPU vs eager
``generate()`` vs a Python loop over fxport's one-step model (``--task text-generation-step``) in
ONNX Runtime, the way optimum and onnxruntime-genai decode.

GPT-2-small-shaped and Llama-shaped transformers models (12 layers, width 768, 12 heads; Llama
with 4 key-value heads and a 2048-wide MLP; random weights; vocabulary 8192 by default) generate
``--new`` tokens greedily after a ``--prompt``-token prompt at batch 1 and 4; no row stops early
(no end token). Each variant runs in a subprocess of its own, one thread, so its peak RSS
(``VmHWM``) is its own; tokens/s is batch × new ÷ the median of ``--repeats`` full generations
after one warm-up; "same ids" compares the three outputs. Target (issue 27): the file ≥ 1.5×
eager ``generate()`` at batch 1 and not slower than the Python loop.

    python3 -m benchmarks.generation_speed                 # writes its table into docs/generation.md
    python3 -m benchmarks.generation_speed --layers 2 --width 64 --heads 4 --new 8   # a quick check
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

import torch

from benchmarks.common import median_seconds, peak_rss_mb

TITLE = "Tokens/s: one-file generator vs eager generate() vs a Python loop over the one-step model"
CONFIG = dict(layers=12, width=768, heads=12, vocab=8192, prompt=32, new=64)
MODELS = ("gpt2", "llama")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(REPO, "docs", "generation.md")
BEGIN, END = "<!-- generation speed: written by python3 -m benchmarks.generation_speed -->", "<!-- end of generation speed -->"


def build(model: str, config: dict) -> torch.nn.Module:
    """The model with random weights (seeded)."""
    import transformers

    torch.manual_seed(0)
    if model == "gpt2":
        settings = transformers.GPT2Config(n_layer=config["layers"], n_embd=config["width"], n_head=config["heads"],
                                           vocab_size=config["vocab"], n_positions=1024)
        return transformers.GPT2LMHeadModel(settings).eval()
    settings = transformers.LlamaConfig(num_hidden_layers=config["layers"], hidden_size=config["width"],
                                        num_attention_heads=config["heads"], num_key_value_heads=max(1, config["heads"] // 3),
                                        intermediate_size=config["width"] * 8 // 3, vocab_size=config["vocab"],
                                        max_position_embeddings=1024)
    return transformers.LlamaForCausalLM(settings).eval()


def export_files(model: str, config: dict, folder: str) -> dict:
    """The one-file generator and the one-step model, converted by fxport (not verified here:
    the measured runs compare their ids with eager generate())."""
    import fxport
    from fxport.generation.architectures import build_generator
    from fxport.generation.decoder_step import DecoderStep, step_dynamic_shapes, step_inputs

    lm = build(model, config)
    prompt = torch.randint(0, config["vocab"], (2, 5)), torch.ones(2, 5, dtype=torch.int64)
    times = {}
    start = time.perf_counter()
    generator = build_generator(lm, max_new_tokens=config["new"], eos_token_id=None)
    fxport.convert(generator, prompt, dynamic_shapes=generator.dynamic_shapes, verify=False,
                   output=os.path.join(folder, f"{model}-generate.onnx"))
    times["generator"] = time.perf_counter() - start
    start = time.perf_counter()
    fxport.convert(DecoderStep(lm).eval(), step_inputs(lm, 2, 3, 1), dynamic_shapes=step_dynamic_shapes(lm),
                   verify=False, output=os.path.join(folder, f"{model}-step.onnx"))
    times["step"] = time.perf_counter() - start
    return times


def measure(model: str, variant: str, config: dict, folder: str, batch: int, repeats: int) -> dict:
    """Tokens/s (median of ``repeats`` after a warm-up) and this process's peak RSS."""
    torch.set_num_threads(1)
    draw = torch.Generator().manual_seed(1)
    ids = torch.randint(0, config["vocab"], (batch, config["prompt"]), generator=draw)
    mask = torch.ones_like(ids)
    new = config["new"]
    if variant == "eager":
        lm = build(model, config)

        def run():
            with torch.no_grad():
                return lm.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new, min_new_tokens=new,
                                   do_sample=False, eos_token_id=None, pad_token_id=0).numpy()
    else:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads, options.log_severity_level = 1, 1, 3
        name = f"{model}-generate.onnx" if variant == "onnx_loop" else f"{model}-step.onnx"
        session = ort.InferenceSession(os.path.join(folder, name), options, providers=["CPUExecutionProvider"])
        if variant == "onnx_loop":
            def run():
                return session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]
        else:
            run = _python_loop(session, ids.numpy(), mask.numpy(), new)
    first = run()  # the warm-up, and the ids compared across variants
    seconds = median_seconds(run, repeats, warmup=0)
    return {"tokens_per_s": batch * new / seconds, "peak_rss_mb": peak_rss_mb(), "ids": first.tolist()}


def _python_loop(session, ids, mask, new):
    """Greedy decoding over the one-step file, the cache fed back from its ``present.*`` outputs."""
    import numpy as np

    inputs = session.get_inputs()
    past_names = [i.name for i in inputs[3:]]
    present_names = [o.name for o in session.get_outputs()[1:]]
    kv_heads, head_size = inputs[3].shape[1], inputs[3].shape[3]

    def run():
        past = {name: np.zeros((ids.shape[0], kv_heads, 0, head_size), np.float32) for name in past_names}
        step_mask = mask
        positions = np.where(step_mask == 0, 0, step_mask.cumsum(-1) - 1)
        step_ids, sequences = ids, ids
        for _ in range(new):
            logits, *present = session.run(None, {"input_ids": step_ids, "attention_mask": step_mask,
                                                  "position_ids": positions, **past})
            token = logits[:, -1].argmax(-1)[:, None]
            sequences = np.concatenate([sequences, token], 1)
            past = dict(zip(past_names, present))
            step_mask = np.concatenate([step_mask, np.ones_like(step_mask[:, :1])], 1)
            positions, step_ids = positions[:, -1:] + 1, token
        return sequences

    assert [name.replace("past_key_values", "present") for name in past_names] == present_names
    return run


def run(repeats: int = 3, config: dict | None = None, models=MODELS):
    """Export each model once, then each variant at batch 1 and 4 in a subprocess."""
    from benchmarks.common import Section

    config = dict(CONFIG, **(config or {}))
    rows, notes = [], []
    with tempfile.TemporaryDirectory() as folder:
        for model in models:
            times = export_files(model, config, folder)
            notes.append(f"{model}: generator {times['generator']:.0f} s, step model {times['step']:.0f} s")
            for batch in (1, 4):
                results = {}
                for variant in ("eager", "onnx_loop", "python_loop"):
                    args = [sys.executable, "-m", "benchmarks.generation_speed", "--measure", variant, "--model", model,
                            "--folder", folder, "--batch", str(batch), "--repeats", str(repeats),
                            "--config", json.dumps(config)]
                    done = subprocess.run(args, capture_output=True, text=True, check=True)
                    results[variant] = json.loads(done.stdout.strip().splitlines()[-1])
                eager, loop, python = (results[v] for v in ("eager", "onnx_loop", "python_loop"))
                same = eager["ids"] == loop["ids"] == python["ids"]
                rows.append([model, str(batch), f"{eager['tokens_per_s']:.1f}", f"{loop['tokens_per_s']:.1f}",
                             f"{python['tokens_per_s']:.1f}", f"{loop['tokens_per_s'] / eager['tokens_per_s']:.2f}×",
                             f"{loop['tokens_per_s'] / python['tokens_per_s']:.2f}×",
                             f"{eager['peak_rss_mb']:.0f} / {loop['peak_rss_mb']:.0f} / {python['peak_rss_mb']:.0f}",
                             "yes" if same else "NO"])
    shape = ", ".join(f"{k} {v}" for k, v in config.items())
    note = (f"{shape}; one thread each; tokens/s = batch × new ÷ median of {repeats} generations after a warm-up. "
            f"Conversion (fxport.convert, not verified; the ids are compared here): {'; '.join(notes)}.")
    header = ["model", "batch", "eager generate() tok/s", "one file (ONNX Loop) tok/s", "Python loop + step file tok/s",
              "file ÷ eager", "file ÷ Python loop", "peak RSS MB (eager / file / Python loop)", "same ids"]
    return Section(TITLE, note, header, rows)


def write_doc(section) -> None:
    text = open(DOC, encoding="utf-8").read()
    block = f"{BEGIN}\n\n{section.markdown()}\n{END}"
    if BEGIN in text:
        text = text[:text.index(BEGIN)] + block + text[text.index(END) + len(END):]
    else:
        marker = "<!-- generation sweep"
        text = text.replace(marker, block + "\n\n" + marker, 1)
    with open(DOC, "w", encoding="utf-8") as handle:
        handle.write(text)


def main(argv=None) -> None:
    from benchmarks.common import variant_arguments

    parser, config_of = variant_arguments(TITLE, CONFIG, ("eager", "onnx_loop", "python_loop"))
    parser.add_argument("--model", choices=MODELS)
    options = parser.parse_args(argv)
    config = config_of(options)
    if options.measure:
        from benchmarks.run import _quiet_transformers

        _quiet_transformers()
        print(json.dumps(measure(options.model, options.measure, config, options.folder, options.batch, options.repeats)))
        return
    from benchmarks.common import print_section
    from benchmarks.run import _quiet_transformers

    _quiet_transformers()
    section = run(options.repeats, config, [options.model] if options.model else MODELS)
    print_section(section)
    if config == CONFIG and not options.model:
        write_doc(section)


if __name__ == "__main__":
    main()
