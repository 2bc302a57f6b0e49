"""``torch.tensor([f(p) for p in xs])`` over a list of records a data-dependent loop grew.

torchaudio's forced-alignment tutorial backtracks into ``path``, a list of ``Point(token_index,
time_index, score)`` namedtuples grown in two ``while`` loops, and reads it back field by field::

    torch.tensor([[p.token_index, p.time_index] for p in path], dtype=torch.long)
    torch.tensor([p.score for p in path])

After its loop such a list is the stack of its elements' rows (a row per record, a column per
field), and its number of elements is data, so the comprehension cannot run element by element.
Its element reads the record only through its fields (``p.name``, ``p[0]``), with constants and
arithmetic: evaluated once on :class:`Columns`, where ``p.name`` is that field's column, it
gives every element at once, and ``torch.tensor`` of it is the columns stacked along the last
axis. Each column has the dtype ``torch.tensor`` gives the field's numbers (``calls.python_dtype``:
int64 for Python ints, the default float for floats, a tensor's own dtype), so the result has the
dtype ``torch.tensor`` gives the elements. The
converter sends only such comprehensions here (converters/call_trees.py); a plain list runs the
comprehension as written, into ``torch.tensor`` as converted code calls it (``_fx.tensor_``).

Example::

    >>> import collections, torch
    >>> from fxport.controlflow.operators.lists.appender import Appender
    >>> Point = collections.namedtuple("Point", ["j", "t", "score"])
    >>> path = Appender("path", [], torch.zeros(2, 3), torch.zeros((), dtype=torch.int64))
    >>> path.append(Point(1, 4, 0.5)); path.append(Point(0, 3, 0.25)); path.finished = True
    >>> tensor_of(lambda p: [p.j, p.t], path, dtype=torch.long).tolist(), tensor_of(lambda p: p.score, path).tolist()
    ([[1, 4], [0, 3]], [0.5, 0.25])
"""

from __future__ import annotations

import torch

from fxport.controlflow.operators.calls import python_dtype, tensor_
from fxport.controlflow.operators.failures import refuse_here
from fxport.controlflow.operators.lists.appender import Appender, stack
from fxport.controlflow.operators.values import is_number


class Columns:
    """Every element of a grown list of records at once: ``p.field`` / ``p[i]`` is a column."""

    def __init__(self, grown: Appender, rows: torch.Tensor, record):
        self._grown, self._rows, self._record = grown, rows, record

    def _column(self, position: int) -> torch.Tensor:
        return self._rows[:, position].to(python_dtype([self._record[position]]))

    def __getattr__(self, name: str):
        fields = type(self._record)._fields if hasattr(type(self._record), "_fields") else ()
        if name.startswith("_") or name not in fields:
            raise AttributeError(name)
        return self._column(fields.index(name))

    def __getitem__(self, position):
        if not isinstance(position, int) or not -len(self._record) <= position < len(self._record):
            refuse_here(f"an element of list {self._grown.name!r} grown in a data-dependent loop is indexed by "
                        f"{position!r} in a comprehension", "read its fields by name or by a constant position")
        return self._column(position % len(self._record))


def tensor_of(element, values, **kwargs):
    """``torch.tensor([element(p) for p in values], **kwargs)``; of a list of records a
    data-dependent loop grew, ``element`` evaluated once on its :class:`Columns`."""
    if not (isinstance(values, Appender) and values.finished):
        return tensor_([element(v) for v in values], **kwargs)  # as torch.tensor(...) in converted code
    record = record_of(values)
    if record is None:
        refuse_here(f"a comprehension over list {values.name!r} grown in a data-dependent loop reads elements that "
                    "are not records of numbers (a namedtuple or tuple of numbers)",
                    f"torch.stack({values.name}) right after the loop and compute on that")
    rows = stack(values)
    made = _as_column(element(Columns(values, rows.reshape(rows.shape[0], -1), record)), rows.shape[0])
    dtype = kwargs.pop("dtype", None)
    made = made.to(dtype) if dtype is not None else made
    return made.to(**({"device": kwargs.pop("device")} if "device" in kwargs else {}))


def record_of(grown: Appender):
    """An element of ``grown`` as it was appended (a namedtuple or a tuple of numbers), or None."""
    return grown.record


def _as_column(made, count):
    """What the element gave for every record: a column, a constant repeated, or a list of them as
    the columns of a tensor (``[p.j, p.t]``: shape (count, 2))."""
    if isinstance(made, torch.Tensor):
        return made
    if is_number(made):
        return torch.full((count,), made)
    if isinstance(made, (list, tuple)) and made:
        parts = [_as_column(part, count) for part in made]
        dtype = python_dtype(parts)
        return torch.stack([p.to(dtype) for p in parts], dim=-1)
    refuse_here(f"a comprehension over a list grown in a data-dependent loop gives a {type(made).__name__} per element",
                "give a number, a field, or a list of them per element")
