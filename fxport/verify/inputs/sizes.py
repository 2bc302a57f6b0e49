"""The sizes verification's generated sets run at, along the model's dynamic dimensions.

``larger`` and ``smaller`` (or ``mixed``: a grown batch with a shrunk image) move every dynamic
dimension off the example's size at once; :func:`edge_sizes` moves one at a time to where
conversions break (0, 1, 2, the declared and exported bounds). Every size stays on a derived
dimension's grid and inside the range the export is valid for; :mod:`fxport.verify.inputs.generated` draws
the values.

Example::

    >>> example_dim_sizes(InputSet((torch.ones(1, 3, 224, 224),)), {0: {0: "batch", 2: "h", 3: "w"}})
    {'batch': 1, 'h': 224, 'w': 224}
"""

from __future__ import annotations

import torch  # noqa: F401 - the examples' tensors

from fxport.eager.limits import ExampleCost
from fxport.eager.inputs import InputSet


def generated_sizes(example: InputSet, dynamic_axes: dict[int, dict[int, str]] | None,
                    bounds: dict, cost: ExampleCost | None = None) -> tuple[
                        dict[str, int], list[tuple[str, dict[str, int], str]], list[tuple[dict[str, int], str]]]:
    """``(the example's sizes, [(label, sizes, role)] of the sets that move every dimension at
    once, [(sizes, why)] of the edge sets)``: no set twice, none that checks nothing another
    does. ``role`` is ``"larger"`` or ``"smaller"`` (a ``mixed`` set takes smaller's role), kept
    when the other set is left out.

    ``smaller`` is left out when it shrinks one dimension that an edge set already runs at
    another size below the example (a clip's frames at 2); a big example's batch grows in the
    set that shrinks the image (``mixed``), or in that edge set, when that is cheaper
    (:func:`crossed`): ``larger[batch=1,frames=9]`` and ``mixed[batch=2,frames=2]`` cost 1.6
    runs of an 8-frame clip, where ``2×9`` frames and the edge's 2 cost 2.5. ``cost``: the
    example's eager run, for a model with converted loops (:func:`edge_sizes`).
    """
    sizes = example_dim_sizes(example, dynamic_axes or {})
    if not sizes:
        return sizes, [], []
    low, high = size_limits(dynamic_axes, bounds)
    grid = size_grid(dynamic_axes, bounds)
    larger = on_grid(larger_sizes(example, dynamic_axes, sizes, high), grid, low, high, up=True)
    smaller = on_grid({name: min(max(2, low.get(name, 2), size // 2), size) for name, size in sizes.items()},
                      grid, low, high, up=False)
    edges = edge_sizes(example, dynamic_axes, bounds, cost)
    shrinking_edge = edge_shrinking_as_smaller_does(smaller, sizes, edges)
    if shrinking_edge is None:
        larger, smaller = crossed(example, dynamic_axes, sizes, larger, smaller)
    else:  # smaller left to the edge, which the grown batch may meet instead (a clip's frames at 2)
        larger, smaller = crossed(example, dynamic_axes, sizes, larger, shrinking_edge)
        if smaller == shrinking_edge:
            smaller = sizes
        else:
            edges = [(edge, why) for edge, why in edges if edge != shrinking_edge]
    moved = [(set_label(new_sizes, sizes), new_sizes, role)
             for new_sizes, role in ((larger, "larger"), (smaller, "smaller")) if new_sizes != sizes]
    covered, kept = [sizes, larger, smaller], []
    for new_sizes, why in edges:
        if new_sizes in covered or two_already_checked(new_sizes, sizes, why, (larger, smaller)):
            continue
        covered.append(new_sizes)
        kept.append((new_sizes, why))
    return sizes, moved, kept


def edge_shrinking_as_smaller_does(smaller: dict[str, int], sizes: dict[str, int],
                                    edges: list[tuple[dict[str, int], str]]) -> dict[str, int] | None:
    """The edge set that makes ``smaller`` redundant, or None: ``smaller`` shrinks one dimension
    only, and an edge set inside the exported range already runs that dimension at another size
    of 2 or more below the example (a clip of 8 frames at 2): the two check the same thing, and
    the edge is the cheaper run. Several dimensions shrunk together (an image's height and
    width) are a combination no edge set tries: kept.

    >>> edge_shrinking_as_smaller_does({"b": 1, "t": 4}, {"b": 1, "t": 8}, [({"b": 1, "t": 2}, "")])
    {'b': 1, 't': 2}
    >>> edge_shrinking_as_smaller_does({"h": 4, "w": 4}, {"h": 8, "w": 8}, [({"h": 2, "w": 8}, "")]) is None
    True
    """
    changed = [name for name in sizes if smaller[name] != sizes[name]]
    if len(changed) != 1:
        return None
    name = changed[0]
    return next((edge for edge, why in edges
                 if not why.startswith("outside") and 2 <= edge[name] < sizes[name] and edge[name] != smaller[name]
                 and all(edge[other] == sizes[other] for other in sizes if other != name)), None)


def two_already_checked(new_sizes: dict[str, int], sizes: dict[str, int], why: str,
                         checked: tuple[dict[str, int], ...]) -> bool:
    """An edge size that only sets one dimension to 2 (the first size past torch's 0/1
    specialisation) adds nothing when ``larger`` or ``smaller`` already has that dimension at 2
    (an image batch 1 → 2): one full-size run less. Bound edges (``why``) are always kept.

    >>> two_already_checked({"b": 2, "h": 224}, {"b": 1, "h": 224}, "", ({"b": 2, "h": 225},))
    True
    """
    changed = [name for name in sizes if new_sizes[name] != sizes[name]]
    return (not why and len(changed) == 1 and new_sizes[changed[0]] == 2
            and any(other.get(changed[0]) == 2 for other in checked))


def crossed(example: InputSet, dynamic_axes, sizes: dict[str, int], larger: dict[str, int],
             smaller: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """``(larger, smaller)`` of an example over :data:`LARGER_FREE_ELEMENTS` with the dimensions
    ``larger`` doubles (an image batch 1 → 2) grown in ``smaller`` instead, when that pair of
    runs is cheaper: every dimension is still run above
    and below (or, at 1, above) the example, but the grown batch meets the shrunk image.

    >>> image, axes = InputSet((torch.ones(1, 3, 224, 224),)), {0: {0: "b", 2: "h", 3: "w"}}
    >>> crossed(image, axes, {"b": 1, "h": 224, "w": 224}, {"b": 2, "h": 225, "w": 225}, {"b": 1, "h": 112, "w": 112})
    ({'b': 1, 'h': 225, 'w': 225}, {'b': 2, 'h': 112, 'w': 112})
    """
    doubled = {name for name, size in sizes.items() if larger[name] >= 2 * size}
    big = element_count(example, dynamic_axes, sizes) > LARGER_FREE_ELEMENTS
    if not big or not doubled or doubled == set(sizes):
        return larger, smaller
    crossed_larger = {name: sizes[name] if name in doubled else size for name, size in larger.items()}
    crossed_smaller = {name: larger[name] if name in doubled else size for name, size in smaller.items()}

    def cost(*runs: dict[str, int]) -> int:
        return sum(element_count(example, dynamic_axes, run) for run in runs if run != sizes)

    if cost(crossed_larger, crossed_smaller) < cost(larger, smaller):
        return crossed_larger, crossed_smaller
    return larger, smaller


def set_label(new_sizes: dict[str, int], sizes: dict[str, int]) -> str:
    """``larger`` or ``smaller`` when every dimension moved one way (or stayed), else ``mixed``."""
    if all(new_sizes[name] >= size for name, size in sizes.items()):
        return "larger"
    return "smaller" if all(new_sizes[name] <= size for name, size in sizes.items()) else "mixed"


#: The ``larger`` set of a big example (over :data:`LARGER_FREE_ELEMENTS`) may hold at most this
#: many times its elements: an image batch grown 1 → 3 and 224 → 336 costs 6.75 example runs.
LARGER_BUDGET = 2.5


LARGER_FREE_ELEMENTS = 1 << 16


def larger_sizes(example: InputSet, dynamic_axes, sizes: dict[str, int], high: dict[str, int]) -> dict[str, int]:
    """Every dynamic dimension grown by half (1 → 3); for a big example where that costs more than
    :data:`LARGER_BUDGET` example runs, by one (224 → 225, batch 1 → 2) — still another size on
    every dimension, and one that divides by nothing the example size does.

    >>> larger_sizes(InputSet((torch.ones(1, 3, 224, 224),)), {0: {0: "b", 2: "h", 3: "w"}},
    ...               {"b": 1, "h": 224, "w": 224}, {})
    {'b': 2, 'h': 225, 'w': 225}
    >>> larger_sizes(InputSet((torch.ones(2, 8),)), {0: {0: "b", 1: "s"}}, {"b": 2, "s": 8}, {})
    {'b': 3, 's': 12}
    """
    def capped(grown: dict[str, int]) -> dict[str, int]:
        return {name: min(size, high.get(name, 2**62)) for name, size in grown.items()}

    larger = capped({name: size + max(1, size // 2) if size >= 2 else 3 for name, size in sizes.items()})
    before, after = (element_count(example, dynamic_axes, s) for s in (sizes, larger))
    if after > max(LARGER_BUDGET * before, LARGER_FREE_ELEMENTS):
        larger = capped({name: size + 1 for name, size in sizes.items()})
    return larger


#: Inputs of a generated size set may hold at most this many elements (or 16x the example's)
#: when a declared maximum is tried.
MAX_GENERATED_ELEMENTS = 1 << 24


def edge_sizes(example: InputSet, dynamic_axes: dict[int, dict[int, str]] | None,
               bounds: dict[int, dict[int, tuple[int, int]]],
               cost: ExampleCost | None = None) -> list[tuple[dict[str, int], str]]:
    """The sizes where a converted model differs from eager when it does: ``(sizes, why)``.

    For each dynamic dimension, the others kept at the example's size: sizes 1, 0 and 2 where
    the declared range allows them; the declared minimum and maximum (the maximum when the
    inputs stay affordable); and both sides of every bound the capture introduced (the valid
    range of a :class:`fxport.capture.dynamic_dims.DimRange` narrower than the declared one), so a model
    exported for sizes ≥ 2 is also run at 1. With several dimensions, also all of them at 1.
    ``why`` says what is special about the size (``"min"``, ``"outside exported 2..inf"``).
    With ``cost`` (the example's eager run, given for a model with converted loops, whose run
    grows with its sizes as Python loops do) a declared maximum is run only where its estimated
    eager run is affordable; else the largest size halving it reaches that is
    (:func:`affordable_maximum`, ``"in place of max 4096"``).

    Example::

        >>> from fxport.capture.dynamic_dims import DimRange, UNBOUNDED
        >>> ex = InputSet((torch.ones(4, 3),))
        >>> [(s, w) for s, w in edge_sizes(ex, {0: {0: "batch"}}, {0: {0: DimRange(2, UNBOUNDED)}})]
        [({'batch': 1}, 'outside exported 2..inf'), ({'batch': 0}, 'outside exported 2..inf'), ({'batch': 2}, '')]
    """
    sizes = example_dim_sizes(example, dynamic_axes or {})
    if not sizes:
        return []
    low, high = size_limits(dynamic_axes, bounds)
    declared_low, declared_high = declared_limits(dynamic_axes, bounds)
    budget = max(MAX_GENERATED_ELEMENTS, 16 * sum(t.numel() for t in example.tensors()))
    found: list[tuple[dict[str, int], str]] = []

    grid = size_grid(dynamic_axes, bounds)
    no_zero = zero_sides_left_out(dynamic_axes, bounds)

    def add(name: str, size: int, why: str = "") -> None:
        lo, hi = declared_low.get(name, 0), declared_high.get(name, 2**62)
        step, offset = grid.get(name, (1, 0))
        if size < lo or size > hi or size == sizes[name] or (size - offset) % step:
            return
        if name in no_zero and size < low.get(name, 0):  # the model's range: no graph computes its size 0
            return
        if size < low.get(name, 0) or size > high.get(name, 2**62):
            why = f"outside exported {_describe(low.get(name, 0), high.get(name, 2**62))}"
        new_sizes = {**sizes, name: size}
        if element_count(example, dynamic_axes, new_sizes) > budget:
            return
        if all(s != new_sizes for s, _ in found):
            found.append((new_sizes, why))

    for name in sizes:
        lo, hi = low.get(name, 0), high.get(name, 2**62)
        d_lo, d_hi = declared_low.get(name, 0), declared_high.get(name, 2**62)
        add(name, 1)
        add(name, 0)
        add(name, 2)
        if d_lo > 1:
            add(name, d_lo, "min")
        if d_hi < 2**62:
            chosen = affordable_maximum(example, dynamic_axes, sizes, name, d_hi, grid, cost)
            if chosen is not None:
                add(name, *chosen)
        if lo > d_lo:  # a lower bound the export introduced: both sides
            add(name, lo - 1)
            add(name, lo, "min")
        if hi < d_hi:
            add(name, hi, "max")
            add(name, hi + 1)
    if len(sizes) > 1:
        ones = {name: 1 for name in sizes}
        if all(declared_low.get(n, 0) <= 1 for n in sizes) and ones != sizes:
            outside = [n for n in sizes if low.get(n, 0) > 1]
            why = f"outside exported {', '.join(outside)} range" if outside else ""
            if all(s != ones for s, _ in found):
                found.append((ones, why))
    return found


def zero_sides_left_out(dynamic_axes, bounds) -> set[str]:
    """The dimensions the capture exported from 1 because a side of an ``if`` taken only at their
    size 0 gives values no graph computes beside the other side's (fxport/capture/size_zero_branches.py):
    size 0 is outside the file's range, and a set of it made up here would only run the other side
    (an input set of size 0 the user gives still runs, and refuses)."""
    from fxport.capture.size_zero_branches import narrowed_by_a_zero_side

    return {name for index, axes in (dynamic_axes or {}).items() for axis, name in axes.items()
            if narrowed_by_a_zero_side((bounds or {}).get(index, {}).get(axis))}


#: How :func:`edge_sizes` names a size run in place of a declared maximum too slow to run.
IN_PLACE_OF_MAX = "in place of max"


def affordable_maximum(example: InputSet, dynamic_axes, sizes: dict[str, int], name: str, maximum: int,
                       grid: dict, cost: ExampleCost | None) -> tuple[int, str] | None:
    """``(size, why)`` of the set run for ``name``'s declared ``maximum``: the maximum itself
    (``"max"``) when there is no ``cost`` or its estimated eager run (the example's seconds ×
    the size ratio) is at most :meth:`~fxport.eager.limits.ExampleCost.affordable_seconds`;
    else the largest size halving it reaches (on the grid, above the example) that is; None
    when none is (``larger`` is then the largest size run).

    >>> from fxport.eager.limits import ExampleCost
    >>> boxes = InputSet((torch.ones(12, 4),))
    >>> affordable_maximum(boxes, {0: {0: "n"}}, {"n": 12}, "n", 4096, {}, ExampleCost(0.0001, 48))  # 34 ms
    (4096, 'max')
    >>> affordable_maximum(boxes, {0: {0: "n"}}, {"n": 12}, "n", 4096, {}, ExampleCost(0.01, 48))    # 3.4 s
    (256, 'in place of max 4096')
    """
    if cost is None:
        return maximum, "max"
    step, offset = grid.get(name, (1, 0))
    size = maximum
    while size > sizes[name]:
        snapped = offset + (size - offset) // step * step
        if snapped <= sizes[name]:
            break
        if cost.estimate(element_count(example, dynamic_axes, {**sizes, name: snapped})) <= cost.affordable_seconds():
            return snapped, "max" if snapped == maximum else f"{IN_PLACE_OF_MAX} {maximum}"
        size //= 2
    return None


def size_grid(dynamic_axes, bounds) -> dict[str, tuple[int, int]]:
    """Per dimension name, ``(step, offset)`` of the sizes it takes (a derived Dim ``8 * h8``:
    (8, 0)); dimensions without a grid are left out."""
    grid = {}
    for index, axes in (dynamic_axes or {}).items():
        for axis, name in axes.items():
            step = getattr(bounds.get(index, {}).get(axis), "step", (1, 0))
            if step != (1, 0):
                grid[name] = step
    return grid


def on_grid(new_sizes: dict[str, int], grid: dict, low: dict, high: dict, up: bool) -> dict[str, int]:
    """``new_sizes`` moved onto each dimension's grid: up (or down) to the next size it takes,
    the other way when that leaves the valid range.

    >>> on_grid({"h": 129, "b": 3}, {"h": (8, 0)}, {"h": 128}, {"h": 512}, up=True)
    {'h': 136, 'b': 3}
    >>> on_grid({"h": 100}, {"h": (8, 0)}, {"h": 64}, {"h": 512}, up=False)
    {'h': 96}
    """
    def snapped(name: str, size: int) -> int:
        step, offset = grid.get(name, (1, 0))
        below = offset + (size - offset) // step * step
        above = below if below == size else below + step
        first, second = (above, below) if up else (below, above)
        fits = [s for s in (first, second) if low.get(name, 0) <= s <= high.get(name, 2**62)]
        return fits[0] if fits else size

    return {name: snapped(name, size) for name, size in new_sizes.items()}


def _describe(low: int, high: int) -> str:
    return f"{low}..{'inf' if high >= 2**62 else high}"


def declared_limits(dynamic_axes, bounds) -> tuple[dict[str, int], dict[str, int]]:
    """Per dimension name, the range the user declared (the valid range when none is known)."""
    low: dict[str, int] = {}
    high: dict[str, int] = {}
    for index, axes in (dynamic_axes or {}).items():
        for axis, name in axes.items():
            bound = bounds.get(index, {}).get(axis, (0, 2**62))
            lo, hi = getattr(bound, "declared", (0, 2**62))
            low[name] = max(low.get(name, 0), lo)
            high[name] = min(high.get(name, 2**62), hi)
    return low, high


def element_count(example: InputSet, dynamic_axes, new_sizes: dict[str, int]) -> int:
    total = 0
    for index, tensor in enumerate(example.tensors()):
        count = 1
        for axis, size in enumerate(tensor.shape):
            name = (dynamic_axes or {}).get(index, {}).get(axis)
            count *= new_sizes[name] if name is not None else size
        total += count
    return total


def size_limits(dynamic_axes, bounds) -> tuple[dict[str, int], dict[str, int]]:
    """Per dimension name, the tightest (low, high) over every axis that carries it."""
    low: dict[str, int] = {}
    high: dict[str, int] = {}
    for index, axes in dynamic_axes.items():
        for axis, name in axes.items():
            lo, hi = bounds.get(index, {}).get(axis, (0, 2**62))
            low[name] = max(low.get(name, 0), lo)
            high[name] = min(high.get(name, 2**62), hi)
    return low, high


def example_dim_sizes(example: InputSet, dynamic_axes: dict[int, dict[int, str]]) -> dict[str, int]:
    tensors = example.tensors()
    sizes: dict[str, int] = {}
    for index, axes in dynamic_axes.items():
        for axis, name in axes.items():
            sizes.setdefault(name, tensors[index].shape[axis])
    return sizes
