"""Fuzz regression (error-without-user-location): the ONNX exporter failed: RuntimeError: Attempting
to use FunctionalTensor on its own.

A masked assignment of a number (``h[h < c] = v``) inside a data-dependent loop is an index_put
of a 0-d tensor constant in the while_loop body; torch.onnx 2.13 cannot decompose a subgraph
holding a tensor constant. The graph pass ``subgraph-constants`` (rewrites/subgraph_constants.py)
now builds such constants with ops in the subgraph.
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
        steps = steps + 1
        steps = steps + 1
        for i in range(2):
            for i in range(x.shape[0]):
                g = torch.tanh(g) + h
                g.add_(torch.relu(g) - g * -0.5)
            k1 = torch.zeros((), dtype=torch.int64)
            while k1 < n:
                k1 = k1 + 1
                h[h < 2.0] = 1.0
        buf = torch.zeros(6, x.shape[0])
        for i in range(int(n)):
            g = g * 0.5 + 1.0
            buf[i] = g.sum(dim=-1)
        return buf.sum(dim=0) + g.sum(dim=-1)
