"""Numbers read from tensors (.item(), int(), float()) used as Python numbers in converted bodies.

Inside a ``while_loop`` body or a ``cond`` branch such a number is a 0-d tensor (or an unbacked
SymFloat), so each use below is converted to a tensor op: tensors built from it (``new_tensor``,
``as_tensor``, ``new_full``), Python's ``min``/``max``/``divmod``/``bool``/``round``, ``math``'s
functions, and ``roll`` by it. The refused ones say which use, at which line.
"""

import itertools
import math

import torch
from torch import nn


class NextTokenAsNewTensor(nn.Module):
    """kospeech's RNN-T decode: ``tok = x.new_tensor([[int(row.argmax().item())]])`` fed back as the
    next step's input; ``as_tensor``, ``new_full`` and a float ``new_tensor`` of the same numbers;
    the loop ends at token 0 (a break), at ``steps``, or not at all."""

    def forward(self, table, steps):
        tok = table.new_tensor([[1]], dtype=torch.long)
        total = torch.zeros(1, 1, dtype=torch.long)
        scores = table.new_zeros(2)
        i = torch.zeros((), dtype=torch.long)
        while i < steps:
            k = int(table[tok[0, 0]].argmax().item())
            tok = table.new_tensor([[k]], dtype=torch.long)
            total = total * 10 + tok + torch.as_tensor([[k]]) + table.new_full((1, 1), k, dtype=torch.long)
            scores = scores + table.new_tensor([table[k, k].item(), float(k)])
            if k == 0:
                break
            i = i + 1
        return total, scores, i


class NumbersReadInBranch(nn.Module):
    """``x.new_tensor([[k, n]])`` and ``x.new_tensor([math.sqrt(f), f])`` of numbers read inside a
    branch lowered to ``cond`` (``math.sqrt`` of a SymFloat there has no ONNX translation)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = torch.zeros(1, 2, dtype=torch.long)
        z = torch.zeros(2)
        if x.sum() > 0:
            h = self.lin(x)
            k = int(h[:, 0].argmax().item())
            f = h.abs().max().item()
            y = x.new_tensor([[k, x.shape[0]]], dtype=torch.long)
            z = x.new_tensor([math.sqrt(f), f])
        return y, z


class MinMaxOfReadNumbers(nn.Module):
    """``x[max(k - 1, 0)]``, ``x[min(k + 1, n - 1)]`` (clamped neighbours of a position read from
    the data), ``min([k, 2])`` of a list, and ``min``/``max`` of a float read with ``.item()``."""

    def forward(self, x, n):
        acc = torch.zeros(x.shape[1])
        for _ in range(int(n)):
            k = x[:, 0].argmax().item()
            f = x[:, 1].max().item()
            lo, hi = max(k - 1, 0), min(k + 1, x.shape[0] - 1)
            acc = acc + x[lo] + x[hi] * min(f, 0.5) + max(f, -0.25) + min([k, 2])
            x = x.roll(1, 0)
        return acc


class MinMaxOfSizesInLoop(nn.Module):
    """``max(n - 3, 1)`` and ``min(n, 4)`` of a size in a loop body: torch.export traces the builtin
    ``max`` of symbolic numbers in a ``while_loop`` body as ``sym_min`` (a wrong file); ``_fx.max_``
    calls ``torch.sym_max`` itself."""

    def forward(self, x, steps):
        acc = torch.zeros(x.shape[1])
        i = torch.zeros((), dtype=torch.long)
        while i < steps:
            acc = acc + max(x.shape[0] - 3, 1) + min(x.shape[0], 4) * 10 + x[i % 2]
            i = i + 1
        return acc


class DivmodBoolRound(nn.Module):
    """``q, r = divmod(k + i, 3)``, ``if bool(r):`` and ``round(k / 2)`` of a position read in the body."""

    def forward(self, x, n):
        acc = torch.zeros(x.shape[1])
        for i in range(int(n)):
            k = x[:, 0].argmax().item()
            q, r = divmod(k + i, 3)
            if bool(r):
                acc = acc + x[min(q, x.shape[0] - 1)] * r
            else:
                acc = acc - round(k / 2)
            x = x.roll(1, 0)
        return acc


class MathOfReadNumbers(nn.Module):
    """``math.sqrt``/``log``/``exp``/``ceil`` of a float read with ``.item()``, ``math.floor`` of a
    position read from the data divided by 2; a ``math.isnan`` test."""

    def forward(self, x, steps):
        acc = torch.zeros(x.shape[1])
        i = torch.zeros((), dtype=torch.long)
        while i < steps:
            f = x.abs().max().item()
            k = x[:, 0].argmax().item()
            acc = acc + math.sqrt(f) + math.log(f + 1.0) * math.exp(-f) + math.floor(k / 2) + math.ceil(f)
            if math.isnan(f):
                acc = acc * 0
            x = x * 0.5
            i = i + 1
        return acc


class RollByReadNumber(nn.Module):
    """``x.roll(k, 0)`` and ``torch.roll(y, -k)`` (flattened) by a position read in the body."""

    def forward(self, x, steps):
        y = x * 1.0
        i = torch.zeros((), dtype=torch.long)
        while i < steps:
            k = int(x[:, 0].argmin())
            x = x.roll(k, 0) + 1
            y = torch.roll(y, -k) * 0.5 + x
            i = i + 1
        return x, y


class TolistOfDataLength(nn.Module):
    """speechbrain's ctc_greedy_decode: ``seq.narrow(0, 0, int(...)).argmax(-1).tolist()``, a list
    as long as a number read from a tensor says, measured with len() (held as the tensor: converts)."""

    def forward(self, x, lens):
        outs = []
        for row, n in zip(x, lens):
            k = int(torch.round(n * x.shape[1]))
            labels = row.narrow(0, 0, k).argmax(-1).tolist()
            outs.append(len(labels))
        return torch.tensor(outs)


class TolistOfDataLengthGrouped(nn.Module):
    """The same list read with ``itertools.groupby`` (an iteration outside a for statement:
    refused at that line)."""

    def forward(self, x, lens):
        outs = []
        for row, n in zip(x, lens):
            k = int(torch.round(n * x.shape[1]))
            labels = row.narrow(0, 0, k).argmax(-1).tolist()
            outs.append(len([g for g, _ in itertools.groupby(labels)]))
        return torch.tensor(outs)


class RangeOfReadNumberAsValue(nn.Module):
    """``sum(range(k))``: ``range`` outside a for header needs a Python int (refused at its line)."""

    def forward(self, x, steps):
        acc = torch.zeros(())
        i = torch.zeros((), dtype=torch.long)
        while i < steps:
            k = x.argmax().item()
            acc = acc + sum(range(k))
            i = i + 1
        return acc


class FormattedReadFloat(nn.Module):
    """``"%.3f" % f``: string formatting needs a Python float (refused at its line)."""

    def forward(self, x, steps):
        acc = torch.zeros(())
        i = torch.zeros((), dtype=torch.long)
        while i < steps:
            f = x.max().item()
            acc = acc + len("%.3f" % f)
            i = i + 1
        return acc


class ShadowedBuiltins(nn.Module):
    """``min``, ``round`` and ``math`` names that are not the builtins where they are called."""

    def forward(self, x, y):
        min = torch.minimum  # noqa: A001 (the point: a local named like the builtin)
        round = torch.round  # noqa: A001
        return min(x, y), round(x * 2)
