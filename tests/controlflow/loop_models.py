"""Loop patterns for the differential tests. Error tests assert the line marked `# error-line`."""

import torch
from torch import nn

D = torch.export.Dim.DYNAMIC


class WhileTensorCondition(nn.Module):
    def forward(self, x):
        while x.sum() < 100:
            x = x * 2 + 1
        return x


class ForRangeInt(nn.Module):
    def forward(self, x, n):
        for i in range(int(n)):
            x = x + i
        return x


class ForRangeItem(nn.Module):
    def forward(self, x, n):
        acc = torch.zeros_like(x)
        for i in range(n.item()):
            acc = acc + x * (i + 1)
        return acc


class ForRangeDynamicDim(nn.Module):
    def forward(self, x):
        acc = torch.zeros(x.shape[1])
        for i in range(x.shape[0]):
            acc = acc * 0.5 + x[i]
        return acc


class ConvNTimes(nn.Module):
    """Seed example: an input convolved n times, n given at run time."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 3, padding=1)

    def forward(self, x, n):
        for _ in range(int(n)):
            x = torch.tanh(self.conv(x))
        return x


class GreedyDecoder(nn.Module):
    """Seed example: greedy decoding that stops at an end token."""

    def __init__(self, vocab=6, hidden=8, eos=0, max_len=8, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = nn.Embedding(vocab, hidden)
        self.cell = nn.GRUCell(hidden, hidden)
        self.out = nn.Linear(hidden, vocab)
        self.eos, self.max_len = eos, max_len

    def forward(self, h, token):
        tokens = []
        for _ in range(self.max_len):
            h = self.cell(self.embed(token), h)
            token = self.out(h).argmax(-1)
            tokens.append(token)
            if token[0] == self.eos:
                break
        return torch.stack(tokens, 1)


class StaticRange(nn.Module):
    def forward(self, x):
        for i in range(3):
            x = x * 2 + i
        return x


class ModuleListIteration(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


class LoopIndexInBody(nn.Module):
    def forward(self, x, n):
        out = torch.zeros(x.shape[1])
        for i in range(int(n)):
            out = out + x[i] * i
        return out


class BreakInWhile(nn.Module):
    def forward(self, x, limit):
        i = torch.zeros((), dtype=torch.int64)
        total = torch.zeros(())
        while i < x.shape[0]:
            if total + x[i] > limit:
                break
            total = total + x[i]
            i = i + 1
        return total, i


class ContinueInFor(nn.Module):
    def forward(self, x):
        acc = torch.zeros(())
        for i in range(x.shape[0]):
            if x[i] < 0:
                continue
            acc = acc + x[i]
        return acc


class NestedLoops(nn.Module):
    def forward(self, x, n, m):
        acc = torch.zeros_like(x)
        for i in range(int(n)):
            for j in range(int(m)):
                acc = acc + x * (i + 1) - j
        return acc


class LoopInBranch(nn.Module):
    def forward(self, x, n):
        if x.sum() > 0:
            for _ in range(int(n)):
                x = x * 2
        else:
            x = x - 1
        return x


class BranchInLoop(nn.Module):
    def forward(self, x, n):
        for _ in range(int(n)):
            if x.sum() > 10:
                x = x - 3
            else:
                x = x * 2
        return x


class AppendThenStack(nn.Module):
    def forward(self, x):
        h = torch.zeros(x.shape[1])
        outs = []
        for i in range(x.shape[0]):
            h = torch.tanh(h + x[i])
            outs.append(h)
        return torch.stack(outs)


class AppendThenCat(nn.Module):
    def forward(self, x, n):
        pieces = []
        for i in range(int(n)):
            pieces.append(x * i)
        return torch.cat(pieces, dim=1)


class BufferWrite(nn.Module):
    def forward(self, x):
        buf = torch.zeros_like(x)
        for i in range(x.shape[0]):
            buf[i] = x[i] * i
        return buf


class CountIterations(nn.Module):
    def forward(self, x):
        count = 0
        while x.abs().max() > 1:
            x = x / 2
            count += 1
        return x, count


class NumberPromotedToFloat(nn.Module):
    def forward(self, x, n):
        total = 0
        for _ in range(int(n)):
            total = total + x.sum()
        return total


class WhileCounterBelowTensor(nn.Module):
    def forward(self, x, n):
        i = 0
        while i < n:
            x = x + 1
            i = i + 1
        return x


class IterateRows(nn.Module):
    def forward(self, x):
        acc = torch.zeros(x.shape[1])
        for row in x:
            acc = acc + row.relu()
        return acc


class NegativeStep(nn.Module):
    def forward(self, x, n):
        acc = torch.zeros(())
        for i in range(int(n), 0, -1):
            acc = acc * 2 + i
        return x + acc


class StartStopRange(nn.Module):
    def forward(self, x, start, stop):
        acc = torch.zeros_like(x)
        for i in range(int(start), int(stop)):
            acc = acc + i
        return x + acc


class ReturnInPythonLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i == 1:
                return x * 10
        return x


class ConditionBecomesTensor(nn.Module):
    def forward(self, x):
        steps = 0
        while steps < 2 or x.sum() > 1:
            x = x * 0.5
            steps += 1
            if steps > 50:
                break
        return x, steps


class TinyRNN(nn.Module):
    """Per-step outputs over a dynamic time axis: x[:, t] with a traced t, stacked on dim 1."""

    def __init__(self):
        super().__init__()
        self.cell = nn.GRUCell(3, 5)

    def forward(self, x):
        h = torch.zeros(x.shape[0], 5)
        outs = []
        for t in range(x.shape[1]):
            h = self.cell(x[:, t], h)
            outs.append(h)
        return torch.stack(outs, dim=1), h


# --- unconvertible patterns ------------------------------------------------------------------


class CarriedDtypeChanges(nn.Module):
    def forward(self, x, n):
        for _ in range(int(n)):  # error-line
            x = x > 0
        return x


class GrowsByConcatenation(nn.Module):
    def forward(self, x, n):
        for _ in range(int(n)):
            x = torch.cat([x, x])
        return x


class GrowsAndAppends(nn.Module):
    """x doubles its rows each step while its column sums are appended (a stack that grows)."""

    def forward(self, x, n):
        parts = []
        for _ in range(int(n)):
            x = torch.cat([x, x])
            parts.append(x.sum(0))
        return x, torch.stack(parts)


class DefinedOnlyInLoop(nn.Module):
    def forward(self, x, n):
        for i in range(int(n)):  # error-line
            y = x * i
        return y


class ExtendsOuterList(nn.Module):
    def forward(self, x, n):
        found = []
        for _ in range(int(n)):  # error-line
            found.extend([x])
        return x


class AppendInUnboundedWhile(nn.Module):
    def forward(self, x, n):
        outs = []
        while x.sum() < n:  # error-line
            x = x + 1
            outs.append(x)
        return torch.stack(outs)


class ReturnInTensorLoop(nn.Module):
    """An early return under a tensor condition in a data-dependent loop (a search loop)."""

    def forward(self, x, n):
        for i in range(int(n)):
            x = x * 1.5
            if x.sum() > 10.0:
                return x * i
        return x - 1


class FirstRowAbove(nn.Module):
    """The first row whose sum passes a threshold, returned from inside a loop over a dynamic
    number of rows (the carried return value came into the body with a fresh size symbol where
    the row had a static one: refused as branches of different shapes)."""

    def forward(self, x):
        for row in x:
            if row.sum() > 0.5:
                return row
        return torch.zeros_like(x[0]) - 1


class ReturnInWhile(nn.Module):
    def forward(self, x, n):
        k = torch.zeros((), dtype=torch.int64)
        while k < n:
            k = k + 1
            if x.abs().max() > 4.0:
                return x.sum(dim=-1) * k
            x = x * 2.0
        return x.sum(dim=-1)


class ReturnTupleInTensorLoop(nn.Module):
    def forward(self, x, n):
        for i in range(int(n)):  # error-line
            if x.sum() > i:
                return x, x * i
        return x, x


class IndexReadAfterLoop(nn.Module):
    """Python leaves the loop variable bound to the last item: ``i`` after the loop is n - 1."""

    def forward(self, x, n):
        i = torch.zeros((), dtype=torch.int64) - 1
        for i in range(int(n)):
            x = x + 0.5
        return x * i


class IndexReadAfterStaticLoop(nn.Module):
    def forward(self, x):
        for i in range(3):
            x = x + i
        return x * i


class LoopThenLoopInBranch(nn.Module):
    """A loop variable reused by a loop inside a branch (fuzzer find: NameError for ``i``)."""

    def forward(self, x, n):
        for i in range(x.shape[0]):
            x = x + 0.1 * i
        if x.sum() > 0:
            x = x * 2
        else:
            for i in range(int(n)):
                x = torch.tanh(x)
        return x


class IndexUndefinedBeforeLoop(nn.Module):
    def forward(self, x, n):
        for i in range(int(n)):  # error-line
            x = x + 0.5
        return x * i


class ReturnInLoopInBranch(nn.Module):
    """A return under a tensor condition in a Python loop inside a converted branch (fuzzer find:
    first a refusal lost inside the traced branch, then converted once loop returns were)."""

    def forward(self, x, n):
        h = x
        if x.sum() > 0:
            h = h * 0.5
            for i in range(2):
                if x.mean() > 0.55:
                    return h * 2.0
                h = h + 1
        return h + 1


class ReturnInWhileThenSubmodule(nn.Module):
    """The select after a loop that may return is a cond (the rest calls a submodule) whose
    predicate is the loop's return flag."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(4, 4)

    def forward(self, x, n):
        k = torch.zeros((), dtype=torch.int64)
        while k < n:
            k = k + 1
            x = torch.tanh(x) + 0.5
            if x.mean() > 0.9:
                return x * 2.0
        return self.lin(x)
