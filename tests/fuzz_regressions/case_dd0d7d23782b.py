"""Fuzz regression (clear error on a valid program): torch.export failed: RuntimeError: Output 0
of Slice is a view and is being modified inplace. This view is the output of a function that
returns multiple views.

``view = h[:, 1:3]; view.mul_(1.0)`` after a converted while loop writes into a view of a
while_loop output, which autograd refuses for the outputs of a multi-output op. The outputs of
converted loops and conds are now fresh tensors (an Identity in ONNX, folded away).
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
        for i in range(2):
            h = torch.relu(h) - g * -1.0
            h = self.lin(h)
        k0 = torch.zeros((), dtype=torch.int64)
        while (k0 < n + 2) and (((h > -1.0).any()) or (h.shape[0] > 3)):
            k0 = k0 + 1
            if g.mean() < 2.0:
                continue
            if g.max() > h.min():
                steps = steps + 1
            elif (h.sum().item() > -0.1) or ((h > -0.1).any()):
                h = self.lin(g)
            else:
                torch.relu_(g)
                if (h.mean() < 1.0) and (h.abs().mean() > self.threshold):
                    break
        view = h[:, 1:3]
        view.mul_(1.0)
        g = g.clone()
        g[:, 3] = (self.lin(g))[:, 0]
        outs = []
        for i in range(int(n) + 1):
            h = torch.tanh(h) * 0.9
            outs.append(h.sum(dim=-1))
        return torch.stack(outs).sum(dim=0) + h.sum(dim=-1)

