"""``any()`` of an empty tensor is False: ``aten::any``, ``aten::any.dim``, ``aten::any.dims``.

The stock translation (onnxscript's torch_lib) computes ``Cast(ReduceMax(Cast(x, int64)), bool)``.
ONNX defines ``ReduceMax`` over an empty set as the lowest value of the type, which casts to
True, so ``torch.zeros(0, dtype=torch.bool).any()`` — False in torch — was True in the file:
a decoding loop's ``if not unfinished.any(): break`` ran every step at batch 0 (found by the
generation sweep's verification, Falcon). These rules count the true elements instead
(``ReduceSum`` of the int64 flags, > 0): an empty slice sums to 0, so False. Exact.
(``all()`` needs no rule: ``ReduceMin`` of an empty set is the highest value, True as torch.)
"""

from __future__ import annotations

from onnxscript import ir
from onnxscript import opset18 as op

import fxport
from fxport.rewrites._helpers import ints, norm_dim, rank


def _any(x, axes: list[int], keepdim: bool):
    """Whether a slice over ``axes`` (empty: all) holds a non-zero value; False for an empty one."""
    flags = op.Cast(op.Cast(x, to=ir.DataType.BOOL), to=ir.DataType.INT64)
    keep = 1 if keepdim else 0
    count = op.ReduceSum(flags, ints(*axes), keepdims=keep) if axes else op.ReduceSum(flags, keepdims=keep)
    return op.Greater(count, op.Constant(value=ir.tensor(0, dtype=ir.DataType.INT64)))


@fxport.onnx_op("aten::any", opset=18, priority=fxport.BUILTIN_PRIORITY)
def any_all(self):
    """Whether any element is non-zero; False for an empty tensor, as torch."""
    if rank(self) == 0:
        return op.Cast(self, to=ir.DataType.BOOL)
    return _any(self, [], keepdim=False)


@fxport.onnx_op("aten::any.dim", opset=18, priority=fxport.BUILTIN_PRIORITY)
def any_dim(self, dim: int, keepdim: bool = False):
    """Whether any element along ``dim`` is non-zero; False for an empty slice."""
    if rank(self) == 0:
        return op.Cast(self, to=ir.DataType.BOOL)
    return _any(self, [norm_dim(dim, self)], keepdim)


@fxport.onnx_op("aten::any.dims", opset=18, priority=fxport.BUILTIN_PRIORITY)
def any_dims(self, dim=None, keepdim: bool = False):
    """Whether any element over ``dim`` (all when None or empty) is non-zero; False when empty."""
    if rank(self) == 0:
        return op.Cast(self, to=ir.DataType.BOOL)
    axes = sorted({norm_dim(d, self) for d in dim}) if dim else []
    return _any(self, axes, keepdim)
