"""Not a converter bug, kept to pin the runner's check of fxport's own input sets: the long
profile's mismatch "on 1 of 12 input sets (first: random, max abs error 6)". h.copy_(exp(40·g))
then h - h.mean(-1): on the "random" set fxport draws, float32 eager gives 6.93 where float64
gives 0.93 (ONNX Runtime 0.93), and float64 runs with float32-sized rounding noise give either.
The runner's own input sets are well conditioned, so the first check passed it; on a
verification mismatch the runner now rebuilds the failed sets fxport made (generated, or searched
from the example) and checks them too, and classes it invalid (ill-conditioned).
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
        steps = steps + 1
        if not (h.shape[0] > 3):
            if (g.abs().mean() > self.threshold) and (g.mean() < -0.5):
                g.masked_fill_(g > -1.0, 0.0)
                h.copy_(torch.maximum(g, g))
            else:
                h = h.clone()
                h[:, 3] = (g - g.mean(dim=-1, keepdim=True))[:, 0]
        elif (g < 2.0).all():
            steps = steps + 1
            h.copy_(torch.exp(g * 40.0))
        else:
            k1 = torch.zeros((), dtype=torch.int64)
            while k1 < n:
                k1 = k1 + 1
                h.clamp_(min=-1.0, max=0.5)
                if ((h < 2.0).all()) or (h.mean() < -0.5):
                    break
        k0 = torch.zeros((), dtype=torch.int64)
        while (k0 < n + 2) and (not (g.shape[0] > 3)):
            k0 = k0 + 1
            if (g.mean() < 0.5) or (g.mean() < 0.5):
                steps = steps + 1
            else:
                if (h < 2.0).all():
                    return (h * 2.0).sum(dim=-1) + steps
            if not ((g < 2.0).all()):
                g = g.clone()
                g[:, 2] = (torch.tanh(h) + g)[:, 0]
            else:
                h = h - h.mean(dim=-1, keepdim=True)
                g.clamp_(min=-1.0, max=-0.5)
        buf = torch.zeros(6, x.shape[0])
        k = torch.zeros((), dtype=torch.int64)
        while (k < n) and ((h.shape[0] > 3) or (h.mean() < 1.0)):
            h = h * 0.5 + 1.0
            buf[k] = h.sum(dim=-1)
            k = k + 1
        return buf.sum(dim=0) + g.sum(dim=-1)
