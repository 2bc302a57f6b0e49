"""The dynamic-shape spec refined from a failed ``torch.export``: what :func:`~fxport.capture.program.capture`
retries with.

torch.export's failure names what the spec got wrong: a bound the model imposes (``Suggested
fixes``), a guard that only excludes the empty size, or guards it cannot prove over a range
(``Constraints violated``). Each function here reads one of those from the exception and
returns the spec changed accordingly (any form: dicts, tuples, lists of Dims), or None when it
does not apply.

Example::

    >>> map_dims({"x": (Dim("b"), None)}, lambda dim: dim.__name__)
    {'x': ('b', None)}
"""

from __future__ import annotations

import re
from typing import Any, Callable

from torch.export import Dim
from torch.export.dynamic_shapes import _DimHint, _DimHintType

from fxport.capture.dynamic_dims import is_finite
from fxport.capture.failures import (SUGGESTED_CONSTANT, guards_at_sizes, location_named_in_message,
                                     traced_location_from_exception)

SUGGESTED_DIM = re.compile(r"^\s*(\w+) = Dim\('(\w+)'((?:, (?:min|max)=\d+)*)\)\s*$", re.M)


def adopt_suggested_bounds(exc, normalized, adopted: dict, oblivious: bool = False) -> Any:
    """``normalized`` with the min/max torch.export suggests merged into its Dims (any form: dict,
    tuple, list); None when not applicable. The stock exporter refines the same way.

    Not adopted: a suggested constant (the model specialises the dimension: an error), a derived
    Dim, and, from a size-oblivious capture, a maximum below 2 (an artefact of the size-1 example
    that the capture from the grown example does not have). ``adopted`` receives dimension name →
    the user's file:line that bounds it (or None).
    """
    text = str(exc)
    if "Suggested fixes" not in text or SUGGESTED_CONSTANT.search(text.split("Suggested fixes", 1)[1]):
        return None
    bounds = {}
    for match in SUGGESTED_DIM.finditer(text.split("Suggested fixes", 1)[1]):
        suggested = {k.strip(): int(v) for k, v in (part.split("=") for part in match.group(3).split(",") if part.strip())}
        if oblivious and suggested.get("max", 2) < 2:
            continue
        bounds[match.group(2)] = suggested
    dims: dict[str, Dim] = {}

    def refine(dim: Dim) -> Dim:
        if dim.__name__ not in bounds:
            return dim
        if dim.__name__ not in dims:
            dims[dim.__name__] = Dim(dim.__name__, **{**limits(dim), **bounds[dim.__name__]})
        return dims[dim.__name__]

    refined = map_dims(normalized, refine)
    if not dims:
        return None
    where = location_named_in_message(text) or traced_location_from_exception(exc)
    for name in dims:
        adopted[name] = where
    return refined


def excluding_size_zero(exc, spec, adopted: dict) -> Any:
    """The spec with min=1 for the Dims a size-oblivious capture found a guard on; None if none.

    Most such guards only exclude the empty size (``interpolate`` needs an output of at least
    one row: ``trunc(3.0*w) != 0``); declaring min=1 lets the capture keep 1 and above symbolic.
    A guard that size 1 does not satisfy either (``batch != 1``), that size 2 does not (a
    specialisation, ``batch == 1``: vit's attention), or that size 0 satisfies already (a bound
    like ``seq <= 512``), makes that retry pointless: it is skipped, and the capture goes
    straight to its fallback (one export less).
    """
    names = {name for name, (at_zero, at_one, at_two) in guards_at_sizes(str(exc), 0, 1, 2)
             if at_zero is not True and at_one is not False and at_two is not False}
    if not names or not isinstance(spec, (dict, list, tuple)):
        return None
    dims: dict[str, Dim] = {}
    changed = []

    def refine(dim: Dim) -> Dim:
        if dim.__name__ not in names or dim.min != 0:
            return dim
        if dim.__name__ not in dims:
            dims[dim.__name__] = Dim(dim.__name__, **{**limits(dim), "min": 1})
            changed.append(dim.__name__)
        return dims[dim.__name__]

    refined = map_dims(spec, refine)
    if not changed:
        return None
    where = traced_location_from_exception(exc)
    for name in changed:
        adopted.setdefault(name, where)
    return refined


#: torch's constraint solver crashes while wording the fixes for some guards of size arithmetic
#: (squeezenet's ceil-mode pooling: ``(-4) + 2*((h/4) // 2) < (-2) + h/4``).
_SOLVER_CRASH = "Expected op to be '==', got"
_VIOLATED = re.compile(r"Constraints violated \(([\w, ]+)\)")


def as_dynamic_hints(exc, spec, keep_bounds: bool = False) -> Any:
    """The spec with ``Dim.DYNAMIC`` (same min/max) for the named Dims whose guards torch could
    not prove over their range and had no fix to suggest for (``1 % (96*(w // 4)) != 0`` for w ≥ 64);
    None when there are none. The stock exporter declares every dimension this way: torch keeps
    the guards it can check, and a dimension the model really specialises still fails the capture.
    The program's ranges, not the spec's, say what the file is valid for. ``keep_bounds``: not for a
    guard that fails at large sizes (BERT's ``min(64, seq) == seq``): a size-oblivious capture drops
    it, the capture from the grown example words it as a bound to adopt.

    Example::

        >>> as_dynamic_hints(RuntimeError("Constraints violated (w)! ..."), {"x": {3: Dim("w", min=64)}})
        {'x': {3: DimHint(DYNAMIC, min=64)}}
    """
    text = str(exc)
    match = _VIOLATED.search(text)
    names = {name.strip() for name in match.group(1).split(",")} if match else set()
    if _SOLVER_CRASH in text:  # torch's solver failed to word its fixes: the Dims its guard names
        names = set(re.findall(r"[A-Za-z_]\w*", text.split(_SOLVER_CRASH, 1)[1]))
    fixes = text.split("Suggested fixes", 1)[1] if "Suggested fixes" in text else ""
    names -= {m.group(2) for m in SUGGESTED_DIM.finditer(fixes)} | {m.group(1) for m in SUGGESTED_CONSTANT.finditer(fixes)}
    if keep_bounds:
        names -= {name for name, (at_large,) in guards_at_sizes(text, 2 ** 20) if at_large is False}
    changed = []

    def hint(dim: Dim) -> Any:
        if dim.__name__ not in names:
            return dim
        changed.append(dim.__name__)
        return Dim.DYNAMIC(**limits(dim))

    refined = map_dims(spec, hint)
    return refined if changed else None


def map_dims(spec: Any, fn: Callable[[Dim], Any]) -> Any:
    """``spec`` (dicts, lists, tuples of Dims) with ``fn`` applied to each named, non-derived Dim.

    >>> map_dims({"x": (Dim("b"), None)}, lambda dim: dim.__name__)
    {'x': ('b', None)}
    """
    if isinstance(spec, dict):
        return {key: map_dims(value, fn) for key, value in spec.items()}
    if isinstance(spec, (list, tuple)):
        return type(spec)(map_dims(value, fn) for value in spec)
    if isinstance(spec, Dim) and not hasattr(spec, "root"):
        return fn(spec)
    return spec


def has_derived_dims(spec: Any) -> bool:
    """Whether ``spec`` holds a derived Dim (``8 * Dim("h8")``), which needs its root as a Dim."""
    return any_dim(spec, lambda dim: hasattr(dim, "root"))


def has_dim_hints(spec: Any) -> bool:
    """Whether ``spec`` holds a ``Dim.DYNAMIC``/``Dim.AUTO`` hint (torch may specialise it)."""
    return any_dim(spec, lambda dim: isinstance(dim, _DimHint) and dim.type != _DimHintType.STATIC)


def any_dim(spec: Any, test: Callable[[Any], bool]) -> bool:
    if isinstance(spec, dict):
        return any(any_dim(value, test) for value in spec.values())
    if isinstance(spec, (list, tuple)):
        return any(any_dim(value, test) for value in spec)
    return test(spec)


def limits(dim: Dim) -> dict[str, int]:
    """A Dim's declared bounds as ``Dim(...)`` keywords (an unbounded max left out)."""
    return {"min": dim.min, **({"max": int(dim.max)} if is_finite(dim.max) else {})}


def excluding_zero_sides(exc: BaseException, spec: Any, excluded: dict, sources: set) -> Any:
    """``spec`` with min=1 for each Dim ``exc`` names in ``size_zero_dims`` (a refused ``if``
    that only their size 0 takes); None when it names none, or none of them is a named Dim of
    ``spec`` with min 0. ``excluded`` receives dimension name → the ``if``'s location, ``sources``
    the input sizes they are (the exports after this one run with them excluded from 0:
    operators/size_zero_sides.py's ``sizes_without_zero``); why: fxport/capture/size_zero_branches.py.

    >>> from fxport.errors import ControlFlowError
    >>> err = ControlFlowError("if: the branches produce differently structured values")
    >>> err.size_zero_dims = ("n",)
    >>> excluded = {}
    >>> excluding_zero_sides(err, {"x": {0: Dim("n")}}, excluded, set())
    {'x': {0: Dim('n', min=1)}}
    >>> list(excluded)
    ['n']
    """
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
