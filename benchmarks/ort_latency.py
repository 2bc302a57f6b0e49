"""ONNX Runtime latency: fxport's output vs torch.onnx.export(dynamo=True)'s, same models, same run.

Both models run in single-threaded CPU sessions on the example inputs, call by call alternately
(so load drift on a shared machine hits both); the figure is the ratio of medians. Target ≤ 1.00×.
"""

from __future__ import annotations

import torch

import fxport
from benchmarks.common import Section, adaptive_rounds, ms, ort_runner, ort_session, paired_medians, ratio
from benchmarks.convert_time import models
from fxport.capture.dynamic_dims import normalize_dynamic_shapes
from fxport.eager.inputs import InputSet
from fxport.common.quiet import quiet_torch
from fxport.report.result import count_ops


def stock_export(module, args, dynamic):
    """The stock exporter's ONNX for ``module`` (dynamo=True, its default optimisation)."""
    shapes = normalize_dynamic_shapes(module, dynamic, InputSet(args))
    with quiet_torch():
        return torch.onnx.export(module, args, dynamo=True, dynamic_shapes=shapes, verbose=False).model_proto


def node_total(model) -> int:
    return sum(count_ops(model.graph).values())


def run(repeats: int = 3) -> Section:
    rows = []
    for name, module, args, dynamic in models():
        ours = fxport.convert(module, args, dynamic_shapes=dynamic, verify=False).model
        stock = stock_export(module, args, dynamic)
        run_ours = ort_runner(ort_session(ours), args)
        run_stock = ort_runner(ort_session(stock), args)
        rounds = adaptive_rounds(run_stock, minimum=10 * repeats)
        ours_s, stock_s = paired_medians(run_ours, run_stock, rounds)
        rows.append([name, ms(stock_s), ms(ours_s), ratio(ours_s, stock_s),
                     str(node_total(stock)), str(node_total(ours)), str(rounds)])
    return Section(
        "ONNX Runtime latency: fxport output vs stock exporter output",
        "Median latency per call (ms), onnxruntime CPU, 1 intra-op thread, example inputs; the two "
        "sessions are called alternately in the same process. Target: ratio ≤ 1.00×.",
        ["model", "stock ms", "fxport ms", "ratio", "stock nodes", "fxport nodes", "calls each"],
        rows,
    )
