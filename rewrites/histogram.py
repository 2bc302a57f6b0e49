"""``torch.histc`` with the default range (``min == max``, e.g. ``torch.histc(x, bins=10)``).

The stock translation precomputes the bin edges from ``min``/``max`` and refuses
``min == max``, which means "use the data's range" — the default call. This rule computes the
range at run time (widened by 1 on both sides when the data is constant, as torch does) and
bins with torch's own formula ``floor((x - lo) * bins / (hi - lo))`` in the input dtype, so
values on bin edges land where torch puts them. Values outside ``[lo, hi]`` and NaN are not
counted. Counting uses ``ScatterElements(reduction="add")``: O(n) memory.
"""

from __future__ import annotations

from onnxscript import ir
from onnxscript import opset18 as op

import fxport
from fxport.rewrites._helpers import const_like, ints


@fxport.onnx_op("aten::histc", opset=18, priority=fxport.BUILTIN_PRIORITY)
def histc(self, bins: int = 100, min: float = 0.0, max: float = 0.0):
    """Histogram with bins equal-width bins; min == max (the default) uses the data's range."""
    values = op.Reshape(self, ints(-1))
    if min == max:
        low = op.ReduceMin(values, keepdims=0)
        high = op.ReduceMax(values, keepdims=0)
        constant = op.Equal(low, high)
        one = const_like(1.0, values)
        low = op.Where(constant, op.Sub(low, one), low)
        high = op.Where(constant, op.Add(high, one), high)
    else:
        low, high = const_like(min, values), const_like(max, values)
    inside = op.And(op.GreaterOrEqual(values, low), op.LessOrEqual(values, high))
    position = op.Div(op.Mul(op.Sub(values, low), const_like(bins, values)), op.Sub(high, low))
    index = op.Cast(op.Floor(op.Where(inside, position, const_like(0.0, values))),
                    to=ir.DataType.INT64)
    last = op.Constant(value_int=bins - 1)
    index = op.Where(op.Greater(index, last), last, index)  # x == hi goes in the last bin
    counts = op.ConstantOfShape(op.Constant(value_ints=[bins]),
                                value=ir.tensor([0.0], dtype=ir.DataType.DOUBLE))
    updates = op.Cast(inside, to=ir.DataType.DOUBLE)
    counts = op.ScatterElements(counts, index, updates, axis=0, reduction="add")
    return op.CastLike(counts, self)
