"""Reads of a list inside the data-dependent loop that grows it: ``xs[-k]``, ``xs[-k:]``,
``xs == []``, ``if xs`` (issue #47: NeMo's ``last_label = SOS if label == [] else label[-1]``,
icefall's ``hyp[-context_size:]``).

Inside the loop the list is an :class:`~fxport.controlflow.operators.lists.appender.Appender`:
rows so far (the ``rows`` buffer of a ``for`` over a range, written at the carried count, or the
``grow`` stack of a loop whose state grows) and the count of its elements. A read is a read of
those rows at the count: ``xs[-k]`` is row ``count - k``, ``xs[-k:]`` rows ``count - k`` to
``count``, ``xs == []`` is ``count == 0``, all tensors, so a test of them is a tensor condition
(``where``/``cond``). A row read where the list holds fewer elements (the side of a ``where`` not
taken, or where eager raises IndexError) reads a zero row padded after the rows, never out of
bounds. A ``while`` loop carries only a count in its first pass (``count`` mode): its probe
notes a test of the list's emptiness, and the loop then carries the stack (``grow``), since a
later trip may read the list where the first did not. A list grown at the front (``insert(0, v)``,
front.py) holds its rows in the order they came: its element ``k`` is row ``count - 1 - k``.

Example::

    >>> import torch
    >>> from fxport.controlflow.operators.lists.appender import Appender
    >>> ys = Appender("ys", [], torch.zeros(3, 2), torch.zeros((), dtype=torch.int64))
    >>> (ys == []).item(), read(ys, -1).tolist()      # empty: a zero row, never an index error
    (True, [0.0, 0.0])
    >>> ys.append(torch.ones(2)); ys.append(torch.full((2,), 2.0))
    >>> (ys == []).item(), read(ys, -1).tolist(), read(ys, -2).tolist()
    (False, [2.0, 2.0], [1.0, 1.0])
"""

from __future__ import annotations

import torch

from fxport.controlflow.operators.failures import refuse_here
from fxport.controlflow.operators.lists.elements import element_rows
from fxport.controlflow.operators.values import as_int64


def probe_items(grown) -> list:
    """The probe's elements so far, the outer loop's first (a :class:`Continues` of its probe)."""
    first = grown.initial.items if _continues(grown.initial) else list(grown.initial)
    if getattr(grown, "front", False):  # grown at the front: the probe's elements, last first, then the others
        return list(reversed(grown.probe)) + list(first)
    return list(first) + list(grown.probe)


def continued_rows(grown):
    """In a probe, the rows of a list whose outer loop carries its stack (a :class:`Continues` of
    it): that stack, then the probe's elements; else None."""
    if grown.mode != "probe" or not _continues(grown.initial) or grown.initial.rows is None:
        return None
    rows = grown.initial.rows
    if grown.probe:
        rows = torch.cat([rows, torch.stack(list(grown.probe)).to(rows.dtype)])
    return rows


def _continues(initial) -> bool:
    """Whether a list's ``initial`` is the outer list's elements so far (appender.Continues)."""
    return getattr(initial, "continues_outer", False)


def count_so_far(grown) -> torch.Tensor:
    """The number of elements the list holds inside its loop (the initial ones too), 0-d int64."""
    rows = continued_rows(grown)
    if rows is not None:
        return as_int64(rows.shape[0])
    if grown.mode == "grow":
        return as_int64(grown.data.shape[0]) + len(grown.initial)
    appends = grown.length[1] if grown.mode == "write" else grown.length
    return as_int64(appends) + len(grown.initial)


def is_empty(grown):
    """``xs == []``: a Python bool where the count is a Python number (the probe, a list whose
    length is known after its loop), else a 0-d bool tensor."""
    if not grown.finished and grown.mode != "select":
        grown.check_prefix_known(f"{grown.name} == []")  # elements before the loop that it does not count
    if grown.mode == "probe":
        grown.asked_empty = True
        if continued_rows(grown) is not None:
            return count_so_far(grown) == 0
        return not probe_items(grown)
    if grown.mode == "select":
        truth = grown.selected_truth()  # a SelectedList's (lists/selected.py)
        return (not truth) if isinstance(truth, bool) else torch.logical_not(truth)
    if grown.finished:
        size = grown.len_after_loop()
        return size == 0 if isinstance(size, int) else as_int64(size) == 0
    return count_so_far(grown) == 0


def read(grown, index):
    """``xs[index]`` inside the loop that grows ``xs`` (``rows``, ``count`` or ``grow`` mode)."""
    if getattr(grown, "front", False) and grown.mode in ("rows", "grow"):
        return _read_front(grown, index)
    if isinstance(index, bool) or not isinstance(index, (int, slice)):
        if grown.mode == "grow" or continued_rows(grown) is not None:  # parts[k], k a counter: as torch indexes it
            return _rows(grown)[index]
        _refuse(grown, f"with a {type(index).__name__} index", "index with a Python int or a slice xs[-k:]")
    if grown.mode in ("count", "write"):
        refuse_here(f"list {grown.name!r} grown in a data-dependent while loop is read by position inside it on a "
                    "trip after the first, which did not read it (the loop's first pass only counts the elements)",
                    f"test it as {grown.name} == [] (the loop then carries its elements), loop over a range, or keep "
                    f"the value you need in a variable of its own (last = v where you append v)")
    if isinstance(index, int):
        if 0 <= index < len(grown.initial):
            return grown.initial[index]  # before any append: the same element on every trip
        rows = _rows(grown)
        count = count_so_far(grown)
        position = count + index if index < 0 else as_int64(index)
        return _row_at(rows, position, count)
    return _sliced(grown, index)


def _read_front(grown, index):
    """``xs[k]`` inside the loop of a list grown at the front: row ``count - 1 - k`` of the rows in
    the order they came (its elements before the loop first, reversed: :func:`_rows`)."""
    traced = isinstance(index, torch.SymInt) or (
        isinstance(index, torch.Tensor) and index.dim() == 0 and not index.dtype.is_floating_point and index.dtype != torch.bool)
    if isinstance(index, bool) or not (isinstance(index, int) or traced):
        _refuse(grown, f"grown at the front (insert(0, ...)), with a {type(index).__name__} index",
                f"read single elements {grown.name}[k] there, or keep the rows you need in a tensor")
    count = count_so_far(grown)
    position = as_int64(index)
    position = torch.where(position < 0, position + count, position) if traced or index < 0 else position
    return _row_at(_rows(grown), count - 1 - position, count)


def _rows(grown) -> torch.Tensor:
    """The rows that hold the elements from position 0 (the initial ones first; of a list grown at the
    front, those reversed, so that all its rows are in the order they came)."""
    rows = continued_rows(grown)
    if rows is not None:
        return rows
    if grown.mode == "grow" or not grown.initial:
        return grown.data
    first = torch.stack(element_rows(grown.initial)).to(grown.data.dtype)
    if getattr(grown, "front", False):
        first = first.flip(0)
    if tuple(first.shape[1:]) != tuple(grown.data.shape[1:]):
        _refuse(grown, "whose elements before the loop have another shape than those it appends",
                f"append elements of one shape to {grown.name!r}")
    return torch.cat([first, grown.data])


def _row_at(rows: torch.Tensor, position: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """Row ``position`` of ``rows`` where ``0 <= position < count``, else a zero row (read only on
    a side not taken, or where eager raises IndexError): never an index out of bounds."""
    padded = torch.cat([rows, rows.new_zeros((1,) + tuple(rows.shape[1:]))])
    inside = torch.logical_and(position >= 0, position < count)
    at = torch.where(inside, position, as_int64(rows.shape[0]))
    return padded.index_select(0, at.reshape(1)).squeeze(0)


def _sliced(grown, index: slice):
    """``xs[a:b]`` inside the loop: a list of those rows (``torch.stack`` reads it back)."""
    if grown.mode in ("grow", "probe"):  # probe: of a list whose outer loop carries its stack
        return grown.sliced(_rows(grown)[index])  # a slice of the stack so far: its length is a size
    start, stop, step = index.start, index.stop, index.step
    if not (isinstance(start, int) and start < 0 and stop is None and step in (None, 1)):
        _refuse(grown, f"with the slice [{_text(start)}:{_text(stop)}{'' if step is None else ':' + _text(step)}]",
                f"read {grown.name}[-k:] with k no more than the elements {grown.name!r} holds before the loop, "
                "or keep the rows you need in a tensor")
    k = -start
    if k > len(grown.initial):  # how many rows the slice holds would be data
        _refuse(grown, f"with [{start}:] (its length is data: the list holds fewer than {k} elements before the loop)",
                f"start {grown.name!r} with at least {k} elements before the loop, or keep the rows you need in a tensor")
    rows = _rows(grown)
    count = count_so_far(grown)
    positions = count - k + torch.arange(k)
    return grown.sliced(rows.index_select(0, positions))


def _text(value) -> str:
    return "" if value is None else str(value)


def _refuse(grown, problem: str, hint: str):
    refuse_here(f"indexing list {grown.name!r} inside the data-dependent loop that grows it {problem} is not "
                "supported", hint)
