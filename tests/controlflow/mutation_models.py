"""Branches and loop bodies that write tensors in place (issue 13: mutation is state)."""

import torch
from torch import nn


class ScaleInPlace(nn.Module):
    def forward(self, x):
        y = x.clone()
        if y.mean() > 0:
            y.mul_(3)
        return y


class AccumulateInto(nn.Module):
    def forward(self, x):
        out = torch.zeros_like(x)
        if x.sum() > 0:
            out.add_(x)
        return out


class SubscriptWrites(nn.Module):
    """Int, slice, mask and augmented subscript assignment in both branches."""

    def forward(self, x):
        h = x * 2
        m = x > 0.5
        if h.sum() > 0:
            h[0] = 0
            h[:, 0] += 1
        else:
            h[m] = 1
        return h


class FunctionFormInPlace(nn.Module):
    def forward(self, x):
        h = x + 1
        if h.mean() > 0:
            torch.relu_(h)
        return h


class IndexedUpdates(nn.Module):
    def forward(self, x):
        out = torch.zeros_like(x)
        rows = torch.zeros(x.shape[0], dtype=torch.long)  # every row into row 0
        if x.max() > 1:
            out.index_add_(0, rows, x)
        else:
            out.masked_fill_(x < 0, -1.0)
        return out * 2


class WriteAtLoopIndex(nn.Module):
    """out[i] = … inside a loop whose trip count comes from data."""

    def forward(self, x, n):
        out = torch.zeros_like(x)
        i = torch.tensor(0)
        while i < n:
            out[i] = x[i] * 2
            i = i + 1
        return out


class AccumulateInLoop(nn.Module):
    def forward(self, x):
        out = torch.zeros_like(x)
        k = 0
        while x[k:].sum() > 0 and k < 5:
            out.add_(x[k])
            k += 1
        return out
