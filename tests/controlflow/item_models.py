"""Models whose control flow reads Python numbers from tensors (.item())."""

import torch
from torch import nn


class ItemInsideTracedBranch(nn.Module):
    def forward(self, x):
        g = x
        if x.mean() > 0:
            g = torch.exp(g)
            if g.sum().item() > 30.0:
                g = g * 2
            else:
                g = g - 100
        return g


class ItemPredicateInsideLoop(nn.Module):
    def forward(self, x, n):
        for _ in range(int(n)):
            if x.sum().item() > 3.0:
                x = x * 0.5
            else:
                x = x + 1.0
        return x


class ItemValueInsideLoop(nn.Module):
    def forward(self, x, n):
        for _ in range(int(n)):
            x = x * float(x.max().item())
        return x


class ItemAtTopLevel(nn.Module):
    def forward(self, x):
        if x.sum().item() > 0:
            return x * 2
        return x - 1


class ItemPredicatesInBranchWithParameters(nn.Module):
    """A cond branch that reads parameters and branches on .item() (fuzzer find, seed 0)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = x
        g = torch.tanh(x)
        if g.sum().item() > 1.0:
            h = self.lin(h)
            if h.sum().item() > -4.0:
                g = g * 0.0 + h
        return (h + g).sum(dim=-1)


class ItemAgainstUnrepresentableConstant(nn.Module):
    def forward(self, x):
        if x.sum().item() > 0.99999999:  # 1.0 > 0.99999999 in Python; float32(0.99999999) == 1.0
            return x * 2
        return x - 1


class ItemRangeThenShapeCondWithParameters(nn.Module):
    """range(int(n)) reads n with .item(); a later cond with parameters made the exporter's
    re-run fail on that symbol while autograd was on (fuzzer find, seed 0)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(4, 4)

    def forward(self, x, n):
        h = x
        for i in range(int(n)):
            h = h + 0.1 * i
        g = self.lin(h)
        if not (g.shape[0] > 3):
            if (h > 0.5).any():
                g = torch.exp(h * 4.0)
            else:
                g = torch.relu(h) - h * 0.5
        return (h + g).sum(dim=-1)
