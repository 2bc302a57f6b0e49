"""Fuzz regression (error-without-user-location): the ONNX exporter failed: PendingUnbackedSymbolNotFound: Pending unbacked symbols {u3} not in returned outputs [FakeTensor(..., size=(s77, 4), requires_grad=True), FakeTensor(..., size=(s77, 4))] .; r"""
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
            g = g + 0.1 * i
            h = torch.maximum(h, g)
        g = self.lin(h)
        if not (g.shape[0] > 3):
            if ((h < 2.0).all()) or ((h > 0.5).any()):
                h = torch.sqrt(g) * -0.5
                g = torch.exp(h * 40.0)
            elif not ((h > 0.5).any()):
                g = torch.sqrt(h) * -1.0
            else:
                g = torch.exp(h * 40.0)
                g = torch.relu(h) - h * 0.5
        return (h + g).sum(dim=-1)
