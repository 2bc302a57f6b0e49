"""``torch.linalg.inv`` and ``torch.linalg.solve``: Gauss-Jordan elimination with partial
pivoting, unrolled over the (static) matrix size and computed in float64 inside the graph.

Registered for ``aten::linalg_inv``, ``aten::linalg_inv_ex`` and ``aten::linalg_solve`` (the
op the model calls is kept whole; ``linalg_inv_ex`` covers pre-decomposed programs). The
matrix size must be static; batch dimensions may be dynamic. A singular matrix yields inf/NaN
where torch raises. The graph has O(n) steps of O(n²) work each — meant for small systems
(n ≲ 64).
"""

from __future__ import annotations

from onnxscript import ir
from onnxscript import opset18 as op

import fxport
from fxport import RuleError
from rewrites._helpers import ints, rank


def _static_size(matrix, what: str) -> int:
    n = matrix.shape[-1]
    if not isinstance(n, int):
        raise RuleError(f"{what}: the matrix size must be static, got {n}",
                        hint="export with a fixed size for the last two dimensions")
    return n


def _double(number: float):
    return op.Constant(value=ir.tensor(number, dtype=ir.DataType.DOUBLE))


def _gauss_jordan(augmented, n: int):
    """Reduce [A | B] (float64, [..., n, n+k]) to [I | A⁻¹B] with partial pivoting."""
    rows = op.Constant(value_ints=list(range(n)))
    zero = _double(0.0)
    for k in range(n):
        column = op.Gather(augmented, op.Constant(value_int=k), axis=-1)          # [..., n]
        candidates = op.Where(op.GreaterOrEqual(rows, op.Constant(value_int=k)),
                              op.Abs(column), _double(-1.0))
        pivot_row = op.ArgMax(candidates, axis=-1, keepdims=1)                  # [..., 1]
        is_pivot = op.Unsqueeze(op.Equal(rows, pivot_row), ints(-1))            # [..., n, 1]
        is_k = op.Unsqueeze(op.Equal(rows, op.Constant(value_int=k)), ints(-1))   # [n, 1]
        pivot_values = op.ReduceSum(op.Where(is_pivot, augmented, zero), ints(-2), keepdims=1)
        row_k = op.Gather(augmented, op.Constant(value_ints=[k]), axis=-2)      # [..., 1, n+k]
        augmented = op.Where(is_k, pivot_values, op.Where(is_pivot, row_k, augmented))
        normalised = op.Div(pivot_values,
                            op.Gather(pivot_values, op.Constant(value_ints=[k]), axis=-1))
        factors = op.Gather(augmented, op.Constant(value_ints=[k]), axis=-1)   # [..., n, 1]
        factors = op.Where(is_k, op.Sub(factors, _double(1.0)), factors)
        augmented = op.Sub(augmented, op.Mul(factors, normalised))
    return augmented


def _solve(a, b, n: int, k_columns):
    """A⁻¹B for A [..., n, n] and B [..., n, k] (any batch broadcast), in A's dtype."""
    a64 = op.Cast(a, to=ir.DataType.DOUBLE)
    b64 = op.Cast(b, to=ir.DataType.DOUBLE)
    batch = op.Max(op.Shape(a64, end=-2), op.Shape(b64, end=-2)) if k_columns else None
    a64 = op.Expand(a64, op.Concat(batch, op.Constant(value_ints=[n, n]), axis=0))
    b64 = op.Expand(b64, op.Concat(batch, op.Shape(b64, start=-2), axis=0))
    reduced = _gauss_jordan(op.Concat(a64, b64, axis=-1), n)
    solution = op.Slice(reduced, op.Constant(value_ints=[n]),
                        op.Constant(value_ints=[2**62]), op.Constant(value_ints=[-1]))
    return op.CastLike(solution, a)


def _broadcast_ranks(a, b, a_rank: int, b_rank: int):
    """Left-pad the lower-rank operand with 1-dims so batch shapes can broadcast."""
    if a_rank < b_rank:
        a = op.Unsqueeze(a, ints(*range(b_rank - a_rank)))
    elif b_rank < a_rank:
        b = op.Unsqueeze(b, ints(*range(a_rank - b_rank)))
    return a, b


def _inverse(A):
    n = _static_size(A, "linalg.inv")
    eye = op.Constant(value=ir.tensor([[1.0 if i == j else 0.0 for j in range(n)]
                                       for i in range(n)], dtype=ir.DataType.DOUBLE))
    identity = op.CastLike(op.Expand(eye, op.Shape(A)), A)
    return _solve(A, identity, n, k_columns=True)


@fxport.onnx_op("aten::linalg_inv", opset=18, priority=fxport.BUILTIN_PRIORITY)
def linalg_inv(A):
    """Matrix inverse (batched): Gauss-Jordan with partial pivoting in float64."""
    return _inverse(A)


@fxport.onnx_op("aten::linalg_inv_ex", opset=18, priority=fxport.BUILTIN_PRIORITY)
def linalg_inv_ex(A, check_errors: bool = False):
    """linalg.inv_ex: the inverse and info = 0 (singularity is not detected)."""
    inverse = _inverse(A)
    info = op.Cast(op.ConstantOfShape(op.Shape(A, end=-2)), to=ir.DataType.INT32)
    return inverse, info


@fxport.onnx_op("aten::linalg_solve", opset=18, priority=fxport.BUILTIN_PRIORITY)
def linalg_solve(A, B, left: bool = True):
    """Solve AX = B (or XA = B with left=False), batched, vector or matrix B; float64 inside."""
    n = _static_size(A, "linalg.solve")
    a_rank, b_rank = rank(A), rank(B)
    a_batch = list(A.shape)[:-1]
    vector = b_rank == 1 or (b_rank == a_rank - 1 and list(B.shape) == a_batch)
    if not left:
        A = op.Transpose(A, perm=list(range(a_rank - 2)) + [a_rank - 1, a_rank - 2])
        if not vector:
            B = op.Transpose(B, perm=list(range(b_rank - 2)) + [b_rank - 1, b_rank - 2])
    if vector:
        B = op.Unsqueeze(B, ints(-1))
        b_rank += 1
    A, B = _broadcast_ranks(A, B, a_rank, b_rank)
    X = _solve(A, B, n, k_columns=True)
    if vector:
        return op.Squeeze(X, ints(-1))
    if not left:
        r = max(a_rank, b_rank)
        X = op.Transpose(X, perm=list(range(r - 2)) + [r - 1, r - 2])
    return X
