"""Adaptive average pooling to a fixed grid on inputs of any size: ``aten::_adaptive_avg_pool2d``.

torch's decomposition of ``adaptive_avg_pool2d`` asks Python whether the input's height and
width divide the output's (``shape[-2] % output_size[-2] == 0``) and, for the example's sizes,
writes an ``avg_pool2d`` whose kernel and stride are the example's: a file right at the
example's size and wrong (or failing) at others — alexnet's and vgg's
``AdaptiveAvgPool2d((7, 7))`` before their classifier. Here each output cell is the mean of
the input window ``[⌊i·H/OH⌋, ⌈(i+1)·H/OH⌉)`` (and the same along the width), whatever the
input's size: two averaging matrices built from the runtime height and width, applied with
``MatMul`` on both sides. A 1×1 grid (global pooling) is a ``ReduceMean``.
"""

from __future__ import annotations

from onnxscript import ir
from onnxscript import opset18 as op

import fxport
from fxport.rewrites._helpers import arange_along, ints, rank


def _averaging_matrix(value, axis: int, bins: int):
    """(bins, n) weights, n = ``value``'s runtime length along ``axis``: row i holds
    1/(end-start) on positions [⌊i·n/bins⌋, ⌈(i+1)·n/bins⌉) and 0 elsewhere."""
    positions = arange_along(value, axis)                                # [n]
    n = op.Size(positions)
    index = op.Constant(value_ints=list(range(bins)))                   # [bins]
    count = op.Constant(value_int=bins)
    start = op.Div(op.Mul(index, n), count)                             # floor: non-negative
    end = op.Div(op.Sub(op.Add(op.Mul(op.Add(index, op.Constant(value_int=1)), n), count),
                        op.Constant(value_int=1)), count)               # ceil
    column = op.Unsqueeze(positions, ints(0))                           # [1, n]
    inside = op.And(op.GreaterOrEqual(column, op.Unsqueeze(start, ints(1))),
                    op.Less(column, op.Unsqueeze(end, ints(1))))         # [bins, n]
    width = op.Cast(op.Unsqueeze(op.Sub(end, start), ints(1)), to=ir.DataType.DOUBLE)
    weights = op.Div(op.Cast(inside, to=ir.DataType.DOUBLE), width)
    return op.CastLike(weights, value)


@fxport.onnx_op("aten::_adaptive_avg_pool2d", opset=18, priority=fxport.BUILTIN_PRIORITY)
def adaptive_avg_pool2d(self, output_size: list[int]):
    """Mean over each cell's window at the input's runtime size (not the example's); float noise."""
    bins_h, bins_w = output_size
    last = rank(self) - 1
    if (bins_h, bins_w) == (1, 1):
        return op.ReduceMean(self, ints(last - 1, last), keepdims=1)
    rows = _averaging_matrix(self, last - 1, bins_h)                    # [OH, H]
    columns = op.Transpose(_averaging_matrix(self, last, bins_w), perm=[1, 0])  # [W, OW]
    return op.MatMul(op.MatMul(rows, self), columns)
