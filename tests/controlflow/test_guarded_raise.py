"""A ``raise`` or ``assert`` under an ``if`` inside a converted loop is that ``if``'s effect (issue
#47: WaveRNN's ``generate`` loop over the frames ends its ``if self.mode == 'MOL': … elif self.mode
== 'RAW': … else: raise`` chain with a ``raise`` the loop used to refuse). Under a Python test it
runs as Python — the loop converts and equals eager at every trip count; under a tensor test the
``if`` refuses it in one line at the user's ``if``; one directly in the body is still the loop's."""

from __future__ import annotations

import pytest
import torch

import fxport
from tests.controlflow._util import assert_matches_eager, export_to_ort, line_in_source, trip_counts


class ModeChain(torch.nn.Module):
    """WaveRNN's shape: a loop over a dynamic length whose body picks a mode by a Python string."""

    def __init__(self, mode: str):
        super().__init__()
        torch.manual_seed(0)
        self.mode = mode
        self.fc = torch.nn.Linear(3, 3)

    def forward(self, frames):
        x = torch.zeros(1, 3)
        output = []
        for i in range(frames.shape[0]):
            x = torch.tanh(self.fc(x + frames[i:i + 1]))
            if self.mode == "sum":
                sample = x.sum(1)
            elif self.mode == "max":
                sample = x.amax(1)
            else:
                raise RuntimeError("Unknown model mode value - ", self.mode)
            assert self.mode in ("sum", "max"), "a Python assert under no if runs as Python too"
            output.append(sample)
        if len(output) == 0:
            return torch.zeros(0)
        return torch.cat(output)


class AssertUnderPythonIf(torch.nn.Module):
    """An ``assert`` on a Python value under a Python ``if`` in a loop with a data-dependent exit."""

    def __init__(self):
        super().__init__()
        self.strict = True

    def forward(self, x, limit):
        total = torch.zeros(())
        steps = 0
        while total < limit:
            if self.strict:
                assert x.dim() == 1, "x is a vector"
            total = total + x.abs().sum() + 0.5
            steps += 1
        return total


class AssertOnCounter(torch.nn.Module):
    """``assert n_steps < limit`` directly in a data-dependent loop (torchdiffeq's step guard):
    the counter is a tensor in the converted loop, so the assert is one on a tensor's value."""

    def forward(self, x):
        n_steps = 0
        while x.sum() > 0:
            assert n_steps < 100, "max_num_steps exceeded"
            x = x - 1
            n_steps += 1
        return x


class RaiseUnderTensorTest(torch.nn.Module):
    """A ``raise`` under a tensor condition in a loop: eager raises only on some inputs."""

    def forward(self, x):
        acc = torch.zeros(())
        for i in range(x.shape[0]):
            if x[i] < -100:
                raise ValueError("value out of range")
            acc = acc + x[i]
        return acc


class RaiseInBody(torch.nn.Module):
    """A ``raise`` directly in a data-dependent loop's body (it would run on the first trip)."""

    def forward(self, x):
        while x.sum() > 0:
            x = x - 1
            raise ValueError("stop")
        return x


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
@pytest.mark.parametrize("mode", ["sum", "max"])
def test_a_raise_in_a_python_mode_chain_inside_a_loop_converts_and_equals_eager(mode):
    model = ModeChain(mode)
    inputs = [(torch.randn(n, 3),) for n in (1, 2, 3, 7)]
    assert {1, 2, 3, 7} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, (torch.randn(4, 3),), dynamic_shapes={"frames": {0: "frames"}})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


def test_an_assert_under_a_python_if_inside_a_data_dependent_loop_converts():
    model = AssertUnderPythonIf()
    inputs = [(torch.ones(2), torch.tensor(-1.0)), (torch.ones(2), torch.tensor(1.0)),
              (torch.ones(2), torch.tensor(4.0)), (torch.full((2,), 0.1), torch.tensor(9.0))]
    assert {0, 1, 2} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, (torch.ones(2), torch.tensor(3.0)))
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


def test_an_assert_on_the_counter_in_a_loop_is_warned_or_refused_at_the_assert_not_the_loop():
    result = fxport.convert(AssertOnCounter(), (torch.ones(3),), verify=False)
    line = line_in_source(AssertOnCounter.forward, "assert n_steps < 100")
    assert any(f"test_guarded_raise.py:{line} checks a tensor's value" in w for w in result.warnings), result.warnings
    with pytest.raises(fxport.ConversionError) as raised:
        fxport.convert(AssertOnCounter(), (torch.ones(3),), verify=False, disable_rules=("assert-on-tensor",))
    message = str(raised.value)
    line = line_in_source(AssertOnCounter.forward, "assert n_steps < 100")
    assert "\n" not in message and f"test_guarded_raise.py:{line}" in message, message
    assert message.startswith("assert on a tensor's value cannot be kept"), message


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_raise_under_a_tensor_test_in_a_loop_is_a_check_warned_about_or_refused_at_the_raise():
    """A branch that only raises is a check (tests/controlflow/test_raising_branches.py)."""
    model = RaiseUnderTensorTest()
    line = line_in_source(RaiseUnderTensorTest.forward, 'raise ValueError("value out of range")')
    result = fxport.convert(model, (torch.randn(4),), dynamic_shapes={"x": {0: "n"}}, verify=False)
    assert any(f"test_guarded_raise.py:{line} checks a tensor's value" in w for w in result.warnings), result.warnings
    exported = export_to_ort(model, (torch.randn(4),), dynamic_shapes={"x": {0: "n"}})
    assert_matches_eager(model, exported, [(torch.randn(n),) for n in (1, 2, 5)])
    with pytest.raises(fxport.ConversionError) as raised:
        fxport.convert(model, (torch.randn(4),), dynamic_shapes={"x": {0: "n"}}, verify=False,
                       disable_rules=("raise-on-tensor",))
    message = str(raised.value)
    assert "\n" not in message and f"test_guarded_raise.py:{line}" in message, message


def test_a_raise_directly_in_a_data_dependent_loop_body_is_still_the_loops_refusal():
    with pytest.raises(fxport.ConversionError) as raised:
        fxport.convert(RaiseInBody(), (-torch.ones(3),), verify=False)
    message = str(raised.value)
    line = line_in_source(RaiseInBody.forward, "while x.sum() > 0:")
    assert "\n" not in message and f"test_guarded_raise.py:{line}" in message, message
    assert "while on a tensor condition has a side effect" in message and "raise at line" in message, message
