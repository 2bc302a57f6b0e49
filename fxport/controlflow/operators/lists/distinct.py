"""``set(xs)`` of a list grown inside the data-dependent loop that reads it.

GPT2-chitchat's repetition penalty reads the ids generated so far inside the decoding loop::

    for id in set(generated):
        next_token_logits[id] /= self.repetition_penalty
    ...
    generated.append(next_token.item())

Inside the loop the list is an :class:`~fxport.controlflow.operators.lists.appender.Appender`,
whose number of elements is data. ``iterated`` makes the distinct values so far a 1-d integer tensor
(``torch.unique``, ascending), and the ``for`` over it is a data-dependent loop over its rows.
Python's set has an order of its own; the converter sends here only a ``for`` whose body cannot
tell the order (converters/call_trees.py, :func:`order_free_body`). Any other ``set(...)`` is
the builtin.

Example::

    >>> import torch
    >>> from fxport.controlflow.operators.lists.appender import Appender
    >>> ids = Appender("ids", [], torch.zeros(4, dtype=torch.int64), torch.zeros((), dtype=torch.int64), mode="grow")
    >>> ids.data = torch.tensor([3, 1, 3])
    >>> iterated(set, ids).tolist(), iterated(set, [3, 1, 3])
    ([1, 3], {1, 3})
"""

from __future__ import annotations

from fxport.controlflow.operators.lists.appender import Appender


def iterated(function, values):
    """``set(values)`` in a ``for`` header: the distinct values so far of a list still grown by its
    loop; anything else, ``function`` (the builtin) as written."""
    if isinstance(values, Appender) and not values.finished:
        return values.distinct_so_far()
    return function(values)
