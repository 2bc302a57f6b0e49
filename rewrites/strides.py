"""``aten::sym_stride`` has no ONNX translation on torch 2.13: the stride of a dense tensor.

A ``while_loop`` body nested in another one can read a size of a carried tensor through its
stride (dynamo picks ``x.stride(0)`` as the source of the number ``x.shape[1]`` when the two are
one symbol), and the exporter stops there ("No ONNX function found for aten.sym_stride"). ONNX
tensors have no strides: each is dense, row-major, as fxport makes every value a loop carries,
so the stride along ``dim`` is the product of the sizes after it.
"""

from __future__ import annotations

from onnxscript import opset18 as op

import fxport


@fxport.onnx_op("aten::sym_stride.int", opset=18, priority=fxport.rules.BUILTIN_PRIORITY)
def sym_stride(self, dim: int):
    """The row-major stride of ``self`` along ``dim``: the product of the later sizes (1 for the last)."""
    if dim == -1:
        return op.Constant(value_int=1)
    return op.ReduceProd(op.Shape(self, start=dim + 1), keepdims=0)
