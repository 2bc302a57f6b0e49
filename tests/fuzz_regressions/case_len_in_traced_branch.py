"""Fuzz regression (long profile, chunk 57): 'len() of list ... is not a Python int' without a
user location, counted as a bug.

The list is grown by a for loop in the rest of the function after a loop that returns (a
torch.cond branch dynamo traces); there the probe saw elements of one size, the list got a
preallocated buffer whose Appender carried no location, and len() after the loop is refused
inside the traced branch. Every Appender now carries its loop's location, and the refusal says
where it is: 'inside a converted branch (or after a loop that returns)'.
"""

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
        if (h.sum().item() > 0.1) and (h.mean() < 0.1):
            h.index_add_(1, torch.tensor([2, 2]), (self.gate(h))[:, :2])
        elif g.sum().item() > 0.1:
            for i in range(x.shape[0]):
                if not (h.shape[0] > 3):
                    return (h * 2.0).sum(dim=-1) + steps
            for i in range(2):
                g = torch.log(h)
        else:
            for i in range(2):
                if (h.sum() > 0.5) and ((h > 0.5).any()):
                    continue
                h.clamp_(min=-1.0, max=0.5)
        if not (g.max() > h.min()):
            g = g.clone()
            g[:, 3] = (torch.relu(g) - g * -1.0)[:, 0]
            k1 = torch.zeros((), dtype=torch.int64)
            while (k1 < n + 2) and ((g > -0.5).any()):
                k1 = k1 + 1
                if (h.abs().mean() > self.threshold) or ((h > 2.0).any()):
                    continue
                if not ((g < 2.0).all()):
                    break
        else:
            g[g < 1.0] = -0.5
            h = self.gate(h)
        g = g.clone()
        g[:, 3] = (torch.exp(h * 40.0))[:, 0]
        if (h.sum().item() > 1.0) or (h.shape[0] > 3):
            g = torch.maximum(g, h)
        parts = [g[:, :1]]
        for i in range(int(n)):
            g = torch.tanh(g) * 0.9 + h * 0.1
            parts.append(g[:, :i + 1])
            if ((g < 2.0).all()) or (g.sum() > -0.5):
                break
        return torch.cat(parts, dim=1).sum(dim=-1) + len(parts)
