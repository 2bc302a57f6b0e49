"""The capture again without size 0 where only size 0 takes a side no graph holds.

``if boxes.numel() == 0: return keep`` beside the function's ``return keep, count``: the two
sides give values of another structure (or rank), which neither ``where`` nor ``torch.cond``
computes, and the control-flow runtime refuses the ``if``. When that side is taken only at size 0
of dimensions the user declared dynamic, the refusal names them (``size_zero_dims``,
fxport/controlflow/operators/size_zero_sides.py), and
:func:`fxport.capture.spec_refinement.excluding_zero_sides` gives the spec with each of them
from 1: there the test is torch's plain ``False``, the ``if`` is Python's, and the file is exact
on every size it is exported for. This module holds why the range is narrowed: the reason at the
``if``'s line (:data:`REASON`), which the warning and the metadata give. The range is narrowed at the ``if`` (its
line in the warning, :data:`REASON`) and recorded in the ONNX metadata; verification leaves the
size 0 it made up out of its sets (fxport/verify/verified_ranges.py), and an input set of size 0
the user gives still refuses.

Example::

    >>> zero_side_reason("model.py:12").startswith("narrowed by the model at model.py:12")
    True
"""

from __future__ import annotations

#: How the warning and the metadata say why the range starts at 1 (``where``: the ``if``'s line).
REASON = ("narrowed by the model at {where}, whose if returns values of another structure or rank at size 0 "
          "(no exported graph computes them beside those of the other sizes)")
#: the words of :data:`REASON` that say which narrowing a range's reason is
_MARK = "values of another structure or rank at size 0"


def zero_side_reason(where) -> str:
    """The range's reason for a dimension narrowed at ``where`` (a refused ``if`` only size 0 takes)."""
    return REASON.format(where=where if where is not None else "an if")


def narrowed_by_a_zero_side(dim_range) -> bool:
    """Whether a :class:`~fxport.capture.dynamic_dims.DimRange` starts at 1 for :data:`REASON`."""
    return dim_range is not None and _MARK in (getattr(dim_range, "reason", None) or "") \
        and dim_range[0] == 1 and getattr(dim_range, "declared", (0,))[0] == 0
