"""Conversion cost as a transformer grows: tiny GPT-2 (random weights) from 2 to 32 layers.

Each depth runs in a fresh subprocess so peak memory is that conversion's alone: the process
builds the model, converts a 1-layer model once (one-time costs: lazy imports, exporter
set-up), then times ``fxport.convert(verify=False)`` of the measured depth (median of repeats)
and reads the peak resident set size (``resource.getrusage``, high-water mark) before and after.
Per-layer cost is the least-squares slope over all depths; growth is linear when the slope of
the deeper half is within 1.5× of the shallower half's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from benchmarks.common import Section

DEPTHS = (2, 4, 8, 16, 32)

_CHILD = r"""
import json, resource, statistics, sys, time, warnings
warnings.filterwarnings("ignore")
import torch, transformers, fxport
from benchmarks.convert_time import GPT2Hidden
transformers.logging.set_verbosity_error()

def build(layers):
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=layers, n_embd=64, n_head=4, vocab_size=500, n_positions=128,
                                     bos_token_id=0, eos_token_id=0)
    return GPT2Hidden(transformers.GPT2Model(config)).eval()

layers, repeats = int(sys.argv[1]), int(sys.argv[2])
args, dynamic = (torch.randint(0, 500, (2, 16)),), {"input_ids": {0: "batch", 1: "seq"}}
fxport.convert(build(1), args, dynamic_shapes=dynamic, verify=False)
model = build(layers)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
samples = []
for _ in range(repeats):
    start = time.perf_counter()
    result = fxport.convert(model, args, dynamic_shapes=dynamic, verify=False)
    samples.append(time.perf_counter() - start)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"layers": layers, "seconds": statistics.median(samples), "peak_rss_mb": after / 1024,
                  "peak_growth_mb": (after - before) / 1024, "nodes": result.node_counts.get("optimized")}))
"""


def measure(layers: int, repeats: int) -> dict:
    """Convert a ``layers``-deep tiny GPT-2 in a fresh interpreter; seconds and peak memory."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", _CHILD, str(layers), str(repeats)], capture_output=True,
                          text=True, cwd=root, env=env, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"scaling run with {layers} layers failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs."""
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread if spread else 0.0


def linearity(depths: list[int], values: list[float]) -> tuple[float, float, float]:
    """(overall slope, shallow-half slope, deep-half slope); halves share the middle depth."""
    middle = len(depths) // 2
    return (slope(depths, values), slope(depths[: middle + 1], values[: middle + 1]),
            slope(depths[middle:], values[middle:]))


def verdict(shallow: float, deep: float) -> str:
    if shallow <= 0:
        return "flat"
    return "linear" if deep <= 1.5 * shallow else f"super-linear (deep half {deep / shallow:.1f}× steeper)"


def run(repeats: int = 3, depths: tuple[int, ...] = DEPTHS) -> Section:
    results = [measure(layers, repeats) for layers in depths]
    xs = [r["layers"] for r in results]
    seconds = [r["seconds"] for r in results]
    memory = [r["peak_growth_mb"] for r in results]
    time_slope, time_shallow, time_deep = linearity(xs, seconds)
    mem_slope, mem_shallow, mem_deep = linearity(xs, memory)
    rows = [[str(r["layers"]), f"{r['seconds']:.2f}", f"{r['seconds'] / r['layers']:.3f}",
             f"{r['peak_growth_mb']:.0f}", f"{r['peak_rss_mb']:.0f}", str(r["nodes"])] for r in results]
    footer = [
        f"Per-layer conversion time (least-squares slope): **{time_slope * 1e3:.0f} ms/layer**; "
        f"shallow half {time_shallow * 1e3:.0f} ms/layer, deep half {time_deep * 1e3:.0f} ms/layer: "
        f"**{verdict(time_shallow, time_deep)}**.",
        f"Per-layer peak-memory growth: **{mem_slope:.1f} MB/layer**; shallow half {mem_shallow:.1f}, "
        f"deep half {mem_deep:.1f} MB/layer: **{verdict(mem_shallow, mem_deep)}**.",
    ]
    return Section(
        "Scaling: conversion time and peak memory vs transformer depth",
        f"Tiny GPT-2 (n_embd 64, 4 heads, random weights, nothing downloaded), dynamic batch and "
        f"sequence, fxport.convert without verification; median of {repeats} conversions per depth, "
        "each depth in a fresh subprocess. Peak growth = rise of the process's peak RSS during the "
        "measured conversions. Target: linear growth.",
        ["layers", "convert s", "s / layer", "peak growth MB", "peak RSS MB", "ONNX nodes"],
        rows,
        footer,
    )
