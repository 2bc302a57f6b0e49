"""Lists appended to under a tensor condition outside any converted loop.

``if c: xs.append(v)`` in an unrolled loop, in the first Python-run trips of a ``while`` whose
test becomes a tensor later (wenet's ``remove_duplicates_and_blank``), or around a converted loop
that appends (CenterTrack's early ``return`` before its ``for``): how many elements the list holds
is data. The list becomes a :class:`SelectedList`: every append is a candidate row with a keep
flag. Running both branches of the ``if`` and selecting them with ``where`` (after
:func:`aligned` gives both the same candidates) is exact, and the list read back is the kept
rows in order.

A Python list of fixed length written by index under a tensor condition (YOLOv5's ``output[xi] =
x[i]`` after ``if not x.shape[0]: continue`` in a loop over the images) is merged the same way by
entries: each branch writes its own copy, both run, every entry is selected with ``where``
(entries of other sizes padded, selected and cut back: sized_select.py), and the entries are
written back into the list object the ``if`` started from (:func:`written_back`), so every name
for it sees them. Not inside a body torch traces, where a Python list cannot be written (refused
there as before, conditionals.py).

Example::

    >>> import torch
    >>> from fxport.controlflow.operators.lists.selected import SelectedList, aligned
    >>> taken, untaken = SelectedList("xs", []), SelectedList("xs", [])
    >>> taken.append(torch.tensor(3.0))
    >>> a, b = aligned(taken, untaken)          # one candidate row; kept only where appended
    >>> a.keep, b.keep
    (tensor([True]), tensor([False]))
    >>> b.stacked().shape, a.stacked()
    (torch.Size([0]), tensor([3.]))
"""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree

from fxport.controlflow.operators.lists.appender import Appender, ByIdentity, Continues, SelectedBefore, SelectedContinued, stack
from fxport.controlflow.operators.lists.carried import extended
from fxport.controlflow.operators.lists.elements import element_rows
from fxport.controlflow.operators.optional import known_set
from fxport.controlflow.operators.state import in_traced_body
from fxport.controlflow.operators.failures import fail
from fxport.controlflow.operators.values import (is_number, is_row_of_numbers, numbers_as_tensors, row_of_numbers,
                                                same_size, scalar)


class SelectedList(Appender):
    """Candidate rows (``data``, or None before the first append) and their keep flags (``keep``,
    a bool vector); ``initial``: the Python elements it held before it became one."""

    def __init__(self, name: str, initial: list, data=None, keep=None):
        super().__init__(name, initial, data, keep, mode="select")
        self.finished = True  # readable (stacked, measured) wherever it is

    def selected_truth(self):
        """``if xs:`` of the kept rows (:func:`truth_of_selected`), for in_loop.py."""
        return truth_of_selected(self)

    @property
    def keep(self):
        return self.length

    def append(self, value):
        row = _element(value, self)
        if self.data is None:
            self.data, self.length = row.unsqueeze(0), torch.ones(1, dtype=torch.bool)
            return
        _check_same_shape(self, row)
        dtype = torch.promote_types(self.data.dtype, row.dtype)
        self.data = torch.cat([self.data.to(dtype), row.to(dtype).unsqueeze(0)])
        self.length = torch.cat([self.length, torch.ones(1, dtype=torch.bool)])

    def extend_rows(self, rows: torch.Tensor) -> "SelectedList":
        """This list followed by ``rows``, each kept (the appends of a converted loop after it)."""
        kept = torch.ones(rows.shape[0], dtype=torch.bool)
        if self.data is None:
            return self.rebuilt(rows, kept)
        dtype = torch.promote_types(self.data.dtype, rows.dtype)
        return self.rebuilt(torch.cat([self.data.to(dtype), rows.to(dtype)]), torch.cat([self.length, kept]))

    def rebuilt(self, data, length) -> "SelectedList":
        clone = SelectedList(self.name, self.initial, data, length)
        clone.location = self.location
        return clone

    def stacked(self, dim: int = 0) -> torch.Tensor:
        """``torch.stack`` of the list: its initial elements, then the kept candidates."""
        if self.data is None:
            if not self.initial:
                fail(f"torch.stack of list {self.name!r}: the list is empty on every path the export saw and its "
                     "element shape is unknown", self, "append a value of the element shape on some path")
            return torch.stack(element_rows(self.initial), dim)
        kept = self.data[self.length]
        rows = torch.cat([torch.stack(element_rows(self.initial)).to(kept.dtype), kept]) if self.initial else kept
        return torch.movedim(rows, 0, dim)

    def catted(self, dim: int = 0) -> torch.Tensor:
        """``torch.cat`` of the list (elements of one shape, rank ≥ 1)."""
        rows = self.stacked(0)
        if rows.dim() < 2:
            fail(f"torch.cat of list {self.name!r}: zero-dimensional tensors cannot be concatenated", self,
                 "use torch.stack")
        dim = dim + rows.dim() - 1 if dim < 0 else dim
        moved = torch.movedim(rows, 0, dim)
        shape = list(moved.shape)
        return moved.reshape(shape[:dim] + [shape[dim] * shape[dim + 1]] + shape[dim + 2:])

    def count(self):
        """``len()``: a size (an unbacked SymInt while exporting)."""
        if self.data is None:
            return len(self.initial)
        kept = self.length.sum().item()
        torch._check(kept >= 0)
        return len(self.initial) + kept

    def rows(self) -> torch.Tensor:
        return self.stacked(0)

    def __getitem__(self, index):
        return self.stacked(0)[index]


def truth_of_selected(value):
    """``if xs:`` of a :class:`SelectedList`: a bool tensor (is anything kept); of a list grown in
    a data-dependent loop, whether it holds elements (a tensor inside its loop: in_loop.py); other
    values as they are."""
    if isinstance(value, Appender) and not isinstance(value, SelectedList):
        return value.truth()
    if not isinstance(value, SelectedList):
        return value
    if value.initial or value.data is None:
        return bool(value.initial)
    return value.keep.any()


def _element(value, where) -> torch.Tensor:
    """An appended value as a tensor: a tensor, a number, or a list/tuple of numbers and 0-d
    tensors (``xs.append([i, j])``, which ``torch.tensor(xs)`` reads back as rows)."""
    value = known_set(value)  # None on some paths: the list is read back as tensors, where None would raise
    if isinstance(value, torch.Tensor):
        return value
    if is_number(value):
        return scalar(value)
    if is_row_of_numbers(value):
        return row_of_numbers(value)
    fail(f"list {where.name!r} appended to under a tensor condition gets a {type(value).__name__}, not a tensor or "
         "number", where, f"append one tensor (torch.stack of the parts) to {where.name!r}")


def _check_same_shape(selected: SelectedList, row: torch.Tensor) -> None:
    want = selected.data.shape[1:]
    if row.dim() != len(want) or not all(same_size(a, b) for a, b in zip(row.shape, want)):
        fail(f"list {selected.name!r} appended to under a tensor condition gets elements of shapes "
             f"{tuple(want)} and {tuple(row.shape)}", selected,
             "append elements of one shape (pad them), or collect them in a tensor")


def aligned(a: SelectedList, b: SelectedList) -> tuple[SelectedList, SelectedList]:
    """The two branches' versions of one list with the same candidate rows: the shorter is padded
    with rows that are not kept (a branch that did not append keeps nothing there)."""
    if a.data is None and b.data is None:
        return a, b
    like = a.data if a.data is not None else b.data
    a, b = _padded(a, like), _padded(b, like)
    extra = a.data.shape[0] - b.data.shape[0]
    if not isinstance(extra, int):
        fail(f"if: list {a.name!r} gets a data-dependent number of elements in a branch (a data-dependent loop "
             "there appends to it)", a, f"append a fixed number of elements per branch (one torch.cat of the "
             f"loop's elements), or keep {a.name!r} in a tensor and a count")
    if extra > 0:
        b = _with_rows(b, extra)
    elif extra < 0:
        a = _with_rows(a, -extra)
    dtype = torch.promote_types(a.data.dtype, b.data.dtype)
    return a.rebuilt(a.data.to(dtype), a.length), b.rebuilt(b.data.to(dtype), b.length)


def _padded(selected: SelectedList, like: torch.Tensor) -> SelectedList:
    if selected.data is not None:
        return selected
    return selected.rebuilt(like.new_zeros((0,) + tuple(like.shape[1:])), torch.zeros(0, dtype=torch.bool))


def _with_rows(selected: SelectedList, extra: int) -> SelectedList:
    data = selected.data
    pad = data.new_zeros((extra,) + tuple(data.shape[1:]))
    return selected.rebuilt(torch.cat([data, pad]), torch.cat([selected.length, torch.zeros(extra, dtype=torch.bool)]))


def selected_lists(args: tuple, info) -> tuple:
    """The if's arguments with each plain list the branches append to (and that is read after
    the if) as a :class:`SelectedList`."""
    outputs = set(info.names)
    converted = []
    for name, value in zip(info.params, args):
        if name in info.appended and name in outputs and isinstance(value, list):
            value = SelectedList(name, numbers_as_tensors(value))
            value.location = info.location
        converted.append(value)
    return tuple(converted)


def aligned_outputs(true_out, false_out) -> tuple:
    """Branch outputs with every SelectedList pair :func:`aligned`."""
    if not isinstance(true_out, (list, tuple)):
        return true_out, false_out
    a_out, b_out = list(true_out), list(false_out)
    for i, (a, b) in enumerate(zip(a_out, b_out)):
        if isinstance(a, SelectedList) and isinstance(b, SelectedList):
            a_out[i], b_out[i] = aligned(a, b)
    return type(true_out)(a_out), type(false_out)(b_out)


def lists_selected_before(state: tuple) -> tuple[tuple, dict]:
    """A converted loop's entry state with each SelectedList as an empty list the loop grows
    (``SelectedBefore``), and each list an enclosing (or earlier) data-dependent loop grows as one
    too (``NestedIn``, carried.py); and ``{slot: list}`` to join them to after the loop."""
    before = {i: v for i, v in enumerate(state) if isinstance(v, Appender)}
    return tuple((SelectedBefore(v) if isinstance(v, SelectedList) else Continues.of(v)) if i in before else v
                 for i, v in enumerate(state)), before


def joined_after(values: tuple, before: dict) -> tuple:
    """The loop's final state with each list selected before it (or grown by a loop around it)
    joined to what the loop appended."""
    if not before:
        return values
    values = list(values)
    for slot, selected in before.items():
        grown = values[slot]
        if not isinstance(selected, SelectedList):  # a list an outer (or earlier) loop grows
            values[slot] = extended(selected, grown)
            continue
        if isinstance(grown, Appender) and isinstance(grown.initial, SelectedContinued):
            values[slot] = grown  # its stack started with the kept rows (read inside the loop: carried.py)
        elif isinstance(grown, Appender) and not isinstance(grown, SelectedList):
            values[slot] = selected.extend_rows(stack(grown)) if grown.data is not None else selected
        elif isinstance(grown, SelectedBefore) and not grown:
            values[slot] = selected
        else:
            fail(f"list {selected.name!r} appended to under a tensor condition is replaced in a data-dependent loop",
                 selected, "only append to it")
    return tuple(values)



#: the reason a written list's ``if`` is a where (the branches must run in Python to write lists)
LIST_WRITTEN = "a Python list is written in a branch"


def is_written_list(name: str, value, info) -> bool:
    """``value`` (the argument ``name`` of an ``if``) is a list the branches write by index and the
    code after the ``if`` reads, outside a body torch traces."""
    return (isinstance(value, list) and name in info.mutated and name in info.names and name not in info.appended
            and not in_traced_body())


def lists_written(args: tuple, info) -> bool:
    """Whether the ``if`` writes an entry of a list (:func:`is_written_list`)."""
    return any(is_written_list(name, value, info) for name, value in zip(info.params, args))


def written_back(outs: tuple, args: tuple, info) -> tuple:
    """The ``if``'s outputs with each written list's selected entries put into the list object it
    started from (which then stands for the list after the ``if``).

    >>> from fxport.controlflow.operators import StatementInfo
    >>> info = StatementInfo("if", None, ("out",), params=("out",), mutated=("out",))
    >>> out = [torch.zeros(1)]
    >>> merged = written_back(([torch.ones(1)],), (out,), info)
    >>> merged[0] is out, out
    (True, [tensor([1.])])
    """
    incoming = dict(zip(info.params, args))
    outs = list(outs)
    for slot, name in enumerate(info.names):
        original = incoming.get(name)
        if is_written_list(name, original, info) and isinstance(outs[slot], list) and outs[slot] is not original:
            original[:] = outs[slot]
            outs[slot] = original
    return tuple(outs)


def _flatten(selected: SelectedList):
    return [selected.data, selected.length], (selected.name, ByIdentity(selected.initial), selected.location)


def _unflatten(children, context):
    name, initial, location = context
    result = SelectedList(name, initial.value, children[0], children[1])
    result.location = location
    return result



pytree.register_pytree_node(SelectedList, _flatten, _unflatten)
