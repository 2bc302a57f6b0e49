"""``and``/``or``/``not``: Python semantics for Python values, logical ops for traced ones.

Converted code passes the operands of ``and``/``or`` as thunks, so the right operand is
evaluated only when Python would evaluate it.

Example::

    >>> from fxport.controlflow.operators.logical import and_, or_, not_
    >>> and_(lambda: 0, lambda: 1 / 0), or_(lambda: 0, lambda: 2), not_([])
    (0, 2, True)
"""

from __future__ import annotations

from typing import Callable

import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from fxport.controlflow.operators.lists.appender import Appender
from fxport.controlflow.operators.lists.tensor_items import TensorItems
from fxport.controlflow.operators.values import as_bool_tensor, is_bool_like, is_symbolic, is_traced


def and_(left: Callable, right: Callable):
    """``a and b``: Python semantics for Python values, logical_and for traced tensors."""
    a = left()
    if not is_traced(a):
        return a and right()
    b = right()
    return torch.logical_and(as_bool_tensor(a), as_bool_tensor(b))


def or_(left: Callable, right: Callable):
    """``a or b``: Python semantics for Python values, logical_or for traced tensors."""
    a = left()
    if not is_traced(a):
        return a or right()
    b = right()
    return torch.logical_or(as_bool_tensor(a), as_bool_tensor(b))


def not_(value):
    """``not a``."""
    if is_symbolic(value):
        return torch.sym_not(value) if is_bool_like(value) else value == 0
    if is_traced(value):
        return torch.logical_not(as_bool_tensor(value))
    return not value


def in_(value, options):
    """``value in (a, b)`` with a literal tuple or list: for a traced one-element tensor (``y =
    logits.argmax().item()`` inside a traced body), whether it equals any of them, as a bool
    tensor; ``value in t`` of a traced tensor ``t``, whether any element of ``t`` equals it (what
    ``Tensor.__contains__`` answers), as a bool tensor; anything else, Python's ``in``.

    >>> in_(torch.tensor(3), (0, 3)), in_(2, [0, 3])
    (tensor(True), False)
    """
    if isinstance(value, (torch.SymInt, torch.SymFloat)) and free_unbacked_symbols(value):
        value = torch.full((), value)  # a number read from a tensor (y = t.item()): compared as a tensor
    if isinstance(options, (Appender, TensorItems)):  # a grown list; t.tolist() of a dynamic length
        return options.contains(value)
    if isinstance(options, torch.Tensor) and is_traced(options) and not isinstance(value, str):
        return (options == value).any()  # Tensor.__contains__ without its bool(): any element equal
    if isinstance(value, torch.Tensor) and value.numel() == 1 and options and not any(
            isinstance(o, torch.Tensor) and o.numel() != 1 for o in options):
        found = [torch.eq(value.reshape(()), o.reshape(()) if isinstance(o, torch.Tensor) else o) for o in options]
        result = found[0]
        for other in found[1:]:
            result = torch.logical_or(result, other)
        return result
    return value in options
