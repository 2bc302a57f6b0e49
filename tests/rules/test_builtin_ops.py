"""Every built-in op rule, differentially: ONNX Runtime vs eager on edge values."""

from __future__ import annotations

import pytest
import torch

import fxport.testing
from tests.rules.cases import CASES, Apply


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_builtin_rule_matches_eager(case):
    check = fxport.testing.assert_rule_converts(
        Apply(case.function), case.args, expect_fired=[case.rule], atol=case.atol, rtol=case.rtol)
    assert check.fired[case.rule] >= 1


def test_bucketize_needs_no_rule_and_is_correct_on_both_sides():
    """torch 2.13's exporter translates bucketize itself; check it stays right (both sides)."""
    values = torch.tensor([1.0, 2.0, 2.5, float("nan"), -5.0, 7.0, 3.0])
    boundaries = torch.tensor([1.0, 2.0, 3.0])

    def both(x, b):
        return torch.bucketize(x, b), torch.bucketize(x, b, right=True, out_int32=True)

    check = fxport.testing.assert_rule_converts(Apply(both), (values, boundaries), atol=0, rtol=0)
    assert not any(rule.startswith("aten::bucketize") for rule in check.fired)


ACCURACY_VS_FLOAT64 = {  # case id -> (atol, rtol) against eager run in float64 (≈ exact)
    "erfinv": (1e-12, 6e-7),
    "lgamma": (1e-12, 2e-7),
    "digamma": (1e-12, 2e-7),
    "hypot": (2e-45, 2e-7),  # 2e-45: one float32 subnormal step
    "cdist_p2": (1e-6, 1e-6),
    "linalg_inv": (1e-6, 1e-6),
    "linalg_solve": (1e-6, 1e-6),
    "linalg_cholesky": (1e-6, 1e-6),
}


@pytest.mark.parametrize("case_id", sorted(ACCURACY_VS_FLOAT64))
def test_float_rules_are_within_float32_rounding_of_the_exact_value(case_id):
    """Against float64 eager, not just float32 eager: the rule's own error, not torch's."""
    import numpy as np

    case = next(c for c in CASES if c.id == case_id)
    atol, rtol = ACCURACY_VS_FLOAT64[case_id]
    model = fxport.convert(Apply(case.function), case.args, verify=False).model
    with torch.no_grad():
        exact = Apply(case.function)(*[a.double() for a in case.args]).numpy()
    got = fxport.testing.run_onnx(model, case.args)[0].astype(np.float64)
    with np.errstate(over="ignore"):
        finite = np.isfinite(exact.astype(np.float32))  # representable as a float32 result
    assert (np.isfinite(got) == finite).all()
    error = np.abs(got[finite] - exact[finite])
    limit = atol + rtol * np.abs(exact[finite])
    worst = int(np.argmax(error - limit))
    assert error[worst] <= limit[worst], (error[worst], exact[finite][worst])
