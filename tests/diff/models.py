"""Models the diff tests point at: each exercises one rewrite tier (targets tests/diff/models.py:Name)."""

import torch
from torch import nn


class IfElse(nn.Module):
    """A tensor-conditioned if/else: torch.export refuses it, the TorchScript trace bakes one branch."""

    example_args = (torch.arange(4.0) - 1.0,)
    example_dynamic_shapes = {"x": {0: "n"}}

    def forward(self, x):
        y = torch.tanh(x)
        if y.sum() > 0:
            z = y * 2
        else:
            z = y - 1
        return z + x


class MissingOp(nn.Module):
    """erfinv has no ONNX translation in the stock exporter; an op rule supplies one."""

    example_args = (torch.linspace(-0.9, 0.9, 6),)

    def forward(self, x):
        return torch.special.erfinv(x) * 2 + 1


class Plain(nn.Module):
    """Needs no rewrite: every diff is empty."""

    example_args = (torch.randn(2, 4),)

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.linear(x)) * 2



class Untraceable(nn.Module):
    """Neither torch.export (data-dependent branch) nor torch.jit.trace (a None output) takes it."""

    example_args = (torch.arange(4.0),)

    def forward(self, x):
        if x.sum() > 0:
            return x * 2, None
        return x - 1, None


class DoubleUntil(nn.Module):
    """A while loop on a tensor: the trace unrolls the example's trip count (6), fxport keeps a Loop."""

    example_args = (torch.tensor([1.0, 2.0]),)

    def forward(self, x):
        while x.sum() < 100:
            x = x * 2
        return x
