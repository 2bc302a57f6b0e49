"""Not a converter bug, kept to pin the fuzzer's rounding-noise check: the long profile's
mismatch of 1.58e29 (= 2^97, one float32 ulp of a 2e36 term) on one input set. g[:, 3] =
exp(40·h) reaches 2e36 and g - g.mean(-1) is then summed: zero in exact arithmetic, and float32
eager's order happens to cancel it exactly, so float32 and float64 eager agree (both 0) and the
first check passed it. Float64 runs with float32-sized rounding noise at every op show the output
is rounding: the runner classes it invalid (ill-conditioned).
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
        for i in range(x.shape[0]):
            h = torch.tanh(g) + h
            g = g.clone()
            g[:, 3] = (torch.exp(h * 40.0))[:, 0]
        if g.shape[0] > 3:
            g = g - g.mean(dim=-1, keepdim=True)
            for i in range(int(n)):
                h = h.clone()
                h[:, 1] = (torch.sqrt(g) * 0.0)[:, 0]
        else:
            if (h.mean() < 1.0) or (h.mean() < 1.0):
                steps = steps + 1
                steps = steps + 1
            g = self.gate(h)
        if not (h.sum() > -0.5):
            steps = steps + 1
        else:
            k1 = torch.zeros((), dtype=torch.int64)
            while (k1 < n + 2) and (not ((g > 0.5).any())):
                k1 = k1 + 1
                if (h.sum().item() > 0.5) or ((h < 2.0).all()):
                    continue
                if (h < 2.0).all():
                    continue
        buf = torch.zeros(6, x.shape[0])
        k = torch.zeros((), dtype=torch.int64)
        while (k < n) and (not (g.abs().mean() > self.threshold)):
            h = h * 0.5 + 1.0
            buf[k] = h.sum(dim=-1)
            k = k + 1
        return buf.sum(dim=0) + g.sum(dim=-1)
