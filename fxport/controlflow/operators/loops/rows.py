"""``zip(...)`` and ``enumerate(...)`` of tensors in a ``for`` header: rows read by position.

``for i, (box, label) in enumerate(zip(boxes, labels)):`` iterates the rows of two tensors
whose number of rows may be a dynamic dimension. Python's ``zip`` and ``enumerate`` objects are
iterators: a loop over them can only run as Python (unrolled at the example's length), and a
``break`` on a tensor condition in it cannot become a ``while_loop``. The converter writes the
header's calls as :func:`zip_` and :func:`enumerate_`; while exporting, when every zipped value
is a tensor with at least one dimension, they return :class:`Rows`: the tensors and how one item
is built from them at a position (``(i, (boxes[i], labels[i]))``). ``for_stmt`` runs a loop over
rows whose count is a dynamic size (or whose ``break`` is a tensor) as a ``while_loop`` over the
positions, passing the tensors into the body, which reads each row at the loop counter. A
static count runs as Python, the items as Python's ``zip`` gives them. Anything else (lists,
generators, ranges, outside export) is the builtin.

Example::

    >>> import torch
    >>> list(zip_([1, 2], "ab"))
    [(1, 'a'), (2, 'b')]
    >>> list(enumerate_(zip_([5, 6], [7, 8]), start=1))
    [(1, (5, 7)), (2, (6, 8))]
"""

from __future__ import annotations

import builtins
from typing import Callable

import torch

from fxport.controlflow.operators.indexing import getitem
from fxport.controlflow.operators.values import is_traced, same_size


class Rows:
    """The items a ``zip``/``enumerate`` of ``tensors`` yields: ``make(position, tensors)`` builds
    the item at ``position``; ``length`` is the number of items (a SymInt where dynamic)."""

    def __init__(self, tensors: tuple, length, make: Callable):
        self.tensors, self.length, self._make = tensors, length, make

    def item(self, position, tensors: tuple | None = None):
        """The item at ``position``, read from ``tensors`` (inside a loop body: the body's own
        inputs standing for :attr:`tensors`)."""
        return self._make(position, self.tensors if tensors is None else tensors)

    def __iter__(self):
        for position in range(int(self.length)):
            yield self.item(position)


def zip_(*iterables, **kwargs):
    """``zip(...)`` in a ``for`` header: :class:`Rows` of tensors being exported, else the builtin."""
    if kwargs or not iterables or not all(_has_rows(v) for v in iterables):
        return builtins.zip(*iterables, **kwargs)
    return Rows(tuple(iterables), _shortest([v.shape[0] for v in iterables]),
                lambda position, tensors: tuple(_row(t, position) for t in tensors))


def enumerate_(iterable, start=0):
    """``enumerate(...)`` in a ``for`` header: :class:`Rows` (the counter first) of a tensor being
    exported or of :func:`zip_`'s rows, else the builtin."""
    if isinstance(iterable, Rows):
        inner = iterable
        return Rows(inner.tensors, inner.length, lambda position, tensors: (_counted(position, start),
                                                                             inner.item(position, tensors)))
    if _has_rows(iterable):
        return Rows((iterable,), iterable.shape[0],
                    lambda position, tensors: (_counted(position, start), _row(tensors[0], position)))
    return builtins.enumerate(iterable, start)


def _has_rows(value) -> bool:
    return isinstance(value, torch.Tensor) and value.dim() > 0 and is_traced(value)


def _shortest(lengths: list):
    """The number of items ``zip`` gives: the lengths' minimum (one of them where all are equal)."""
    shortest = lengths[0]
    for length in lengths[1:]:
        if not same_size(shortest, length):
            shortest = torch.sym_min(shortest, length)
    return shortest


def _row(tensor: torch.Tensor, position):
    return getitem(tensor, position)  # a traced counter too (its range known: operators/counters.py)


def _counted(position, start):
    return position if isinstance(start, int) and start == 0 else position + start
