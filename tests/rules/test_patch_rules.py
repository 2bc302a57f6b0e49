"""Patch rules: replace a function / module class only while capturing; originals restored."""

from __future__ import annotations

import math

import pytest
import torch

import fxport
import fxport.testing
from fxport.rules import rules_of
from fxport.rules.patching import apply_patches
from tests.rules import fixture_lib


@fxport.patch("tests.rules.fixture_lib.opaque_double")
def traceable_double(x):
    """2x in traceable PyTorch."""
    return x * 2


@fxport.patch(fixture_lib.OpaqueGate)
class TraceableGate:
    """OpaqueGate.forward as torch ops."""

    def forward(self, x):
        return x * torch.sigmoid(x)


def test_model_fails_to_capture_without_the_patches():
    with pytest.raises(fxport.CaptureError):
        fxport.convert(fixture_lib.UsesOpaque(), (torch.randn(3, 4),), verify=False)


def test_function_and_class_patches_make_the_model_convert_and_match_eager():
    check = fxport.testing.assert_rule_converts(
        fixture_lib.UsesOpaque(), (torch.randn(3, 4),), rules=[traceable_double, TraceableGate],
        expect_fired=["patch:tests.rules.fixture_lib.opaque_double",
                      "patch:tests.rules.fixture_lib.OpaqueGate"])
    assert check.max_abs_error < 1e-5


def test_patches_are_undone_after_capture_even_on_error():
    original_function = fixture_lib.opaque_double
    original_forward = fixture_lib.OpaqueGate.__dict__["forward"]
    with pytest.raises(ZeroDivisionError):
        with apply_patches(rules_of(traceable_double) + rules_of(TraceableGate), records=[]):
            assert fixture_lib.opaque_double is not original_function
            assert fixture_lib.OpaqueGate.forward is not original_forward
            1 / 0
    assert fixture_lib.opaque_double is original_function
    assert fixture_lib.OpaqueGate.__dict__["forward"] is original_forward


def test_original_is_reachable_from_the_replacement():
    @fxport.patch("math.hypot")
    def counted_hypot(*coords):
        return counted_hypot.original(*coords) + 1000

    records = []
    with apply_patches(rules_of(counted_hypot), records):
        assert math.hypot(3, 4) == 1005.0
    assert math.hypot(3, 4) == 5.0
    assert records[0].data["calls"] == 1 and records[0].tier == "patch"


def test_class_patch_exposes_the_original_methods():
    @fxport.patch(fixture_lib.OpaqueGate, name="gate-plus-one")
    class GatePlusOne:
        def forward(self, x):
            return GatePlusOne.original.forward(self, x) + 1

    x = torch.randn(5)
    with apply_patches(rules_of(GatePlusOne), records=[]):
        patched = fixture_lib.OpaqueGate()(x)
    torch.testing.assert_close(patched, fixture_lib.OpaqueGate()(x) + 1)


def test_patch_that_never_runs_is_not_reported_and_testing_fails_on_it():
    @fxport.patch("math.gamma", name="unused-gamma")
    def unused(x):
        return x

    class Plain(torch.nn.Module):
        def forward(self, x):
            return x + 1

    with pytest.raises(AssertionError, match="'unused-gamma' applied 0 times"):
        fxport.testing.assert_rule_converts(Plain(), (torch.randn(2),), rules=[unused],
                                            expect_fired=["unused-gamma"])


@pytest.mark.parametrize("target, message", [
    ("tests.rules.fixture_lib.no_such_function", "has no attribute 'no_such_function'"),
    ("no_such_package.module.function", "no module of it can be imported"),
    ("tests.rules.fixture_lib.OpaqueGate.no_such_method", "has no attribute 'no_such_method'"),
])
def test_missing_target_is_a_rule_error_before_capture(target, message):
    @fxport.patch(target)
    def replacement(x):
        return x

    with pytest.raises(fxport.RuleError, match=message):
        fxport.convert(fixture_lib.UsesOpaque(), (torch.randn(3, 4),), rules=[replacement],
                       verify=False)
