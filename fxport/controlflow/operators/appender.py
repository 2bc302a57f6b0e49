"""Lists grown with ``.append`` inside a data-dependent loop: a buffer plus a length.

The loop lowering replaces such a list by an :class:`Appender` (registered as a pytree node,
so it is carried through ``while_loop`` as two tensors); :func:`stack` and :func:`cat` read
it back after the loop. On a plain list they are ``torch.stack``/``torch.cat``.

Example::

    >>> import torch
    >>> from fxport.controlflow.operators.appender import Appender, stack
    >>> grown = Appender("ys", [], torch.zeros(3, 2), torch.zeros((), dtype=torch.int64))
    >>> grown.append(torch.ones(2)); grown.append(torch.full((2,), 2.0))
    >>> stack(grown)
    tensor([[1., 1.],
            [2., 2.]])
"""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree

from fxport.controlflow.operators.values import scalar
from fxport.errors import ControlFlowError


class Appender:
    """A list grown with ``.append`` inside a tensor loop: a preallocated buffer plus a length.

    ``exact`` is set after the loop when every iteration appended exactly once (the buffer is
    then the stacked list, no narrowing needed).
    """

    def __init__(self, name: str, initial: list, buf=None, length=None):
        self.name, self.initial, self.buf, self.length = name, initial, buf, length
        self.probe: list = []
        self.exact = False

    def append(self, value):
        value = value if isinstance(value, torch.Tensor) else scalar(value)
        if self.buf is None:  # probing: learn the element type
            self.probe.append(value)
            return
        position = self.length.reshape(1)
        self.buf = torch.index_put(self.buf, (position,), value.to(self.buf.dtype).unsqueeze(0))
        self.length = self.length + 1

    def copy(self):
        clone = Appender(self.name, self.initial, self.buf, self.length)
        clone.probe = self.probe
        clone.exact = self.exact
        return clone

    def __iter__(self):
        raise ControlFlowError(
            f"list {self.name!r} grown in a data-dependent loop can only be used with torch.stack/torch.cat",
            hint="stack or concatenate it right after the loop",
        )

    def __bool__(self):
        raise ControlFlowError(
            f"truth value of list {self.name!r} grown in a data-dependent loop is not known while exporting",
            hint="make the list non-empty on every path (e.g. append before the break)",
        )

    def __len__(self):
        raise TypeError(f"len() of list {self.name!r} grown in a data-dependent loop; use torch.stack(...).shape[0]")


class _Ref:
    """Compares by identity, so a pytree context holding a list of tensors stays comparable."""

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, _Ref) and other.value is self.value

    def __hash__(self):
        return id(self.value)


def _appender_flatten(appender):
    return [appender.buf, appender.length], (appender.name, _Ref(appender.initial), appender.exact)


def _appender_unflatten(children, context):
    name, initial, exact = context
    result = Appender(name, initial.value, children[0], children[1])
    result.exact = exact
    return result


pytree.register_pytree_node(Appender, _appender_flatten, _appender_unflatten)


def stack(tensors, dim: int = 0, *, out=None):
    """``torch.stack``, also for lists grown in a data-dependent loop."""
    if not isinstance(tensors, Appender):
        return torch.stack(tensors, dim) if out is None else torch.stack(tensors, dim, out=out)
    return torch.movedim(_stacked(tensors), 0, dim)


def cat(tensors, dim: int = 0, *, out=None):
    """``torch.cat``, also for lists grown in a data-dependent loop."""
    if not isinstance(tensors, Appender):
        return torch.cat(tensors, dim) if out is None else torch.cat(tensors, dim, out=out)
    stacked = _stacked(tensors)
    moved = torch.movedim(stacked, 0, dim if dim >= 0 else stacked.dim() - 1 + dim)
    shape = list(moved.shape)
    d = dim if dim >= 0 else stacked.dim() - 1 + dim
    return moved.reshape(shape[:d] + [shape[d] * shape[d + 1]] + shape[d + 2 :])


def _stacked(appender: Appender):
    buf = appender.buf
    if appender.exact:
        rows = buf
    else:
        count = appender.length.item()
        torch._check(count >= 0)
        torch._check(count <= buf.shape[0])
        rows = buf.narrow(0, 0, count)
    if appender.initial:
        rows = torch.cat([torch.stack(appender.initial).to(rows.dtype), rows])
    return rows
