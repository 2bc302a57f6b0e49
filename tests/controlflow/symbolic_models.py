"""Models whose converted cond/loop bodies branch or loop on a symbolic scalar.

Inside those bodies torch traces with dynamo, where ``x.shape[0] > 3`` looks like a Python bool;
each model here was silently specialised to the example's batch size before the fix.
"""

import torch
from torch import nn


class ShapeIfInWhile(nn.Module):
    def forward(self, x, n):
        k = torch.zeros((), dtype=torch.int64)
        while k < n:
            k = k + 1
            if not (x.shape[0] > 3):
                x = x - 1.0
            else:
                x = x + 1.0
        return x


class ShapeAndTensorIfExpInFor(nn.Module):
    def forward(self, x, n):
        for _ in range(int(n)):
            x = x * 2.0 if x.shape[0] > 3 and x.sum() > 0 else x - 1.0
        return x


class ShapeOrTensorIfInFor(nn.Module):
    def forward(self, x, n):
        for _ in range(int(n)):
            if x.shape[0] <= 3 or x.sum() > 100:
                x = x - 1.0
            else:
                x = x + 1.0
        return x


class RangeOverDimInFor(nn.Module):
    def forward(self, x, n):
        acc = torch.zeros(x.shape[1])
        for _ in range(int(n)):
            for j in range(x.shape[0]):
                acc = acc + x[j] * (j + 1)
        return acc


class HalfRangeOverDimInFor(nn.Module):
    def forward(self, x, n):
        acc = torch.zeros(x.shape[1])
        for _ in range(int(n)):
            for j in range(int(x.shape[0] / 2)):
                acc = acc + x[j]
        return acc


class ShapeIfInCondBranch(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        if x.sum() > 0:
            y = self.lin(x)
            if x.shape[0] > 3:
                y = y * 2.0
            else:
                y = y - 5.0
        else:
            y = x
        return y


class FuzzedWhileWithShapeElif(nn.Module):
    """The fuzzer's find (benchmarks/fuzz, seed 0), shrunk by hand: the ``elif`` on the batch size
    took the example's branch for every batch size in ONNX Runtime."""

    def forward(self, x, n):
        h = x
        g = torch.tanh(x)
        k = torch.zeros((), dtype=torch.int64)
        while k < n:
            k = k + 1
            if g.mean() < 0.0:
                h = torch.maximum(h, g)
            elif not (h.shape[0] > 3):
                h = g - g.mean(dim=-1, keepdim=True)
            else:
                h = torch.sqrt(h) * 2.0
        return h.sum(dim=-1)


class LoopInCondBranchMixingOperands(nn.Module):
    """torch gives each cond operand fresh size symbols: inside the branch, g = log(h) must still
    be known to have g's shape (fuzzer find, seed 0)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(4, 4)

    def forward(self, x, n):
        h = x
        g = self.lin(h)
        if h.mean() < 2.0:
            k = torch.zeros((), dtype=torch.int64)
            while k < n:
                k = k + 1
                g = torch.log(h)
        return (h + g).sum(dim=-1)
