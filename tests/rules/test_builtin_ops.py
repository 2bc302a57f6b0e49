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
