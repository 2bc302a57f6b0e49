"""Fuzz regression (error-without-user-location): the ONNX exporter failed: PendingUnbackedSymbolNotFound: Pending unbacked symbols {zuf13} not in returned outputs [FakeTensor(..., size=(s77, 4)), FakeTensor(..., size=(s77, 4)), FakeTensor(..., size="""
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
        if not (g.sum().item() > 1.0):
            if not (h.max() > g.min()):
                h = self.lin(h)
            if h.sum().item() > 0.0:
                g = g * 0.0 + h
        h = torch.log(h)
        return (h + g).sum(dim=-1)
