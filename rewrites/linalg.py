"""Dense linear algebra, unrolled over the (static) matrix size and computed in float64 inside
the graph: ``linalg.inv`` and ``linalg.solve`` (Gauss-Jordan elimination with partial
pivoting), ``linalg.cholesky`` (column by column) and ``linalg.solve_triangular``
(substitution).

The op the model calls is registered, so it is kept whole; the ``*_ex`` variants cover
pre-decomposed programs (their ``info`` output is always 0). The matrix size must be static;
batch dimensions may be dynamic. A singular (or, for Cholesky, non positive-definite) matrix
yields inf/NaN where torch raises. The graphs have O(n) steps of O(n²) work each — meant for
small systems (n ≲ 64).
"""

from __future__ import annotations

from onnxscript import ir
from onnxscript import opset18 as op

import fxport
from fxport import RuleError
from fxport.rewrites._helpers import ints, rank


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


def _swap_last_two(value, r: int):
    return op.Transpose(value, perm=list(range(r - 2)) + [r - 1, r - 2])


def _cholesky_lower(A, n: int):
    """Lower Cholesky factor, column by column (float64 inside); NaN when not positive definite."""
    a = op.Cast(A, to=ir.DataType.DOUBLE)
    rows = op.Constant(value_ints=list(range(n)))
    columns = []
    for j in range(n):
        column = op.Gather(a, op.Constant(value_ints=[j]), axis=-1)            # [..., n, 1]
        if columns:
            done = op.Concat(*columns, axis=-1)                                  # [..., n, j]
            row_j = op.Gather(done, op.Constant(value_ints=[j]), axis=-2)        # [..., 1, j]
            column = op.Sub(column, op.MatMul(done, op.Transpose(
                row_j, perm=list(range(rank(A) - 2)) + [rank(A) - 1, rank(A) - 2])))
        diagonal = op.Sqrt(op.Gather(column, op.Constant(value_ints=[j]), axis=-2))
        below = op.Unsqueeze(op.GreaterOrEqual(rows, op.Constant(value_int=j)), ints(-1))
        columns.append(op.Where(below, op.Div(column, diagonal), _double(0.0)))
    return op.CastLike(op.Concat(*columns, axis=-1), A)


@fxport.onnx_op("aten::linalg_cholesky", opset=18, priority=fxport.BUILTIN_PRIORITY)
def linalg_cholesky(self, upper: bool = False):
    """Cholesky factor (lower, or upper=True), batched, float64 inside; NaN if not PD."""
    A = self
    factor = _cholesky_lower(A, _static_size(A, "linalg.cholesky"))
    return _swap_last_two(factor, rank(A)) if upper else factor


@fxport.onnx_op("aten::linalg_cholesky_ex", opset=18, priority=fxport.BUILTIN_PRIORITY)
def linalg_cholesky_ex(self, upper: bool = False, check_errors: bool = False):
    """linalg.cholesky_ex: the factor and info = 0 (non-PD input gives NaN, not info > 0)."""
    A = self
    factor = _cholesky_lower(A, _static_size(A, "linalg.cholesky_ex"))
    factor = _swap_last_two(factor, rank(A)) if upper else factor
    info = op.Cast(op.ConstantOfShape(op.Shape(A, end=-2)), to=ir.DataType.INT32)
    return factor, info


def _substitute(a, b, n: int, upper: bool, unit: bool):
    """Solve the triangular system a x = b row by row (a [..., n, n], b [..., n, k])."""
    solved = {}
    order = range(n - 1, -1, -1) if upper else range(n)
    for i in order:
        row_b = op.Gather(b, op.Constant(value_ints=[i]), axis=-2)               # [..., 1, k]
        known = sorted(solved)
        if known:
            coefficients = op.Gather(op.Gather(a, op.Constant(value_ints=[i]), axis=-2),
                                     op.Constant(value_ints=known), axis=-1)    # [..., 1, m]
            values = op.Concat(*[solved[k] for k in known], axis=-2)            # [..., m, k]
            row_b = op.Sub(row_b, op.MatMul(coefficients, values))
        if not unit:
            pivot = op.Gather(op.Gather(a, op.Constant(value_ints=[i]), axis=-2),
                              op.Constant(value_ints=[i]), axis=-1)              # [..., 1, 1]
            row_b = op.Div(row_b, pivot)
        solved[i] = row_b
    return op.Concat(*[solved[i] for i in range(n)], axis=-2)


@fxport.onnx_op("aten::linalg_solve_triangular", opset=18, priority=fxport.BUILTIN_PRIORITY)
def linalg_solve_triangular(self, B, upper: bool, left: bool = True,
                            unitriangular: bool = False):
    """Triangular solve (upper/lower, left/right, unit diagonal), batched, float64 inside."""
    A = self
    n = _static_size(A, "linalg.solve_triangular")
    a_rank, b_rank = rank(A), rank(B)
    a64, b64 = op.Cast(A, to=ir.DataType.DOUBLE), op.Cast(B, to=ir.DataType.DOUBLE)
    if not left:  # X A = B  <=>  A^T X^T = B^T, and A^T is triangular the other way
        a64, b64 = _swap_last_two(a64, a_rank), _swap_last_two(b64, b_rank)
        upper = not upper
    a64, b64 = _broadcast_ranks(a64, b64, a_rank, b_rank)
    solution = _substitute(a64, b64, n, upper, unitriangular)
    if not left:
        solution = _swap_last_two(solution, max(a_rank, b_rank))
    return op.CastLike(solution, A)
