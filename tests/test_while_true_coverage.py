"""``while True: ... break`` and ``for _ in range(4): ... break`` cannot run 0 times (issue 25
item 7): coverage does not search for it, so --strict-coverage can pass."""

import torch

import fxport


class DoubleUntilLarge(torch.nn.Module):
    def forward(self, x):
        while True:
            x = x * 2
            if x.abs().sum() > 10:
                break
        return x


def test_while_true_is_not_asked_for_zero_iterations():
    model = DoubleUntilLarge().eval()
    result = fxport.convert(model, (torch.full((3,), 0.5),), strict_coverage=True)
    assert result.verified
    (loop,) = [c for c in result.coverage if c["kind"] == "while"]
    assert loop["missing"] == [] and 0 not in loop["outcomes"]
    assert not any("never reached" in w for w in result.warnings), result.warnings
    assert "Loop" in result.op_counts()


class DoubleAtMostFourTimes(torch.nn.Module):
    def forward(self, x):
        for _ in range(4):
            x = x * 2
            if x.abs().sum() > 10:
                break
        return x


def test_a_static_range_with_a_tensor_break_is_not_asked_for_zero_iterations():
    """``for _ in range(4):`` with a break on a tensor runs 1..4 times: coverage wants 2+, not 0."""
    result = fxport.convert(DoubleAtMostFourTimes().eval(), (torch.full((3,), 0.5),), strict_coverage=True)
    (loop,) = [c for c in result.coverage if c["kind"] == "for"]
    assert loop["missing"] == [] and 0 not in loop["outcomes"], loop
    assert "Loop" in result.op_counts()
