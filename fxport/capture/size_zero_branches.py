"""The capture again without size 0 where only size 0 takes a side no graph holds.

``if boxes.numel() == 0: return keep`` beside the function's ``return keep, count``: the two
sides give values of another structure (or rank), which neither ``where`` nor ``torch.cond``
computes, and the control-flow runtime refuses the ``if``. When that side is taken only at size 0
of dimensions the user declared dynamic, the refusal names them (``size_zero_dims``,
fxport/controlflow/operators/size_zero_sides.py), and :func:`excluding_zero_sides` gives the spec
with each of them from 1: there the test is torch's plain ``False``, the ``if`` is Python's, and
the file is exact on every size it is exported for. The range is narrowed at the ``if`` (its
line in the warning, :data:`REASON`) and recorded in the ONNX metadata; verification leaves the
size 0 it made up out of its sets (fxport/verify/verified_ranges.py), and an input set of size 0
the user gives still refuses.

Example::

    >>> from torch.export import Dim
    >>> from fxport.errors import ControlFlowError
    >>> err = ControlFlowError("if: the branches produce differently structured values")
    >>> err.size_zero_dims = ("n",)
    >>> excluded = {}
    >>> excluding_zero_sides(err, {"x": {0: Dim("n")}}, excluded, set())
    {'x': {0: Dim('n', min=1)}}
    >>> list(excluded)
    ['n']
"""

from __future__ import annotations

from typing import Any

from torch.export import Dim

#: How the warning and the metadata say why the range starts at 1 (``where``: the ``if``'s line).
REASON = ("narrowed by the model at {where}, whose if returns values of another structure or rank at size 0 "
          "(no exported graph computes them beside those of the other sizes)")
#: the words of :data:`REASON` that say which narrowing a range's reason is
_MARK = "values of another structure or rank at size 0"


def excluding_zero_sides(exc: BaseException, spec: Any, excluded: dict, sources: set) -> Any:
    """``spec`` with min=1 for each Dim ``exc`` names in ``size_zero_dims`` (a refused ``if``
    that only their size 0 takes); None when it names none, or none of them is a named Dim of
    ``spec`` with min 0. ``excluded`` receives dimension name → the ``if``'s location, ``sources``
    the input sizes they are (the exports after this one run with them excluded from 0:
    operators/size_zero_sides.py's ``sizes_without_zero``)."""
    from fxport.capture.spec_refinement import limits, map_dims  # (spec_refinement reads dynamic_dims, which reads this)

    names = set(getattr(exc, "size_zero_dims", ()) or ())
    if not names or not isinstance(spec, (dict, list, tuple)):
        return None
    dims: dict[str, Dim] = {}

    def refine(dim: Dim) -> Dim:
        if dim.__name__ not in names or dim.min != 0:
            return dim
        if dim.__name__ not in dims:
            dims[dim.__name__] = Dim(dim.__name__, **{**limits(dim), "min": 1})
        return dims[dim.__name__]

    refined = map_dims(spec, refine)
    if not dims:
        return None
    for name in dims:
        excluded.setdefault(name, getattr(exc, "where", None))
    sources.update(getattr(exc, "size_zero_sources", ()))
    return refined


def zero_side_reason(where) -> str:
    """The range's reason for a dimension narrowed at ``where`` by :func:`excluding_zero_sides`."""
    return REASON.format(where=where if where is not None else "an if")


def narrowed_by_a_zero_side(dim_range) -> bool:
    """Whether a :class:`~fxport.capture.dynamic_dims.DimRange` starts at 1 for :data:`REASON`."""
    return dim_range is not None and _MARK in (getattr(dim_range, "reason", None) or "") \
        and dim_range[0] == 1 and getattr(dim_range, "declared", (0,))[0] == 0
