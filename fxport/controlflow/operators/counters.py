"""What the counter of a converted ``for i in range(a, b)`` is known to lie in, inside the body.

A converted loop's counter is a traced 0-d tensor: torch knows nothing of its value, so a slice
by it (``enc[t:t + 1]``, ``frames[i:i + 2]``) has a length torch must read from data (an
unbacked size), and a tensor it meets by broadcasting (``x + enc[t:t + 1]``) takes that unknown
length as its own: a carried ``x`` of 1 row becomes one of ``u`` rows and the loop's state
"grows". Eager knows better: ``a <= t < b``, so where ``b + k - 1 <= size`` the slice
``t:t + k`` holds exactly ``k`` rows. The loop lowering notes each counter it hands the body
(:func:`note_counter`); the indexing operator asks :func:`known_width` before it reads a
length from data.

Example::

    >>> import torch
    >>> counter = torch.tensor(3)
    >>> note_counter(counter, 0, 8)
    >>> known_width(counter, 1, size=8), known_width(counter, 2, size=8), known_width(counter, 1, size=5)
    (1, None, None)
"""

from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

#: the attribute a counter tensor holds its ``(least value, bound it stays below)`` in: set on
#: the tensor itself (inside a body dynamo traces a write into a module's dict is refused as a
#: side effect; one on a tensor the body made is not)
_RANGE = "_fx_counter_range"


def note_counter(counter: torch.Tensor, start, stop) -> None:
    """Record that ``start <= counter < stop`` in the body that receives ``counter``. Bounds that
    are tensors (a range read from data) say nothing torch can compare, and are not recorded."""
    if isinstance(start, torch.Tensor) or isinstance(stop, torch.Tensor):
        return
    setattr(counter, _RANGE, (start, stop))


def known_width(start, width: int, size) -> int | None:
    """``width`` when the slice ``start:start + width`` of a dimension of ``size`` holds exactly
    ``width`` positions for every value the counter ``start`` takes, else None."""
    bounds = getattr(start, _RANGE, None) if isinstance(start, torch.Tensor) else None
    if bounds is None or width <= 0:
        return None
    least, stop = bounds
    if statically_known_true(least >= 0) and statically_known_true(stop + width - 1 <= size):
        return width
    return None


def decided(left, op: str, right) -> bool | None:
    """Python's answer to ``left <op> right`` where one side is a counter :func:`note_counter`
    saw and the other a number, when every value the counter takes gives the same answer (``t ==
    0`` in the loop from its second trip on, ``i < n`` for ``i`` in ``range(n)``); else None.

    Example::

        >>> counter = torch.tensor(1)
        >>> note_counter(counter, 1, 6)
        >>> decided(counter, "==", 0), decided(0, "<", counter), decided(counter, ">", 2)
        (False, True, None)
    """
    for counter, other, flipped in ((left, right, False), (right, left, True)):
        bounds = getattr(counter, _RANGE, None) if isinstance(counter, torch.Tensor) else None
        if bounds is None or not isinstance(other, (int, torch.SymInt)) or isinstance(other, bool):
            continue
        least, highest = bounds[0], bounds[1] - 1
        if not statically_known_true(least <= highest):
            return None
        low, high = (other - highest, other - least) if flipped else (least - other, highest - other)
        return over_range(low, high, op)
    return None


def over_range(low, high, op: str) -> bool | None:
    """The answer to ``d <op> 0`` for every ``low <= d <= high``, or None where it depends on d
    (bounds: ints, SymInts, or the sympy numbers torch bounds a size expression by)."""
    zero = _known(low == 0) and _known(high == 0)
    apart = _known(low > 0) or _known(high < 0)
    always = {"<": _known(high < 0), "<=": _known(high <= 0), ">": _known(low > 0), ">=": _known(low >= 0),
              "==": zero, "!=": apart}[op]
    never = {"<": _known(low >= 0), "<=": _known(low > 0), ">": _known(high <= 0), ">=": _known(high < 0),
             "==": apart, "!=": zero}[op]
    return True if always else False if never else None


def _known(condition) -> bool:
    return statically_known_true(condition) if isinstance(condition, torch.SymBool) else bool(condition)
