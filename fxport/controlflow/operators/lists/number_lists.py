"""Python lists of ints sized by a dynamic dimension, held as a 1-D int64 tensor while traced.

``labels = [0] * len(D)``, ``dnew = [0 for _ in range(m + 1)]``, ``dold = list(range(m + 1))``:
with ``len(D)`` or ``m`` a dynamic size, Python's list needs the size as a number (torch
specialises the dimension), and a loop counter indexing it (``dnew[j] = dold[j - 1]``) cannot
pick an item. The converter (:mod:`~fxport.controlflow.converters.number_lists`) sends such a
creation here when every use of the name in its function is an item read or write, ``len()``, or
a swap with another such list; at run time the list is then an int64 tensor when its length is
symbolic (``torch.full`` / ``torch.arange``), and a Python list as written otherwise. Reads are
tensor indexing (``_fx.getitem``: index_select at a traced index, negative indices counted from
the end), writes go through :func:`setitem`, which refuses a value Python would store as
something other than an int (a float, a float tensor), so the list stays exactly Python's ints
(within int64).

A list of one constant (``[-1 for _ in range(n)]``, ``[None] * n``) that the converter cannot
prove to be used only that way (a parameter rebound to it, other uses on other paths) is a
:class:`Uniform` at a dynamic length: every item read is the constant, as Python reads it, and
any write, iteration or other use is refused in one line, since the list no longer exists as
Python's.

Example::

    >>> repeat(0, 3), range_list(1, 4), setitem([0, 0], 1, True)
    ([0, 0, 0], [1, 2, 3], [0, True])
"""

from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from fxport.controlflow.operators.failures import refuse_here
from fxport.controlflow.operators.indexing import setitem as _setitem
from fxport.controlflow.operators.values import is_symbolic, is_traced

_HINT = "keep the items ints (int(v)), or build the list as a tensor (torch.zeros(n, dtype=torch.float32))"


def _is_int(value) -> bool:
    """A Python int or bool, a SymInt, or a 0-d int64 tensor (a counter, a number read in a body):
    what an item of the int64 tensor reads back as exactly. Not a tensor of another dtype or shape,
    which Python would store and read back as it is (``~`` of a bool tensor is not ``~True``)."""
    if isinstance(value, torch.Tensor):
        return value.dim() == 0 and value.dtype == torch.int64
    return isinstance(value, (int, torch.SymInt)) and not isinstance(value, torch.SymBool)


def _is_size(value) -> bool:
    """A length Python's list would need as a number: a symbolic size or a traced 0-d integer."""
    if isinstance(value, torch.Tensor):
        return is_traced(value) and value.numel() == 1 and not value.dtype.is_floating_point
    return is_symbolic(value)


def _int64(value):
    if isinstance(value, torch.Tensor):
        return value.reshape(()).to(torch.int64)
    return torch.full((), value, dtype=torch.int64)


def repeat(value, count):
    """``[value] * count`` (and ``[value for _ in range(count)]``): an int64 tensor of ``count``
    items when ``count`` is a dynamic size and ``value`` an int; the list otherwise.

    >>> repeat(-1, 2)
    [-1, -1]
    """
    if not (_is_size(count) and _is_int(value)):
        return [value] * count
    if isinstance(count, torch.Tensor):
        count = count.reshape(()).to(torch.int64).item()
        torch._check(count >= 0)
    return _int64(value).expand(count).clone() if isinstance(value, torch.Tensor) else torch.full(
        (count,), value, dtype=torch.int64)


def repeat_range(value, *bounds):
    """``[value for _ in range(*bounds)]``: :func:`repeat` with the range's length.

    >>> repeat_range(0, 1, 4)
    [0, 0, 0]
    """
    if not any(_is_size(b) for b in bounds) or not _is_int(value):
        return [value for _ in range(*bounds)]
    return torch.full_like(torch.arange(*bounds, dtype=torch.int64), 0) + _int64(value)


def range_list(*bounds):
    """``list(range(*bounds))``: ``torch.arange`` (int64) when a bound is a dynamic size.

    >>> range_list(3)
    [0, 1, 2]
    """
    if not any(_is_size(b) for b in bounds):
        return list(range(*bounds))
    return torch.arange(*bounds, dtype=torch.int64)


def setitem(target, index, value):
    """``target[index] = value`` on a list :func:`repeat` or :func:`range_list` made: on the tensor,
    a value that reads back as Python's (an int, a bool, a 0-d int64 tensor), or a
    one-line refusal at the user's line for any other value; on a Python list, as written.

    >>> setitem([1, 2], -1, 5)
    [1, 5]
    """
    if not isinstance(target, torch.Tensor):
        return _setitem(target, index, value)
    if isinstance(index, slice) or isinstance(index, tuple) or (isinstance(index, torch.Tensor) and index.dim() > 0):
        refuse_here("a slice or several items of a list of ints sized by a dynamic dimension are written",
                    "write one item at a time (xs[i] = v)")
    if not _is_int(value):
        kind = f"a {value.dtype} tensor" if isinstance(value, torch.Tensor) else f"a {type(value).__name__}"
        refuse_here(f"{kind} is written into a list of ints sized by a dynamic dimension (held as an int64 tensor)",
                    _HINT)
    if isinstance(index, (int, torch.SymInt)) and not isinstance(index, bool):
        index = _int64(index)  # written functionally (index_put), also at a constant index: the list is loop state
    return _setitem(target, index, _int64(value))


class Uniform:
    """``[value] * length`` at a dynamic ``length``, never written: each item read is ``value``.

    >>> xs = Uniform(-1, 4); xs[2], len(xs), bool(xs)
    (-1, 4, True)
    """

    __slots__ = ("value", "length")

    def __init__(self, value, length):
        self.value, self.length = value, length

    def __getitem__(self, index):
        if isinstance(index, (int, torch.SymInt)) or isinstance(index, torch.Tensor) and index.numel() == 1 \
                and not index.dtype.is_floating_point:
            return self.value  # out of range only where eager raises (the exported file reads the constant)
        _refuse("read with a slice or an index that is not one int")

    def __len__(self):
        if is_symbolic(self.length):
            _refuse("measured with len() outside converted code")
        return int(self.length)

    def __bool__(self):
        if statically_known_true(self.length > 0):
            return True
        if statically_known_true(self.length == 0):
            return False
        _refuse("tested for emptiness")

    def __setitem__(self, index, value):
        _refuse("written")

    def refuse_write(self):
        """``_fx.setitem`` on it (a write at a computed index): refused as any write is."""
        _refuse("written")

    def __iter__(self):
        _refuse("iterated over")

    def __getattr__(self, attr):
        if attr in _LIST_METHODS:
            _refuse(f"used with .{attr}()")
        raise AttributeError(attr)

    def __repr__(self):
        return f"Uniform({self.value!r}, {self.length!r})"


_LIST_METHODS = frozenset(n for n in dir(list) if not n.startswith("_"))


def _refuse(use: str):
    refuse_here(f"a list of one constant sized by a dynamic dimension ([c] * n) is {use}",
                "use the list only by item reads/writes and len() in the function that creates it (not passed "
                "on, returned or rebinding a parameter: then it is held as a tensor), or build it as a tensor "
                "(torch.full((n,), c))")


def uniform(value, count):
    """``[value] * count`` with a constant ``value``: a :class:`Uniform` when ``count`` is a dynamic
    size, else the list.

    >>> uniform(None, 2)
    [None, None]
    """
    if not _is_size(count):
        return [value] * count
    if isinstance(count, torch.Tensor):
        count = count.reshape(()).to(torch.int64).item()
    return Uniform(value, count)


def uniform_range(value, *bounds):
    """``[value for _ in range(*bounds)]`` with a constant ``value``: :func:`uniform` of the range's length.

    >>> uniform_range(-1, 1, 3)
    [-1, -1]
    """
    if not any(_is_size(b) for b in bounds):
        return [value for _ in range(*bounds)]
    start, stop, step = (0, bounds[0], 1) if len(bounds) == 1 else (bounds[0], bounds[1], bounds[2] if len(bounds) > 2 else 1)
    if not isinstance(step, int) or step <= 0 or is_symbolic(step):
        return [value for _ in range(*bounds)]
    return Uniform(value, torch.sym_max((stop - start + step - 1) // step, 0))
