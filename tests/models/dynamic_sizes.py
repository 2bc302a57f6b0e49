"""Models whose behaviour depends on the size of a dynamic dimension (tests/test_dynamic_sizes.py)."""

import torch
from torch import nn
from torch._higher_order_ops.map import map as functorch_map


class Center(nn.Module):
    """The issue's headline: batch 1 takes the other branch."""

    def forward(self, x):
        if x.shape[0] > 1:
            return x - x.mean(0, keepdim=True)
        else:
            return x * 2


class SingleColumn(nn.Module):
    """``x.size(1) == 1``: a size equality, axis 1."""

    def forward(self, x):
        if x.size(1) == 1:
            return x * 3
        return torch.softmax(x, dim=1)


class MixBatch(nn.Module):
    """A size condition with an expensive branch (a submodule call): torch.cond, ONNX If."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.mix = nn.Linear(4, 4)

    def forward(self, x):
        if x.shape[0] > 1:
            y = self.mix(x - x.mean(0, keepdim=True))
        else:
            y = x
        return y + 1


class Halving(nn.Module):
    """``n = x.shape[0]; while n > 1``: a loop whose trip count is log2 of the batch."""

    def forward(self, x):
        n = x.shape[0]
        steps = 0
        while n > 1:
            n = n // 2
            steps += 1
        return x * steps


class RowSum(nn.Module):
    """``for row in x`` over a dynamic first dimension."""

    def forward(self, x):
        acc = torch.zeros(x.shape[1])
        for row in x:
            acc = acc + row * row
        return acc


class MapRows(nn.Module):
    """functorch's ``map`` over the rows (ONNX Scan)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = nn.Linear(3, 4)

    def forward(self, x, scale):
        return functorch_map(lambda row, s: torch.relu(self.proj(row)) * s, x, scale)


class SameEitherWay(nn.Module):
    """A size branch whose sides agree: narrowing it (no control-flow conversion) is harmless."""

    def forward(self, x):
        if x.shape[0] > 1:
            return x + x
        return x * 2


class Conv(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.relu(self.conv(x)).flatten(1)


class SelfAttention(nn.Module):
    """nn.MultiheadAttention: its graph is valid for sequence lengths ≥ 2 only (0/1 specialisation)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


class Pinned(nn.Module):
    """Pins its batch to 2 (reshape to a constant shape): the batch cannot be dynamic."""

    def forward(self, x):
        return x.reshape(2, 6)


class ScaledAttention(nn.Module):
    """A size condition before nn.MultiheadAttention, which the size-oblivious capture refuses:
    the classic capture decides the condition for sequences ≥ 2."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, x):
        if x.shape[1] > 1:
            x = x * 2
        return self.attn(x, x, x, need_weights=False)[0]


class Windows(nn.Module):
    """swin's stage in small: pads the rows to 7-row windows and shifts them where there are
    three windows or more (sizes from 15 on); doubles them otherwise."""

    def forward(self, x):
        y = nn.functional.pad(x, (0, 0, 0, (7 - x.shape[1] % 7) % 7))
        return y.roll(3, 1) if y.shape[1] // 7 > 2 else y * 2
