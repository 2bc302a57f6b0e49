"""``if x.shape[1] == 1:`` on a dynamic size: the branch sees that size as 1.

Exported with sizes kept symbolic down to 1, ``x.squeeze(1)`` inside the branch cannot know the
size is 1 (torch decides size questions as if it were ≥ 2), so the branch would compute for
the general size and its result would not match the other branch. The branch taken at size 1
gets its tensors with that axis reduced to a static 1 (``sum(axis, keepdim=True)``: the same
values when the size is 1, no guard, no error at size 0 or ≥ 2 where the value is discarded),
and any result axis that the other branch gives that size is expanded back to it.

Example::

    >>> from fxport.controlflow.operators.size_one import size_one_test
    >>> size_one_test(True) is None
    True
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.utils._pytree as pytree


def size_one_test(pred):
    """``(symbol, taken)`` when ``pred`` is ``size == 1`` (taken True) or ``size != 1`` (False)
    for one symbolic size; None otherwise."""
    if not isinstance(pred, torch.SymBool):
        return None
    import sympy

    expr = pred.node.expr
    if not isinstance(expr, (sympy.Eq, sympy.Ne)):
        return None
    a, b = expr.args
    symbol = a if b == 1 else b if a == 1 else None
    if symbol is None or not symbol.is_Symbol:
        return None
    return symbol, isinstance(expr, sympy.Eq)


def axes_of(values, symbol) -> dict[int, list[int]]:
    """Slot → the axes of that tensor among ``values`` whose size is the symbol ``symbol``."""
    axes = {}
    for slot, value in enumerate(values):
        if isinstance(value, torch.Tensor) and not value.is_sparse:
            found = [axis for axis, size in enumerate(value.shape)
                     if isinstance(size, torch.SymInt) and size.node.expr == symbol]
            if found:
                axes[slot] = found
    return axes


def as_size_one(tensor: torch.Tensor, axes: list[int]) -> torch.Tensor:
    """``tensor`` with each of ``axes`` reduced to size 1 (its one row where the size is 1)."""
    for axis in axes:
        if tensor.dtype == torch.bool:
            tensor = tensor.any(axis, keepdim=True)
        else:
            tensor = tensor.sum(axis, keepdim=True, dtype=tensor.dtype)
    return tensor


def specialised(pred, true_fn: Callable, false_fn: Callable, args: tuple, run_other: Callable):
    """``(true_fn, false_fn)`` with the branch taken at size 1 specialised (see module doc).

    ``run_other(fn)`` runs the other branch once for the shapes of its results. Returns the
    functions unchanged when ``pred`` is no size-one test or no argument has that size.
    """
    test = size_one_test(pred)
    if test is None:
        return true_fn, false_fn
    symbol, taken = test
    return specialised_at(symbol, taken, true_fn, false_fn, args, run_other)


def specialised_at(symbol, taken: bool, true_fn: Callable, false_fn: Callable, args: tuple, run_other: Callable):
    """:func:`specialised` for the size ``symbol`` (a symbol, or an expression such as ``max(1, u)``),
    whose size-one side is the true branch when ``taken``."""
    axes = axes_of(args, symbol)
    if not axes:
        return true_fn, false_fn
    other = false_fn if taken else true_fn
    expand_at = [(leaf, axis) for leaf, value in enumerate(pytree.tree_leaves(run_other(other)))
                 if isinstance(value, torch.Tensor) for axis in axes_of([value], symbol).get(0, [])]
    source_slot, source_axis = next((s, a[0]) for s, a in axes.items())

    def branch(*values):
        size = values[source_slot].shape[source_axis]
        narrowed = [as_size_one(v, axes[i]) if i in axes else v for i, v in enumerate(values)]
        outs = (true_fn if taken else false_fn)(*narrowed)
        leaves, spec = pytree.tree_flatten(outs)
        for leaf, axis in expand_at:
            value = leaves[leaf] if leaf < len(leaves) else None
            if isinstance(value, torch.Tensor) and axis < value.dim() and is_static_one(value.shape[axis]):
                shape = list(value.shape)
                shape[axis] = size
                leaves[leaf] = value.expand(shape)
        return pytree.tree_unflatten(leaves, spec)

    return (branch, false_fn) if taken else (true_fn, branch)


def is_static_one(size) -> bool:
    """A size that is the Python int 1 (not a symbol)."""
    return isinstance(size, int) and not isinstance(size, torch.SymInt) and size == 1
