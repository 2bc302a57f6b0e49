"""The decisions verification replays for torch's own ops (docs/rules.md, "Decisions verification
may replay"): top-k, sort, argsort, arg-max/min, max/min over a dimension, float comparisons,
ceil/floor/round.

Each ``take`` returns the op's result with ONNX Runtime's decision in place, why that decision
is not one the op takes on keys within the comparison's tolerance (None when it is), and the
margin: how far apart the keys it decided otherwise were (the verdict's note reports it).
They are rules of the tier ``decision``, named ``decision:<op>``: ``fxport rules`` lists them,
``--disable decision:aten::topk`` leaves one out of the replay, and a rule of yours for the same
op overrides one (these sit at ``fxport.BUILTIN_PRIORITY``).

Example::

    >>> import torch
    >>> own = torch.topk(torch.tensor([3.0, 2.0, 2.0000003, 1.0]), 2)
    >>> _, problem, margin = take_topk((torch.tensor([3.0, 2.0, 2.0000003, 1.0]), 2), {}, own,
    ...                                {1: torch.tensor([0, 1])}, lambda dtype: (1e-4, 1e-3))
    >>> problem is None, f"{margin:.2g}"    # index 1 instead of 2: keys tied within tolerance
    (True, '2.4e-07')
"""

from __future__ import annotations

from typing import Callable

import torch

import fxport
from fxport.rules import keys_within, valid_indices

BUILTIN = fxport.BUILTIN_PRIORITY


def margin(picked: torch.Tensor, own: torch.Tensor) -> float:
    """The largest distance between keys a decision taken otherwise picked and the program's own
    (0.0 when none differ): the margin the verdict reports.

    >>> margin(torch.tensor([2.0, 1.0]), torch.tensor([2.0, 1.5]))
    0.5
    """
    if picked.shape != own.shape or not picked.numel():
        return 0.0
    distance = (picked.double() - own.double()).abs()
    return float(distance[torch.isfinite(distance)].max()) if bool(torch.isfinite(distance).any()) else 0.0


def _take_by_indices(x: torch.Tensor, dim: int, own_values: torch.Tensor, indices: torch.Tensor,
                     limits: Callable, what: str) -> tuple[torch.Tensor, str | None, float]:
    indices = indices.to(torch.int64)
    problem = valid_indices(indices, x.shape[dim], dim) if indices.shape == own_values.shape else \
        f"{what} have shape {list(indices.shape)} where eager has {list(own_values.shape)}"
    if problem:
        return own_values, problem, 0.0
    values = x.gather(dim, indices)
    ordered_own, ordered = own_values.sort(dim=dim).values, values.sort(dim=dim).values
    return values, keys_within(ordered, ordered_own, limits, what), margin(ordered, ordered_own)


def _dim(args: tuple, kwargs: dict, position: int, default: int, rank: int) -> int:
    given = args[position] if len(args) > position and not isinstance(args[position], bool) else None
    return (kwargs.get("dim", default) if given is None else given) % max(rank, 1)


@fxport.decision("aten::topk", label="top-k", outputs=(1,), priority=BUILTIN)
def take_topk(args, kwargs, own, taken, limits):
    """ONNX Runtime's top-k indices, admissible when their keys are the k largest within tolerance.

    (The k smallest for ``largest=False``.)"""
    x = args[0]
    values, problem, apart = _take_by_indices(x, _dim(args, kwargs, 2, -1, x.dim()), own[0], taken[1], limits,
                                              "top-k keys")
    return (values, taken[1].to(torch.int64)), problem, apart


@fxport.decision("aten::sort", label="sort", outputs=(1,), priority=BUILTIN)
def take_sort(args, kwargs, own, taken, limits):
    """ONNX Runtime's sort order, admissible when its key at each position is eager's within tolerance."""
    x = args[0]
    values, problem, _ = _take_by_indices(x, _dim(args, kwargs, 1, -1, x.dim()), own[0], taken[1], limits,
                                          "sorted keys")
    return ((values, taken[1].to(torch.int64)), problem or keys_within(values, own[0], limits, "sorted keys"),
            margin(values, own[0]))


@fxport.decision("aten::argsort", label="argsort", priority=BUILTIN)
def take_argsort(args, kwargs, own, taken, limits):
    """ONNX Runtime's argsort, admissible as a sort's order is (:func:`take_sort`)."""
    x = args[0]
    dim = _dim(args, kwargs, 1, -1, x.dim())
    (_, indices), problem, apart = take_sort((x, dim), {}, (x.gather(dim, own), own), {1: taken[None]}, limits)
    return indices, problem, apart


def _take_extreme(args, kwargs, own, taken, limits, what):
    x = args[0]
    dim = args[1] if len(args) > 1 else kwargs.get("dim")
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    indices = taken[None].to(torch.int64)
    if indices.shape != own.shape:
        return own, f"{what} has shape {list(indices.shape)} where eager has {list(own.shape)}", 0.0
    flat = x.reshape(-1) if dim is None else x
    axis = 0 if dim is None else dim % max(x.dim(), 1)
    picked, best = (indices.reshape(-1), own.reshape(-1)) if dim is None else (
        (indices, own) if keepdim else (indices.unsqueeze(axis), own.unsqueeze(axis)))
    problem = valid_indices(picked, flat.shape[axis], axis) if picked.numel() else None
    if problem:
        return indices, problem, 0.0
    keys, best_keys = flat.gather(axis, picked), flat.gather(axis, best)
    return indices, keys_within(keys, best_keys, limits, f"{what} keys"), margin(keys, best_keys)


@fxport.decision("aten::argmax", label="arg-max", priority=BUILTIN)
def take_argmax(args, kwargs, own, taken, limits):
    """ONNX Runtime's arg-max: admissible when the key it picks is the maximum within tolerance."""
    return _take_extreme(args, kwargs, own, taken, limits, "arg-max")


@fxport.decision("aten::argmin", label="arg-min", priority=BUILTIN)
def take_argmin(args, kwargs, own, taken, limits):
    """ONNX Runtime's arg-min: admissible when the key it picks is the minimum within tolerance."""
    return _take_extreme(args, kwargs, own, taken, limits, "arg-min")


def _take_reduction(args, kwargs, own, taken, limits, what):
    x = args[0]
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    axis = (args[1] if len(args) > 1 else kwargs["dim"]) % max(x.dim(), 1)
    indices, problem, apart = _take_extreme(args, kwargs, own[1], {None: taken[1]}, limits, what)
    if problem:
        return own, problem, apart
    values = x.gather(axis, indices if keepdim else indices.unsqueeze(axis))
    return (values if keepdim else values.squeeze(axis), indices), None, apart


@fxport.decision("aten::max", label="max over a dimension", outputs=(1,), priority=BUILTIN)
def take_max_dim(args, kwargs, own, taken, limits):
    """ONNX Runtime's ``max(dim)`` indices, admissible as an arg-max is.

    The full reduction has no indices and is no decision."""
    return _take_reduction(args, kwargs, own, taken, limits, "arg-max")


@fxport.decision("aten::min", label="min over a dimension", outputs=(1,), priority=BUILTIN)
def take_min_dim(args, kwargs, own, taken, limits):
    """ONNX Runtime's ``min(dim)`` indices, admissible as an arg-min is."""
    return _take_reduction(args, kwargs, own, taken, limits, "arg-min")


def take_comparison(args, kwargs, own, taken, limits):
    """ONNX Runtime's float comparison, admissible where it flips only values within tolerance.

    Every element it decides otherwise must compare values within tolerance of each other (a
    score at the threshold)."""
    flags = taken[None].to(torch.bool)
    if flags.shape != own.shape:
        return own, f"the comparison has shape {list(flags.shape)} where eager has {list(own.shape)}", 0.0
    flipped = flags != own
    left, right = (torch.as_tensor(a, dtype=torch.float64) for a in args[:2])
    left, right = torch.broadcast_tensors(left, right)
    dtype = next((a.dtype for a in args[:2] if isinstance(a, torch.Tensor) and a.dtype.is_floating_point),
                 torch.float32)
    atol, rtol = limits(dtype)
    near = (left - right).abs() <= atol + rtol * torch.maximum(left.abs(), right.abs())
    far = flipped & ~near.expand_as(flipped)
    apart = (left - right).abs().expand_as(flipped)[flipped]
    apart = float(apart.max()) if apart.numel() else 0.0
    if bool(far.any()):
        at = tuple(far.nonzero()[0].tolist())
        return own, f"it decides {left[at].item():.6g} against {right[at].item():.6g} otherwise", apart
    return flags, None, apart


def _take_rounding(boundary_offset: float):
    def take(args, kwargs, own, taken, limits):
        """ONNX Runtime's rounding of floats, admissible one off on values at a boundary.

        It may differ from the program's by one on values within tolerance of the boundary between
        the two (an integer for ceil and floor, a half for round): a box 35.0000001 px wide on one
        side and 34.9999999 on the other."""
        x, rounded = args[0], taken[None].to(own.dtype)
        if rounded.shape != own.shape:
            return own, f"the rounding has shape {list(rounded.shape)} where eager has {list(own.shape)}", 0.0
        differ = rounded != own
        if not bool(differ.any()):
            return own, None, 0.0
        values = x.double()
        boundary = torch.floor(values - boundary_offset + 0.5) + boundary_offset
        atol, rtol = limits(x.dtype)
        far = differ & (((rounded - own).abs() > 1) | ((values - boundary).abs() > atol + rtol * values.abs()))
        apart = float((values - boundary).abs()[differ].max())
        if bool(far.any()):
            at = tuple(far.nonzero()[0].tolist())
            return (own, f"it rounds {values[at].item():.6g} to {rounded[at].item():g} where eager has "
                         f"{own[at].item():g}", apart)
        return rounded, None, apart
    return take


take_ceil = fxport.decision("aten::ceil", label="ceil", priority=BUILTIN)(_take_rounding(0.0))
take_floor = fxport.decision("aten::floor", label="floor", priority=BUILTIN)(_take_rounding(0.0))
take_round = fxport.decision("aten::round", label="round", priority=BUILTIN)(_take_rounding(0.5))

for _name in ("gt", "ge", "lt", "le"):
    fxport.decision(f"aten::{_name}", label=f"comparison ({_name})", floats_only=True,
                    priority=BUILTIN)(take_comparison)
