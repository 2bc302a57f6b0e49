"""Differential cases for the built-in op rules: model, inputs with edge values, tolerance.

Shared by the tests (tests/rules/test_builtin_ops.py) and the accuracy measurement
(``python -m tests.rules.cases`` prints the table in docs/rule-catalogue.md).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import torch

NAN, INF = float("nan"), float("inf")


class Apply(torch.nn.Module):
    """A module calling ``function`` on its inputs (one model per differential case)."""

    def __init__(self, function: Callable):
        super().__init__()
        self.function = function

    def forward(self, *args):
        return self.function(*args)


@dataclasses.dataclass
class Case:
    id: str
    rule: str
    function: Callable
    args: tuple
    atol: float
    rtol: float
    domain: str = ""
    #: False where float64 changes the answer itself (binning moves edge values).
    float64_reference: bool = True


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _erfinv_inputs():
    x = torch.linspace(-1, 1, 40001)
    edges = torch.tensor([-1.0, 1.0, -1.5, 1.5, 0.0, -0.0, 1 - 6e-8, -1 + 6e-8, 1e-30, NAN])
    return (torch.cat([x, edges]),)


def _gamma_inputs():
    g = _gen(1)
    positive = torch.logspace(-7, 7, 4000)
    real_line = torch.linspace(-30, 30, 6001)
    near_poles = torch.tensor([-1 + 1e-4, -1 - 1e-4, -2.5, -0.5, -10.0001, -7.9999])
    edges = torch.tensor([0.0, -0.0, -1.0, -2.0, -20.0, 1.0, 2.0, INF, -INF, NAN, 1e30, 1.4616321])
    return (torch.cat([positive, real_line, near_poles, edges, torch.randn(100, generator=g)]),)


def _hypot_inputs():
    g = _gen(2)
    scales = 10.0 ** torch.randint(-35, 35, (2000,), generator=g).float()
    a = torch.randn(2000, generator=g) * scales
    b = torch.randn(2000, generator=g) * scales.flip(0)
    ea = torch.tensor([0.0, INF, NAN, -INF, 3.0, 3e38, 1e-45, -0.0])
    eb = torch.tensor([0.0, NAN, 1.0, 2.0, 4.0, 3e38, 1e-45, 0.0])
    return torch.cat([a, ea]), torch.cat([b, eb])


def _table_3d(seed: int, with_specials: bool):
    x = torch.randn(4, 9, 5, generator=_gen(seed))
    if with_specials:
        x[0, 3, 1] = NAN
        x[2, 0, 4] = NAN
        x[1, 2, 2] = INF
        x[3, 5, 0] = -INF
        x[1, 7, 3] = x[1, 4, 3]  # a tie
    return x


def _small_ints(seed: int):
    return torch.randint(-3, 4, (4, 9, 5), generator=_gen(seed))


def _cumprod_input():
    g = _gen(30)
    x = (torch.rand(4, 9, 5, generator=g) * 1.5 + 0.5) * torch.randn(4, 9, 5, generator=g).sign()
    x[0, 4, 0] = 0.0
    x[1, 2, 1] = INF
    x[2, 6, 2] = NAN
    x[3, 0, 3] = -INF
    return x


def _search_inputs():
    g = _gen(5)
    boundaries = torch.sort(torch.randn(12, generator=g))[0]
    boundaries[4] = boundaries[5]  # a repeated boundary
    values = torch.cat([torch.randn(40, generator=g) * 2, boundaries,
                        torch.tensor([NAN, INF, -INF])])
    return boundaries, values


def _batched_search_inputs():
    g = _gen(6)
    boundaries = torch.sort(torch.randn(3, 10, generator=g), -1)[0]
    values = torch.randn(3, 7, generator=g)
    values[1, :4] = boundaries[1, 2:6]
    return boundaries, values


def _points(seed: int):
    g = _gen(seed)
    x1 = torch.randn(2, 30, 6, generator=g)
    x2 = torch.randn(2, 40, 6, generator=g)
    x2[:, 0] = x1[:, 0]  # identical points: distance exactly 0
    x2[:, 1, 0] = x1[:, 1, 0] + 1.0  # differs in one coordinate
    return x1, x2


def _systems(seed: int, n: int = 6):
    g = _gen(seed)
    a = torch.randn(3, n, n, generator=g) + n ** 0.5 * torch.eye(n)
    a[0] = a[0][torch.randperm(n, generator=g)]  # needs pivoting
    a[1, 0, 0] = 0.0  # zero on the diagonal: needs pivoting
    return a, torch.randn(3, n, 2, generator=g), torch.randn(3, n, generator=g)


def _histc_input():
    x = torch.randn(3000, generator=_gen(37)) * 0.9
    x[:2] = torch.tensor([-3.0, 3.0])  # the data range: [-3, 3]
    edges = -3.0 + torch.arange(8, dtype=torch.float32) * (6.0 / 7.0)  # 7-bin edges
    x[2:10] = edges
    x[10:18] = torch.nextafter(edges, torch.tensor(INF))
    x[18:26] = torch.nextafter(edges, torch.tensor(-INF))
    return x.clamp(-3.0, 3.0)


def _histc_explicit_input():
    x = _histc_input().clone()
    x[30] = NAN
    x[31:36] = torch.tensor([-1.0, 2.0, -0.4, 0.2, 0.8])  # explicit range and its 5-bin edges
    return x


def _spd(seed: int, n: int = 6):
    m = torch.randn(3, n, n, generator=_gen(seed))
    return m @ m.transpose(-1, -2) + torch.eye(n)


CASES = [
    Case("erfinv", "aten::erfinv", torch.erfinv, _erfinv_inputs(), 1e-6, 1e-5,
         "[-1, 1] step 5e-5, ±1, |x|>1, ±0, 1-6e-8, nan"),
    Case("lgamma", "aten::lgamma", torch.lgamma, _gamma_inputs(), 1e-5, 2e-5,
         "1e-7..1e7 log-spaced, [-30, 30], poles, near poles, ±inf, nan"),
    Case("digamma", "aten::digamma", torch.digamma, _gamma_inputs(), 2e-5, 1e-5,
         "1e-7..1e7 log-spaced, [-30, 30], ±0, poles, near poles, ±inf, nan"),
    Case("hypot", "aten::hypot", torch.hypot, _hypot_inputs(), 0.0, 2e-7,
         "magnitudes 1e-35..1e35 (overflow/underflow of a²), 0, ±inf, nan, 3e38"),
    Case("cummax", "aten::cummax", lambda x: torch.cummax(x, 1), (_table_3d(3, True),), 0, 0,
         "4x9x5 float with nan, ±inf, ties"),
    Case("cummax_int", "aten::cummax", lambda x: torch.cummax(x, -1), (_small_ints(3),), 0, 0,
         "int64 in [-3, 3] (many ties)"),
    Case("cummin", "aten::cummin", lambda x: torch.cummin(x, 0), (_table_3d(4, True),), 0, 0,
         "4x9x5 float with nan, ±inf, ties"),
    Case("cummin_int", "aten::cummin", lambda x: torch.cummin(x, 1), (_small_ints(4),), 0, 0,
         "int64 in [-3, 3]"),
    Case("cumprod", "aten::cumprod", lambda x: torch.cumprod(x, 1), (_cumprod_input(),), 0,
         2e-6, "4x9x5 in ±[0.5, 2] with 0, ±inf, nan"),
    Case("cumprod_int_dtype", "aten::cumprod",
         lambda x: (torch.cumprod(x, 0), torch.cumprod(x, -1, dtype=torch.float64)),
         (_small_ints(31).to(torch.int32),), 0, 0, "int32 → int64 accumulation; dtype=float64"),
    Case("median_dim", "aten::median.dim", lambda x: torch.median(x, 1), (_table_3d(7, False),),
         0, 0, "4x9x5 float, odd length"),
    Case("median_dim_nan_keepdim", "aten::median.dim",
         lambda x: torch.median(x, -1, keepdim=True)[0], (_table_3d(8, True),), 0, 0,
         "nan, ±inf, even-length... lower median"),
    Case("median_dim_even", "aten::median.dim", lambda x: torch.median(x, 0)[0],
         (_table_3d(9, True),), 0, 0, "even length (4): lower median; nan"),
    Case("median", "aten::median", torch.median, (_table_3d(10, False),), 0, 0, "global"),
    Case("median_nan", "aten::median", torch.median, (_table_3d(11, True),), 0, 0,
         "global with nan"),
    Case("median_int", "aten::median", torch.median, (_small_ints(12),), 0, 0, "global int64"),
    Case("nanmedian_dim", "aten::nanmedian.dim", lambda x: torch.nanmedian(x, 1)[0],
         (_table_3d(13, True),), 0, 0, "nan skipped"),
    Case("nanmedian", "aten::nanmedian", torch.nanmedian, (_table_3d(14, True),), 0, 0,
         "global, nan skipped"),
    Case("kthvalue", "aten::kthvalue", lambda x: torch.kthvalue(x, 3, 1),
         (_table_3d(15, False),), 0, 0, "k=3 along dim 1"),
    Case("kthvalue_nan_keepdim", "aten::kthvalue",
         lambda x: torch.kthvalue(x, 5, 2, keepdim=True)[0], (_table_3d(16, True),), 0, 0,
         "k = n (nan is the largest)"),
    Case("mode", "aten::mode", lambda x: torch.mode(x, 1), (_small_ints(17),), 0, 0,
         "int64 with ties: smallest value, last index"),
    Case("mode_float", "aten::mode", lambda x: torch.mode(torch.round(x * 2), 0),
         (_table_3d(18, False),), 0, 0, "float rounded to halves"),
    Case("searchsorted_left", "aten::searchsorted", lambda s, v: torch.searchsorted(s, v),
         _search_inputs(), 0, 0, "1-D boundaries with a repeat; values on boundaries, ±inf, nan"),
    Case("searchsorted_right", "aten::searchsorted",
         lambda s, v: torch.searchsorted(s, v, right=True), _search_inputs(), 0, 0, "right=True"),
    Case("searchsorted_side_int32", "aten::searchsorted",
         lambda s, v: torch.searchsorted(s, v, side="right", out_int32=True),
         _batched_search_inputs(), 0, 0, "batched boundaries, side='right', int32"),
    Case("searchsorted_sorter", "aten::searchsorted",
         lambda s, v, order: torch.searchsorted(s, v, sorter=order),
         (lambda s, v: (s.flip(0), v, torch.argsort(s.flip(0))))(*_search_inputs()), 0, 0,
         "unsorted boundaries + sorter"),
    Case("cdist_p2", "aten::cdist", lambda a, b: torch.cdist(a, b), _points(19), 2e-6, 1e-5,
         "30x40 points (torch uses its matmul shortcut), identical points"),
    Case("cdist_p1", "aten::cdist", lambda a, b: torch.cdist(a, b, p=1), _points(20), 1e-6, 1e-6,
         "p=1"),
    Case("cdist_pinf", "aten::cdist", lambda a, b: torch.cdist(a, b, p=math.inf), _points(21),
         0, 0, "p=inf"),
    Case("cdist_p0", "aten::cdist", lambda a, b: torch.cdist(a, b, p=0), _points(22), 0, 0,
         "p=0 (count of differing coordinates)"),
    Case("cdist_p3_5", "aten::cdist", lambda a, b: torch.cdist(a, b, p=3.5), _points(23),
         1e-6, 1e-5, "general p=3.5"),
    Case("cdist_p0_5", "aten::cdist", lambda a, b: torch.cdist(a[0], b[0], p=0.5),
         _points(24), 1e-5, 1e-5, "general p=0.5, unbatched"),
    Case("linalg_inv", "aten::linalg_inv", torch.linalg.inv, (_systems(25)[0],), 1e-5, 1e-4,
         "batched 6x6, permuted rows and a zero diagonal (pivoting)"),
    Case("linalg_solve", "aten::linalg_solve", torch.linalg.solve, _systems(26)[:2], 1e-5, 1e-4,
         "batched 6x6, B 6x2"),
    Case("linalg_solve_vector", "aten::linalg_solve",
         lambda a, b: torch.linalg.solve(a, b), (_systems(27)[0], _systems(27)[2]), 1e-5, 1e-4,
         "batched vector right-hand side"),
    Case("linalg_solve_right", "aten::linalg_solve",
         lambda a, b: torch.linalg.solve(a, b, left=False),
         (_systems(28)[0], _systems(28)[1].transpose(-1, -2)), 1e-5, 1e-4, "left=False (XA = B)"),
    Case("linalg_solve_broadcast", "aten::linalg_solve",
         lambda a, b: torch.linalg.solve(a[0], b), _systems(29)[:2], 1e-5, 1e-4,
         "unbatched A, batched B"),
    Case("histc_data_range", "aten::histc", lambda x: torch.histc(x, bins=7),
         (_histc_input(),), 0, 0,
         "default min=max=0 (data range), values on bin edges", float64_reference=False),
    Case("histc_constant", "aten::histc", lambda x: torch.histc(x * 0 + 3, bins=4),
         (_histc_input(),), 0, 0,
         "constant data: range widened to [2, 4]", float64_reference=False),
    Case("histc_explicit", "aten::histc", lambda x: torch.histc(x, bins=5, min=-1, max=2),
         (_histc_explicit_input(),), 0, 0,
         "explicit range; values outside it and nan ignored", float64_reference=False),
    Case("linalg_cholesky", "aten::linalg_cholesky", torch.linalg.cholesky,
         (_spd(32),), 1e-5, 1e-4, "batched 6x6 SPD (A Aᵀ + I)"),
    Case("linalg_cholesky_upper", "aten::linalg_cholesky",
         lambda a: torch.linalg.cholesky(a, upper=True), (_spd(33),), 1e-5, 1e-4, "upper=True"),
    Case("linalg_cholesky_ex", "aten::linalg_cholesky_ex",
         lambda a: torch.linalg.cholesky_ex(a), (_spd(34),), 1e-5, 1e-4, "factor and info"),
    Case("solve_triangular_lower", "aten::linalg_solve_triangular",
         lambda a, b: torch.linalg.solve_triangular(a.tril(), b, upper=False),
         _systems(35)[:2], 1e-5, 1e-4, "lower, left"),
    Case("solve_triangular_upper_right_unit", "aten::linalg_solve_triangular",
         lambda a, b: torch.linalg.solve_triangular(a.triu(), b, upper=True, left=False,
                                                    unitriangular=True),
         (_systems(36)[0], _systems(36)[1].transpose(-1, -2)), 1e-5, 1e-4,
         "upper, left=False, unitriangular"),
    Case("squeeze_dim_one", "aten::squeeze.dim", lambda x: x.squeeze(-2) * 2,
         (torch.arange(6.0).reshape(2, 1, 3),), 0, 0, "squeeze(-2) of a size-1 dimension: removed"),
    Case("squeeze_dims_mixed", "aten::squeeze.dims", lambda x: x.squeeze((0, 1, 2)) * 2,
         (torch.arange(12.0).reshape(1, 4, 1, 3),), 0, 0, "dims (0, 1, 2) of sizes 1, 4, 1: two removed"),
]


def error_vs_float64(case: Case, onnx_model) -> tuple[float, float] | None:
    """Max (abs, rel) error of the ONNX result against eager run in float64 (≈ exact), over
    finite reference values; None for non-float cases."""
    import numpy as np

    import fxport.testing

    if not case.float64_reference or not all(a.is_floating_point() for a in case.args):
        return None
    with torch.no_grad():
        reference = Apply(case.function)(*[a.double() for a in case.args])
    reference = [reference] if isinstance(reference, torch.Tensor) else list(reference)
    actual = fxport.testing.run_onnx(onnx_model, case.args)
    worst_abs = worst_rel = 0.0
    for want, got in zip(reference, actual):
        if not want.is_floating_point():
            continue
        want, got = want.numpy(), np.asarray(got, dtype=np.float64)
        finite = np.isfinite(want) & np.isfinite(got)
        diff = np.abs(want[finite] - got[finite])
        scale = np.abs(want[finite])
        if diff.size:
            worst_abs = max(worst_abs, float(diff.max()))
            big = scale > 1e-30
            worst_rel = max(worst_rel, float((diff[big] / scale[big]).max()) if big.any() else 0)
    return worst_abs, worst_rel


def measure() -> list[tuple]:
    """(case, rule, abs/rel error vs eager float32, abs/rel error vs float64, domain) per case:
    the table in docs/rule-catalogue.md."""
    import fxport.testing

    rows = []
    for case in CASES:
        check = fxport.testing.assert_rule_converts(
            Apply(case.function), case.args, expect_fired=[case.rule], atol=case.atol,
            rtol=case.rtol)
        exact = error_vs_float64(case, check.result.model)
        rows.append((case.id, case.rule, check.max_abs_error, check.max_rel_error, exact,
                     case.domain))
    return rows


if __name__ == "__main__":
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    print("| case | rule | inputs | max abs / rel error vs eager (float32) "
          "| max abs / rel error vs float64 |")
    print("| --- | --- | --- | --- | --- |")
    for case_id, rule, abs_err, rel_err, exact, domain in measure():
        versus_exact = "—" if exact is None else f"{exact[0]:.2g} / {exact[1]:.2g}"
        cell = domain.replace("|", "\\|")
        print(f"| {case_id} | `{rule}` | {cell} | {abs_err:.2g} / {rel_err:.2g} "
              f"| {versus_exact} |")
