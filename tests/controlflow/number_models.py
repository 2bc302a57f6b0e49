"""Numbers read from tensors (.item(), int(), float()) inside converted bodies (issue 13, item 4).

Inside a cond branch or a while_loop body such a number stays a 0-d tensor, so it can be a
loop bound, an index or a factor without a guard on its value.
"""

import torch
from torch import nn


class RangeOfIntInBranch(nn.Module):
    """``n = int(x.sum())`` then ``for i in range(n)`` inside a tensor branch."""

    def forward(self, x):
        y = x * 1.0
        if x.mean() > 0:
            n = int(x.sum())
            for i in range(n):
                y = y + i
        else:
            y = y - 1
        return y


class ArgmaxItemIndexInWhile(nn.Module):
    """``k = x.argmax().item(); y = x[k]`` inside a data-dependent while body."""

    def forward(self, x, steps):
        acc = torch.zeros_like(x[0])
        i = torch.zeros((), dtype=torch.long)
        while i < steps:
            k = x[:, 0].argmax().item()
            acc = acc + x[k]
            x = x * 0.5
            i = i + 1
        return acc


class FloatScaleInBranch(nn.Module):
    """``s = float(x.mean()); y = y * s`` in a branch."""

    def forward(self, x):
        y = x + 1
        if x.sum() > 0:
            s = float(x.mean())
            y = y * s
        return y


class FloatScaleInExpensiveBranch(nn.Module):
    """The same read in a branch that becomes a cond (it calls a submodule)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = x + 1
        if x.sum() > 0:
            s = float(x.mean())
            y = self.lin(y) * s
        return y


class IndexReadInForBody(nn.Module):
    """An index read from a tensor inside a ``for i in range(int(t))`` body."""

    def forward(self, x, idx, n):
        acc = torch.zeros_like(x[0])
        for i in range(int(n)):
            j = int(idx[i])
            acc = acc + x[j] * (i + 1)
        return acc


class TruncatingIntInBranch(nn.Module):
    """``int()`` truncates toward zero (-2.7 → -2) and ``float()`` of an int tensor is a float."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(4, 4)

    def forward(self, x, c):
        y = self.lin(x)
        if x.sum() > 0:
            k = int(x[0, 0] * 3)
            f = float(c) / 4
            y = self.lin(y) + k + f
        return y


class ItemComparisonInLoop(nn.Module):
    """A number read in a loop body, compared and used in arithmetic: ``if s > 0.5``."""

    def forward(self, x, n):
        for _ in range(int(n)):
            s = x.max().item()
            x = x * s if s < 2.0 else x - s
        return x


class TolistOfScalarInBody(nn.Module):
    def forward(self, x, n):
        for _ in range(int(n)):
            m = x.abs().max().tolist()
            x = x / (m + 1)
        return x


class ItemIndexInBranch(nn.Module):
    """``k = x.argmax().item(); y = x[k]`` inside a cond branch."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = x[0] * 0
        if x.sum() > 0:
            k = x[:, 0].argmax().item()
            y = self.lin(x[k])
        return y


class SliceBoundInLoop(nn.Module):
    """A slice bound read from a tensor inside a loop body, reduced afterwards."""

    def forward(self, x, n):
        acc = torch.zeros(x.shape[1])
        for i in range(int(n)):
            k = int(x[i, 0] > 0) + 1
            acc = acc + x[:k].sum(0)
        return acc


class ItemAccumulatorInLoop(nn.Module):
    """A 0-d float32 accumulator plus a float read in the body keeps its dtype (Python: float32)."""

    def forward(self, x, n):
        total = torch.zeros(())
        for i in range(int(n)):
            total = total + float(x[i].max()) * 0.5
        return total


class NumbersAtTopLevel(nn.Module):
    """Outside converted bodies, numbers read from tensors are Python numbers as before."""

    def forward(self, x, n):
        k = int(n)
        scale = float(x.mean())
        return x[:, :k] * scale


class ListSizedByReadNumber(nn.Module):
    """A Python list sized by a number read in a loop body: no tensor op can stand for it."""

    def forward(self, x, n):
        acc = x
        for _ in range(int(n)):
            k = int(x.sum())
            acc = acc + len([0] * k)
        return acc


class FloatOfItemAtTopLevel(nn.Module):
    def forward(self, x, s):
        f = float(s.item())
        return x * f + 1


class CutoffAtTopLevel(nn.Module):
    """BlinkDL/ChatRWKV ``sample_logits``'s top-p: a float read from a tensor as a mask's threshold."""

    def forward(self, logits):
        probs = torch.softmax(logits, dim=-1)
        sorted_probs = torch.sort(probs, descending=True)[0]
        cumulative_probs = torch.cumsum(sorted_probs, dim=-1)
        cutoff = float(sorted_probs[torch.argmax((cumulative_probs > 0.8).int())])
        probs[probs < cutoff] = 0
        return probs / torch.sum(probs), torch.argmax(probs) * (1 + cutoff)  # an int tensor times a float read


class IndexWriteBesideIndexTensors(nn.Module):
    """``path[rows, idx, j] = 1`` and ``direction[rows, idx, j]`` with a traced counter ``j``
    beside index tensors, counting down (coqui-ai/TTS ``maximum_path_numpy``'s backtrack)."""

    def forward(self, direction, n):
        b, t_x, t_y = direction.shape
        path = torch.zeros(direction.shape)
        idx = torch.full((b,), t_x - 1, dtype=torch.long)
        rows = torch.arange(b)
        for j in reversed(range(int(n))):
            path[rows, idx, j] = 1
            idx = (idx + direction[rows, idx, j] - 1).clamp(min=0)
        return path, idx


class DataOfTensorInLoop(nn.Module):
    """``t.data`` of a tensor from outside a loop body whose state grows, as the PyTorch tutorial's
    greedy decoder writes ``torch.ones(1, 1).type_as(src.data).fill_(next_word)``."""

    def forward(self, src, table):
        ys = torch.ones(1, 1).fill_(2).type(torch.long)
        for i in range(src.shape[0] + 2):
            _, next_word = torch.max(table[ys[-1]] + src.data.sum(), dim=1)
            next_word = next_word.item()
            ys = torch.cat([ys, torch.ones(1, 1).type_as(src.data).fill_(next_word)], dim=0)
            if next_word == 3:
                break
        return ys


class IntOfNumpyInLoop(nn.Module):
    """``int(t.numpy())`` in a loop body: the number is read from ``t`` itself (AllenNLP's
    ``int(best_path.numpy())``)."""

    def forward(self, x, steps):
        acc = torch.zeros_like(x[0])
        i = torch.zeros((), dtype=torch.long)
        while i < steps:
            k = int(x[:, 0].argmax().numpy())
            acc = acc + x[k] * (i + 1)
            x = x.roll(1, 0)
            i = i + 1
        return acc


class NumpyArrayInLoop(nn.Module):
    """``.numpy()`` kept as an array in a loop body: nothing in an ONNX file can hold it."""

    def forward(self, x, steps):
        i = torch.zeros((), dtype=torch.long)
        while i < steps:
            x = torch.from_numpy(x.numpy() * 2)
            i = i + 1
        return x


class AllcloseOfBroadcastShapesInLoop(nn.Module):
    """``torch.allclose(a, b)`` of a 0-d and a (1,) tensor ends a loop (cockpit's power
    iteration compares ``torch.Tensor([inf])`` with a norm): allclose broadcasts them."""

    def forward(self, x, target, steps):
        i = torch.zeros((), dtype=torch.long)
        while i < steps:
            x = x * 0.5
            if torch.allclose(x.abs().max(), target, atol=1e-3):
                break
            i = i + 1
        return x, i


class ListIndexedByCounter(nn.Module):
    """A Python list of numbers (``t.tolist()``) indexed by a loop's traced counter."""

    def forward(self, x, steps):
        values = x.tolist()
        acc = torch.zeros(())
        i = torch.zeros((), dtype=torch.long)
        while i < steps:
            acc = acc + values[i]
            i = i + 1
        return acc
