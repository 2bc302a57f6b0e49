"""Two names for one tensor, one of them rebound by a converted statement on some paths only,
then an in-place write through one name (issue 25, item 3). In eager the write reaches the
other name exactly when the statement left the two as one object."""

import torch
from torch import nn


class LoopRebindsUnderBranch(nn.Module):
    """The issue's case: ``b`` is rebound from the fourth step of a data-dependent loop on."""

    def forward(self, a, b, n):
        b_ref = b
        for i in range(n.item()):
            a = a + b
            if i == 3:
                for _ in range(2):
                    b = b + 1
        b_ref += 1
        return a, b, b_ref


class IfRebinds(nn.Module):
    """A tensor condition rebinds ``b``; the write through ``b_ref`` reaches ``b`` otherwise."""

    def forward(self, x, b):
        b_ref = b
        if x.sum() > 0:
            b = b * 2
        b_ref.mul_(3)
        return b + 0, b_ref + 0


class WriteThroughTheRebound(nn.Module):
    """The loop may rebind the alias itself; the write goes through the original name."""

    def forward(self, x, n):
        y = x.clone()
        view = y
        for i in range(n.item()):
            if i % 2 == 1:
                view = view - 1
        y[:, 0] = 7.0
        return view + 0, y + 0


class RealiasedInTheBody(nn.Module):
    """A while loop on a tensor condition splits the pair and joins it again (``b = b_ref``)."""

    def forward(self, x):
        b = x.clone()
        b_ref = b
        total = x.sum()
        while total > 0:
            b = b + 1
            if total < 2:
                b = b_ref
            total = total - 1
        b_ref += 10
        return b + 0, b_ref + 0


class SplitIntoOtherShape(nn.Module):
    """The branch rebinds ``b`` to a tensor of another shape: the write cannot be followed."""

    def forward(self, x, b):
        b_ref = b
        if x.sum() > 0:
            b = b[:1]
        b_ref += 1
        return b + 0


class ResidualAfterStaticLoop(nn.Module):
    """A static loop (Python runs it) rebinds ``x``; nothing data-dependent splits the pair."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])

    def forward(self, x):
        residual = x
        for layer in self.layers:
            x = layer(x)
        x += residual
        return x


class RebindsUnderWith(nn.Module):
    """The rebinding sits in a ``with`` block inside the data-dependent loop."""

    def forward(self, b, n):
        b_ref = b
        for i in range(n.item()):
            if i == 1:
                with torch.no_grad():
                    b = b * 3
        b_ref.add_(2)
        return b + 0, b_ref + 0
