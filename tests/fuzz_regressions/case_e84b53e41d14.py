"""Fuzz regression (error-without-user-location): the ONNX exporter failed: RuntimeError: Attempting
to use FunctionalTensor on its own.

An index literal (``h.index_add_(1, torch.tensor([2, 3]), ...)``) and masked assignments of
numbers inside converted branches and loops are tensor constants in cond/while_loop subgraphs,
which torch.onnx 2.13 cannot decompose; the graph pass ``subgraph-constants`` builds them there.
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
        if g.abs().mean() > self.threshold:
            if ((g > -0.1).any()) or ((g > -0.1).any()):
                h.index_add_(1, torch.tensor([2, 3]), (g / (g.abs().sum(dim=-1, keepdim=True) + 1.0))[:, :2])
                g = g.clone()
                g[:, 2] = (g / (g.abs().sum(dim=-1, keepdim=True) + 1.0))[:, 0]
            else:
                h = h.clone()
                h[:, 1] = (torch.tanh(g) + g)[:, 0]
            if g.sum() > 2.0:
                steps = steps + 1
            else:
                g = torch.sqrt(g) * 1.0
        elif not (h.shape[0] > 3):
            if ((g > -1.0).any()) and (g.sum().item() > -1.0):
                g = torch.relu(g) - h * 0.0
                steps = steps + 1
            if g.sum().item() > 1.0:
                h.copy_(self.gate(h))
                h.index_add_(1, torch.tensor([0, 0]), (self.lin(h))[:, :2])
        else:
            if not ((g < 2.0).all()):
                h.copy_(self.lin(h))
            elif (g.mean() < -0.5) and ((g < 2.0).all()):
                h[h < -1.0] = 0.5
                g = g.clone()
                g[:, 0] = (torch.tanh(h) + h)[:, 0]
            else:
                g[g < -0.1] = 1.0
                steps = steps + 1
        steps = steps + 1
        h = self.lin(g)
        h = h - h.mean(dim=-1, keepdim=True)
        return (h + g).sum(dim=-1) + steps
