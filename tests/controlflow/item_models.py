"""Models whose control flow reads Python numbers from tensors (.item())."""

import torch
from torch import nn


class ItemInsideTracedBranch(nn.Module):
    def forward(self, x):
        g = x
        if x.mean() > 0:
            g = torch.exp(g)
            if g.sum().item() > 0.5:
                g = g * 2
        return g


class ItemAtTopLevel(nn.Module):
    def forward(self, x):
        if x.sum().item() > 0:
            return x * 2
        return x - 1
