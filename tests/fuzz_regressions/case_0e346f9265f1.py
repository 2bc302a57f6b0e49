"""Fuzz regression (error-without-user-location): the ONNX exporter failed: PendingUnbackedSymbolNotFound: Pending unbacked symbols {u12} not in returned outputs [FakeTensor(..., size=(s77, 4)), FakeTensor(..., size=(s77, 4)), FakeTensor(..., size=(4"""
# expect: equal

import torch
from torch import nn


class Fuzzed(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(4, 4)
        self.register_buffer("threshold", torch.tensor(0.25))

    def forward(self, x, n):
        h = x
        g = torch.tanh(x)
        for i in range(int(n)):
            if (h.mean() < 2.0) and (h.sum().item() > 2.0):
                break
        for i in range(int(n)):
            h = h + 0.1 * i
            h = torch.tanh(g) + g
        h = torch.exp(h * 40.0)
        if (h.sum() > 2.0) and (h.max() > g.min()):
            k = torch.zeros((), dtype=torch.int64)
            while k < n:
                k = k + 1
                h = g / (h.abs().sum(dim=-1, keepdim=True) + 1.0)
                h = self.lin(g)
            k = torch.zeros((), dtype=torch.int64)
            while k < n:
                k = k + 1
                g = torch.maximum(h, h)
                h = g - g.mean(dim=-1, keepdim=True)
        buf = torch.zeros(6, x.shape[0])
        for i in range(int(n)):
            g = g * 0.5 + 1.0
            buf[i] = g.sum(dim=-1)
        return buf.sum(dim=0) + g.sum(dim=-1)
