"""Reductions over an empty slice answer as torch does: ``any()`` is False (``aten::any``,
``aten::any.dim``, ``aten::any.dims``), ``mean()`` is NaN (``aten::mean``, ``aten::mean.dim``);
``einsum`` and ``roll`` of an empty dimension run (``aten::einsum``, ``aten::roll``).

The stock translation (onnxscript's torch_lib) computes ``Cast(ReduceMax(Cast(x, int64)), bool)``.
ONNX defines ``ReduceMax`` over an empty set as the lowest value of the type, which casts to
True, so ``torch.zeros(0, dtype=torch.bool).any()`` — False in torch — was True in the file:
a decoding loop's ``if not unfinished.any(): break`` ran every step at batch 0 (found by the
generation sweep's verification, Falcon). These rules count the true elements instead
(``ReduceSum`` of the int64 flags, > 0): an empty slice sums to 0, so False. Exact.
(``all()`` needs no rule: ``ReduceMin`` of an empty set is the highest value, True as torch.)

ONNX Runtime's ``ReduceMean`` of an empty set is 0; torch's mean is 0/0 = NaN. So
``if h.mean() < 1.0:`` at batch 0 took the branch in the file and not in eager (found by the
fuzzer once a loop's output length showed its trip count). The mean rules keep ``ReduceMean``
and select NaN where the input has no elements; when every reduced axis has a static non-zero
size (a feature axis: ``x.pow(2).mean(-1)`` of an RMS norm) they are the plain ``ReduceMean``,
so ONNX Runtime's norm fusions still see it. Exact.

ONNX Runtime (1.32, CPU) dies of a floating-point exception (SIGFPE, the whole process) on an
``Einsum`` whose operand has a zero-size axis: torchvision's ``maxvit_t`` at batch 0 killed
verification's process for every exporter's file. The ``aten::einsum`` rule pads each empty
axis to one zero row, runs the ``Einsum``, and slices every output axis back to its length:
an empty output axis comes back empty, a contraction over an empty axis sums zeros, 0 as in
torch. Operands with only static non-zero sizes, or an equation with ``...``, are the plain
``Einsum``. Exact.

The stock ``aten::roll`` takes the shift modulo the rolled dimension's runtime length; at a
dynamic length that is 0 at run time ONNX Runtime fails on that ``Mod`` by 0 (a control-flow
conversion's where runs the roll of a shifted-window branch at 0 rows too). The rule divides
by ``max(n, 1)``: both slices are empty at 0, as torch's roll of an empty dimension. Exact.
"""

from __future__ import annotations

from onnxscript import ir
from onnxscript import opset18 as op

import fxport
from fxport.rewrites._helpers import dim_size, ints, is_float, norm_dim, rank


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


# torch ScalarType codes (c10/core/ScalarType.h) → ONNX element types, for mean's ``dtype``.
_SCALAR_TYPES = {5: ir.DataType.FLOAT16, 6: ir.DataType.FLOAT, 7: ir.DataType.DOUBLE,
                 15: ir.DataType.BFLOAT16}


def _mean(self, axes: list[int], keepdim: bool, dtype):
    """ReduceMean of ``self`` over ``axes`` (empty: all), NaN where ``self`` has no elements."""
    r = rank(self)  # of the rule's input: an intermediate value (the cast) carries no shape
    reduced = [self.shape[axis] for axis in (axes or range(r))]
    never_empty = all(isinstance(size, int) and size > 0 for size in reduced)
    x = self
    if dtype is not None and dtype != -1:  # the exporter passes an ONNX DataType (or a torch code)
        x = op.Cast(self, to=dtype if isinstance(dtype, ir.DataType) else _SCALAR_TYPES[dtype])
    elif not is_float(self):
        never_empty = True  # integer means are refused by torch; leave them to ReduceMean
    if r == 0:
        return x
    keep = 1 if keepdim else 0
    mean = op.ReduceMean(x, ints(*axes), keepdims=keep) if axes else op.ReduceMean(x, keepdims=keep)
    if never_empty:
        return mean  # no reduced slice can be empty
    # a reduced slice is empty only if the input is; an empty input with a non-empty reduced
    # slice has an empty output, which the select leaves empty
    empty = op.Equal(op.Size(self), op.Constant(value=ir.tensor(0, dtype=ir.DataType.INT64)))
    return op.Where(empty, op.CastLike(op.Constant(value_float=float("nan")), mean), mean)


@fxport.onnx_op("aten::mean", opset=18, priority=fxport.BUILTIN_PRIORITY)
def mean_all(self, dtype=None):
    """Mean of all elements; NaN for an empty tensor, as torch (ONNX Runtime's ReduceMean gives 0)."""
    return _mean(self, [], keepdim=False, dtype=dtype)


@fxport.onnx_op("aten::mean.dim", opset=18, priority=fxport.BUILTIN_PRIORITY)
def mean_dim(self, dim=None, keepdim: bool = False, dtype=None):
    """Mean over ``dim`` (all when None or empty); NaN for an empty slice, as torch."""
    dims = [dim] if isinstance(dim, int) else list(dim or [])
    axes = sorted({norm_dim(d, self) for d in dims}) if rank(self) else []
    return _mean(self, axes, keepdim, dtype)


@fxport.onnx_op("aten::einsum", opset=18, priority=fxport.BUILTIN_PRIORITY)
def einsum(equation: str, tensors, path=None):
    """``torch.einsum``; an operand with a zero-size axis does not reach ONNX Runtime's Einsum,
    which crashes the process on one (see the module doc)."""
    labels = _einsum_labels(equation, len(tensors))
    never_empty = all(isinstance(size, int) and size > 0 for t in tensors for size in (t.shape or [0]))
    if labels is None or never_empty:
        return op.Einsum(*tensors, equation=equation)
    operands, output = labels
    padded = [_pad_empty_axes(t) for t in tensors]
    result = op.Einsum(*padded, equation=equation)
    if not output:
        return result
    first = {}  # label -> (operand, axis) of its first occurrence
    for i, axes in enumerate(operands):
        for axis, label in enumerate(axes):
            first.setdefault(label, (i, axis))
    sizes = op.Concat(*[dim_size(tensors[first[label][0]], first[label][1]) for label in output], axis=0)
    return op.Slice(result, ints(*[0] * len(output)), sizes, ints(*range(len(output))))


def _einsum_labels(equation: str, count: int):
    """(labels of each operand, labels of the output) of an explicit or implicit equation
    without ``...``; None otherwise."""
    equation = equation.replace(" ", "")
    if "..." in equation:
        return None
    left, _, right = equation.partition("->")
    operands = left.split(",")
    if len(operands) != count:
        return None
    if "->" not in equation:  # implicit: the labels that occur once, in alphabetical order
        joined = "".join(operands)
        right = "".join(sorted(label for label in set(joined) if joined.count(label) == 1))
    return operands, right


def _pad_empty_axes(x):
    """``x`` with every zero-size axis padded to one zero row at its end."""
    empty = op.Cast(op.Equal(op.Shape(x), op.Constant(value=ir.tensor(0, dtype=ir.DataType.INT64))),
                    to=ir.DataType.INT64)
    return op.Pad(x, op.Concat(op.Mul(empty, op.Constant(value=ir.tensor(0, dtype=ir.DataType.INT64))), empty, axis=0))


@fxport.onnx_op("aten::roll", opset=18, priority=fxport.BUILTIN_PRIORITY)
def roll(self, shifts, dims=()):
    """``torch.roll``; a dimension whose length is 0 at run time rolls to itself, as in torch
    (the stock translation takes the shift modulo that length: ONNX Runtime fails on Mod by 0)."""
    shifts = [shifts] if not isinstance(shifts, (list, tuple)) else list(shifts)
    dims = [dims] if isinstance(dims, int) else list(dims or [])
    if rank(self) == 0:
        return op.Identity(self)
    if not dims:  # the flattened tensor, rolled and reshaped back (a zero dimension stays zero)
        rolled = _roll_axis(op.Reshape(self, ints(-1)), shifts[0], 0)
        return op.Reshape(rolled, op.Shape(self), allowzero=1)
    result = self
    for shift, dim in zip(shifts, dims):
        result = _roll_axis(result, shift, norm_dim(dim, self))
    return result


def _roll_axis(x, shift, axis: int):
    """``x`` rolled by ``shift`` along ``axis``: its last ``shift mod n`` rows first, where the
    modulo's divisor is ``max(n, 1)`` (both slices are empty when ``n`` is 0)."""
    length = dim_size(x, axis)
    negated = ints(-shift) if isinstance(shift, int) else op.Neg(op.Reshape(op.Cast(shift, to=ir.DataType.INT64), ints(1)))
    cut = op.Mod(negated, op.Max(length, ints(1)))
    return op.Concat(op.Slice(x, cut, length, ints(axis)), op.Slice(x, ints(0), cut, ints(axis)), axis=axis)
