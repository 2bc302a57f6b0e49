"""``value[index]`` and ``target[index] = value`` with an index computed at run time.

A traced 0-d integer index becomes ``index_select``/``index_put`` instead of a guard on its
value (``.item()``); everything else indexes as Python does.

Example::

    >>> import torch
    >>> from fxport.controlflow.operators.indexing import getitem, setitem
    >>> getitem(torch.arange(4), 2), setitem([0, 0], 1, 5)
    (tensor(2), [0, 5])
"""

from __future__ import annotations

import torch

from fxport.controlflow.operators.values import is_symbolic, is_traced, scalar
from fxport.errors import ControlFlowError
from fxport.frames import here


def _is_traced_index(index) -> bool:
    return (
        isinstance(index, torch.Tensor)
        and is_traced(index)
        and index.dim() == 0
        and not index.dtype.is_floating_point
        and index.dtype != torch.bool
    )


def _position(index: torch.Tensor, size) -> torch.Tensor:
    """The 1-element int64 position of a traced index along a dimension of ``size``.

    A negative index counts from the end, and the position is clamped into the dimension: an
    index that is valid is unchanged, and one that is not (only where the statement's result is
    discarded, as on the untaken side of an ``if`` lowered with where, since eager would have
    raised) cannot make ONNX Runtime fail on Gather/ScatterND.
    """
    position = torch.where(index < 0, index + size, index).reshape(1).to(torch.int64)
    return position.clamp(max=size - 1).clamp(min=0)


def getitem(value, index):
    """``value[index]``; a traced 0-d integer index becomes index_select (no .item() guard)."""
    if not isinstance(value, torch.Tensor):
        return value[index]
    parts = index if isinstance(index, tuple) else (index,)
    if not any(_is_traced_index(p) for p in parts):
        return value[index]
    result, dim = value, 0
    squeeze = []
    for part in parts:
        if _is_traced_index(part):
            position = _position(part, result.shape[dim])
            result = torch.index_select(result, dim, position)
            squeeze.append(dim)
            dim += 1
        elif isinstance(part, slice):
            result = result[(slice(None),) * dim + (part,)]
            dim += 1
        elif isinstance(part, int):
            result = torch.narrow(result, dim, part if part >= 0 else part + result.shape[dim], 1)
            squeeze.append(dim)
            dim += 1
        else:
            return _advanced(value, parts)
    for d in reversed(squeeze):
        result = result.squeeze(d)
    return result


def _is_plain_part(part) -> bool:
    """An index part that takes exactly one dimension of the value: an int, a slice, a traced
    0-d index or an integer index tensor (no None, Ellipsis or boolean mask)."""
    if isinstance(part, (int, slice)) and not isinstance(part, bool):
        return True
    return isinstance(part, torch.Tensor) and not part.dtype.is_floating_point and part.dtype != torch.bool


def _advanced(value: torch.Tensor, parts: tuple):
    """``value[t, idx]``: a traced 0-d index beside an integer index tensor. As an index tensor of
    one element it broadcasts with the others to the shape eager's integer gives (no .item())."""
    has_tensor_index = any(isinstance(p, torch.Tensor) and p.dim() >= 1 for p in parts)
    if not has_tensor_index or len(parts) > value.dim() or not all(_is_plain_part(p) for p in parts):
        return value[parts]
    return value[tuple(_position(p, value.shape[d]) if _is_traced_index(p) else p for d, p in enumerate(parts))]


def _one_traced_axis(target, index) -> int | None:
    """The axis of ``target[:, ..., t]``'s one traced 0-d index (or symbolic size, which torch
    would specialise) when every other part is ``:``."""
    if not isinstance(target, torch.Tensor) or not isinstance(index, tuple):
        return None
    traced = [i for i, part in enumerate(index)
              if _is_traced_index(part) or isinstance(part, torch.SymInt) and is_symbolic(part)]
    plain = all(part == slice(None) for i, part in enumerate(index) if i not in traced)
    return traced[0] if len(traced) == 1 and plain and len(index) <= target.dim() else None


def setitem(target, index, value):
    """``target[index] = value``; with a traced 0-d index the tensor is updated functionally."""
    if isinstance(target, torch.Tensor) and _is_traced_index(index):
        position = _position(index, target.shape[0])
        value = scalar(value, target.dtype) if not isinstance(value, torch.Tensor) else value.to(target.dtype)
        return torch.index_put(target, (position,), value.unsqueeze(0) if value.dim() else value)
    axis = _one_traced_axis(target, index)
    if axis is not None:  # out[:, t] = v: the same along the indexed axis moved to the front
        position = index[axis] if isinstance(index[axis], torch.Tensor) else scalar(index[axis])
        moved = setitem(target.movedim(axis, 0), position, value)
        return moved.movedim(0, axis)
    axis = _traced_axis_among_basic_parts(target, index)
    if axis is not None:  # buf[t + 1, 1:] = v: the row at t, written as eager would, put back at t
        return _set_row(target, index, axis, value)
    if not isinstance(target, torch.Tensor) and (is_traced(index) or is_traced(value)) and torch.compiler.is_dynamo_compiling():
        raise ControlFlowError(
            f"a {type(target).__name__} is changed with [...] = inside a data-dependent loop or branch",
            where=here(),
            hint="use a preallocated tensor (buf[i] = v) or append to a list and torch.stack it",
        )
    if isinstance(target, torch.Tensor) and isinstance(value, torch.Tensor) and value.dtype != target.dtype:
        value = value.to(target.dtype)  # as eager's assignment casts (a counter promoted to int64 into floats)
    target[index] = value
    return target


def _traced_axis_among_basic_parts(target, index) -> int | None:
    """The axis of the one traced 0-d index in ``target[..]``'s tuple when every other part is an
    int or a slice (``trellis[t + 1, 1:]``)."""
    if not isinstance(target, torch.Tensor) or not isinstance(index, tuple) or len(index) > target.dim():
        return None
    traced = [i for i, part in enumerate(index) if _is_traced_index(part)]
    basic = all(isinstance(part, (int, slice)) and not isinstance(part, bool)
                for i, part in enumerate(index) if i not in traced)
    return traced[0] if len(traced) == 1 and basic else None


def _set_row(target: torch.Tensor, index: tuple, axis: int, value):
    """``target[index] = value`` where ``index[axis]`` is traced: the row at that position is taken
    (``index_select``), assigned with the other parts as eager assigns, and written back
    (``index_put``); the result is the new target."""
    moved = target.movedim(axis, 0)
    position = _position(index[axis], moved.shape[0])
    row = torch.index_select(moved, 0, position).squeeze(0).clone()
    rest = index[:axis] + index[axis + 1:]
    row[rest] = value.to(row.dtype) if isinstance(value, torch.Tensor) else value
    return torch.index_put(moved, (position,), row.unsqueeze(0)).movedim(0, axis)
