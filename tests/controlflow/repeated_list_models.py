"""Models that stack or concatenate a list repeated a dynamic size's number of times
(``torch.stack([w] * b)``, ``torch.cat(n * [a, b])``, ``[w for _ in range(b)]``), in loop
bodies, branches and helpers (tests/controlflow/test_repeated_list_sizes.py)."""

import torch
from torch import nn


def tiled_rows(weight, h):
    """A helper called from a loop body: the batch read from its argument, the list stacked."""
    batch = h.shape[0]
    return torch.stack([weight] * batch, dim=0)  # batch x k x k


class StackedWeightInFor(nn.Module):
    """``for t in range(x.shape[1])`` (dynamic time: a Loop) whose body stacks a parameter once
    per row of the batch, the batch read inside the body (in a helper) from a carried tensor."""

    def __init__(self, k: int = 3):
        super().__init__()
        torch.manual_seed(0)
        self.w = nn.Parameter(torch.randn(k, k) * 0.5)
        self.k = k

    def forward(self, x):
        h = torch.zeros(x.shape[0], self.k)
        for t in range(x.shape[1]):
            a = tiled_rows(self.w, h)
            h = torch.tanh((a * h.unsqueeze(1)).sum(2) + x[:, t:t + 1])
        return h


def max_product(log_a, log_b):
    """pytorch_HMM's maxmul in small: both operands stacked along a new axis to a common shape."""
    m = log_a.shape[0]
    p = log_b.shape[1]
    a = torch.stack([log_a] * p, dim=2)   # m x n x p
    b = torch.stack(m * [log_b], dim=0)   # m x n x p
    return torch.max(a + b, dim=1)


class MaxProductWritesInFor(nn.Module):
    """A Viterbi-style forward pass: ``for t in range(1, T)`` writes ``delta[:, t]`` and
    ``psi[:, t]`` from :func:`max_product` of the previous row (the batch read inside the body)."""

    def __init__(self, n: int = 3):
        super().__init__()
        torch.manual_seed(1)
        self.a = nn.Parameter(torch.randn(n, n))
        self.n = n

    def forward(self, x):
        batch, steps = x.shape[0], x.shape[1]
        delta = torch.zeros(batch, steps, self.n)
        psi = torch.zeros(batch, steps, self.n, dtype=torch.long)
        delta[:, 0, :] = x[:, 0, :]
        for t in range(1, steps):
            best, arg = max_product(self.a.log_softmax(0), delta[:, t - 1, :].transpose(0, 1))
            delta[:, t, :] = x[:, t, :] + best.transpose(0, 1)
            psi[:, t, :] = arg.transpose(0, 1)
        return delta, psi


class CatPairsInWhile(nn.Module):
    """``while i < steps`` (a tensor bound) with a ``break`` on a tensor condition; the body
    concatenates ``n * [rows, -rows]`` along the last axis, ``n`` the batch of the input, and
    reads it back transposed (so each row of ``h`` gets other columns of it)."""

    def __init__(self, k: int = 2):
        super().__init__()
        torch.manual_seed(2)
        self.rows = nn.Parameter(torch.randn(2, k))

    def forward(self, x, steps, cap):
        n = x.shape[0]
        h = x
        i = 0
        while i < steps:
            pairs = torch.cat(n * [self.rows, -self.rows], dim=-1)   # 2 x (2 k n)
            h = h + pairs.t().reshape(n, -1)[:, : h.shape[1]] * 0.5
            i += 1
            if h.sum() > cap:
                break
        return h, i


class ComprehensionInBranch(nn.Module):
    """``if x.sum() > 0`` (a torch.cond) whose branch stacks ``[self.w for _ in range(b)]`` with
    ``b`` the batch, along the last axis; the other branch along the first."""

    def __init__(self, k: int = 4):
        super().__init__()
        torch.manual_seed(3)
        self.w = nn.Parameter(torch.randn(k))

    def forward(self, x):
        b = x.shape[0]
        if x.sum() > 0:
            y = torch.stack([self.w for _ in range(b)], dim=-1).t() * x
        else:
            y = torch.stack([self.w for _ in range(0, b)]) - x
        return y


class NamedRepeatInFor(nn.Module):
    """The repeated list kept under a name before it is stacked (not rewritten: a name may be read
    any other way), in a helper called from a loop body: the batch is pinned at that line."""

    def forward(self, x):
        h = x[:, :1]
        for t in range(x.shape[1]):
            h = h + self.stacked(x[:, t:t + 1]).sum(0)
        return h

    def stacked(self, column):
        copies = [column] * column.shape[0]
        return torch.stack(copies)
