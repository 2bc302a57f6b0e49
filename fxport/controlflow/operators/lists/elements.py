"""The elements of a grown list as the rows ``torch.stack`` / ``torch.tensor`` read back.

A list a loop grows may hold, besides tensors, numbers and tuples of numbers: Whisper's DTW
backtrace appends ``(i - 1, j - 1)``, and its first trip runs as Python (``i > 0`` of a size is
True for every size the capture allows) before ``trace[i, j] == 0`` makes ``i`` a tensor, so the
loop starts from a list that already holds a tuple of sizes. ``torch.tensor(result)`` reads each
such element as one row; an appended one becomes that row at the append (``Appender.append``),
one that was there before the loop becomes it where the list is stacked.

Example::

    >>> import torch
    >>> [tuple(e.tolist()) if e.dim() else e.item() for e in element_rows([(2, 3), 4, torch.tensor([5, 6])])]
    [(2, 3), 4, (5, 6)]
"""

from __future__ import annotations

import torch

from fxport.controlflow.operators.values import is_number, is_row_of_numbers, row_of_numbers, scalar


def as_element(value):
    """A tensor as it is, a number as a 0-d tensor, a tuple or list of numbers and one-element
    tensors as one 1-d row (dtypes promoted as ``torch.tensor`` promotes them); anything else
    as it is (``torch.stack`` says what is wrong)."""
    if isinstance(value, torch.Tensor):
        return value
    if is_row_of_numbers(value):
        return row_of_numbers(value)
    return scalar(value) if is_number(value) else value


def numbers_in_rows_as_tensors(initial):
    """A loop's list's elements before the loop with each tuple or list of numbers holding 0-d
    tensors instead (``(i - 1, j - 1)`` of sizes): the loop's body reads them, and a size dynamo
    meets in them inside a body it traces is taken as a constant (the capture specialised the
    size). The same tuples in structure; ``initial`` itself where nothing changes (a list fxport
    made, :class:`~fxport.controlflow.operators.lists.appender.SelectedBefore`, is never one)."""
    if type(initial) is not list or not any(is_row_of_numbers(e) and any(is_number(v) for v in e) for e in initial):
        return initial
    return [_same_kind(e, [scalar(v) if is_number(v) else v for v in e]) if is_row_of_numbers(e) else e for e in initial]


def _same_kind(row, values: list):
    """``values`` as a sequence of ``row``'s type: a namedtuple's fields (``Point(j, t, score)``,
    torchaudio's forced-alignment backtrack) by position, a tuple or list from the values."""
    return type(row)._make(values) if hasattr(type(row), "_make") else type(row)(values)


def element_rows(elements) -> list:
    """``elements`` (a list's elements before or after its loop), each as :func:`as_element` makes it."""
    return [as_element(e) for e in elements]
