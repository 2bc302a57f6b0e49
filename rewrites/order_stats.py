"""Order statistics: median (global and along a dim), nanmedian, kthvalue, mode.

All are exact (they select elements, never compute new values). They sort along the dimension
with ONNX ``TopK``; NaN is ordered last, as torch does, by sorting it as +inf and reading the
selected element back from the input. ``median``/``nanmedian`` return the lower median for even
counts, like torch. Indices of tied values may differ from torch's (torch leaves them
unspecified for median/kthvalue); the values never do.
"""

from __future__ import annotations

from onnxscript import ir
from onnxscript import opset18 as op

import fxport
from fxport.rewrites._helpers import const_like, dim_size, ints, is_float, move_axis_last, norm_dim, \
    rank, restore_axis


def _nan_as_inf(x, floating: bool):
    return op.Where(op.IsNaN(x), const_like(float("inf"), x), x) if floating else x


def _sorted_along(x, axis: int, floating: bool):
    """(ascending values, their indices in x) along axis; NaN sorted last."""
    n = dim_size(x, axis)
    _, indices = op.TopK(_nan_as_inf(x, floating), n, axis=axis, largest=0, sorted=1)
    return op.GatherElements(x, indices, axis=axis), indices


def _pick(values, indices, position, axis: int, keepdim: bool):
    """values/indices at ``position`` (int64, broadcastable, size 1 along axis)."""
    value = op.GatherElements(values, position, axis=axis)
    index = op.GatherElements(indices, position, axis=axis)
    if not keepdim:
        value, index = op.Squeeze(value, ints(axis)), op.Squeeze(index, ints(axis))
    return value, index


def _nan_count(x, axis: int):
    return op.ReduceSum(op.Cast(op.IsNaN(x), to=ir.DataType.INT64), ints(axis), keepdims=1)


def _median_along(self, dim: int, keepdim: bool, skip_nan: bool, floating: bool):
    axis = dim
    values, indices = _sorted_along(self, axis, floating)
    n = dim_size(self, axis)
    one = op.Constant(value_ints=[1])
    nans = _nan_count(self, axis) if floating else None
    count = op.Sub(n, nans) if (skip_nan and nans is not None) else n
    position = op.Max(op.Div(op.Sub(count, one), op.Constant(value_ints=[2])),
                      op.Constant(value_ints=[0]))
    position_shape = op.ScatterElements(op.Shape(self), op.Constant(value_ints=[axis]), one)
    position = op.Expand(position, position_shape)
    value, index = _pick(values, indices, position, axis, keepdim=True)
    if nans is not None and not skip_nan:
        # torch: any NaN makes the median NaN, reported at the index of the first NaN.
        has_nan = op.Greater(nans, op.Constant(value_ints=[0]))
        first_nan = op.ArgMax(op.Cast(op.IsNaN(self), to=ir.DataType.INT32), axis=axis,
                              keepdims=1)
        value = op.Where(has_nan, const_like(float("nan"), value), value)
        index = op.Where(has_nan, first_nan, index)
    if not keepdim:
        value, index = op.Squeeze(value, ints(axis)), op.Squeeze(index, ints(axis))
    return value, index


@fxport.onnx_op("aten::median.dim", opset=18, priority=fxport.BUILTIN_PRIORITY)
def median_dim(self, dim: int, keepdim: bool = False):
    """Lower median along dim (values, indices); NaN propagates; exact."""
    return _median_along(self, norm_dim(dim, self), keepdim, skip_nan=False,
                         floating=is_float(self))


@fxport.onnx_op("aten::median", opset=18, priority=fxport.BUILTIN_PRIORITY)
def median(self):
    """Lower median of all elements (0-d); NaN propagates; exact."""
    flat = op.Reshape(self, op.Constant(value_ints=[-1]))
    value, _ = _median_along(flat, 0, keepdim=False, skip_nan=False, floating=is_float(self))
    return value


@fxport.onnx_op("aten::nanmedian.dim", opset=18, priority=fxport.BUILTIN_PRIORITY)
def nanmedian_dim(self, dim: int, keepdim: bool = False):
    """Lower median along dim ignoring NaN (all-NaN rows give NaN); exact."""
    return _median_along(self, norm_dim(dim, self), keepdim, skip_nan=True,
                         floating=is_float(self))


@fxport.onnx_op("aten::nanmedian", opset=18, priority=fxport.BUILTIN_PRIORITY)
def nanmedian(self):
    """Lower median of all non-NaN elements (0-d); all-NaN gives NaN; exact."""
    flat = op.Reshape(self, op.Constant(value_ints=[-1]))
    value, _ = _median_along(flat, 0, keepdim=False, skip_nan=True, floating=is_float(self))
    return value


@fxport.onnx_op("aten::kthvalue", opset=18, priority=fxport.BUILTIN_PRIORITY)
def kthvalue(self, k: int, dim: int = -1, keepdim: bool = False):
    """k-th smallest along dim (values, indices), NaN counted as largest; exact."""
    axis = norm_dim(dim, self)
    _, indices = op.TopK(_nan_as_inf(self, is_float(self)), op.Constant(value_ints=[k]), axis=axis,
                         largest=0, sorted=1)
    index = op.Gather(indices, op.Constant(value_ints=[k - 1]), axis=axis)
    value = op.GatherElements(self, index, axis=axis)
    if not keepdim:
        value, index = op.Squeeze(value, ints(axis)), op.Squeeze(index, ints(axis))
    return value, index


@fxport.onnx_op("aten::mode", opset=18, priority=fxport.BUILTIN_PRIORITY)
def mode(self, dim: int = -1, keepdim: bool = False):
    """Most frequent value along dim (smallest on ties) and its last index; O(n²) memory."""
    r = rank(self)
    x, inverse = move_axis_last(self, norm_dim(dim, self), r)
    last = ints(-1)
    same = op.Equal(op.Unsqueeze(x, last), op.Unsqueeze(x, ints(-2)))      # [..., n, n]
    counts = op.ReduceSum(op.Cast(same, to=ir.DataType.INT64), last, keepdims=0)
    most = op.ReduceMax(counts, last, keepdims=1)
    ceiling = op.ReduceMax(x, last, keepdims=1)
    value = op.ReduceMin(op.Where(op.Equal(counts, most), x, ceiling), last, keepdims=1)
    n = op.Squeeze(dim_size(x, r - 1))
    positions = op.Range(op.Constant(value_int=0), n, op.Constant(value_int=1))
    minus_one = op.Constant(value_int=-1)
    index = op.ReduceMax(op.Where(op.Equal(x, value), positions, minus_one), last, keepdims=1)
    value, index = restore_axis(value, inverse), restore_axis(index, inverse)
    if not keepdim:
        axis = norm_dim(dim, self)
        value, index = op.Squeeze(value, ints(axis)), op.Squeeze(index, ints(axis))
    return value, index
