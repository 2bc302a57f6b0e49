"""The one comparison of eager PyTorch outputs with ONNX Runtime outputs.

The verify stage (:mod:`fxport.verify.verification`), :mod:`fxport.testing` and the test suite's helpers all
judge outputs here, with one set of criteria (:class:`Acceptance`): eager outputs are flattened
the way the exporter flattens them (:func:`flatten_outputs`); shapes and the output count must
agree; integer and bool outputs must be equal; float outputs must satisfy ``|onnx - eager| ≤
atol + rtol·|eager|`` on finite values with dtype-aware default tolerances (:data:`TOLERANCES`),
and NaN / +inf / -inf must sit at the same positions (rows of outputs a sort orders are paired
first where their keys tie, :mod:`fxport.verify.ties`); or, for quantised models, the cosine
similarity must reach ``min_cosine`` (shapes and NaN/inf positions still agreeing).

Example::

    >>> import numpy as np, torch
    >>> result = compare((torch.tensor([1.0, 2.0]), 3), [np.array([1.0, 2.00001], np.float32), np.array(3)])
    >>> result.passed, result.mismatched
    (True, [])
    >>> bad = compare(torch.tensor([1.0, float("nan")]), [np.array([1.0, 0.0], np.float32)])
    >>> bad.passed, bad.failure()
    (False, 'output[0]: nan positions differ at (1,): onnx 0.0, eager nan')
"""

from __future__ import annotations

import dataclasses
from typing import Any, Sequence

import numpy as np
import torch

from fxport.eager.inputs import number_as_tensor
from fxport.verify.ties import align_tied_rows

#: (absolute, relative) tolerance per output dtype.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-6),
    torch.float32: (1e-4, 1e-3),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 5e-2),
}


@dataclasses.dataclass(frozen=True)
class Acceptance:
    """How a verification row passes.

    Attributes:
        tolerance_dtype: compare float outputs with ``TOLERANCES[tolerance_dtype]`` instead of
            the eager output's dtype (float16 models against float32 eager).
        min_cosine: when set, a row passes on cosine similarity ≥ ``min_cosine`` (with matching
            shapes and NaN/inf positions) instead of element tolerances: quantised models.
        atol, rtol: the user's element tolerances for float outputs, replacing the dtype's
            (``--atol`` / ``--rtol``); None keeps ``TOLERANCES``.
    """

    tolerance_dtype: torch.dtype | None = None
    min_cosine: float | None = None
    atol: float | None = None
    rtol: float | None = None
    #: flat indices of the outputs a sort orders (their tied rows may be paired, fxport/verify/ties.py);
    #: None: any sorted 1-D float output may be such a key (no program to ask).
    sort_keys: frozenset[int] | None = None

    def limits(self, dtype: torch.dtype) -> tuple[float, float]:
        """(atol, rtol) for float outputs of ``dtype`` under this acceptance."""
        atol, rtol = TOLERANCES.get(self.tolerance_dtype or dtype, TOLERANCES[torch.float32])
        return (atol if self.atol is None else self.atol, rtol if self.rtol is None else self.rtol)


@dataclasses.dataclass
class OutputComparison:
    """One output of one input set, onnx against eager. ``max_rel``: relative to ``max(|eager|,
    atol / rtol)`` — where the tolerance is absolute (values near zero) an error is not magnified
    into a large relative one (1e-7 off a 1e-9 value reads 1e-6 with float32's limits, not 100)."""

    name: str
    max_abs: float
    max_rel: float
    passed: bool
    #: shapes agree and NaN/inf positions agree (what a cosine criterion still requires).
    structural_ok: bool = True
    #: why the output failed, for a person: the first mismatching element ("" when it passed).
    detail: str = ""


@dataclasses.dataclass
class Comparison:
    """What :func:`compare` found: one :class:`OutputComparison` per output, and the cosine
    similarity of all float outputs together. ``noise`` is set when the verdict was judged
    against a float64 reference (:mod:`fxport.verify.judges.float64_noise`)."""

    outputs: list[OutputComparison]
    cosine: float
    #: a NoiseJudgement (fxport/verify/judges/float64_noise.py) or None
    noise: Any = None
    #: how outputs were paired before comparing (tied sort keys, fxport/verify/ties.py).
    notes: list[str] = dataclasses.field(default_factory=list)
    #: the ONNX outputs as compared (after that pairing); None when not recorded.
    compared: list[np.ndarray] | None = dataclasses.field(default=None, repr=False)

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.outputs)

    @property
    def max_abs(self) -> float:
        return max((c.max_abs for c in self.outputs), default=0.0)

    @property
    def max_rel(self) -> float:
        return max((c.max_rel for c in self.outputs), default=0.0)

    @property
    def mismatched(self) -> list[str]:
        """The names of the outputs that failed (``output[0]``, ``output[1] shape [2] != [3]``)."""
        return [c.name for c in self.outputs if not c.passed]

    def failure(self) -> str | None:
        """One line on the first failing output (None when all passed)."""
        failed = next((c for c in self.outputs if not c.passed), None)
        return None if failed is None else failed.detail or failed.name


def compare(eager_outputs: Any, onnx_outputs: Sequence[Any], acceptance: Acceptance = Acceptance()) -> Comparison:
    """Compare what eager PyTorch returned (any nesting; see :func:`flatten_outputs`) with ONNX
    Runtime's outputs under ``acceptance``: the one comparer of fxport. It is the first two judges
    of verification (:mod:`fxport.verify.judges`): fixed tolerances, then tied rows paired."""
    fixed = compare_fixed(eager_outputs, onnx_outputs, acceptance)
    return fixed if fixed.passed else compare_tied(eager_outputs, fixed, acceptance)


def compare_fixed(eager_outputs: Any, onnx_outputs: Sequence[Any], acceptance: Acceptance = Acceptance()) -> Comparison:
    """Each output position by position under ``acceptance``'s fixed tolerances (or its cosine
    criterion), nothing paired."""
    expected = flatten_outputs(eager_outputs)
    actual = [np.asarray(value) for value in onnx_outputs]
    outputs, cosine = compare_outputs(expected, actual, acceptance.tolerance_dtype, acceptance.atol, acceptance.rtol)
    if acceptance.min_cosine is not None:
        good_cosine = cosine >= acceptance.min_cosine
        outputs = [dataclasses.replace(c, passed=c.structural_ok and good_cosine,
                                       detail=c.detail if not c.structural_ok or good_cosine
                                       else f"{c.name}: cosine {cosine:.4f} < {acceptance.min_cosine}")
                   for c in outputs]
    return Comparison(outputs, cosine, compared=actual)


def compare_tied(eager_outputs: Any, failed: Comparison, acceptance: Acceptance = Acceptance()) -> Comparison:
    """``failed`` (a :func:`compare_fixed` result) compared again with the rows of tied sort keys
    paired (:mod:`fxport.verify.ties`); ``failed`` itself when no row moved or the criterion is
    a cosine (which no order changes)."""
    if acceptance.min_cosine is not None or failed.compared is None:
        return failed
    paired = align_tied_rows(eager_outputs, failed.compared, acceptance.limits, acceptance.sort_keys)
    if not paired.notes:
        return failed
    actual = [np.asarray(value) for value in paired.outputs]
    outputs, cosine = compare_outputs(flatten_outputs(eager_outputs), actual, acceptance.tolerance_dtype,
                                      acceptance.atol, acceptance.rtol)
    return Comparison(outputs, cosine, notes=paired.notes, compared=actual)


def same_specials(a: np.ndarray, b: np.ndarray) -> bool:
    return all(np.array_equal(test(a), test(b)) for test in (np.isnan, np.isposinf, np.isneginf))


def compare_outputs(
    expected: Sequence[torch.Tensor],
    actual: Sequence[np.ndarray],
    tolerance_dtype: torch.dtype | None = None,
    atol: float | None = None,
    rtol: float | None = None,
) -> tuple[list[OutputComparison], float]:
    """Compare flattened eager outputs with ONNX Runtime outputs; returns per-output results and cosine.

    Float outputs use ``TOLERANCES`` of the eager output's dtype, or of ``tolerance_dtype`` when
    given (a float16 model checked against float32 eager uses the float16 tolerances); ``atol``
    / ``rtol``, when given, replace the dtype's value (``--atol`` / ``--rtol``).
    """
    results = []
    finite_pairs: list[tuple[np.ndarray, np.ndarray]] = []
    for index, (ref, got) in enumerate(zip(expected, actual)):
        ref_np = to_numpy(ref.detach().cpu())
        name = f"output[{index}]"
        if ref_np.shape != got.shape:
            results.append(OutputComparison(f"{name} shape {list(got.shape)} != {list(ref_np.shape)}",
                                            float("inf"), float("inf"), False, structural_ok=False,
                                            detail=f"{name}: shape {list(got.shape)} vs eager {list(ref_np.shape)}"))
            continue
        if not (ref.dtype.is_floating_point or ref.dtype.is_complex):
            equal = bool(np.array_equal(ref_np, got))
            diff = float(np.abs(ref_np.astype(np.float64) - got.astype(np.float64)).max()) if ref_np.size else 0.0
            results.append(OutputComparison(name, diff, diff, equal, detail="" if equal else _unequal(name, ref_np, got)))
            continue
        limit_abs, limit_rel = Acceptance(tolerance_dtype=tolerance_dtype, atol=atol, rtol=rtol).limits(ref.dtype)
        r, g = ref_np.astype(np.float64), got.astype(np.float64)
        same_special = same_specials(r, g)
        finite = np.isfinite(r) & np.isfinite(g)
        abs_err = np.abs(r[finite] - g[finite])
        rel_err = abs_err / np.maximum(np.abs(r[finite]), max(limit_abs / max(limit_rel, 1e-12), 1e-12))
        limit = limit_abs + limit_rel * np.abs(r[finite])
        close = bool(np.all(abs_err <= limit))
        max_abs = float(abs_err.max()) if abs_err.size else 0.0
        max_rel = float(rel_err.max()) if rel_err.size else 0.0
        detail = ""
        if not same_special:
            detail = _special_mismatch(name, r, g)
        elif not close:
            worst = int(np.argmax(abs_err - limit))
            at = tuple(int(i) for i in np.argwhere(finite)[worst])
            detail = (f"{name}: |onnx - eager| = {abs_err[worst]:.3g} > {limit[worst]:.3g} at {at} "
                      f"(eager value {r[finite][worst]:.6g})")
        results.append(OutputComparison(name, max_abs, max_rel, same_special and close, structural_ok=same_special,
                                        detail=detail))
        finite_pairs.append((r[finite], g[finite]))
    if len(expected) != len(actual):
        results.append(OutputComparison(f"output count {len(actual)} != {len(expected)}", float("inf"), float("inf"),
                                        False, structural_ok=False,
                                        detail=f"ONNX has {len(actual)} outputs, eager {len(expected)}"))
    return results, _cosine(finite_pairs)


def _cosine(pairs: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """Cosine similarity of the concatenated finite (eager, onnx) values, scaled by their largest
    magnitude first so that squares of huge float64 values cannot overflow to inf/inf.

    >>> round(_cosine([(np.array([1e200, 2e200]), np.array([1e200, 2e200]))]), 12)
    1.0
    """
    scale = max((float(np.abs(a).max()) for pair in pairs for a in pair if a.size), default=0.0)
    if scale == 0.0:  # every value is zero on both sides (or there are none)
        return 1.0
    eager = np.concatenate([e.ravel() for e, _ in pairs]) / scale
    onnx = np.concatenate([o.ravel() for _, o in pairs]) / scale
    norm_e, norm_a = float((eager ** 2).sum()), float((onnx ** 2).sum())
    if norm_e == 0.0 or norm_a == 0.0:  # one side all zeros (the other holds the ±1 of the scale)
        return 0.0
    return min(1.0, float((eager * onnx).sum()) / float(np.sqrt(norm_e) * np.sqrt(norm_a)))


def _unequal(name: str, want: np.ndarray, got: np.ndarray) -> str:
    bad = tuple(int(i) for i in np.argwhere(want != got)[0]) if want.ndim else ()
    return f"{name}: {got[bad]} != eager {want[bad]} at index {bad}"


def _special_mismatch(name: str, want: np.ndarray, got: np.ndarray) -> str:
    for label, test in (("nan", np.isnan), ("+inf", np.isposinf), ("-inf", np.isneginf)):
        mismatch = test(want) != test(got)
        if mismatch.any():
            at = tuple(int(i) for i in np.argwhere(mismatch)[0]) if want.ndim else ()
            return f"{name}: {label} positions differ at {at}: onnx {got[at]}, eager {want[at]}"
    return f"{name}: nan/inf positions differ"


def flatten_outputs(outputs: Any) -> list[torch.Tensor]:
    """Eager outputs flattened the way the exporter flattens them.

    Python numbers (int, float, bool) become 0-d tensors, as the exported model returns them
    (see :func:`fxport.capture.program.constant_outputs_as_tensors`); None is dropped.

    Example::

        >>> [t.dtype for t in flatten_outputs((torch.ones(2), 3, (2.5, True), None))]
        [torch.float32, torch.int64, torch.float32, torch.bool]
    """
    flat, _ = torch.utils._pytree.tree_flatten(outputs)
    return [value if isinstance(value, torch.Tensor) else number_as_tensor(value)
            for value in flat if isinstance(value, (torch.Tensor, bool, int, float))]


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A CPU tensor as numpy (bfloat16 through ml_dtypes)."""
    if tensor.dtype == torch.bfloat16:
        import ml_dtypes

        return tensor.float().numpy().astype(ml_dtypes.bfloat16)
    return tensor.numpy()
