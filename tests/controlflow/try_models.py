"""``try``/``with`` in converted code (issue 13, item 5): models that convert and models refused."""

import contextlib

import torch
from torch import nn


class WhileTryFinallyBreak(nn.Module):
    """The issue's case: a while loop on a tensor condition, break inside try, finally counts."""

    def forward(self, x, limit):
        steps = torch.zeros((), dtype=torch.long)
        i = torch.zeros((), dtype=torch.long)
        while i < limit:
            try:
                x = x * 2
                if x.abs().max() > 5:
                    break
                x = x + 0.5
            finally:
                steps = steps + 1
            i = i + 1
        return x, steps


class ForTryFinallyContinue(nn.Module):
    def forward(self, x, n):
        total = torch.zeros_like(x)
        skipped = torch.zeros(())
        for i in range(int(n)):
            try:
                if x[i % x.shape[0]].sum() < 0:
                    continue
                total = total + x * i
            finally:
                skipped = skipped + 1
        return total, skipped


class ReturnInTryInLoop(nn.Module):
    """A return inside try/finally inside a data-dependent loop (a flag and a break)."""

    def forward(self, x, n):
        for _ in range(int(n)):
            try:
                if x.sum() > 20:
                    return x * 3
                x = x * 2
            finally:
                x = x + 1
        return x


class TryFinallyInBranch(nn.Module):
    def forward(self, x):
        y = x
        if x.sum() > 0:
            try:
                y = self.scale(x)
            finally:
                y = y + 1
        return y

    def scale(self, x):
        return x * 2


class TryFinallyAroundIf(nn.Module):
    def forward(self, x):
        try:
            if x.sum() > 0:
                y = x * 2
            else:
                y = x - 1
        finally:
            z = x.mean()
        return y + z


class NoGradAroundIf(nn.Module):
    """Before: the if inside the with lost its assignment (the ONNX file returned x)."""

    def forward(self, x):
        y = x
        with torch.no_grad():
            if x.sum() > 0:
                y = x * 2
        return y


class NullcontextAroundWhile(nn.Module):
    def forward(self, x, n):
        i = torch.zeros((), dtype=torch.long)
        with contextlib.nullcontext(), torch.set_grad_enabled(False):
            while i < n:
                x = x * 1.5
                i = i + 1
        return x


class NoGradAndAutocastInBranch(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = x
        if x.sum() > 0:
            with torch.no_grad():
                y = self.lin(x)
            with torch.autocast("cpu", enabled=False):
                y = y * 2
        return y


class Tracker:
    """A context manager fxport does not know."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class TryExceptInBranch(nn.Module):
    def forward(self, x):
        y = x
        if x.sum() > 0:
            try:
                y = x * 2
            except RuntimeError:
                y = x
        return y


class TryExceptAroundIf(nn.Module):
    def forward(self, x):
        try:
            if x.sum() > 0:
                x = x * 2
        except RuntimeError:
            pass
        return x


class ReturnInTryFinally(nn.Module):
    def forward(self, x):
        try:
            if x.sum() > 0:
                return x * 2
        finally:
            x = x + 1
        return x


class UnknownWithAroundIf(nn.Module):
    def forward(self, x):
        with Tracker():
            if x.sum() > 0:
                x = x * 2
        return x


class UnknownWithInCondBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        y = x
        if x.sum() > 0:
            with Tracker():
                y = self.lin(x)
        return y


class UnknownWithInLoopBody(nn.Module):
    def forward(self, x, n):
        for _ in range(int(n)):
            with Tracker():
                x = x * 2
        return x


class PythonIfTryExceptOutsideControlFlow(nn.Module):
    """A try/except that is not in or around an if/loop stays as written."""

    def forward(self, x):
        try:
            y = x * 2
        except RuntimeError:
            y = x
        return y


class _Separator(nn.Module):
    """A submodule whose ``forward`` the loop below calls by name (``model.forward(chunk)``)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.conv = nn.Conv1d(2, 4, kernel_size=3, padding=1)

    def forward(self, mix):
        return self.conv(mix)


class NoGradLocalInChunkLoop(nn.Module):
    """torchaudio's Demucs ``separate_sources`` shape: ``while start < length`` over chunks, ``out``
    assigned under ``with torch.no_grad():`` on every trip and read after it — local to the trip,
    not loop state (the liveness analysis saw through no ``with`` before)."""

    def __init__(self):
        super().__init__()
        self.model = _Separator()

    def forward(self, mix):
        length = mix.shape[-1]
        final = torch.zeros(mix.shape[0], 4, length)
        start, chunk = 0, 3
        while start < length:
            piece = mix[:, :, start:start + chunk]
            with torch.no_grad():
                out = self.model.forward(piece)
            final[:, :, start:start + chunk] += out * 0.5
            start += chunk
        return final
