"""Fuzz regression (long profile; mismatch on fxport's own search set "values ×10", max abs
error 4.72e21). The search scaled x so far that exp(40·g) overflows float32 in eager, and the
rest of the program is decided by inf/NaN arithmetic; the same fix as case_0c8dabc9e4c1:
search variations on which eager overflows are not used (the unreached sides are warnings).
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
        g = h / (g.abs().sum(dim=-1, keepdim=True) + 1.0)
        if ((h > 1.0).any()) or (h.abs().mean() > self.threshold):
            if (g.abs().mean() > self.threshold) or (g.max() > h.min()):
                g = torch.exp(g * 40.0)
                h = g - g.mean(dim=-1, keepdim=True)
            elif (h.max() > g.min()) and ((h > 2.0).any()):
                g = self.lin(g)
                h = g * 2.0 + g
            else:
                g = g.clone()
                g[:, 2] = (torch.tanh(h) + g)[:, 0]
            steps = steps + 1
        else:
            if (h.shape[0] > 3) or (h.mean() < 2.0):
                h = h.clone()
                h[:, 2] = (h - h.mean(dim=-1, keepdim=True))[:, 0]
            elif (h.shape[0] > 3) or ((h < 2.0).all()):
                g = torch.sqrt(h) * 0.0
                h = torch.log(h)
            else:
                h = h.clone()
                h[:, 3] = (g - g.mean(dim=-1, keepdim=True))[:, 0]
            steps = steps + 1
        g = self.lin(h)
        outs = [h.sum(dim=-1)]
        k = torch.zeros((), dtype=torch.int64)
        while (k < n) and (not (h.max() > g.min())):
            k = k + 1
            g = torch.tanh(g) * 0.9
            outs.append(g.sum(dim=-1))
        return torch.stack(outs).sum(dim=0) + g.sum(dim=-1)
