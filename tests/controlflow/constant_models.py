"""Branches and loop bodies that create tensor constants (``torch.tensor(...)``, a number
assigned through a mask): the exporter cannot lift a constant out of a subgraph, so the
``subgraph-constants`` pass builds it there with ops."""

import torch
from torch import nn


class MaskedNumberInLoop(nn.Module):
    """A masked assignment of a number (an index_put of a 0-d constant) in a data-dependent loop."""

    def forward(self, x, n):
        h = x.clone()
        k = torch.zeros((), dtype=torch.int64)
        while k < n:
            k = k + 1
            h = h * 1.5
            h[h < -1.0] = 0.25
        return h


class LiteralsInBranch(nn.Module):
    """A vector literal and an index literal in a branch (lowered as a cond)."""

    def forward(self, x):
        h = x * 2
        if h.sum() > 0:
            h = h + torch.tensor([1.0, -2.0, 3.0])
            h = h.index_add(1, torch.tensor([0, 2]), h[:, :2])
        else:
            h = h - torch.tensor(0.5)
        return h


class Float64LiteralInLoop(nn.Module):
    """A float64 literal that float32 cannot hold exactly, in a loop body."""

    def forward(self, x, n):
        total = torch.zeros((), dtype=torch.float64)
        for _ in range(int(n)):
            total = total + torch.tensor(0.1, dtype=torch.float64) + x.sum() * 0
        return total


class LiteralInLoopInBranch(nn.Module):
    """Constants in a loop body nested in a branch (a subgraph of a subgraph)."""

    def forward(self, x, n):
        h = x.clone()
        if h.mean() > 0:
            for _ in range(int(n)):
                h = h - torch.tensor([0.5, 1.0, 1.5])
        else:
            h = h * torch.tensor([2.0, 1.0, 0.5])
        return h


class LargeLiteralInLoop(nn.Module):
    """A 300-element constant made inside a loop body: refused (build it outside)."""

    def forward(self, x, n):
        h = x.clone()
        for _ in range(int(n)):  # large
            h = h + torch.arange(300, dtype=torch.float32).reshape(100, 3).sum(0) * 0 \
                + torch.tensor([float(i) for i in range(300)]).reshape(100, 3)[:1]
        return h


class ExtremeLiteralsInLoop(nn.Module):
    """float64 constants float32 cannot hold (1e300, subnormals, 0.1) and signed zeros."""

    def forward(self, x, n):
        out = torch.zeros(6, dtype=torch.float64) + x.sum() * 0
        for _ in range(int(n)):
            big = torch.tensor([1e300, -1e-310, 0.1, 2.5e-320], dtype=torch.float64)
            signs = 1.0 / torch.tensor([0.0, -0.0], dtype=torch.float64)  # inf, -inf
            out = torch.cat([big, signs])
        return out
