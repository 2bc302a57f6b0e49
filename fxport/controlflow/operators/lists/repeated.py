"""Lists of tensors repeated a dynamic number of times, read by ``torch.stack`` / ``torch.cat``.

``torch.stack([log_A] * p, dim=2)`` with ``p = log_B.shape[1]`` a dynamic size (the batch): Python
builds the list ``[log_A] * p`` before torch sees it, and for that it needs ``p`` as a number,
so torch fixes the dimension to the example's size ("the model specialises dynamic dimension
'batch' to 2"), at the top level and inside a captured cond branch or loop body alike. The
converter (:mod:`~fxport.controlflow.converters.repeated_lists`) sends such a list, written as
the first argument of ``torch.stack`` / ``torch.cat`` (``[e] * n``, ``n * [a, b]``, ``[e for _ in
range(n)]``), here. Where the count is symbolic, :func:`repeat` answers a :class:`Repeated`,
which ``_fx.stack`` / ``_fx.cat`` read as the stack (or concatenation) of the elements once,
tiled ``count`` times along ``dim``: the same tensor, with the count a size of the graph
(ONNX ``Tile``). Anywhere else (a static count, elements that are not tensors) the list is
Python's, as written.

At a count of 0 eager raises (stack and cat need a non-empty list); the file gives an empty
tensor there: that input is outside the model's domain.

Example::

    >>> import torch
    >>> len(repeat([torch.ones(2)], 3))  # a static count: Python's list
    3
    >>> stacked = Repeated([torch.tensor([1., 2.])], 3).stacked(1)
    >>> stacked.tolist()
    [[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]]
"""

from __future__ import annotations

import torch

from fxport.controlflow.operators.values import is_symbolic


class Repeated:
    """The list ``elements * count`` with a symbolic ``count``, as its elements and the count."""

    def __init__(self, elements: list, count):
        self.elements, self.count = elements, count

    def stacked(self, dim: int = 0) -> torch.Tensor:
        """``torch.stack(elements * count, dim)``: the elements stacked once, tiled along ``dim``."""
        return _tiled(torch.stack(self.elements, dim), dim, self.count)

    def catted(self, dim: int = 0) -> torch.Tensor:
        """``torch.cat(elements * count, dim)``: the elements concatenated once, tiled along ``dim``."""
        return _tiled(torch.cat(self.elements, dim), dim, self.count)

    def as_written(self) -> list:
        """Python's list (torch fixes a dynamic count to the example's size to build it)."""
        return self.elements * self.count


def _tiled(once: torch.Tensor, dim: int, count) -> torch.Tensor:
    """``once`` repeated ``count`` times along ``dim`` (negative: counted from the end)."""
    axis = dim + once.dim() if dim < 0 else dim
    return once.repeat(*[count if i == axis else 1 for i in range(once.dim())])


def repeat(elements: list, count):
    """``elements * count`` (``[e] * n``, ``n * [a, b]``): a :class:`Repeated` where ``count`` is
    symbolic and every element a tensor, else Python's list."""
    if is_symbolic(count) and elements and all(isinstance(e, torch.Tensor) for e in elements):
        return Repeated(list(elements), count)
    return elements * count


def repeat_range(element, *bounds):
    """``[element for _ in range(*bounds)]`` with ``element`` a name or attribute (the same value on
    every trip, read once here): a :class:`Repeated` where a bound is symbolic, else Python's list."""
    if len(bounds) in (1, 2) and any(is_symbolic(b) for b in bounds) and isinstance(element, torch.Tensor):
        start, stop = (0, bounds[0]) if len(bounds) == 1 else bounds
        return Repeated([element], torch.sym_max(stop - start, 0))
    return [element for _ in range(*bounds)]
