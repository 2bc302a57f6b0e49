"""Fuzz regression (long profile; mismatch on fxport's own search set "values ×100", max abs
error 0: eager NaN, ONNX Runtime finite). With x ×100 and n ×100 the first loop doubles g 128
times to ±inf in eager but stops at ±2^127 in ONNX Runtime: g.mean() of ±2^127 values
overflows or not by summation order, and decides the loop exit. Not a converter bug but a
search set outside the model's values; fixed by not using search variations on which eager
overflows (inf/NaN outputs where every other set's were finite).
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
        k0 = torch.zeros((), dtype=torch.int64)
        while (k0 < n + 2) and (g.mean() < 0.5):
            k0 = k0 + 1
            h = torch.tanh(h) + h
            g.mul_(2.0)
        h = self.gate(h)
        if (g.sum() > -0.1) and (g.sum() > -0.1):
            k1 = torch.zeros((), dtype=torch.int64)
            while (k1 < n + 2) and (not (h.shape[0] > 3)):
                k1 = k1 + 1
                if not (h.abs().mean() > self.threshold):
                    return (g * 2.0).sum(dim=-1) + steps
                if not (h.mean() < -1.0):
                    return (h * 2.0).sum(dim=-1) + steps
            k1 = torch.zeros((), dtype=torch.int64)
            while (k1 < n + 2) and ((h.abs().mean() > self.threshold) or (h.sum() > 1.0)):
                k1 = k1 + 1
                h = h.clone()
                h[:, 0] = (torch.tanh(g) + g)[:, 0]
                h.add_(g * 1.0 + h)
        else:
            k1 = torch.zeros((), dtype=torch.int64)
            while k1 < n:
                k1 = k1 + 1
                h[h < -0.5] = 1.0
                if not (g.mean() < 0.5):
                    continue
        g.copy_(torch.maximum(g, g))
        if not (g.max() > h.min()):
            return (h * 2.0).sum(dim=-1)
        return (h + g).sum(dim=-1)
