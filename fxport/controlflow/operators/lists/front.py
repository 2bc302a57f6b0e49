"""``xs.insert(0, v)``: a list grown at the front (pytorch_HMM's Viterbi backtrace,
``z_star_i.insert(0, z_t)`` in ``for t in range(T[i] - 1, 0, -1)``).

The converter writes ``xs.insert(i, v)`` on a list as ``insert_into(xs, i, v, lambda e: xs.append(e))``
(converters/list_extensions.py), so a loop sees the append and carries the list as every list
grown with ``append`` (docs/control-flow.md). Here a Python list is inserted into as written; a
list a data-dependent loop grows (an
:class:`~fxport.controlflow.operators.lists.appender.Appender`) gets the element through that
append, marked :class:`AtFront`: the list is then grown at the front, its rows kept in the order
they came, last first when read (``stack``, ``cat``, ``xs[k]``, ``torch.tensor(xs)``): the same list.
Only index 0 grows a list that way; another index, or appends at both ends of one list in its loop,
are refused in one line at the user's line.

Example::

    >>> import torch
    >>> from fxport.controlflow.operators.lists.appender import Appender, stack
    >>> ys = Appender("ys", [torch.tensor(9)], torch.zeros(2, dtype=torch.int64), torch.zeros((), dtype=torch.int64))
    >>> insert_into(ys, 0, torch.tensor(1), lambda e: ys.append(e))
    >>> insert_into(ys, 0, torch.tensor(2), lambda e: ys.append(e))
    >>> ys.finished = True
    >>> stack(ys).tolist(), ys[0].item()
    ([2, 1, 9], 2)
    >>> xs = [3]; insert_into(xs, 0, 4, xs.append); xs
    [4, 3]
"""

from __future__ import annotations

from fxport.controlflow.operators.failures import refuse_here


class AtFront:
    """An element ``insert_into(xs, 0, v, ...)`` hands to the list's ``append``: put it at the front."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


def insert_into(xs, index, value, append) -> None:
    """``xs.insert(index, value)``: as written for anything but a list a data-dependent loop grows
    (which has ``insert_at_front``), whose ``append`` (``lambda e: xs.append(e)``) gets the element
    at the front."""
    at_front = getattr(xs, "insert_at_front", None)
    if at_front is None:
        xs.insert(index, value)
        return None
    if isinstance(index, bool) or not isinstance(index, int) or index != 0:
        shown = index if isinstance(index, int) else "..."
        refuse_here(f"{xs.name}.insert({shown}, ...) on list {xs.name!r}, grown in a data-dependent loop: only "
                    "insert(0, ...) (a list grown at the front) is supported there",
                    f"insert at index 0, or append to {xs.name!r} and reorder it after the loop")
    at_front(value, append)
    return None


def refuse_both_ends(grown, front: bool) -> None:
    """A list grown in its loop both by ``append`` and by ``insert(0, ...)``: its order would depend on
    which trips did which, which one stack in arrival order cannot keep."""
    first, then = ("append", "insert(0, ...)") if front else ("insert(0, ...)", "append")
    grown._refuse(f"list {grown.name!r} grown in a data-dependent loop gets {then} after {first} in that loop (a list "
                  "grown at both ends)", f"grow {grown.name!r} at one end in the loop (append, or insert(0, ...) only) "
                  "and reorder it after the loop")
