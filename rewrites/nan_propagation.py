"""NaN-propagating max/min reductions: ``aten::max``, ``aten::min``, ``aten::amax``,
``aten::amin``, ``aten::max.dim``, ``aten::min.dim``, ``aten::argmax``, ``aten::argmin``.

torch returns NaN (and, for indices, the index of the first NaN) when a reduced slice contains
NaN. ONNX Runtime's ``ReduceMax``/``ReduceMin``/``ArgMax``/``ArgMin`` do not: their vectorised
CPU paths skip NaN depending on its position and the tensor size (measured on onnxruntime 1.31:
a NaN in the middle or at the end of a 4- to 64-long slice is usually ignored). So each rule
reduces as usual and then overrides slices that contain NaN, detected with
``ReduceMax(Cast(IsNaN(x)))`` (no NaN inside, so reliable). Exact. Integer inputs (no NaN
possible) take the plain reduction; bool inputs are reduced as int32.
"""

from __future__ import annotations

from onnxscript import ir
from onnxscript import opset18 as op

import fxport
from fxport.rewrites._helpers import FLOAT_TYPES, const_like, ints, is_float, norm_dim, rank


def _reduce(x, axes, keepdim: bool, largest: bool):
    """ReduceMax/ReduceMin over ``axes`` (a list; empty = all), NaN-propagating."""
    reduce = op.ReduceMax if largest else op.ReduceMin
    keep = 1 if keepdim else 0
    if x.dtype == ir.DataType.BOOL:
        as_int = op.Cast(x, to=ir.DataType.INT32)
        reduced = reduce(as_int, ints(*axes), keepdims=keep) if axes else reduce(as_int,
                                                                                 keepdims=keep)
        return op.Cast(reduced, to=ir.DataType.BOOL)
    reduced = reduce(x, ints(*axes), keepdims=keep) if axes else reduce(x, keepdims=keep)
    if not is_float(x):
        return reduced
    nan_flags = op.Cast(op.IsNaN(x), to=ir.DataType.FLOAT)
    has_nan = (op.ReduceMax(nan_flags, ints(*axes), keepdims=keep) if axes
               else op.ReduceMax(nan_flags, keepdims=keep))
    has_nan = op.Greater(has_nan, op.Constant(value_float=0.0))
    return op.Where(has_nan, const_like(float("nan"), x), reduced)


def _arg(x, axis: int, keepdim: bool, largest: bool, dtype: ir.DataType):
    """(index of the extreme along axis, NaN-aware: first NaN wins), int64.

    ``dtype`` is the rule input's: an intermediate value (``x`` flattened) carries none.
    """
    arg = op.ArgMax if largest else op.ArgMin
    keep = 1 if keepdim else 0
    source = op.Cast(x, to=ir.DataType.INT32) if dtype == ir.DataType.BOOL else x
    index = arg(source, axis=axis, keepdims=keep, select_last_index=0)
    if dtype not in FLOAT_TYPES:
        return index
    is_nan = op.Cast(op.IsNaN(x), to=ir.DataType.INT32)
    first_nan = op.ArgMax(is_nan, axis=axis, keepdims=keep, select_last_index=0)
    has_nan = op.Greater(op.ReduceMax(is_nan, ints(axis), keepdims=keep),
                         op.Constant(value=ir.tensor(0, dtype=ir.DataType.INT32)))
    return op.Where(has_nan, first_nan, index)


def _flat(x):
    return op.Reshape(x, op.Constant(value_ints=[-1]))


def _values_and_indices(self, dim: int, keepdim: bool, largest: bool):
    if rank(self) == 0:
        return op.Identity(self), op.Constant(value=ir.tensor(0, dtype=ir.DataType.INT64))
    axis = norm_dim(dim, self)
    return _reduce(self, [axis], keepdim, largest), _arg(self, axis, keepdim, largest, self.dtype)


def _arg_reduce(self, dim, keepdim: bool, largest: bool):
    if rank(self) == 0:
        return op.Constant(value=ir.tensor(0, dtype=ir.DataType.INT64))
    if dim is None:
        index = _arg(_flat(self), 0, keepdim=False, largest=largest, dtype=self.dtype)
        if keepdim:
            index = op.Reshape(index, op.Constant(value_ints=[1] * rank(self)))
        return index
    return _arg(self, norm_dim(dim, self), keepdim, largest, self.dtype)


def _amax_amin(self, dim, keepdim: bool, largest: bool):
    axes = sorted({norm_dim(d, self) for d in dim}) if dim else []
    if rank(self) == 0:
        axes = []
    return _reduce(self, axes, keepdim, largest)


@fxport.onnx_op("aten::max", opset=18, priority=fxport.BUILTIN_PRIORITY)
def max_all(self):
    """Maximum of all elements (0-d); any NaN → NaN; exact."""
    return _reduce(self, [], keepdim=False, largest=True)


@fxport.onnx_op("aten::min", opset=18, priority=fxport.BUILTIN_PRIORITY)
def min_all(self):
    """Minimum of all elements (0-d); any NaN → NaN; exact."""
    return _reduce(self, [], keepdim=False, largest=False)


@fxport.onnx_op("aten::amax", opset=18, priority=fxport.BUILTIN_PRIORITY)
def amax(self, dim=(), keepdim: bool = False):
    """Maximum over dims (all when empty); NaN in a slice → NaN; exact."""
    return _amax_amin(self, dim, keepdim, largest=True)


@fxport.onnx_op("aten::amin", opset=18, priority=fxport.BUILTIN_PRIORITY)
def amin(self, dim=(), keepdim: bool = False):
    """Minimum over dims (all when empty); NaN in a slice → NaN; exact."""
    return _amax_amin(self, dim, keepdim, largest=False)


@fxport.onnx_op("aten::max.dim", opset=18, priority=fxport.BUILTIN_PRIORITY)
def max_dim(self, dim: int, keepdim: bool = False):
    """Maximum along dim (values, first index); NaN → NaN at the first NaN's index; exact."""
    return _values_and_indices(self, dim, keepdim, largest=True)


@fxport.onnx_op("aten::min.dim", opset=18, priority=fxport.BUILTIN_PRIORITY)
def min_dim(self, dim: int, keepdim: bool = False):
    """Minimum along dim (values, first index); NaN → NaN at the first NaN's index; exact."""
    return _values_and_indices(self, dim, keepdim, largest=False)


@fxport.onnx_op("aten::argmax", opset=18, priority=fxport.BUILTIN_PRIORITY)
def argmax(self, dim=None, keepdim: bool = False):
    """Index of the first maximum (of all elements when dim is None); first NaN wins."""
    return _arg_reduce(self, dim, keepdim, largest=True)


@fxport.onnx_op("aten::argmin", opset=18, priority=fxport.BUILTIN_PRIORITY)
def argmin(self, dim=None, keepdim: bool = False):
    """Index of the first minimum (of all elements when dim is None); first NaN wins."""
    return _arg_reduce(self, dim, keepdim, largest=False)
