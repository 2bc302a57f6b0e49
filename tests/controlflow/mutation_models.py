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


# --- state outside the branch's locals: buffers, attributes, dict/list entries, inputs ---------


class BufferInPlace(nn.Module):
    """A running statistic updated in place under a data-dependent condition, read after it."""

    def __init__(self):
        super().__init__()
        self.register_buffer("running", torch.ones(3))

    def forward(self, x):
        if x.mean() > 0:
            self.running.mul_(0.5)
            self.running.add_(x.mean(0))
        return x * self.running


class BufferItemWrite(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(2, 3))

    def forward(self, x):
        if x.sum() > 0:
            self.buf[0] = x[0]
        else:
            self.buf[1] += 1
        return x + self.buf.sum(0)


class BufferCounter(nn.Module):
    """``self.count += 1`` on a tensor buffer."""

    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        if x.max() > 1:
            self.count += 1
        return x * (self.count + 1)


class TensorAttributeCounter(nn.Module):
    """``self.count += 1`` on a plain tensor attribute (not a buffer)."""

    def __init__(self):
        super().__init__()
        self.count = torch.zeros(())

    def forward(self, x):
        if x.max() > 1:
            self.count += 1
        return x * (self.count + 1)


class AttributeAssigned(nn.Module):
    """``self.h = self.h * 2``: the attribute is rebound, not written into."""

    def __init__(self):
        super().__init__()
        self.register_buffer("h", torch.ones(3))

    def forward(self, x):
        if x.sum() > 0:
            self.h = self.h * 2 + x.mean(0)
        return x - self.h


class DictEntries(nn.Module):
    """In-place write into a dict entry, an entry assigned, a write into a tensor held in a dict."""

    def forward(self, x):
        d = {"k": x.clone(), "v": x * 0}
        cache = {0: torch.zeros_like(x)}
        k = 0
        if x.mean() > 0:
            d["k"].add_(1)
            d["v"] = x * 3
            cache[k][0] = 5.0
        else:
            cache[k][:, 0] = -1.0
        return d["k"] + d["v"] + cache[0]


class ListElementInPlace(nn.Module):
    def forward(self, x):
        xs = [x.clone(), x * 2]
        if x.sum() > 0:
            xs[0].mul_(2)
        return xs[0] + xs[1]


class WriteThroughAnAlias(nn.Module):
    """An alias of a local written in a branch sees the write, as in eager."""

    def forward(self, x):
        y = x * 1
        alias = y
        if y.mean() > 0:
            y.mul_(3)
        return alias + 1


class WriteThroughAView(nn.Module):
    """A write into a view (a row) changes the tensor it views."""

    def forward(self, x):
        y = x * 1
        row = y[0]
        if y.mean() > 0:
            row.add_(10)
        return y


class WritesThroughTwoViews(nn.Module):
    """Two names for one memory written on different sides: refused."""

    def forward(self, x):
        y = x * 1
        row = y[0]
        if y.mean() > 0:
            y.mul_(3)
        else:
            row.add_(10)
        return y


class MutatesItsInput(nn.Module):
    """The forward writes into the caller's tensor in a branch and does not read it again."""

    def forward(self, x, state):
        if x.sum() > 0:
            state.add_(x.sum(0))
        return x * 2


class MutatesAndReadsItsInput(nn.Module):
    def forward(self, x, state):
        if x.sum() > 0:
            state.mul_(2)
        return x + state


class BufferAccumulatedInLoop(nn.Module):
    """A buffer written at every step of a loop whose trip count comes from data."""

    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.zeros(3))

    def forward(self, x, n):
        i = torch.tensor(0)
        while i < n:
            self.acc.add_(x[i])
            i = i + 1
        return x + self.acc


class AttributeAssignedInLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("h", torch.zeros(3))

    def forward(self, x, n):
        for i in range(int(n)):
            self.h = self.h * 0.5 + x[i]
        return x * self.h


class BufferRowsWrittenInLoop(nn.Module):
    """``self.buf[i] = ...`` at the loop index, and a dict entry reassigned each step."""

    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(6, 3))

    def forward(self, x, n):
        d = {"total": x[0] * 0}
        i = torch.tensor(0)
        while i < n:
            self.buf[i] = x[i] * 2
            d["total"] = d["total"] + x[i]
            i = i + 1
        return self.buf[: x.shape[0]] + d["total"]


class PythonIntAttributeCounter(nn.Module):
    """A Python int attribute changed under a tensor condition: an int64 tensor (round thirteen)."""

    def __init__(self):
        super().__init__()
        self.steps = 0

    def forward(self, x):
        if x.sum() > 0:
            self.steps += 1
        return x * 2


class PythonFloatAttributeScale(nn.Module):
    """A Python float attribute changed under a tensor condition: refused (a Python int converts
    since round thirteen, as an int64 tensor: PythonIntAttributeCounter)."""

    def __init__(self):
        super().__init__()
        self.scale = 1.0

    def forward(self, x):
        if x.sum() > 0:
            self.scale *= 0.5
        return x * 2


class IndexChangedInBranch(nn.Module):
    """The written row's index is assigned in the branch itself."""

    def __init__(self):
        super().__init__()
        self.register_buffer("bufs", torch.zeros(2, 3))

    def forward(self, x):
        if x.sum() > 0:
            i = 1
            self.bufs[i].add_(1)
        return x + self.bufs[1]


class BufferWrittenUnderAnIfInALoop(nn.Module):
    """A buffer written under a data-dependent if nested in a data-dependent loop."""

    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.zeros(3))

    def forward(self, x, n):
        i = torch.tensor(0)
        while i < n:
            if x[i].sum() > 0:
                self.acc.add_(x[i])
            i = i + 1
        return x - self.acc


class BufferRowsUpdatedInPlaceInLoop(nn.Module):
    """``self.buf[i].add_(...)`` at the loop index: the row is updated in the buffer itself."""

    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.ones(6, 3))

    def forward(self, x, n):
        for i in range(int(n)):
            self.buf[i].add_(x[i])
            self.buf[i].mul_(2)
        return self.buf[: x.shape[0]] * x


class DictReadWholeInBranch(nn.Module):
    """The branch writes an entry and reads the whole dict: refused under a tensor condition."""

    def forward(self, x):
        d = {"k": x.clone(), "v": x * 2}
        if x.sum() > 0:
            d["k"].add_(1)
            x = sum(d.values())
        return x


class DictWrittenAtComputedKey(nn.Module):
    def forward(self, x):
        d = {"a": x, "b": x * 2}
        key = "a"
        if x.sum() > 0:
            d[key] = x * 3
        return d["a"]


class AttributeReadByAMethod(nn.Module):
    """A method called in the branch reads the attribute the branch assigns."""

    def __init__(self):
        super().__init__()
        self.register_buffer("h", torch.ones(3))
        self.fc = nn.Linear(3, 3)

    def scaled(self, x):
        return x * self.h

    def forward(self, x, use_cache: bool = True):
        if use_cache:  # a Python condition: runs as written
            self.h = self.h * 2
            x = self.scaled(x)
        if x.sum() > 0:
            self.h = self.h + 1
            x = self.scaled(x)
        return x


class BufferCountInLoopTest(nn.Module):
    """The loop test reads the buffer the body increments."""

    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros((), dtype=torch.long))

    def forward(self, x, n):
        while self.count < n:
            self.count += 1
            x = x * 2
        return x + self.count


class SubmoduleBufferWrite(nn.Module):
    """A submodule writing its own buffer under a data-dependent condition."""

    def __init__(self):
        super().__init__()
        self.register_buffer("seen", torch.zeros(3))

    def forward(self, x):
        if x.mean() > 0:
            self.seen.add_(x.sum(0))
        return x - self.seen


class SubmodulesWritingBuffers(nn.Module):
    """Buffers of submodules (a ModuleList run as a Python loop, and one read after its call)."""

    def __init__(self):
        super().__init__()
        self.inner = SubmoduleBufferWrite()
        self.blocks = nn.ModuleList([SubmoduleBufferWrite(), SubmoduleBufferWrite()])

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.inner(x) + self.inner.seen


class ViewWrittenInLoopBody(nn.Module):
    """A view made inside a data-dependent loop and written in place: the write reaches its base."""

    def forward(self, x, n):
        g = torch.tanh(x)
        for _ in range(int(n)):
            view = g[:, 1:3]
            view.mul_(-0.5)
            row = view.t()
            row.add_(0.25)
        return g * 2


class ViewWrittenInBranch(nn.Module):
    """``row = g[0]; row.add_(10)`` under a tensor condition: g is written (and g[0] would be out
    of range on an empty batch, which the branch never sees, so it is not evaluated there)."""

    def forward(self, x):
        g = torch.tanh(x)
        if g.sum() > 0:
            row = g[0]
            row.add_(10)
        return g * 2


class ViewWriteSeenByAlias(nn.Module):
    """A write through a view made in the branch reaches the base's other names (alias = g)."""

    def forward(self, x):
        g = x.clone()
        alias = g
        if x.sum() > 0:
            v = g[:, 1:3]
            v.mul_(2)
        return alias + g


class ViewWriteInLoopSeenByEarlierView(nn.Module):
    """``row = g[0]`` before a data-dependent loop whose body writes g through a fresh view."""

    def forward(self, x, n):
        g = x.clone()
        row = g[0]
        i = torch.zeros((), dtype=torch.int64)
        while i < n:
            v = g[:, 1:3]
            v.add_(1.0)
            i = i + 1
        return row + g


class ViewWriteIntoBuffer(nn.Module):
    """g = self.buf; a view of g written under a tensor condition updates the buffer."""

    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(3))

    def forward(self, x):
        g = self.buf
        if x.sum() > 0:
            v = torch.narrow(g, 0, 1, 2)
            v.add_(1.0)
        return x + self.buf


class ReturnInLoopThenBufferWrite(nn.Module):
    """A loop's early return inside a tensor-conditioned branch, then buffer writes at a loop index.

    The select on the return flag sits in a cond branch, so it is lowered with where: the rest of
    the function (6 buffer rows written n times) also runs when the loop returned, with n past 6.
    Eager never writes past row 5; the converted graph must not fail there either (fuzz find).
    """

    def forward(self, x, n):
        g = x * 1.0
        if x.sum() > 2.0:
            for i in range(int(n)):
                g = g + 0.1 * i
                if (g > 2.0).any():
                    return g.sum(dim=-1)
        buf = torch.zeros(6, x.shape[0])
        for i in range(int(n)):
            buf[i] = g.sum(dim=-1) + i
        return buf.sum(dim=0)
