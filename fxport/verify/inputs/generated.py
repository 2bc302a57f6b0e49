"""Generating the input sets verification runs, besides the user's: fresh values, padding
variants of masks, and other sizes of every dynamic dimension (edges included).

The one owner of how verification inputs are drawn (:func:`generate_input_sets`), used by the
verify stage (:mod:`fxport.verify.verification`) and the coverage pass. Values stay inside the model's input
domain (:mod:`fxport.verify.inputs.domains`); sizes inside the range the export is valid for.
"""

from __future__ import annotations

import functools

import torch

from fxport.eager import limits as eager_limits
from fxport.verify.inputs.domains import InputDomain, padding_mask
from fxport.eager.inputs import InputSet
from fxport.verify.inputs.sizes import IN_PLACE_OF_MAX, element_count, generated_sizes


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
    :func:`fxport.verify.inputs.domains.input_domains`) keeps the values inside the model's domain: ids below
    their table's size, padding-shaped masks, sorted sequences. Each set is named by what it
    exercises (``random``, ``left-padded mask``, ``larger[batch=3,seq=12], left-padded mask``).

    For a model with converted loops whose example's eager run the conversion timed
    (:func:`fxport.eager.limits.example_cost`), a declared maximum too slow to run in eager is
    replaced by the largest affordable size (``size[n=1024] in place of max 4096``), with one
    warning in the conversion's notes saying which sizes were not run.
    """
    domains = domains or {}
    generator = torch.Generator().manual_seed(seed)
    has_mask = any(domain.padding_mask for domain in domains.values())
    draw = functools.partial(_with_new_values, example, domains=domains, generator=generator)
    sets = [draw({}, name="random" + (", all-ones mask" if has_mask else ""), mask_side="none")]
    if has_mask:
        sets += [draw({}, name=f"{side}-padded mask", mask_side=side) for side in ("right", "left")]
    cost = loop_cost(example)
    sizes, moved, edges = generated_sizes(example, dynamic_axes, bounds or {}, cost)
    _note_maxima_not_run(example, dynamic_axes, sizes, edges, cost)
    if moved and not has_mask:
        del sets[0]  # fresh values at other sizes: random's run adds nothing (drawn all the
        # same, so that every other set keeps the values its name rebuilds: fuzz's failed_input_sets)
    for label, new_sizes, role in moved:
        side = "left" if role == "larger" else "right"
        desc = ",".join(f"{n}={s}" for n, s in new_sizes.items())
        name = f"{label}[{desc}]" + (f", {side}-padded mask" if has_mask else "")
        sets.append(draw(_axis_sizes(example, dynamic_axes, new_sizes), name=name, mask_side=side))
    for new_sizes, why in edges:
        changed = ",".join(f"{n}={s}" for n, s in new_sizes.items() if s != sizes[n])
        name = f"size[{changed}]" + (f" {why}" if why else "") + (", right-padded mask" if has_mask else "")
        sets.append(draw(_axis_sizes(example, dynamic_axes, new_sizes), name=name, mask_side="right",
                         keep_unsized=True))
    return sets


def loop_cost(example: InputSet) -> "eager_limits.ExampleCost | None":
    """The example's measured eager run when the conversion converted a loop (whose eager run
    grows with the sizes it loops over), else None: sizes are then chosen as before."""
    from fxport.controlflow.operators.rule_names import conversion_named

    cost = eager_limits.example_cost(example=example)
    loops = cost is not None and any(
        record.tier == "control-flow" and getattr(conversion_named(record.rule), "construct", None) in ("for", "while")
        for record in cost.rewrites)
    return cost if loops else None


def _note_maxima_not_run(example, dynamic_axes, sizes, edges, cost) -> None:
    """One warning per declared maximum replaced by a smaller size (:data:`IN_PLACE_OF_MAX`)."""
    for new_sizes, why in edges:
        if cost is None or cost.notes is None or not why.startswith(IN_PLACE_OF_MAX):
            continue
        name = next(n for n in sizes if new_sizes[n] != sizes[n])
        maximum = int(why.rsplit(" ", 1)[1])
        elements = element_count(example, dynamic_axes, {**sizes, name: maximum})
        note = (f"verification tries {name} up to {new_sizes[name]}, not at its declared max {maximum}: eager "
                f"PyTorch would take an estimated {eager_limits.seconds_text(cost.estimate(elements))} there "
                f"(the example's {eager_limits.seconds_text(cost.seconds)} × {cost.ratio(elements):.3g}); to "
                f"verify {name}={maximum}, give an input set of that size (--inputs-fn or verify_inputs=)")
        if note not in cost.notes:
            cost.notes.append(note)


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
