"""``t.tolist()`` of a traced integer tensor whose length is not fixed: the list is the tensor.

``hyp = topk_index[i].tolist()`` with the row's length a dynamic size: Python's list needs that
size as a number (torch specialises the dimension; of a length read from data, ``narrow(0, 0,
int(n))``, no file can hold it), and a loop counter reading it inside a
data-dependent loop (``while cur < len(hyp) and hyp[cur] == hyp[prev]``, wenet's
``remove_duplicates_and_blank``) cannot pick one of its items. While exporting,
:func:`~fxport.controlflow.operators.numbers.tolist` gives such a list as :class:`TensorItems`,
the vector as int64, read the way Python reads the list:

* ``xs[i]`` (an int, a loop counter, a number read from a tensor) is the item as a 0-d int64
  tensor, which stands for the Python int in converted code (``!=``, ``==`` on it are tensor
  conditions that become where/cond/while_loop); ``xs[a:b]`` is the slice, a list again;
* ``len(xs)`` is the size (a SymInt), ``for v in xs`` a loop over its items (``while_loop`` over
  a dynamic size), ``v in xs`` whether an item equals ``v``, ``torch.tensor(xs)`` the vector,
  ``isinstance(xs, list)`` True;
* of a matrix (``t.tolist()``, or ``[v.tolist() for v in t]``: :func:`tolist_rows`) each item is
  a row's TensorItems;
* it passes into converted branches and loops as its tensor, and reads as the list inside them
  (:class:`Passing`).

Every other use (``+``, ``*``, ``==`` of lists, ``bool``, ``append``, ``sort``, ``set(xs)``, a
comprehension over it) is refused in one line at the user's line: a tensor answers those
otherwise than the list (``+`` adds, ``*`` multiplies), so no use falls through to the tensor.
Only integer dtypes (not bool) become TensorItems: their items are Python ints exactly within
int64; a float item would be a float32 tensor where Python has a double.

Example::

    >>> xs = TensorItems(torch.tensor([3, 1, 4])); xs[1], len(xs.tensor), xs[1:].tensor
    (tensor(1), 3, tensor([1, 4]))
"""

from __future__ import annotations

from typing import Callable

import torch

from fxport.controlflow.operators.failures import refuse_here
from fxport.controlflow.operators.values import is_symbolic, is_traced

_HINT = ("read it only by items (xs[i]), slices, len(), for loops and torch.tensor(xs), or keep the tensor "
         "(t rather than t.tolist()) and compute on it")


#: fxport.controlflow.operators.indexing's ``getitem`` and ``TensorSlice``, which that module
#: registers when it is imported (:func:`use_indexing`; it reads :class:`TensorItems`, so importing
#: it here would make an import circle)
_INDEXING: dict = {}


def use_indexing(getitem: Callable, slice_type: type) -> None:
    """Read items through ``getitem`` (traced indices clamped into the dimension, as everywhere)."""
    _INDEXING.update(getitem=getitem, slice_type=slice_type)


class TensorItems:
    """The list ``tensor.tolist()`` stands for, read through the int64 vector ``tensor``."""

    __slots__ = ("tensor",)

    def __init__(self, tensor: torch.Tensor):
        self.tensor = tensor

    def item(self, index):
        """``xs[index]``: a 0-d int64 tensor at an int or traced index; a TensorItems of a slice."""
        getitem = _INDEXING["getitem"]
        if isinstance(index, (slice, _INDEXING["slice_type"])):
            return TensorItems(getitem(self.tensor, index))
        if isinstance(index, bool) or not _is_index(index):
            _refuse(f"indexed by {type(index).__name__}")
        item = getitem(self.tensor, index)
        return TensorItems(item) if item.dim() else item  # a row of a matrix's list: a list again

    __getitem__ = item

    def length(self):
        """``len(xs)``: the vector's size (a SymInt where dynamic)."""
        return self.tensor.shape[0]

    def contains(self, value):
        """``value in xs``: whether an item equals ``value``, a bool tensor (of a list of numbers)."""
        if self.tensor.dim() != 1 or isinstance(value, (list, tuple, TensorItems)):
            _refuse("searched with 'in' for a list")
        return (self.tensor == value).any()

    def rows_body(self, body: Callable) -> Callable:
        """A ``for`` body over the items: a row of a matrix's list given as a list again."""
        if self.tensor.dim() == 1:
            return body

        def run(item, *args):
            return body(TensorItems(item) if isinstance(item, torch.Tensor) and item.dim() else item, *args)

        return run

    def __len__(self):
        if is_symbolic(self.tensor.shape[0]):
            _refuse("measured with len() outside converted code")
        return int(self.tensor.shape[0])

    def __iter__(self):
        _refuse("iterated outside a for statement (a comprehension, list(), set(), sum(), unpacking)")

    def __bool__(self):
        _refuse("tested as a Python bool")

    def __contains__(self, value):
        _refuse("searched with 'in' outside converted code")

    def __setitem__(self, index, value):
        _refuse("written")

    def refuse_write(self):
        """``_fx.setitem`` on it (a write at a computed index): refused as any write is."""
        _refuse("written")

    def __eq__(self, other):
        _refuse("compared with ==")

    def __ne__(self, other):
        _refuse("compared with !=")

    __hash__ = object.__hash__

    def __add__(self, other):
        _refuse("joined with +")

    __radd__ = __iadd__ = __add__

    def __mul__(self, other):
        _refuse("repeated with *")

    __rmul__ = __imul__ = __mul__

    def __lt__(self, other):
        _refuse("ordered with <, <=, >, >=")

    __le__ = __gt__ = __ge__ = __lt__

    def __getattr__(self, attr):
        if attr in _LIST_METHODS:
            _refuse(f"used with .{attr}()")
        raise AttributeError(attr)

    def __repr__(self):
        return f"TensorItems({self.tensor!r})"


_LIST_METHODS = frozenset(n for n in dir(list) if not n.startswith("_"))


def _is_index(index) -> bool:
    if isinstance(index, torch.Tensor):
        return index.dim() == 0 and not index.dtype.is_floating_point and index.dtype != torch.bool
    return isinstance(index, (int, torch.SymInt))


def _refuse(use: str):
    refuse_here(f"a list made by .tolist() of a tensor whose length is a dynamic dimension or read from the data "
                f"(held as that tensor) is {use}", _HINT)


def isinstance_(function, value, classes):
    """``isinstance(value, classes)`` as written (``function``: what the name ``isinstance`` is
    where it was called); of a TensorItems, the answer for the list it stands for
    (``isinstance(xs, list)`` is True), so the code takes the list's path.

    >>> isinstance_(isinstance, TensorItems(torch.tensor([1])), list), isinstance_(isinstance, 1, list)
    (True, False)
    """
    if function is isinstance and isinstance(value, TensorItems):
        return isinstance([], classes)
    return function(value, classes)


def holds_items(value, dims: tuple = (1,)) -> bool:
    """A traced integer tensor (not bool) of ``dims`` dimensions whose first is symbolic (a
    dynamic size, or read from data): what :func:`of` wraps."""
    return (isinstance(value, torch.Tensor) and is_traced(value) and value.dim() in dims
            and is_symbolic(value.shape[0]) and not value.dtype.is_floating_point
            and not value.is_complex() and value.dtype != torch.bool)


def tolist_rows(rows, listed: Callable):
    """``[v.tolist() for v in rows]`` (``listed``: that comprehension as written): of a traced
    integer matrix whose number of rows is a dynamic size, ``rows.tolist()`` read as the matrix
    (each item a row's TensorItems); anything else as written.

    >>> tolist_rows(torch.tensor([[1, 2]]), lambda: [[1, 2]])
    [[1, 2]]
    """
    if holds_items(rows, dims=(2,)):
        return of(rows)
    return listed()


def of(value: torch.Tensor) -> TensorItems:
    """``value.tolist()`` for a tensor :func:`holds_items` accepts."""
    return TensorItems(value.to(torch.int64))


class Passing:
    """The operands of one converted branch or loop with each TensorItems as its tensor (a
    ``cond``/``while_loop`` carries tensors). :meth:`fn` gives a body or test that sees them as
    TensorItems again; :meth:`results` makes the outputs that held one before the statement
    (``outputs``: output position → operand position) TensorItems again. A TensorItems a body
    gives at another output is refused: after the statement it would be a bare tensor."""

    def __init__(self, args: tuple, outputs: dict):
        self.positions = frozenset(i for i, a in enumerate(args) if isinstance(a, TensorItems))
        self.args = tuple(a.tensor if i in self.positions else a for i, a in enumerate(args))
        self.kept = frozenset(out for out, arg in outputs.items() if arg in self.positions)

    def __bool__(self):
        return bool(self.positions)

    def fn(self, body: Callable | None, leading: int = 0) -> Callable | None:
        """``body`` seeing the operands as TensorItems again (``leading``: arguments before the
        operands, a ``for`` body's item)."""
        if body is None:
            return None
        positions = frozenset(p + leading for p in self.positions)

        def run(*args):
            return self._tensors_out(body(*_wrapped(args, positions)))

        run.__name__ = getattr(body, "__name__", "run")
        return run

    def _tensors_out(self, values):
        if not isinstance(values, (tuple, list)) or not any(isinstance(v, TensorItems) for v in values):
            return values
        if any(isinstance(v, TensorItems) and i not in self.kept for i, v in enumerate(values)):
            _refuse("assigned inside a converted branch or loop to a name that held no such list before it")
        return type(values)(v.tensor if isinstance(v, TensorItems) else v for v in values)

    def results(self, values):
        return _wrapped(values, self.kept)


def _wrapped(values, positions: frozenset):
    """``values`` with the tensors at ``positions`` made TensorItems again."""
    if not positions or not isinstance(values, (tuple, list)):
        return values
    return type(values)(TensorItems(v) if i in positions and isinstance(v, torch.Tensor) else v
                        for i, v in enumerate(values))


def passing_loop(args: tuple, count: int) -> Passing:
    """:class:`Passing` for a loop: its first ``count`` operands are its carried state, given
    back in that order."""
    return Passing(args, {i: i for i in range(count)})


def passing_branch(args: tuple, info) -> Passing:
    """:class:`Passing` for an ``if``: its outputs are ``info.names``, its operands ``info.params``."""
    params = tuple(info.params)
    return Passing(args, {i: params.index(n) for i, n in enumerate(info.names) if n in params})
