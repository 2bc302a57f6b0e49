"""Not a converter bug, kept to pin the fuzzer's conditioning check: the long profile's one
'mismatch' (ONNX Runtime vs eager, max abs error 4.72e+21). g = exp(40·h) - its row mean is
zero-sum, and the terms reach 1e28, so (h + g).sum(-1) is float32 rounding noise in eager
itself; a float64 run disagrees by as much. The runner classes it invalid (ill-conditioned).
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
        h = x
        g = torch.tanh(x)
        steps = 0
        if (h.sum() > 0.1) and (h.sum() > 0.1):
            g = torch.exp(h * 40.0)
            h = torch.tanh(h) + h
        else:
            h = torch.tanh(h) + h
        h = torch.tanh(g) + h
        for i in range(int(n)):
            steps = steps + 1
        g = g - g.mean(dim=-1, keepdim=True)
        return (h + g).sum(dim=-1) + steps
