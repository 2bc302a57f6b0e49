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
