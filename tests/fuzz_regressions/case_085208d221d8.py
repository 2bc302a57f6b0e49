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
        for i in range(int(n)):
            h = h + 0.1 * i
            h[h < -1.0] = 0.5
            k1 = torch.zeros((), dtype=torch.int64)
            while k1 < n:
                k1 = k1 + 1
                if (g.sum() > -1.0) and (g.sum().item() > -1.0):
                    continue
        if not ((g > 1.0).any()):
            g.copy_(self.gate(h))
            for i in range(2):
                steps = steps + 1
                if (h.sum().item() > -0.1) or (h.shape[0] > 3):
                    return (g * 2.0).sum(dim=-1) + steps
        h = g - g.mean(dim=-1, keepdim=True)
        buf = torch.zeros(6, x.shape[0])
        k = torch.zeros((), dtype=torch.int64)
        while (k < n) and ((h.shape[0] > 3) and (h.sum().item() > 2.0)):
            g = g * 0.5 + 1.0
            buf[k] = g.sum(dim=-1)
            k = k + 1
        return buf.sum(dim=0) + g.sum(dim=-1)
