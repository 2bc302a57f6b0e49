"""Greedy decoding with a KV cache grown by ``torch.cat``: one ONNX file (fxport's Loop around the
separately exported body) vs eager PyTorch running the same loop vs a Python loop calling an ONNX
Runtime session of the one-step model with the caches as inputs and outputs (the way optimum and
onnxruntime-genai decode).

A GPT-2-small-shaped model in plain PyTorch (12 layers, width 768, 12 heads, random weights; the
vocabulary is smaller than GPT-2's by default, ``--vocab`` changes it) decodes ``--new`` tokens
after a ``--prompt``-token prompt at batch 1 and 4; no row stops early (the end token is out of
the vocabulary). Each variant runs in a subprocess of its own, one thread, so its peak RSS is its
own; tokens/s is the median of ``repeats`` full decodes after one warm-up. Target (issue 26):
the file ≥ 1.2× eager and ≥ 1.0× the Python loop at batch 1.

Run alone: ``python3 -m benchmarks.decoding`` (or ``python3 -m benchmarks.run --only decoding``
to update docs/benchmarks.md; opt-in, as it converts a 12-layer model twice); ``--layers 2
--width 64 --heads 4 --vocab 256 --prompt 8 --new 8`` for a quick check.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time

import torch
from torch import nn

from benchmarks.common import median_seconds, peak_rss_mb

TITLE = "Decoding loop: one-file ONNX Loop vs eager vs a Python loop over a one-step ONNX model"
CONFIG = dict(layers=12, width=768, heads=12, vocab=8192, prompt=32, new=64)


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, h, k_past, v_past):
        batch, length, width = h.shape
        q, k, v = self.qkv(self.ln1(h)).chunk(3, -1)
        k, v = torch.cat([k_past, k], 1), torch.cat([v_past, v], 1)
        start = k_past.shape[1]

        def split(t):
            return t.reshape(batch, t.shape[1], self.heads, width // self.heads).transpose(1, 2)

        scores = split(q) @ split(k).transpose(-1, -2) / math.sqrt(width // self.heads)
        causal = torch.arange(k.shape[1])[None, :] > torch.arange(length)[:, None] + start
        att = torch.softmax(scores.masked_fill(causal, float("-inf")), -1) @ split(v)
        h = h + self.proj(att.transpose(1, 2).reshape(batch, length, width))
        return h + self.mlp(self.ln2(h)), k, v


class GPT(nn.Module):
    def __init__(self, layers, width, heads, vocab, positions=1024):
        super().__init__()
        torch.manual_seed(0)
        self.embed, self.pos = nn.Embedding(vocab, width), nn.Embedding(positions, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln, self.head = nn.LayerNorm(width), nn.Linear(width, vocab, bias=False)
        self.eos = vocab  # never produced: every row decodes max_new tokens

    def step(self, tokens, caches):
        """Logits of the last position and the caches grown by the new positions."""
        start = caches[0][0].shape[1]
        h = self.embed(tokens) + self.pos(torch.arange(tokens.shape[1]) + start)
        grown = []
        for block, (k, v) in zip(self.blocks, caches):
            h, k, v = block(h, k, v)
            grown.append((k, v))
        return self.head(self.ln(h))[:, -1], grown


class Decode(nn.Module):
    """Prefill, then ``while step < max_new and not finished.all()`` with the caches grown by cat."""

    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, tokens, max_new):
        empty = torch.zeros(tokens.shape[0], 0, self.gpt.pos.embedding_dim)
        logits, caches = self.gpt.step(tokens, [(empty, empty) for _ in self.gpt.blocks])
        nxt = logits.argmax(-1)
        finished = nxt == self.gpt.eos
        out = nxt[:, None]
        step = 1
        while step < max_new and not finished.all():
            logits, caches = self.gpt.step(nxt[:, None], caches)
            nxt = torch.where(finished, torch.full_like(nxt, self.gpt.eos), logits.argmax(-1))
            out = torch.cat([out, nxt[:, None]], 1)
            finished = finished | (nxt == self.gpt.eos)
            step = step + 1
        return out


class Step(nn.Module):
    """One step with the caches as flat inputs and outputs (the Python-loop baseline's model)."""

    def __init__(self, gpt):
        super().__init__()
        self.gpt = gpt

    def forward(self, tokens, *flat):
        caches = [(flat[2 * i], flat[2 * i + 1]) for i in range(len(flat) // 2)]
        logits, grown = self.gpt.step(tokens, caches)
        return (logits.argmax(-1),) + tuple(t for pair in grown for t in pair)


def export_files(config: dict, folder: str) -> dict:
    """The one-file decoder and the one-step model, converted by fxport (not verified here)."""
    import fxport

    gpt = GPT(config["layers"], config["width"], config["heads"], config["vocab"]).eval()
    batch, length = torch.export.Dim("batch"), torch.export.Dim("length")
    tokens = torch.randint(0, config["vocab"], (2, 5))
    times = {}
    start = time.perf_counter()
    fxport.convert(Decode(gpt), (tokens, torch.tensor(3)), dynamic_shapes=({0: batch, 1: length}, None),
                   verify=False, output=os.path.join(folder, "decode.onnx"))
    times["decode"] = time.perf_counter() - start
    past = torch.export.Dim("past")
    caches = [torch.zeros(2, 3, config["width"]) for _ in range(2 * config["layers"])]
    start = time.perf_counter()
    fxport.convert(Step(gpt), (tokens, *caches), dynamic_shapes=({0: batch, 1: length}, tuple({0: batch, 1: past} for _ in caches)),
                   verify=False, output=os.path.join(folder, "step.onnx"))
    times["step"] = time.perf_counter() - start
    return times


def measure(variant: str, config: dict, folder: str, batch: int, repeats: int) -> dict:
    """Tokens/s (median of ``repeats`` decodes after a warm-up) and peak RSS of this process."""
    torch.set_num_threads(1)
    tokens = torch.randint(0, config["vocab"], (batch, config["prompt"]), generator=torch.Generator().manual_seed(1))
    new = config["new"]
    if variant == "eager":
        model = Decode(GPT(config["layers"], config["width"], config["heads"], config["vocab"]).eval())

        def run():
            with torch.no_grad():
                return model(tokens, torch.tensor(new)).numpy()
    else:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads, options.log_severity_level = 1, 1, 3
        name = "decode.onnx" if variant == "onnx_loop" else "step.onnx"
        session = ort.InferenceSession(os.path.join(folder, name), options, providers=["CPUExecutionProvider"])
        names = [i.name for i in session.get_inputs()]
        if variant == "onnx_loop":
            def run():
                return session.run(None, {names[0]: tokens.numpy(), names[1]: torch.tensor(new).numpy()})[0]
        else:
            run = _python_loop(session, names, tokens.numpy(), 2 * config["layers"], config["width"], new)
    first = run()  # the warm-up, and the ids compared across variants
    seconds = median_seconds(run, repeats, warmup=0)
    return {"tokens_per_s": batch * new / seconds, "peak_rss_mb": peak_rss_mb(),
            "shape": list(first.shape), "checksum": int(first.sum())}


def _python_loop(session, names, tokens, count, width, new):
    import numpy as np

    def run():
        caches = [np.zeros((tokens.shape[0], 0, width), np.float32) for _ in range(count)]
        nxt, *caches = session.run(None, dict(zip(names, [tokens, *caches])))
        out = [nxt]
        for _ in range(new - 1):
            nxt, *caches = session.run(None, dict(zip(names, [nxt[:, None], *caches])))
            out.append(nxt)
        return np.stack(out, 1)
    return run


def run(repeats: int = 3, config: dict | None = None):
    """Export once, then each variant at batch 1 and 4 in a subprocess; the benchmarks Section."""
    from benchmarks.common import Section

    config = dict(CONFIG, **(config or {}))
    with tempfile.TemporaryDirectory() as folder:
        times = export_files(config, folder)
        results = {}
        for batch in (1, 4):
            for variant in ("eager", "onnx_loop", "python_loop"):
                args = [sys.executable, "-m", "benchmarks.decoding", "--measure", variant, "--folder", folder,
                        "--batch", str(batch), "--repeats", str(repeats), "--config", json.dumps(config)]
                done = subprocess.run(args, capture_output=True, text=True, check=True)
                results[variant, batch] = json.loads(done.stdout.strip().splitlines()[-1])
    rows = []
    for batch in (1, 4):
        eager, loop, python = (results[v, batch] for v in ("eager", "onnx_loop", "python_loop"))
        same = eager["checksum"] == loop["checksum"] == python["checksum"] and eager["shape"] == loop["shape"]
        rows.append([str(batch), f"{eager['tokens_per_s']:.1f}", f"{loop['tokens_per_s']:.1f}",
                     f"{python['tokens_per_s']:.1f}", f"{loop['tokens_per_s'] / eager['tokens_per_s']:.2f}×",
                     f"{loop['tokens_per_s'] / python['tokens_per_s']:.2f}×",
                     f"{eager['peak_rss_mb']:.0f} / {loop['peak_rss_mb']:.0f} / {python['peak_rss_mb']:.0f}",
                     "yes" if same else "NO"])
    shape = ", ".join(f"{k} {v}" for k, v in config.items())
    note = (f"{shape}; one thread each; tokens/s = batch × new ÷ median decode time of {repeats} runs. "
            f"Conversion (fxport.convert, not verified): one-file decoder {times['decode']:.0f} s, one-step model "
            f"{times['step']:.0f} s. Lowering chosen for the cache: Concat on the carried value (no bound needed; "
            "docs/control-flow.md, \"Loops whose state grows\").")
    header = ["batch", "eager tok/s", "ONNX Loop tok/s", "Python loop + ORT step tok/s", "Loop ÷ eager",
              "Loop ÷ Python loop", "peak RSS MB, torch imported (eager / Loop / Python loop)", "same tokens"]
    return Section(TITLE, note, header, rows)


def main(argv=None) -> None:
    from benchmarks.common import variant_arguments

    parser, config_of = variant_arguments(TITLE, CONFIG, ("eager", "onnx_loop", "python_loop"))
    options = parser.parse_args(argv)
    config = config_of(options)
    if options.measure:
        print(json.dumps(measure(options.measure, config, options.folder, options.batch, options.repeats)))
        return
    from benchmarks.common import print_section

    print_section(run(options.repeats, config))


if __name__ == "__main__":
    main()
