"""Numbers read from tensors (.item(), int(), float()) inside converted bodies (issue 13, item 4).

Inside a cond branch or a while_loop body such a number stays a 0-d tensor, so it can be a
loop bound, an index or a factor without a guard on its value.
"""

import torch
from torch import nn


class RangeOfIntInBranch(nn.Module):
    """``n = int(x.sum())`` then ``for i in range(n)`` inside a tensor branch."""

    def forward(self, x):
        y = x * 1.0
        if x.mean() > 0:
            n = int(x.sum())
            for i in range(n):
                y = y + i
        else:
            y = y - 1
        return y


class ArgmaxItemIndexInWhile(nn.Module):
    """``k = x.argmax().item(); y = x[k]`` inside a data-dependent while body."""

    def forward(self, x, steps):
        acc = torch.zeros_like(x[0])
        i = torch.zeros((), dtype=torch.long)
        while i < steps:
            k = x[:, 0].argmax().item()
            acc = acc + x[k]
            x = x * 0.5
            i = i + 1
        return acc


class FloatScaleInBranch(nn.Module):
    """``s = float(x.mean()); y = y * s`` in a branch."""

    def forward(self, x):
        y = x + 1
        if x.sum() > 0:
            s = float(x.mean())
            y = y * s
        return y


class FloatScaleInExpensiveBranch(nn.Module):
    """The same read in a branch that becomes a cond (it calls a submodule)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = x + 1
        if x.sum() > 0:
            s = float(x.mean())
            y = self.lin(y) * s
        return y


class IndexReadInForBody(nn.Module):
    """An index read from a tensor inside a ``for i in range(int(t))`` body."""

    def forward(self, x, idx, n):
        acc = torch.zeros_like(x[0])
        for i in range(int(n)):
            j = int(idx[i])
            acc = acc + x[j] * (i + 1)
        return acc


class TruncatingIntInBranch(nn.Module):
    """``int()`` truncates toward zero (-2.7 → -2) and ``float()`` of an int tensor is a float."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(4, 4)

    def forward(self, x, c):
        y = self.lin(x)
        if x.sum() > 0:
            k = int(x[0, 0] * 3)
            f = float(c) / 4
            y = self.lin(y) + k + f
        return y


class ItemComparisonInLoop(nn.Module):
    """A number read in a loop body, compared and used in arithmetic: ``if s > 0.5``."""

    def forward(self, x, n):
        for _ in range(int(n)):
            s = x.max().item()
            x = x * s if s < 2.0 else x - s
        return x


class TolistOfScalarInBody(nn.Module):
    def forward(self, x, n):
        for _ in range(int(n)):
            m = x.abs().max().tolist()
            x = x / (m + 1)
        return x


class ItemIndexInBranch(nn.Module):
    """``k = x.argmax().item(); y = x[k]`` inside a cond branch."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = x[0] * 0
        if x.sum() > 0:
            k = x[:, 0].argmax().item()
            y = self.lin(x[k])
        return y


class SliceBoundInLoop(nn.Module):
    """A slice bound read from a tensor inside a loop body, reduced afterwards."""

    def forward(self, x, n):
        acc = torch.zeros(x.shape[1])
        for i in range(int(n)):
            k = int(x[i, 0] > 0) + 1
            acc = acc + x[:k].sum(0)
        return acc


class ItemAccumulatorInLoop(nn.Module):
    """A 0-d float32 accumulator plus a float read in the body keeps its dtype (Python: float32)."""

    def forward(self, x, n):
        total = torch.zeros(())
        for i in range(int(n)):
            total = total + float(x[i].max()) * 0.5
        return total


class NumbersAtTopLevel(nn.Module):
    """Outside converted bodies, numbers read from tensors are Python numbers as before."""

    def forward(self, x, n):
        k = int(n)
        scale = float(x.mean())
        return x[:, :k] * scale


class ListSizedByReadNumber(nn.Module):
    """A Python list sized by a number read in a loop body: no tensor op can stand for it."""

    def forward(self, x, n):
        acc = x
        for _ in range(int(n)):
            k = int(x.sum())
            acc = acc + len([0] * k)
        return acc


class FloatOfItemAtTopLevel(nn.Module):
    def forward(self, x, s):
        f = float(s.item())
        return x * f + 1
