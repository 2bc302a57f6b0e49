"""Running maximum / minimum / product: ``aten::cummax``, ``aten::cummin`` (values and
indices) and ``aten::cumprod``.

ONNX has no cumulative max or product, so each position combines itself with every earlier
position (an n×n mask along ``dim``): cummax/cummin are exact for any dtype; cumprod multiplies
in a different order than torch's running product (float error grows like n·eps). Memory is
O(n²) along that dimension.
Semantics follow torch: on ties the *latest* index wins; once a NaN appears the value stays
NaN and the index is that of the latest NaN so far.
"""

from __future__ import annotations

from onnxscript import ir
from onnxscript import opset18 as op

import fxport
from fxport.rewrites._helpers import arange_along, ints, is_float, move_axis_last, norm_dim, \
    rank, restore_axis


def _running_extreme(self, dim: int, largest: bool):
    r = rank(self)
    x, inverse = move_axis_last(self, norm_dim(dim, self), r)
    positions = arange_along(x, r - 1)                                  # [n]
    earlier = op.LessOrEqual(op.Unsqueeze(positions, ints(0)),          # mask[i, j] = j <= i
                             op.Unsqueeze(positions, ints(1)))
    own = op.Unsqueeze(x, ints(-1))                                     # [..., n, 1]
    others = op.Unsqueeze(x, ints(-2))                                  # [..., 1, n]
    candidates = op.Where(earlier, others, own)    # later positions replaced by x_i: no effect
    reduce = op.ReduceMax if largest else op.ReduceMin
    values = reduce(candidates, ints(-1), keepdims=0)
    hits = op.And(earlier, op.Equal(others, op.Unsqueeze(values, ints(-1))))
    minus_one = op.CastLike(op.Constant(value_int=-1), positions)
    indices = op.ReduceMax(op.Where(hits, positions, minus_one), ints(-1), keepdims=0)
    if is_float(self):
        nan_before = op.And(earlier, op.IsNaN(others))
        last_nan = op.ReduceMax(op.Where(nan_before, positions, minus_one), ints(-1), keepdims=0)
        seen_nan = op.GreaterOrEqual(last_nan, op.Constant(value_int=0))
        nan = op.CastLike(op.Constant(value_float=float("nan")), values)
        values = op.Where(seen_nan, nan, values)
        indices = op.Where(seen_nan, last_nan, indices)
    return restore_axis(values, inverse), restore_axis(indices, inverse)


@fxport.onnx_op("aten::cummax", opset=18, priority=fxport.BUILTIN_PRIORITY)
def cummax(self, dim: int):
    """Running maximum along dim (values, indices); exact; O(n²) memory along dim."""
    return _running_extreme(self, dim, largest=True)


@fxport.onnx_op("aten::cummin", opset=18, priority=fxport.BUILTIN_PRIORITY)
def cummin(self, dim: int):
    """Running minimum along dim (values, indices); exact; O(n²) memory along dim."""
    return _running_extreme(self, dim, largest=False)


# torch ScalarType codes (c10/core/ScalarType.h) → ONNX element types.
_SCALAR_TYPES = {3: ir.DataType.INT32, 4: ir.DataType.INT64, 5: ir.DataType.FLOAT16,
                 6: ir.DataType.FLOAT, 7: ir.DataType.DOUBLE, 15: ir.DataType.BFLOAT16}


@fxport.onnx_op("aten::cumprod", opset=18, priority=fxport.BUILTIN_PRIORITY)
def cumprod(self, dim: int, dtype: int | None = None):
    """Running product along dim (integers accumulate in int64, like torch); O(n²) memory."""
    if dtype is not None:  # the exporter passes an ONNX DataType (or a torch ScalarType code)
        x = op.Cast(self, to=dtype if isinstance(dtype, ir.DataType) else _SCALAR_TYPES[dtype])
    elif not is_float(self):
        x = op.Cast(self, to=ir.DataType.INT64)
    else:
        x = self
    r = rank(self)
    x, inverse = move_axis_last(x, norm_dim(dim, self), r)
    positions = arange_along(x, r - 1)
    earlier = op.LessOrEqual(op.Unsqueeze(positions, ints(0)), op.Unsqueeze(positions, ints(1)))
    one = op.CastLike(op.Constant(value_int=1), x)
    factors = op.Where(earlier, op.Unsqueeze(x, ints(-2)), one)
    return restore_axis(op.ReduceProd(factors, ints(-1), keepdims=0), inverse)
