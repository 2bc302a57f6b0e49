"""``assert``: Python's semantics for Python values (shapes); a tensor's value is checked in PyTorch
and left out of the ONNX file with one warning at the assert's line (refused there with
``--disable assert-on-tensor``); and the model's own AssertionError when it runs eagerly."""

import pytest
import torch

import fxport
from fxport.controlflow import convert_control_flow
from fxport.errors import ControlFlowError
from tests.controlflow._util import assert_every_branch_taken, assert_matches_eager, export_to_ort, line_in_source, trip_counts


class ShapeAssertAndBranch(torch.nn.Module):
    """An assert on a shape (a Python value at capture) next to a data-dependent branch."""

    def forward(self, x):
        assert x.dim() == 2, "x must be a matrix"
        if x.sum() > 0:
            y = x * 2
        else:
            y = x - 1
        return y


class TensorAssert(torch.nn.Module):
    def forward(self, x):
        assert (x > -5).all(), f"x below -5 at {torch.argmin(x).item()}"
        return x + 1


MESSAGES_BUILT = []


def _message(x):
    MESSAGES_BUILT.append(x)
    return "x must sum above 0"


class LazyMessage(torch.nn.Module):
    def forward(self, x):
        assert x.sum() > 0, _message(x)
        return x


class TensorAssertInBranch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            assert x.max() < 100
            x = x * 2
        return x


def test_assert_on_a_python_value_runs_as_python_and_the_branch_converts():
    model = ShapeAssertAndBranch()
    inputs = [(torch.ones(4, 3),), (-torch.ones(1, 3),), (torch.randn(7, 3),), (torch.zeros(2, 3),)]
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, (torch.randn(4, 3),), dynamic_shapes={"x": {0: "batch"}})
    assert exported.ops.get("Where", 0) == 1, exported.ops
    assert {record.rule for record in exported.records} == {"if-to-where"}, "the asserts record nothing"
    assert_matches_eager(model, exported, inputs)


def test_assert_on_a_tensor_converts_and_warns_once_at_its_line():
    result = fxport.convert(TensorAssert(), (torch.randn(3),))
    line = line_in_source(TensorAssert.forward, "assert (x > -5)")
    dropped = [w for w in result.warnings if w.startswith("assert at ")]
    assert len(dropped) == 1 and f":{line} checks a tensor's value" in dropped[0], result.warnings
    assert "--disable assert-on-tensor" in dropped[0] and "\n" not in dropped[0]
    assert [r.rule for r in result.rewrites].count("assert-on-tensor") == 1
    exported = export_to_ort(TensorAssert(), (torch.randn(3),), dynamic_shapes={"x": {0: "n"}})
    assert_matches_eager(TensorAssert(), exported, [(torch.zeros(1),), (torch.randn(5),), (torch.full((2,), -4.0),)])


class CountedSteps(torch.nn.Module):
    """A tensor step counter checked against a limit in the loop body (adaptive ODE solvers' shape)."""

    def forward(self, x):
        steps = torch.zeros((), dtype=torch.long)
        while x.sum() > 0:
            assert steps < 100, "too many steps"
            x = x - 1.0
            steps = steps + 1
        return x, steps


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_an_assert_in_a_loop_body_is_checked_in_pytorch_and_the_loop_converts():
    model = CountedSteps()
    inputs = [(torch.zeros(3),), (torch.full((2,), 0.25),), (torch.full((1,), 1.5),), (torch.rand(4) * 3,)]
    assert {0, 1, 2} <= set().union(*trip_counts(model, inputs).values())
    result = fxport.convert(model, (torch.rand(3) * 2,), dynamic_shapes={"x": {0: "n"}})
    line = line_in_source(CountedSteps.forward, "assert steps < 100")
    assert sum(f":{line} checks a tensor's value" in w for w in result.warnings) == 1, result.warnings
    exported = export_to_ort(model, (torch.rand(3) * 2,), dynamic_shapes={"x": {0: "n"}})
    assert exported.ops.get("Loop", 0) == 1, exported.ops
    assert_matches_eager(model, exported, inputs)
    with pytest.raises(AssertionError, match="too many steps"):
        model(torch.full((1,), 200.0))


def test_disabled_an_assert_on_a_tensor_is_refused_in_one_line_at_its_line():
    for model, text in ((TensorAssert(), "assert (x > -5)"), (CountedSteps(), "assert steps < 100")):
        with pytest.raises(ControlFlowError) as info:
            fxport.convert(model, (torch.rand(3) * 2,), verify=False, disable_rules=("assert-on-tensor",))
        error = info.value
        assert error.where.lineno == line_in_source(type(model).forward, text)
        assert "cannot be kept in the ONNX file" in error.what and "--disable assert-on-tensor" in error.hint
        assert "\n" not in str(error)


def test_an_assert_inside_a_tensor_conditioned_branch_stays_a_side_effect_the_branch_refuses():
    with pytest.raises(ControlFlowError, match=r"side effect .*\(assert at line") as info:
        fxport.convert(TensorAssertInBranch(), (torch.ones(3),), verify=False)
    assert info.value.where.lineno == line_in_source(TensorAssertInBranch.forward, "if x.sum() > 0")


def test_eager_the_converted_assert_raises_the_models_own_error_and_builds_the_message_only_then():
    model, shaped, lazy = TensorAssert(), ShapeAssertAndBranch(), LazyMessage()
    with convert_control_flow(model), convert_control_flow(shaped), convert_control_flow(lazy), torch.no_grad():
        assert "_fx.asserts.assert_stmt" in fxport.controlflow.converted_source(TensorAssert.forward)
        assert torch.equal(model(torch.zeros(2)), torch.ones(2))
        lazy(torch.ones(2))
        assert MESSAGES_BUILT == [], "the message is built only when the assert fails"
        with pytest.raises(AssertionError, match="x must sum above 0"):
            lazy(-torch.ones(2))
        assert len(MESSAGES_BUILT) == 1
        with pytest.raises(AssertionError, match="x below -5 at 1"):
            model(torch.tensor([0.0, -6.0]))
        with pytest.raises(AssertionError, match="x must be a matrix"):
            shaped(torch.ones(3))
