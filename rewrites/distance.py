"""``torch.cdist``: pairwise p-norm distances, for p = 0, 1, 2, inf and any other p > 0.

Registered for ``aten::cdist`` (what the model calls; registering it keeps the exporter from
decomposing it) and ``aten::_cdist_forward`` (what a pre-decomposed program contains).
Distances are computed from the explicit differences, never through the
``|x|² + |y|² - 2x·y`` matrix-product shortcut torch uses for large p=2 inputs, so they are
at least as accurate as eager (zero for identical points). Memory: O(P · R · M).
"""

from __future__ import annotations

import math

from onnxscript import ir
from onnxscript import opset18 as op

import fxport
from fxport.rewrites._helpers import const_like, ints


def _pairwise_distance(x1, x2, p: float):
    differences = op.Abs(op.Sub(op.Unsqueeze(x1, ints(-2)), op.Unsqueeze(x2, ints(-3))))
    last = ints(-1)
    if p == 0:
        nonzero = op.Cast(op.Not(op.Equal(differences, const_like(0.0, differences))),
                          to=ir.DataType.FLOAT)
        return op.CastLike(op.ReduceSum(nonzero, last, keepdims=0), x1)
    if p == 1:
        return op.ReduceSum(differences, last, keepdims=0)
    if p == 2:
        return op.Sqrt(op.ReduceSumSquare(differences, last, keepdims=0))
    if math.isinf(p):
        return op.ReduceMax(differences, last, keepdims=0)
    powered = op.Pow(differences, const_like(p, differences))
    return op.Pow(op.ReduceSum(powered, last, keepdims=0), const_like(1.0 / p, differences))


@fxport.onnx_op("aten::cdist", opset=18, priority=fxport.BUILTIN_PRIORITY)
def cdist(x1, x2, p: float = 2.0, compute_mode: int | None = None):
    """Pairwise p-norm distance between row sets (p = 0, 1, 2, inf or general p > 0)."""
    return _pairwise_distance(x1, x2, p)


@fxport.onnx_op("aten::_cdist_forward", opset=18, priority=fxport.BUILTIN_PRIORITY)
def cdist_forward(x1, x2, p: float, compute_mode: int | None):
    """torch.cdist after decomposition; same as aten::cdist."""
    return _pairwise_distance(x1, x2, p)
