"""Models the CLI tests point at (targets like tests/models/basic.py:Name)."""

import torch
from torch import nn


class Scale(nn.Module):
    """A no-argument module that carries its example inputs."""

    example_dynamic_shapes = {"x": {0: "batch"}}

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.linear(x)) * 2

    def example_inputs(self):
        return (torch.randn(2, 4),)


class NoInputs(nn.Module):
    def forward(self, x, y):
        return x + y


class TwoInputs(nn.Module):
    def forward(self, x, ids):
        return x.sum(-1) + ids.float()


class StaticLoop(nn.Module):
    """A loop with a static trip count: unrolls faithfully."""

    example_args = (torch.randn(3, 5),)

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(5, 5) for _ in range(3))

    def forward(self, x):
        for block in self.blocks:
            x = torch.tanh(block(x)) + x
        for _ in range(2):
            x = x * 0.5
        return x


class NeedsArgs(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.width = width

    def forward(self, x):
        return x


class RaisesInInit(nn.Module):
    def __init__(self):
        super().__init__()
        raise ValueError("broken constructor")


class RaisesInForward(nn.Module):
    example_args = (torch.randn(2, 3),)

    def forward(self, x):
        return x @ torch.randn(4, 4)  # shape mismatch: the user's bug


class MissingOp(nn.Module):
    """Two ops without a translation (fxport's built-in rules cover erfinv, lgamma...)."""

    example_args = (torch.rand(5) * 0.98,)

    def forward(self, x):
        a = torch.special.i0(x)
        b = torch.copysign(x + 1, -x)
        return a + b


class DataDependent(nn.Module):
    example_args = (torch.randn(4),)

    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


def make_scale():
    """A factory function target."""
    return Scale()


scale_instance = Scale()
not_a_model = 42


def inputs_for_two():
    """An --inputs-fn target: several input sets, the first is the export example."""
    return [(torch.randn(2, 3), torch.tensor([1, 2])), (torch.randn(5, 3), torch.tensor([0, 7, 1, 1, 2]))]
