"""Models whose converted loop uses its counter as a Python number (tests/controlflow/test_counter_as_number.py).

Written the way public code writes them: the Deep Implicit Layers tutorial's Anderson step
(``n = min(k, m)``, ``F[:, :n]``, ``torch.eye(n)``, ``X[:, k % m]``), whisper's DTW recurrence
(``cost[i - 1, j - 1]`` in nested ``for`` loops over dynamic sizes), and counter arithmetic in a
loop over a dynamic size (neighbours clamped with ``min``/``max``, ``t // 2``, ``x[t:t + 1]``,
``range(T - 1, -1, -1)``).
"""

from __future__ import annotations

import math

import torch
from torch import nn


class AndersonWindow(nn.Module):
    """``for k in range(2, max_iter)`` with a window of the last ``m`` iterates, ``n = min(k, m)``
    columns used (``F[:, :n]``, ``H[:, 1:n + 1, 1:n + 1]``, ``torch.eye(n)``), the iterate written at
    ``X[:, k % m]``, and a ``break`` on the tensor residual; ``k`` is read after the loop."""

    def __init__(self, m: int = 3, max_iter: int = 9, tol: float = 1e-3):
        super().__init__()
        self.m, self.max_iter, self.tol = m, max_iter, tol

    def step(self, z, x):
        return torch.tanh(0.5 * z + x)

    def forward(self, x):
        bsz, d = x.shape
        m = self.m
        X = torch.zeros(bsz, m, d)
        F = torch.zeros(bsz, m, d)
        X[:, 0], F[:, 0] = x, self.step(x, x)
        X[:, 1], F[:, 1] = F[:, 0], self.step(F[:, 0], x)
        H = torch.zeros(bsz, m + 1, m + 1)
        H[:, 0, 1:] = H[:, 1:, 0] = 1
        y = torch.zeros(bsz, m + 1, 1)
        y[:, 0] = 1
        res = torch.zeros(())
        k = 1
        for k in range(2, self.max_iter):
            n = min(k, m)
            G = F[:, :n] - X[:, :n]
            H[:, 1:n + 1, 1:n + 1] = torch.bmm(G, G.transpose(1, 2)) + 1e-4 * torch.eye(n)[None]
            # origin: torch.linalg.solve(H[:, :n + 1, :n + 1], y[:, :n + 1])[:, 1:n + 1, 0] (fxport's solve
            # rule wants a static matrix size); weights read from the same window of H instead
            alpha = torch.softmax(-H[:, 1:n + 1, 1:n + 1].sum(-1) + y[:, :n].sum(-1), -1)
            X[:, k % m] = (alpha[:, None] @ F[:, :n])[:, 0]
            F[:, k % m] = self.step(X[:, k % m], x)
            res = (F[:, k % m] - X[:, k % m]).norm() / (1e-5 + F[:, k % m].norm())
            if res < self.tol:
                break
        return X[:, k % m], res, torch.tensor(k)


class DtwCost(nn.Module):
    """whisper's ``dtw_cpu`` recurrence: nested ``for j in range(1, M + 1): for i in range(1, N +
    1):`` over the sizes of the input, reading ``cost[i - 1, j - 1]``, ``cost[i - 1, j]``,
    ``cost[i, j - 1]`` and writing ``cost[i, j]``/``trace[i, j]`` under ``if c0 < c1 and c0 < c2``."""

    def forward(self, x):
        N, M = x.shape
        cost = torch.ones((N + 1, M + 1), dtype=torch.float32) * math.inf
        trace = -torch.ones((N + 1, M + 1), dtype=torch.float32)
        cost[0, 0] = 0
        for j in range(1, M + 1):
            for i in range(1, N + 1):
                c0 = cost[i - 1, j - 1]
                c1 = cost[i - 1, j]
                c2 = cost[i, j - 1]
                if c0 < c1 and c0 < c2:
                    c, t = c0, 0
                elif c1 < c0 and c1 < c2:
                    c, t = c1, 1
                else:
                    c, t = c2, 2
                cost[i, j] = x[i - 1, j - 1] + c
                trace[i, j] = t
        return cost, trace


class CounterArithmetic(nn.Module):
    """A loop over the rows of a dynamic input whose counter is used as a number: neighbours
    clamped with ``max``/``min``, ``t // 2`` and ``t % 3`` as factors, a prefix of ``min(t + 1, 3)``
    rows, ``torch.arange(n)``, and the row ``x[t:t + 1]`` added to a carried (1, d) tensor."""

    def forward(self, x):
        T = x.shape[0]
        acc = torch.zeros(1, x.shape[1])
        out = torch.zeros_like(x)
        for t in range(T):
            lo, hi = max(t - 1, 0), min(t + 1, T - 1)
            n = min(t + 1, 3)
            prefix = x[:n].sum(0) * torch.arange(n).sum()
            out[t] = x[lo] * (t // 2) + x[hi] * (t % 3) + prefix
            acc = acc + x[t:t + 1]
        return out, acc


class CountdownWindow(nn.Module):
    """``for t in range(T - 1, -1, -1)`` (a negative step): ``x[t:]`` summed, the row at ``t``
    written with ``w[t] = ...``, and a break once the running sum passes a threshold."""

    def forward(self, x, limit):
        T = x.shape[0]
        w = torch.zeros(T)
        total = torch.zeros(())
        for t in range(T - 1, -1, -1):
            tail = x[t:].sum()
            w[t] = tail + t
            total = total + x[t]
            if total > limit:
                break
        return w, total


class RemainderAndPowerByCounter(nn.Module):
    """``x.long() % (t + 1)`` and ``x ** (t % 3)`` in ``for t in range(6)`` left by a tensor ``break``:
    with the counter a number, a tensor with it as the Scalar argument (aten's ``remainder.Scalar``/
    ``pow.Tensor_Scalar``, whose ONNX translations read a Python number)."""

    def forward(self, x, limit):
        acc = torch.zeros_like(x)
        for t in range(6):
            acc = acc + (x.long() % (t + 1)).float() + x ** (t % 3) + x.long() ** (t % 2)
            if acc.sum() > limit:
                break
        return acc
