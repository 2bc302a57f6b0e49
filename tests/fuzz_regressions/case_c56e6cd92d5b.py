"""Fuzz regression (mismatch, issue 26's grown-state generators): ONNX Runtime differs from
eager at batch 0 (output shape [0, 4] != [0, 2]).

``h.mean()`` of the empty batch is NaN in torch, so the while test is False and the loop never
runs; ONNX Runtime's ReduceMean of an empty tensor is 0, so the file ran two steps. Invisible
until the loop's output grew by a column a step. Fixed by the aten::mean rules
(rewrites/empty_reductions.py).
"""
# expect: equal

import torch
from torch import nn


class Gate(nn.Module):
    """A user submodule with its own data-dependent branch and early return."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(1.5))

    def forward(self, t):
        if t.mean() > 0.1:
            return t * self.scale
        return torch.tanh(t) - 0.5


class Fuzzed(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(4, 4)
        self.gate = Gate()
        self.register_buffer("threshold", torch.tensor(0.25))

    def forward(self, x, n):
        h = x.clone()
        g = torch.tanh(x)
        steps = 0
        acc = g[:, :2].clone()
        k = torch.zeros((), dtype=torch.int64)
        while (k < n) and (h.mean() < 1.0):
            k = k + 1
            h = h * 0.5 + 1.0
            acc = torch.cat([acc, h[:, 1:2]], 1)
        return acc
