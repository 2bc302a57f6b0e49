"""Small onnxscript helpers the built-in rules share (not rules themselves).

Every helper takes and returns symbolic ONNX values, as the exporter passes them to rules.
"""

from __future__ import annotations

from onnxscript import ir
from onnxscript import opset18 as op

FLOAT_TYPES = (ir.DataType.FLOAT, ir.DataType.DOUBLE, ir.DataType.FLOAT16, ir.DataType.BFLOAT16)


def rank(value) -> int:
    """The static rank of a symbolic value (rules need it to normalise ``dim``)."""
    return len(value.shape)


def norm_dim(dim: int, value) -> int:
    """``dim`` as a non-negative axis of ``value``."""
    r = rank(value)
    return dim + r if dim < 0 else dim


def is_float(value) -> bool:
    return value.dtype in FLOAT_TYPES


def const_like(number: float, like):
    """A scalar constant with the dtype of ``like``.

    Written as float64 and cast, so float64 computations get full-precision constants (a
    float32 ``value_float`` would round pi and series coefficients to ~1e-8).
    """
    return op.CastLike(op.Constant(value=ir.tensor(float(number), dtype=ir.DataType.DOUBLE)),
                       like)


def ints(*values: int):
    """A 1-D int64 constant."""
    return op.Constant(value_ints=list(values))


def as_double(value):
    return op.Cast(value, to=ir.DataType.DOUBLE)


def dim_size(value, axis: int):
    """The (runtime) length of ``value`` along ``axis``, as a 1-element int64 tensor."""
    return op.Shape(value, start=axis, end=axis + 1)


def arange_along(value, axis: int):
    """``[0, 1, ..., n-1]`` (int64) where ``n`` is ``value``'s length along ``axis``."""
    n = op.Squeeze(dim_size(value, axis))
    return op.Range(op.Constant(value_int=0), n, op.Constant(value_int=1))


def move_axis_last(value, axis: int, r: int):
    """Transpose ``axis`` of a rank-``r`` value to the end; returns (moved, inverse or None).

    (Intermediate values carry no static shape, so ranks are passed explicitly.)
    """
    if axis == r - 1:
        return value, None
    perm = [i for i in range(r) if i != axis] + [axis]
    inverse = [perm.index(i) for i in range(r)]
    return op.Transpose(value, perm=perm), inverse


def restore_axis(value, inverse):
    return value if inverse is None else op.Transpose(value, perm=inverse)
