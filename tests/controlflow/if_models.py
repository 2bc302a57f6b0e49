"""If-statement patterns for the differential tests: each model plus inputs that take every branch.

The error tests assert the file:line of the statement marked `# error-line`.
"""

import torch
from torch import nn

D = torch.export.Dim.DYNAMIC


def t(values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype)


def scaled(n, scale, features=4, seed=0):
    g = torch.Generator().manual_seed(seed + n)
    return torch.rand(n, features, generator=g) * scale


class IfNoElse(nn.Module):
    def forward(self, x):
        y = x + 1
        if x.sum() > 0:
            y = y * 2
        return y


class IfElse(nn.Module):
    def forward(self, x):
        if x.mean() > 0.5:
            y = x * 2
        else:
            y = x - 3
        return y


class ElifChain(nn.Module):
    def forward(self, x):
        s = x.sum()
        if s > 10:
            y = x * 3
        elif s > 0:
            y = x + 1
        elif s > -10:
            y = x - 1
        else:
            y = -x
        return y


class NestedIf(nn.Module):
    def forward(self, x):
        if x.mean() > 0:
            if x.max() > 2:
                y = x * 2
            else:
                y = x + 5
        else:
            y = x.abs()
        return y


class SeveralVariables(nn.Module):
    def forward(self, x):
        a = x + 1
        b = x * 2
        if x.sum() > 0:
            a = a * 3
            b = b - 1
            c = a + b
        else:
            c = x
        return a, b, c


class EarlyReturn(nn.Module):
    def forward(self, x):
        if x.sum() < 0:
            return x * -1
        y = x + 1
        return y * 2


class SeveralReturns(nn.Module):
    def forward(self, x):
        m = x.mean()
        if m > 1:
            return x * 10
        if m > 0:
            return x * 5
        return x


class AndPredicate(nn.Module):
    def forward(self, x):
        if x.sum() > 0 and x.max() < 3:
            return x * 2
        return x


class OrPredicate(nn.Module):
    def forward(self, x):
        if x.min() > 0.5 or x.max() < -0.5:
            x = x * 4
        return x


class NotPredicate(nn.Module):
    def forward(self, x):
        y = x * 1
        if not x.sum() > 0:
            y = x - 7
        return y


class IfExpression(nn.Module):
    def forward(self, x):
        y = x * 2 if x.sum() > 0 else x / 2
        return y + 1


class ItemPredicate(nn.Module):
    def forward(self, x):
        if x.sum().item() > 1.0:
            x = x + 100
        return x


class AnyPredicate(nn.Module):
    def forward(self, x):
        if torch.any(x > 2):
            x = x.clamp(max=2)
        return x


class AllPredicate(nn.Module):
    def forward(self, x):
        if torch.all(x >= 0):
            y = x.sqrt()
        else:
            y = x.abs().sqrt()
        return y


class BufferPredicate(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("threshold", torch.tensor(0.5))

    def forward(self, x):
        if x.mean() > self.threshold:
            x = x - self.threshold
        return x


class ParameterPredicate(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Parameter(torch.tensor([1.0, -1.0, 0.5, 2.0]))

    def forward(self, x):
        if (x * self.gate).sum() > 0:
            out = x * self.gate
        else:
            out = x
        return out


class DynamicShapePredicate(nn.Module):
    def forward(self, x):
        if x.shape[0] > 2:
            y = x * 2
        else:
            y = x + 1
        return y


class BatchSizeChoice(nn.Module):
    """Seed example: branch on batch size choosing between two computations."""

    def __init__(self):
        super().__init__()
        self.big = nn.Linear(4, 4)
        self.small = nn.Linear(4, 4)

    def forward(self, x):
        if x.shape[0] >= 4:
            y = self.big(x).relu()
        else:
            y = self.small(x).tanh()
        return y


class SelectSubmodule(nn.Module):
    """Seed example: select between two submodules on a data-dependent condition."""

    def __init__(self):
        super().__init__()
        self.a = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4))
        self.b = nn.Linear(4, 4)

    def forward(self, x):
        if x.mean() > 0.5:
            out = self.a(x)
        else:
            out = self.b(x)
        return out


class ShapesDiffer(nn.Module):
    def forward(self, x):
        if x.sum() > 2:
            y = x.sum(0, keepdim=True)
        else:
            y = x * 3
        return y


class DataDependentIndex(nn.Module):
    def forward(self, x, i):
        if i < x.shape[0]:
            row = x[i]
        else:
            row = x[0] * 0
        return row


def scale_up(x):
    if x.mean() > 0.5:
        return x * 10
    return x


class CallsUserFunction(nn.Module):
    def forward(self, x):
        return scale_up(x) + 1


class CallsMethod(nn.Module):
    def pick(self, x, y):
        if x.sum() > y.sum():
            return x
        return y

    def forward(self, x):
        return self.pick(x, 1 - x) * 2


class PythonCondition(nn.Module):
    def __init__(self, double):
        super().__init__()
        self.double = double

    def forward(self, x):
        if self.double and x.dim() == 2:
            x = x * 2
        else:
            x = x + 1
        return x


class TupleReturns(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x.max(dim=1).values, x.argmax(dim=1)
        return x.min(dim=1).values, x.argmin(dim=1)


class IntegerTruthiness(nn.Module):
    def forward(self, x):
        count = (x > 0.5).sum()
        if count:
            x = x + count
        return x


class NestedReturn(nn.Module):
    def forward(self, x):
        if x.mean() > 0.5:
            if x.max() > 0.9:
                return x * 2
            x = x + 1
        return x - 1


class ScalarBranches(nn.Module):
    def forward(self, x):
        if x.sum() > 1:
            scale = 2.0
        else:
            scale = 0.5
        return x * scale


class TemporaryInBranch(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            tmp = x * 2
            y = tmp + 1
        else:
            y = x
        return y


class PassThroughBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = x
        if x.sum() > 1:
            y = self.lin(x)
        return y


class ChainedComparison(nn.Module):
    def forward(self, x):
        if 0.2 < x.mean() < 0.6:
            return x * 3
        return x


class InfSafeSelect(nn.Module):
    def forward(self, x):
        if x.min() > 0:
            y = torch.log(x)
        else:
            y = x
        return y


class Scaler(nn.Module):
    def forward(self, x):
        if x.max() > 1:
            return x / x.max()
        return x


class UsesUserSubmodule(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = Scaler()

    def forward(self, x):
        return self.scale(x) + 1


class MultiElementPredicate(nn.Module):
    def forward(self, x):
        if x > 0:
            x = x + 1
        return x


class Base(nn.Module):
    def forward(self, x):
        return x * 2


class CallsSuper(Base):
    def forward(self, x):
        y = super().forward(x)
        if y.sum() > 0:
            y = y + 1
        return y


class DecoratedWithHelpers(nn.Module):
    """A decorated forward calling a method that calls another method, inside a cond branch."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def inner(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1

    def outer(self, x):
        return self.inner(self.lin(x)) + 1

    @torch.no_grad()
    def forward(self, x):
        if x.mean() > 0.5:
            y = self.outer(x)
        else:
            y = x
        return y


class MixedElif(nn.Module):
    """A Python condition, then tensor elifs with in-place updates, then ifs in an unrolled loop."""

    def __init__(self, flag=False):
        super().__init__()
        self.flag = flag
        self.layers = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))

    def forward(self, x, scale: float = 2.0):
        if self.flag:
            x = x * 100
        elif x.sum() > 0:
            x += scale
        else:
            x -= 1
        for layer in self.layers:
            h = layer(x)
            if h.mean() > 0:
                x = h
        return x


# --- unconvertible patterns (line numbers asserted by tests) -------------------------------


class DefinedInOneBranch(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # error-line
            y = x * 2
        return y


class NoneInOneBranch(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # error-line
            y = x * 2
        else:
            y = None
        return y


class DtypesDiffer(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # error-line
            y = x.long()
        else:
            y = x
        return y


class MutatesSelf(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # error-line
            self.seen = True
            x = x + 1
        return x


class Prints(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # error-line
            print("positive")
        return x


class AppendsOuterList(nn.Module):
    def forward(self, x):
        found = []
        if x.sum() > 0:  # error-line
            found.append(x)
        return x, found


class RaisesOnTensorCondition(nn.Module):
    """A branch that computes and then raises: a side effect (one that only raises is a check:
    tests/controlflow/test_raising_branches.py)."""

    def forward(self, x):
        if x.sum() < -100:  # error-line
            x = -x
            raise ValueError(f"input too negative: {x.sum()}")
        return x


CALLS = 0


class AssignsGlobal(nn.Module):
    def forward(self, x):
        global CALLS
        if x.sum() > 0:  # error-line
            CALLS = CALLS + 1
        return x


class RefusalInsideCondBranch(nn.Module):
    """A refusal raised while dynamo traces a cond branch (the outer branch calls a submodule,
    so it is a cond) keeps its message and line instead of a generic torch failure."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        if x.sum() > 0:
            h = self.lin(x)
            if h.mean() > 0:  # error-line
                y = (h > 0).long()
            else:
                y = h
            return y * 2
        return x
