"""Generating the input sets verification runs, besides the user's: fresh values, padding
variants of masks, and other sizes of every dynamic dimension (edges included).

The one owner of how verification inputs are drawn (:func:`generate_input_sets`), used by the
verify stage (:mod:`fxport.verify`) and the coverage pass. Values stay inside the model's input
domain (:mod:`fxport.domain`); sizes inside the range the export is valid for.
"""

from __future__ import annotations

import functools

import torch

from fxport.domain import InputDomain, padding_mask
from fxport.inputs import InputSet


def generate_input_sets(
    example: InputSet,
    dynamic_axes: dict[int, dict[int, str]] | None = None,
    seed: int = 1234,
    bounds: dict[int, dict[int, tuple[int, int]]] | None = None,
    domains: dict[int, InputDomain] | None = None,
) -> list[InputSet]:
    """Fresh values of the example's shapes, padding variants of its masks, other dynamic sizes.

    Every set draws fresh values; ``random`` (the example's own shapes) is left out when a
    ``larger`` or ``smaller`` set draws them at other sizes and no mask needs its all-ones
    variant: it would check nothing they do not, at the cost of a full-size run of both sides.
    ``smaller`` is left out when it shrinks one dimension that an edge set already runs at
    another size below the example (a clip's frames at 2).

    ``bounds`` (tensor index → axis → (low, high), from the exported program) keeps the new
    sizes inside the range the export is valid for; ``domains`` (from
    :func:`fxport.domain.input_domains`) keeps the values inside the model's domain: ids below
    their table's size, padding-shaped masks, sorted sequences. Each set is named by what it
    exercises (``random``, ``left-padded mask``, ``larger[batch=3,seq=12], left-padded mask``).
    """
    domains = domains or {}
    generator = torch.Generator().manual_seed(seed)
    has_mask = any(domain.padding_mask for domain in domains.values())
    draw = functools.partial(_with_new_values, example, domains=domains, generator=generator)
    sets = [draw({}, name="random" + (", all-ones mask" if has_mask else ""), mask_side="none")]
    if has_mask:
        sets += [draw({}, name=f"{side}-padded mask", mask_side=side) for side in ("right", "left")]
    sizes = example_dim_sizes(example, dynamic_axes or {})
    if sizes:
        low, high = _size_limits(dynamic_axes, bounds or {})
        grid = size_grid(dynamic_axes, bounds or {})
        larger = _on_grid(_larger_sizes(example, dynamic_axes, sizes, high), grid, low, high, up=True)
        smaller = _on_grid({name: min(max(2, low.get(name, 2), size // 2), size) for name, size in sizes.items()},
                           grid, low, high, up=False)
        edges = edge_sizes(example, dynamic_axes, bounds or {})
        if _edges_shrink_as_smaller_does(smaller, sizes, edges):
            smaller = sizes
        other_sizes = [(label, new_sizes, side) for label, new_sizes, side in
                       (("larger", larger, "left"), ("smaller", smaller, "right")) if new_sizes != sizes]
        if other_sizes and not has_mask:
            del sets[0]  # fresh values at other sizes: random's run adds nothing (drawn all the
            # same, so that every other set keeps the values its name rebuilds: fuzz's failed_input_sets)
        for label, new_sizes, side in other_sizes:
            desc = ",".join(f"{n}={s}" for n, s in new_sizes.items())
            name = f"{label}[{desc}]" + (f", {side}-padded mask" if has_mask else "")
            sets.append(draw(_axis_sizes(example, dynamic_axes, new_sizes), name=name, mask_side=side))
        covered = [sizes, larger, smaller]
        for new_sizes, why in edges:
            if new_sizes in covered or _two_already_checked(new_sizes, sizes, why, (larger, smaller)):
                continue
            covered.append(new_sizes)
            changed = ",".join(f"{n}={s}" for n, s in new_sizes.items() if s != sizes[n])
            name = f"size[{changed}]" + (f" {why}" if why else "") + (", right-padded mask" if has_mask else "")
            sets.append(draw(_axis_sizes(example, dynamic_axes, new_sizes), name=name, mask_side="right",
                             keep_unsized=True))
    return sets


def _edges_shrink_as_smaller_does(smaller: dict[str, int], sizes: dict[str, int],
                                  edges: list[tuple[dict[str, int], str]]) -> bool:
    """``smaller`` shrinks one dimension only, and an edge set inside the exported range already
    runs that dimension at another size of 2 or more below the example (a clip of 8 frames at 2):
    the two check the same thing, and the edge is the cheaper run. Several dimensions shrunk
    together (an image's height and width) are a combination no edge set tries: kept.

    >>> _edges_shrink_as_smaller_does({"b": 1, "t": 4}, {"b": 1, "t": 8}, [({"b": 1, "t": 2}, "")])
    True
    >>> _edges_shrink_as_smaller_does({"h": 4, "w": 4}, {"h": 8, "w": 8}, [({"h": 2, "w": 8}, "")])
    False
    """
    changed = [name for name in sizes if smaller[name] != sizes[name]]
    if len(changed) != 1:
        return False
    name = changed[0]
    return any(not why.startswith("outside") and 2 <= edge[name] < sizes[name] and edge[name] != smaller[name]
               and all(edge[other] == sizes[other] for other in sizes if other != name)
               for edge, why in edges)


def _two_already_checked(new_sizes: dict[str, int], sizes: dict[str, int], why: str,
                         checked: tuple[dict[str, int], ...]) -> bool:
    """An edge size that only sets one dimension to 2 (the first size past torch's 0/1
    specialisation) adds nothing when ``larger`` or ``smaller`` already has that dimension at 2
    (an image batch 1 → 2): one full-size run less. Bound edges (``why``) are always kept.

    >>> _two_already_checked({"b": 2, "h": 224}, {"b": 1, "h": 224}, "", ({"b": 2, "h": 225},))
    True
    """
    changed = [name for name in sizes if new_sizes[name] != sizes[name]]
    return (not why and len(changed) == 1 and new_sizes[changed[0]] == 2
            and any(other.get(changed[0]) == 2 for other in checked))


#: The ``larger`` set of a big example (over :data:`LARGER_FREE_ELEMENTS`) may hold at most this
#: many times its elements: an image batch grown 1 → 3 and 224 → 336 costs 6.75 example runs.
LARGER_BUDGET = 2.5
LARGER_FREE_ELEMENTS = 1 << 16


def _larger_sizes(example: InputSet, dynamic_axes, sizes: dict[str, int], high: dict[str, int]) -> dict[str, int]:
    """Every dynamic dimension grown by half (1 → 3); for a big example where that costs more than
    :data:`LARGER_BUDGET` example runs, by one (224 → 225, batch 1 → 2) — still another size on
    every dimension, and one that divides by nothing the example size does.

    >>> _larger_sizes(InputSet((torch.ones(1, 3, 224, 224),)), {0: {0: "b", 2: "h", 3: "w"}},
    ...               {"b": 1, "h": 224, "w": 224}, {})
    {'b': 2, 'h': 225, 'w': 225}
    >>> _larger_sizes(InputSet((torch.ones(2, 8),)), {0: {0: "b", 1: "s"}}, {"b": 2, "s": 8}, {})
    {'b': 3, 's': 12}
    """
    def capped(grown: dict[str, int]) -> dict[str, int]:
        return {name: min(size, high.get(name, 2**62)) for name, size in grown.items()}

    larger = capped({name: size + max(1, size // 2) if size >= 2 else 3 for name, size in sizes.items()})
    before, after = (_element_count(example, dynamic_axes, s) for s in (sizes, larger))
    if after > max(LARGER_BUDGET * before, LARGER_FREE_ELEMENTS):
        larger = capped({name: size + 1 for name, size in sizes.items()})
    return larger


#: Inputs of a generated size set may hold at most this many elements (or 16x the example's)
#: when a declared maximum is tried.
MAX_GENERATED_ELEMENTS = 1 << 24


def edge_sizes(example: InputSet, dynamic_axes: dict[int, dict[int, str]] | None,
               bounds: dict[int, dict[int, tuple[int, int]]]) -> list[tuple[dict[str, int], str]]:
    """The sizes where a converted model differs from eager when it does: ``(sizes, why)``.

    For each dynamic dimension, the others kept at the example's size: sizes 1, 0 and 2 where
    the declared range allows them; the declared minimum and maximum (the maximum when the
    inputs stay affordable); and both sides of every bound the capture introduced (the valid
    range of a :class:`fxport.dynamic_dims.DimRange` narrower than the declared one), so a model
    exported for sizes ≥ 2 is also run at 1. With several dimensions, also all of them at 1.
    ``why`` says what is special about the size (``"min"``, ``"outside exported 2..inf"``).

    Example::

        >>> from fxport.dynamic_dims import DimRange, UNBOUNDED
        >>> ex = InputSet((torch.ones(4, 3),))
        >>> [(s, w) for s, w in edge_sizes(ex, {0: {0: "batch"}}, {0: {0: DimRange(2, UNBOUNDED)}})]
        [({'batch': 1}, 'outside exported 2..inf'), ({'batch': 0}, 'outside exported 2..inf'), ({'batch': 2}, '')]
    """
    sizes = example_dim_sizes(example, dynamic_axes or {})
    if not sizes:
        return []
    low, high = _size_limits(dynamic_axes, bounds)
    declared_low, declared_high = _declared_limits(dynamic_axes, bounds)
    budget = max(MAX_GENERATED_ELEMENTS, 16 * sum(t.numel() for t in example.tensors()))
    found: list[tuple[dict[str, int], str]] = []

    grid = size_grid(dynamic_axes, bounds)

    def add(name: str, size: int, why: str = "") -> None:
        lo, hi = declared_low.get(name, 0), declared_high.get(name, 2**62)
        step, offset = grid.get(name, (1, 0))
        if size < lo or size > hi or size == sizes[name] or (size - offset) % step:
            return
        if size < low.get(name, 0) or size > high.get(name, 2**62):
            why = f"outside exported {_describe(low.get(name, 0), high.get(name, 2**62))}"
        new_sizes = {**sizes, name: size}
        if _element_count(example, dynamic_axes, new_sizes) > budget:
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
            add(name, d_hi, "max")
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


def _on_grid(new_sizes: dict[str, int], grid: dict, low: dict, high: dict, up: bool) -> dict[str, int]:
    """``new_sizes`` moved onto each dimension's grid: up (or down) to the next size it takes,
    the other way when that leaves the valid range.

    >>> _on_grid({"h": 129, "b": 3}, {"h": (8, 0)}, {"h": 128}, {"h": 512}, up=True)
    {'h': 136, 'b': 3}
    >>> _on_grid({"h": 100}, {"h": (8, 0)}, {"h": 64}, {"h": 512}, up=False)
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


def _declared_limits(dynamic_axes, bounds) -> tuple[dict[str, int], dict[str, int]]:
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


def _element_count(example: InputSet, dynamic_axes, new_sizes: dict[str, int]) -> int:
    total = 0
    for index, tensor in enumerate(example.tensors()):
        count = 1
        for axis, size in enumerate(tensor.shape):
            name = (dynamic_axes or {}).get(index, {}).get(axis)
            count *= new_sizes[name] if name is not None else size
        total += count
    return total


def _size_limits(dynamic_axes, bounds) -> tuple[dict[str, int], dict[str, int]]:
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


def _axis_sizes(example, dynamic_axes, new_sizes) -> dict[int, dict[int, int]]:
    return {index: {axis: new_sizes[name] for axis, name in axes.items()}
            for index, axes in dynamic_axes.items()}


def _with_new_values(example: InputSet, axis_sizes: dict[int, dict[int, int]], *, name: str,
                     domains: dict[int, InputDomain], generator: torch.Generator, mask_side: str,
                     keep_unsized: bool = False) -> InputSet:
    """The example with every tensor redrawn (``axis_sizes`` resizes axes) inside its domain.

    ``keep_unsized``: a tensor without a dynamic axis (a trip count, a threshold, a flag) keeps
    the example's value, so a set that tests a size also runs the loops and branches the
    example runs (a redrawn count of 0 would leave a loop body untested at that size).
    """
    def redraw(index: int, value: torch.Tensor) -> torch.Tensor:
        if keep_unsized and not axis_sizes.get(index):
            return value.clone()
        shape = list(value.shape)
        for axis, size in axis_sizes.get(index, {}).items():
            shape[axis] = size
        return draw_in_domain(value, tuple(shape), domains.get(index, InputDomain()), generator, mask_side)

    return example.map_tensors(redraw, name=name)


def draw_in_domain(example: torch.Tensor, shape: tuple[int, ...], domain: InputDomain,
                   generator: torch.Generator, mask_side: str = "none") -> torch.Tensor:
    """A fresh tensor of ``shape`` like ``example`` whose values lie in ``domain``.

    Example::

        >>> ids = draw_in_domain(torch.tensor([[3, 4]]), (2, 5), InputDomain(index_bound=7),
        ...                      torch.Generator().manual_seed(0))
        >>> bool((ids >= 0).all() and (ids < 7).all()), list(ids.shape)
        (True, [2, 5])
    """
    if domain.padding_mask:
        return padding_mask(shape, example.dtype, mask_side, generator).to(example.device)
    if domain.index_bound is not None:
        drawn = torch.randint(0, max(domain.index_bound, 1), shape, generator=generator)
        drawn = drawn.to(example.dtype).to(example.device)
    else:
        drawn = random_like(example, shape, generator)
    if domain.sorted_last_axis and drawn.dim() > 0:
        drawn = torch.sort(drawn, dim=-1).values
    return drawn


#: A float example with at least this many values is a sample of its distribution: new values
#: are drawn like it (its mean and spread, inside its range), not uniformly over its range, which
#: for a normal image puts most values in its tails and drives batch-norm nets out of their domain.
MIN_DISTRIBUTION_SAMPLE = 64


def _drawn_like(values: torch.Tensor, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Normal values with ``values``' mean and standard deviation, clamped to its range.

    >>> image = torch.randn(3, 32, 32, generator=torch.Generator().manual_seed(0))
    >>> drawn = _drawn_like(image.double(), (3, 32, 32), torch.Generator().manual_seed(1))
    >>> round(float(drawn.std()), 1), bool(drawn.min() >= image.min() and drawn.max() <= image.max())
    (1.0, True)
    """
    mean, std = values.mean(), values.std()
    drawn = torch.randn(shape, generator=generator, dtype=torch.float64) * std + mean
    return drawn.clamp(values.min(), values.max())


def random_like(example: torch.Tensor, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Random values of ``example``'s dtype: drawn like the example's values (their mean and spread,
    inside their range) when it holds a sample of at least :data:`MIN_DISTRIBUTION_SAMPLE`,
    uniformly over its range otherwise (wider for scalars)."""
    dtype, device = example.dtype, example.device
    values = example.detach().cpu()
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool().to(device)
    if values.numel() == 0:
        return torch.zeros(shape, dtype=dtype, device=device)
    if dtype.is_floating_point:
        low, high = values.float().min().item(), values.float().max().item()
        if values.numel() >= MIN_DISTRIBUTION_SAMPLE and high - low >= 1e-6:
            return _drawn_like(values.double(), shape, generator).to(dtype).to(device)
        if values.numel() == 1 or high - low < 1e-6:
            spread = max(abs(low), 1.0)
            low, high = low - 2 * spread, high + 2 * spread
        drawn = torch.rand(shape, generator=generator) * (high - low) + low
        return drawn.to(dtype).to(device)
    low, high = int(values.min()), int(values.max())
    if values.numel() == 1:
        low, high = min(0, low), max(2 * high, 2)
    return torch.randint(low, high + 1, shape, generator=generator).to(dtype).to(device)
