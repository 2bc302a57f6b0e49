"""Conversion cost as a transformer grows: tiny GPT-2 (random weights) from 2 to 32 layers.

Each depth runs in a fresh subprocess so its memory is its own: the process builds the model,
converts a 1-layer model once (one-time costs: lazy imports, exporter set-up), then times
``fxport.convert(verify=False)`` of the measured depth (median of repeats) while a sampler
thread reads the resident set size every 2 ms; peak growth = highest RSS during a conversion
minus RSS just before it. Per-layer cost is the least-squares slope over all depths; growth is
linear when the slope over the deeper half is within 1.5× of the shallower half's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from benchmarks.common import Section

DEPTHS = (2, 4, 8, 16, 32)

#: Stop repeating a depth once its conversions took this long (keeps the suite under 10 minutes
#: on a busy 2-core machine); every depth gets at least one timed conversion.
DEPTH_BUDGET_S = 40.0

_CHILD = r'''
import ctypes, gc, json, os, statistics, sys, threading, time, warnings
warnings.filterwarnings("ignore")
import torch, transformers, fxport
from benchmarks.convert_time import GPT2Hidden
transformers.logging.set_verbosity_error()

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes():
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * PAGE


class PeakRss:
    """Samples this process's resident set size every 2 ms; .peak is the highest seen."""

    def __enter__(self):
        self.peak, self.running = rss_bytes(), True
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()
        return self

    def sample(self):
        while self.running:
            self.peak = max(self.peak, rss_bytes())
            time.sleep(0.002)

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()
        self.peak = max(self.peak, rss_bytes())


def build(layers):
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_layer=layers, n_embd=64, n_head=4, vocab_size=500, n_positions=128,
                                     bos_token_id=0, eos_token_id=0)
    return GPT2Hidden(transformers.GPT2Model(config)).eval()


layers, repeats, budget_s = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
args, dynamic = (torch.randint(0, 500, (2, 16)),), {"input_ids": {0: "batch", 1: "seq"}}
fxport.convert(build(1), args, dynamic_shapes=dynamic, verify=False)
model = build(layers)
gc.collect()
ctypes.CDLL("libc.so.6").malloc_trim(0)  # hand the warm-up's freed memory back: later growth shows
seconds, growth = [], []
while len(seconds) < repeats and sum(seconds) < budget_s:
    before = rss_bytes()
    with PeakRss() as peak:
        start = time.perf_counter()
        result = fxport.convert(model, args, dynamic_shapes=dynamic, verify=False)
        seconds.append(time.perf_counter() - start)
    nodes = result.node_counts.get("optimized")
    growth.append((peak.peak - before) / 2**20)
    del result
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    result = None
print(json.dumps({"layers": layers, "seconds": statistics.median(seconds), "runs": len(seconds),
                  "peak_growth_mb": statistics.median(growth), "nodes": nodes}))
'''


def measure(layers: int, repeats: int, budget_s: float = DEPTH_BUDGET_S) -> dict:
    """Convert a ``layers``-deep tiny GPT-2 in a fresh interpreter; seconds and peak memory growth."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run([sys.executable, "-c", _CHILD, str(layers), str(repeats), str(budget_s)],
                          capture_output=True, text=True, cwd=root, env=env, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"scaling run with {layers} layers failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs."""
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread if spread else 0.0


def linearity(depths: list[int], values: list[float]) -> tuple[float, float, float]:
    """(overall slope, shallow-half slope, deep-half slope); the halves share the middle depth."""
    middle = len(depths) // 2
    return (slope(depths, values), slope(depths[: middle + 1], values[: middle + 1]),
            slope(depths[middle:], values[middle:]))


def verdict(shallow: float, deep: float) -> str:
    """"linear" when the deep half's slope is within 1.5× of the shallow half's."""
    if shallow <= 0:
        return "not increasing over the shallow half"
    return "linear" if deep <= 1.5 * shallow else f"super-linear (deep half {deep / shallow:.1f}× steeper)"


def run(repeats: int = 3, depths: tuple[int, ...] = DEPTHS) -> Section:
    results = [measure(layers, repeats) for layers in depths]
    xs = [r["layers"] for r in results]
    time_slope, time_shallow, time_deep = linearity(xs, [r["seconds"] for r in results])
    mem_slope, mem_shallow, mem_deep = linearity(xs, [r["peak_growth_mb"] for r in results])
    rows = [[str(r["layers"]), f"{r['seconds']:.2f}", f"{r['seconds'] / r['layers']:.3f}",
             f"{r['peak_growth_mb']:.0f}", str(r["nodes"]), str(r["runs"])] for r in results]
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
        f"sequence, fxport.convert without verification, each depth in a fresh subprocess after a "
        f"1-layer warm-up; median of up to {repeats} conversions per depth (fewer once a depth has "
        f"used {DEPTH_BUDGET_S:.0f} s). Peak growth = highest RSS during a conversion (sampled every "
        "2 ms) minus RSS before it. Target: linear growth.",
        ["layers", "convert s", "s / layer", "peak growth MB", "ONNX nodes", "runs"],
        rows,
        footer,
    )
