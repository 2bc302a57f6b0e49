"""Models whose example takes only one side of a converted branch (tests/test_exercise.py)."""

import torch
from torch import nn


class OneSided(nn.Module):
    """The example and the fresh random values all have a negative mean: only the else side runs
    unless verification searches for inputs that take the other one."""

    example_args = (torch.rand(4, 3) - 5,)

    def forward(self, x):
        if x.mean() > 0:
            y = torch.sin(x) * 2
        else:
            y = torch.cos(x) - 1
        return y


class WritesInUntakenBranch(nn.Module):
    """An in-place write in the branch the example never takes (issue 13's silently wrong file)."""

    example_args = (torch.rand(4, 3) - 5,)

    def forward(self, x):
        y = x.clone()
        if y.mean() > 0:
            y.mul_(3)
        return y


class Unreachable(nn.Module):
    """The else side can never run: a warning (or with --strict-coverage an error), not silence."""

    example_args = (torch.randn(4, 3),)

    def forward(self, x):
        if x.abs().sum() >= 0:
            return x * 2
        return x - 1


class CountedLoop(nn.Module):
    """A while loop on a tensor: 0 iterations for n ≤ 0, several for larger n."""

    example_args = (torch.tensor(3.0),)

    def forward(self, n):
        acc = torch.zeros(())
        while acc < n:
            acc = acc + 1.5
        return acc


class ReachedOnlyByOverflow(nn.Module):
    """The true side needs exp(10·x) past 1e30: of the search's variations only ×10 and ×100
    reach it, and on those eager overflows to inf, so they are not used (a warning instead)."""

    example_args = (torch.linspace(-1.0, 1.0, 12).reshape(4, 3),)

    def forward(self, x):
        h = torch.exp(x * 10.0)
        if h.max() > 1e30:
            return h * 0.5
        return h
