"""Models whose float32 results carry rounding noise above fxport's fixed tolerances: the verdict
must judge them against a float64 run (tests/test_verdict.py)."""

import torch
from torch import nn


class Cancellation(nn.Module):
    """The same values summed in two orders and subtracted: 0 in exact arithmetic, float32 noise
    of order 1e-1 here; then a branch on the data and a data-dependent loop (If / Loop)."""

    def forward(self, x, steps):
        big = x * 1e4
        noise = big.sum(-1) - big.flip(-1).sum(-1)
        if x.mean() > 0:
            y = x * 3.0
        else:
            y = x - 5.0
        i = torch.zeros((), dtype=torch.int64)
        while i < steps:
            y = y + 1.0
            i = i + 1
        return noise, y
