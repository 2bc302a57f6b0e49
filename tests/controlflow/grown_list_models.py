"""Models that grow a list inside a data-dependent loop and stack/cat it after (issue 13)."""

import torch
from torch import nn


class WhileStack(nn.Module):
    """Halve until small; stack every step (trip count from data, empty list before)."""

    def forward(self, x):
        parts = [x]
        while x.abs().sum() > 1.0:
            x = x * 0.5
            parts.append(x)
        return torch.stack(parts)


class WhileStackNegativeDim(nn.Module):
    def forward(self, x, n):
        parts = [x * 0]
        i = torch.zeros((), dtype=torch.int64)
        while i < n:
            parts.append(x + i)
            i = i + 1
        return torch.stack(parts, dim=-1), i


class WhileCat(nn.Module):
    """Fixed-shape elements concatenated on a negative dimension."""

    def forward(self, x, n):
        parts = [x]
        i = torch.zeros((), dtype=torch.int64)
        while i < n:
            x = torch.tanh(x + 1)
            parts.append(x)
            i = i + 1
        return torch.cat(parts, dim=-1)


class WhileCatPrefixes(nn.Module):
    """parts.append(x[:k]) with k changing each iteration: rows vary between iterations."""

    def forward(self, x, n):
        parts = [x[:1]]
        k = torch.ones((), dtype=torch.int64)
        while k <= n:
            parts.append(x[:k] * k)
            k = k + 1
        return torch.cat(parts)


class WhileCatMasked(nn.Module):
    """parts.append(x[mask]): rows chosen by data, a different count each iteration."""

    def forward(self, x, n):
        parts = [x[:0]]
        t = torch.zeros((), dtype=x.dtype)
        while t < n:
            parts.append(x[x[:, 0] > t * 0.5 - 0.5] - t)
            t = t + 1
        return torch.cat(parts, 0)


class WhileCatMaskedDim1(nn.Module):
    """Columns chosen by data, concatenated along dimension 1."""

    def forward(self, x, n):
        parts = [x[:, :1]]
        t = torch.zeros((), dtype=x.dtype)
        while t < n:
            parts.append(x[:, x[0] > t])
            t = t + 1
        return torch.cat(parts, dim=1)


class WhileEmptyStart(nn.Module):
    """An empty list before the loop: eager's stack fails on 0 trips (torch.stack([]))."""

    def forward(self, x, n):
        parts = []
        i = torch.zeros((), dtype=torch.int64)
        while i < n:
            parts.append(x[i])
            i = i + 1
        return torch.stack(parts)


class WhileBreakConditionalAppend(nn.Module):
    """A break and an append under a tensor condition inside the loop."""

    def forward(self, x, n):
        parts = [x.sum(0)]
        i = torch.zeros((), dtype=torch.int64)
        while i < n:
            row = x[0] * torch.cos(i * 1.3)
            if row.sum() > 0:
                parts.append(row * (i + 1))
            if i >= 5:
                break
            i = i + 1
        return torch.stack(parts, 1)


class ForBreakStack(nn.Module):
    """for over a traced range with a data-dependent break."""

    def forward(self, x, n):
        parts = []
        h = torch.zeros(x.shape[1])
        for i in range(int(n)):
            h = torch.tanh(h + x[0] * 0.4)
            parts.append(h)
            if h.sum() > 2.0:
                break
        parts.append(h * 0)
        return torch.stack(parts)


class ForCatVaryingRows(nn.Module):
    """for over a traced range whose elements change their number of rows."""

    def forward(self, x, n):
        parts = [x[:0]]
        for i in range(int(n)):
            parts.append(x[x[:, 1] > i * 0.25])
        return torch.cat(parts)


class AppendAfterLoop(nn.Module):
    def forward(self, x):
        parts = [x]
        while x.sum() > 1.0:
            x = x - 1
            parts.append(x)
        parts.append(x * 10)
        return torch.cat(parts), torch.stack(parts, -2)


class IterateGrownList(nn.Module):
    def forward(self, x):
        parts = [x]
        while x.sum() > 1.0:
            x = x - 1
            parts.append(x)
        total = x
        for p in parts:  # a later data-dependent loop over torch.stack(parts)
            total = total * 0.5 + p
        return total


class IterateGrownPrefixes(nn.Module):
    def forward(self, x, n):
        parts = []
        for k in range(int(n)):  # error-line
            parts.append(x[:k])
        total = x.sum()
        for p in parts:
            total = total + p.sum()
        return total


class TruthOfGrownList(nn.Module):
    def forward(self, x):
        parts = []
        while x.sum() > 1.0:
            x = x - 1
            parts.append(x)
        if parts:  # error-line
            return torch.stack(parts)
        return x


class LastOfListGrownInItsLoop(nn.Module):
    """NeMo's RNN-T greedy decoder: ``last = SOS if label == [] else label[-1]`` inside the loop
    that appends to ``label`` under a tensor condition."""

    def forward(self, x):
        label = []
        total = x.sum() * 0
        while x.sum() > 1.0:
            x = x - 1
            last = 0 if label == [] else label[-1]  # error-line
            total = total + last
            if x[0] > 0:
                label.append(x.sum())
        return total


class LoopInBranch(nn.Module):
    """A grown list inside a converted if (ONNX If holding both passes' Loops)."""

    def forward(self, x, n):
        if x.sum() > 0:
            parts = [x]
            i = torch.zeros((), dtype=torch.int64)
            while i < n:
                parts.append(x + i)
                i = i + 1
            y = torch.stack(parts).sum(0)
        else:
            y = x * 2
        return y


class LoopInLoop(nn.Module):
    """A grown list inside the body of another data-dependent loop."""

    def forward(self, x, n):
        total = x * 0
        for j in range(int(n)):
            parts = [x]
            i = torch.zeros((), dtype=torch.int64)
            while i < j:
                parts.append(x * (i + 1))
                i = i + 1
            total = total + torch.cat(parts, -1).sum(-1, keepdim=True)
        return total


class LenOfGrownList(nn.Module):
    def forward(self, x):
        parts = [x]
        while x.sum() > 1.0:
            x = x - 1
            parts.append(x)
        return x * len(parts) + torch.stack(parts).sum(0)


class WrittenInPlaceAfterTheLoop(nn.Module):
    """A value the loop body reads is changed in place before the list is stacked: the second
    pass must see the value the loop saw."""

    def forward(self, x, n):
        scale = x.sum(0)
        parts = [x]
        i = torch.zeros((), dtype=torch.int64)
        while i < n:
            parts.append(x * i + scale)
            i = i + 1
        scale.mul_(100)
        return torch.stack(parts), scale


class TwoLists(nn.Module):
    """Two lists with different elements grown by one loop (one second pass each)."""

    def forward(self, x):
        parts = [x]
        sums = [x.sum(0)]
        while x.abs().sum() > 1.0:
            x = x * 0.5
            parts.append(x[x[:, 0] > x.mean()])
            sums.append(x.sum(0))
        return torch.cat(parts), torch.stack(sums, -1)


class LastOfGrownList(nn.Module):
    """parts[-1] and parts[0] after the loop."""

    def forward(self, x):
        parts = [x]
        while x.abs().sum() > 1.0:
            x = x * 0.5
            parts.append(x + 1)
        return parts[-1] - parts[0]


class PreviousStepInLoop(nn.Module):
    def forward(self, x):
        parts = [x]
        while x.abs().sum() > 1.0:
            x = x * 0.5 + parts[-1] * 0
            parts.append(x)
        return torch.stack(parts)


class CollectIndices(nn.Module):
    """Indices found per step (int64, one dimension, a different length each time)."""

    def forward(self, x, n):
        found = [torch.zeros(0, dtype=torch.int64)]
        i = torch.zeros((), dtype=torch.int64)
        while i < n:
            found.append(torch.nonzero(x[i] > 0).flatten() + i * 10)
            i = i + 1
        return torch.cat(found)


class IndexOfVaryingRows(nn.Module):
    def forward(self, x):
        parts = [x]
        while x.sum() > 1.0:  # error-line (indexing is refused at the loop that grew the list)
            x = x - 1
            parts.append(x[x > 0])
        return parts[-1]


class LenOfGrownListAfterAReturn(nn.Module):
    """A list grown by a while loop (with len() in it) in the rest of the function after a loop
    that returns: that rest is a cond branch dynamo traces, which cannot trace the sizes the
    list's second pass allocates; the refusal points at the loop that returns."""

    def forward(self, x):
        while x.sum() > 8.0:  # error-line
            x = x - 1
            if x.sum() < 4.5:
                return x * 2
        parts = [x]
        while x.sum() > 1.0:
            x = x - 1
            parts.append(x * len(parts))
        return torch.stack(parts)


class ListPlusListAfterLoop(nn.Module):
    """``parts + [h]`` and ``[h] + parts`` after a loop that grew ``parts`` with prefixes."""

    def forward(self, x, n):
        h = torch.tanh(x)
        parts = []
        for k in range(int(n)):
            parts.append(x[:, :k + 1] * 2)
        return torch.cat(parts + [h], 1), torch.cat([h * 3] + parts, 1)


class PrefixesAfterAReturn(nn.Module):
    """Prefixes collected in the rest of the function after a loop that returns: torch.cond
    cannot trace their sizes there."""

    def forward(self, x, n):
        h = x.clone()
        for _ in range(int(n)):  # error-line
            h = h * 0.5 + 1.0
            if h.mean() > 3.0:
                return h
        parts = []
        for k in range(int(n)):
            parts.append(x[:, :k])
        return torch.cat(parts + [h], 1)


class PrefixByTheCounterInABranch(nn.Module):
    """A slice by the loop counter inside an if of a loop whose state grows."""

    def forward(self, x, n):
        h = x.clone()
        acc = x[:, :1].clone()
        for i in range(int(n)):
            h = h * 0.5 + 1.0
            if h.mean() > 0.2:  # error-line
                acc = torch.cat([acc, x[:, :i + 1]], 1)
            if acc.sum() > 50.0:
                break
        return acc


class LenInsideAndAfterTheLoop(nn.Module):
    """len() in the loop's break test and in an element, and after the loop."""

    def forward(self, x, n):
        parts = [x]
        i = torch.zeros((), dtype=torch.int64)
        while i < n:
            parts.append(x * len(parts) + i)
            if len(parts) >= 4:
                break
            i = i + 1
        return torch.stack(parts) * len(parts)


class LenInsideALoopOfSeveralRows(nn.Module):
    """len() in the body of a list concatenated from elements of several rows: the second pass
    counts appends apart from rows."""

    def forward(self, x, n):
        parts = []
        i = torch.zeros((), dtype=torch.int64)
        while i < n:
            parts.append(x[: i + 1] * len(parts))
            i = i + 1
        return torch.cat(parts)


class ScoresListedWhileTokensGrow(nn.Module):
    """Decoding-shaped: tokens grow by torch.cat while each step's scores are appended to a
    list, with an early exit; the list is stacked after the loop."""

    def forward(self, x, n):
        tokens = x[:, :1].clone()
        scores = []
        k = torch.zeros((), dtype=torch.int64)
        while k < n:
            step = torch.tanh(tokens[:, -1:] + k)
            scores.append(step[:, 0] * 2)
            tokens = torch.cat([tokens, step], 1)
            k = k + 1
            if tokens.mean() > 0.9:
                break
        return tokens, torch.stack(scores + [tokens[:, 0]], 1)


class PreviousElementsReadInTheLoop(nn.Module):
    """parts[-1], parts[0] and parts[k] (k a tensor counter) and len() inside the loop."""

    def forward(self, x, n):
        parts = [x, x * 2]
        k = torch.zeros((), dtype=torch.int64)
        while k < n:
            parts.append(parts[k] + torch.tanh(parts[-1]) * 0.5 - parts[0] * 0.1)
            k = k + 1
            if len(parts) > 6:
                break
        return torch.cat(parts, 0) * len(parts)
