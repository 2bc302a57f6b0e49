"""``where`` between two values of one rank whose sizes differ (a branch appended a row, a
branch kept one box where the other kept a data-dependent number).

Both are padded with zeros to the larger size along each axis where they differ, selected
elementwise, and cut back to the size of the side the condition takes: that side's values fill
exactly the part kept, so the result is that side's value, whatever the other holds.

Example::

    >>> import torch
    >>> from fxport.controlflow.operators.sized_select import select_sized
    >>> select_sized(torch.tensor(True), torch.tensor([1, 2, 3]), torch.tensor([7]))
    tensor([1, 2, 3])
    >>> select_sized(torch.tensor(False), torch.tensor([1, 2, 3]), torch.tensor([7]))
    tensor([7])
"""

from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from fxport.controlflow.operators.values import as_int64, same_size


def can_select_sized(a, b) -> bool:
    """Two tensors of one rank and dtype (their sizes may differ)."""
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dim() == b.dim()
            and a.dtype == b.dtype and a.dim() > 0)


def select_sized(mask, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a`` where the 0-d ``mask`` holds, else ``b`` (see the module doc)."""
    mask = mask.reshape(()).to(torch.bool)
    sizes = {axis: (a.shape[axis], b.shape[axis]) for axis in range(a.dim())
             if not same_size(a.shape[axis], b.shape[axis])}
    for axis in sizes:
        target = _common_size(a.shape[axis], b.shape[axis])
        a, b = _padded(a, axis, target), _padded(b, axis, target)
    chosen = _where(mask, a, b)
    for axis, (size_a, size_b) in sizes.items():
        length = torch.where(mask, as_int64(size_a), as_int64(size_b)).item()
        torch._check(length >= 0)
        torch._check(length <= chosen.shape[axis])
        chosen = chosen.narrow(axis, 0, length)
    return chosen


def _common_size(size_a, size_b):
    """A size both pad to: the larger where torch knows which one it is, else their sum (torch
    proves ``sum - size >= 0`` for the padding, where it cannot prove ``max(a, b) - a >= 0`` of
    sizes like ``min(L, 8)``, minGPT's window, and would guard on the input)."""
    if statically_known_true(size_a >= size_b):
        return size_a
    if statically_known_true(size_b >= size_a):
        return size_b
    return size_a + size_b


def _padded(value: torch.Tensor, axis: int, target) -> torch.Tensor:
    extra = target - value.shape[axis]
    if isinstance(extra, int) and extra == 0:
        return value
    shape = list(value.shape)
    shape[axis] = extra
    return torch.cat([value, value.new_zeros(shape)], dim=axis)


def _where(mask, a, b):
    if a.dtype == torch.bool:  # onnxruntime has no bool Where
        return torch.logical_or(torch.logical_and(mask, a), torch.logical_and(torch.logical_not(mask), b))
    return torch.where(mask, a, b)
