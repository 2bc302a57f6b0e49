"""The missing-aten-mapping route: ``aten::hypot`` has no ONNX translation on torch 2.13.

(The seed tutorial's example, ``asinh``, is translated by the stock exporter today, so fxport
uses ``hypot`` — the exporter decomposes it into ``prims::hypot`` and stops there.) The rule is
the whole recipe: look up the schema (``torch.ops.aten.hypot.default._schema``:
``hypot(Tensor self, Tensor other)``), name the parameters after it, build the result from
standard ONNX ops.
"""

from __future__ import annotations

import math

from onnxscript import opset18 as op

import fxport
from fxport.rewrites._helpers import const_like


@fxport.onnx_op("aten::hypot", opset=18, priority=fxport.rules.BUILTIN_PRIORITY)
def hypot(self, other):
    """sqrt(a² + b²) without overflow: max·sqrt(1 + (min/max)²); inf wins over nan."""
    a, b = op.Abs(self), op.Abs(other)
    big, small = op.Max(a, b), op.Min(a, b)
    zero = const_like(0.0, big)
    safe_big = op.Where(op.Equal(big, zero), const_like(1.0, big), big)
    ratio = op.Div(small, safe_big)
    result = op.Mul(big, op.Sqrt(op.Add(const_like(1.0, big), op.Mul(ratio, ratio))))
    result = op.Where(op.Equal(big, zero), zero, result)
    either_inf = op.Or(op.IsInf(self), op.IsInf(other))
    return op.Where(either_inf, const_like(math.inf, big), result)
