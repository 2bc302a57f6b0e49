"""A branch that only raises, under a tensor's value: a check like ``assert``, checked in PyTorch and
left out of the ONNX file with one warning at the ``raise`` (issue #47: Whisper's DTW backtrace ends
its ``if trace[i, j] == 0: … elif … else: raise ValueError("Unexpected trace[i, j]")`` chain inside
``while i > 0 or j > 0`` with such a raise, which made the loop refuse). The warning comes from a
marker the traced check leaves in the graph, so a check inside a ``torch.cond`` branch or a loop
body dynamo traces is reported as surely as one at the top level; ``--disable raise-on-tensor``
refuses it at its line; eagerly the model raises its own exception."""

from __future__ import annotations

import pytest
import torch

import fxport
from fxport.controlflow import convert_control_flow
from fxport.controlflow.engine import convert_function
from tests.controlflow._util import assert_matches_eager, export_to_ort, line_in_source, trip_counts


class CheckedInput(torch.nn.Module):
    def forward(self, x):
        if (x < 0).any():
            raise ValueError("negative input")
        return x.sqrt()


class TraceWalk(torch.nn.Module):
    """The DTW backtrace's shape: a walk over a trace matrix of 0/1/2, anything else an error."""

    def forward(self, trace):
        trace = trace.clone()
        trace[0, :] = 2  # as whisper's backtrace: the borders lead to (0, 0), so every walk ends
        trace[:, 0] = 1
        i = torch.tensor(trace.shape[0] - 1)
        j = torch.tensor(trace.shape[1] - 1)
        steps = torch.zeros((), dtype=torch.long)
        while i > 0 or j > 0:
            t = trace[i, j]
            if t == 0:
                i, j = i - 1, j - 1
            elif t == 1:
                i = i - 1
            elif t == 2:
                j = j - 1
            else:
                raise ValueError("Unexpected trace[i, j]")
            steps = steps + 1
        return steps, i, j


class CheckInsideBranch(torch.nn.Module):
    """A raising else inside a branch torch.cond traces (an expensive side: a matmul chain)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(8, 8) * 0.1)

    def forward(self, x):
        if x.sum() > 0:
            y = x
            for _ in range(4):
                y = torch.tanh(y @ self.w)
            if y.abs().max() < 1e6:
                y = y * 2
            else:
                raise RuntimeError("diverged")
        else:
            y = -x
        return y


def _warnings(result, model_cls, text):
    line = line_in_source(model_cls.forward, text)
    return [w for w in result.warnings if w.startswith("raise at ") and f":{line} checks a tensor's value" in w]


def test_the_raising_branch_becomes_a_check_and_the_other_side_follows_it():
    def f(x):
        if x.sum() > 9:
            x = x / 9
        else:
            raise ValueError("small")
        return x
    after = convert_function(f).source.after
    assert "_fx.asserts.raise_if(x.sum() > 9, lambda: ValueError('small')" in after and "negate=True" in after, after
    assert "raise ValueError" not in after, after


def test_a_raise_on_a_tensor_at_the_top_level_converts_with_one_warning_at_the_raise():
    result = fxport.convert(CheckedInput(), (torch.rand(4),), dynamic_shapes={"x": {0: "n"}})
    (warning,) = _warnings(result, CheckedInput, 'raise ValueError("negative input")')
    assert "--disable raise-on-tensor" in warning and "\n" not in warning
    exported = export_to_ort(CheckedInput(), (torch.rand(4),), dynamic_shapes={"x": {0: "n"}})
    assert_matches_eager(CheckedInput(), exported, [(torch.rand(1),), (torch.rand(6),), (torch.zeros(2),)])
    model = CheckedInput()
    with convert_control_flow(model), pytest.raises(ValueError, match="negative input"):
        model(torch.tensor([1.0, -1.0]))


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02, round eight)
def test_a_raise_ending_an_elif_chain_in_a_while_converts_and_equals_eager_on_each_path():
    model = TraceWalk()
    sets = [(torch.zeros(1, 1),), (torch.zeros(2, 2),), (torch.zeros(3, 3),), (torch.ones(4, 2),), (torch.full((2, 5), 2.0),),
            (torch.randint(0, 3, (5, 4)).float(),), (torch.randint(0, 3, (3, 6)).float(),)]
    trips = set().union(*trip_counts(model, sets).values())
    assert {0, 1, 2} <= trips, trips
    result = fxport.convert(model, (torch.randint(0, 3, (4, 5)).float(),),
                            dynamic_shapes={"trace": {0: "a", 1: "b"}})
    assert len(_warnings(result, TraceWalk, 'raise ValueError("Unexpected')) == 1, result.warnings
    exported = export_to_ort(model, (torch.randint(0, 3, (4, 5)).float(),), dynamic_shapes={"trace": {0: "a", 1: "b"}})
    assert exported.ops.get("Loop", 0) == 1, exported.ops
    assert_matches_eager(model, exported, sets)
    with pytest.raises(ValueError, match="Unexpected"), torch.no_grad(), convert_control_flow(model):
        model(torch.full((3, 3), 7.0))


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_raise_inside_a_branch_torch_cond_traces_is_still_warned_about():
    model = CheckInsideBranch()
    result = fxport.convert(model, (torch.rand(3, 8),), dynamic_shapes={"x": {0: "n"}})
    assert len(_warnings(result, CheckInsideBranch, 'raise RuntimeError("diverged")')) == 1, result.warnings
    assert result.op_counts().get("If", 0) >= 1, result.op_counts()
    exported = export_to_ort(model, (torch.rand(3, 8),), dynamic_shapes={"x": {0: "n"}})
    assert_matches_eager(model, exported, [(torch.rand(1, 8),), (-torch.rand(5, 8),), (torch.rand(2, 8) - 0.5,)])


def test_disabled_a_raise_on_a_tensor_is_refused_in_one_line_at_the_raise():
    with pytest.raises(fxport.ConversionError) as info:
        fxport.convert(TraceWalk(), (torch.randint(0, 3, (4, 5)).float(),), verify=False,
                       disable_rules=("raise-on-tensor",))
    message = str(info.value)
    assert "\n" not in message and message.startswith("a raise under a tensor's value cannot be kept"), message
    assert f"test_raising_branches.py:{line_in_source(TraceWalk.forward, 'raise ValueError')}" in message, message
