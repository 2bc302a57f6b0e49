"""Fuzz regression (long profile; mismatch: ONNX Runtime failed on a searched input set with
ScatterND "invalid indice 6"). A return inside a loop inside a tensor-conditioned branch: the
select on the return flag sits in a cond branch and is lowered with where, so the rest of the
function, which writes a 6-row buffer at the loop index, also runs when the loop returned, for
trip counts past 6. Fixed by clamping traced indices into their dimension (a valid index is
unchanged; only a discarded side can hold an invalid one).
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
        h = torch.tanh(h) + g
        g = h - h.mean(dim=-1, keepdim=True)
        if (h.sum() > 2.0) and (h.sum() > 2.0):
            for i in range(int(n)):
                g = g + 0.1 * i
                if (g > 2.0).any():
                    return (g * 2.0).sum(dim=-1) + steps
                if g.sum().item() > -0.5:
                    continue
            h = torch.maximum(g, h)
        buf = torch.zeros(6, x.shape[0])
        for i in range(int(n)):
            h = h * 0.5 + 1.0
            buf[i] = h.sum(dim=-1)
        return buf.sum(dim=0) + g.sum(dim=-1)
