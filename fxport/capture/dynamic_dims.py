"""Dynamic dimensions: the two spellings of a spec, and the sizes a captured program is valid for.

The torch.export format (``Dim`` objects, ``Dim.AUTO``, per-argument dicts or tuples) passes
through unchanged; the simple form names the axes, ``{"x": {0: "batch", 2: "height"}}``, and axes
with the same name share one ``Dim``. After capture, :func:`dynamic_dim_bounds` reads the range
each dynamic input dimension is valid for (a :class:`DimRange`: valid and declared range, and
where the capture narrowed it); :func:`record_dynamic_ranges` writes them to ONNX metadata.

Example::

    >>> import torch
    >>> from fxport.eager.inputs import InputSet
    >>> normalize_dynamic_shapes(torch.nn.ReLU(), {"input": {0: "batch"}}, InputSet((torch.ones(2, 3),)))
    {'input': {0: Dim('batch', min=0)}}
"""

from __future__ import annotations

import json
from typing import Any

import torch
from torch.export import Dim

from fxport.capture.narrowings import symbol_key
from fxport.capture.size_zero_branches import narrowed_by_a_zero_side, zero_side_reason
from fxport.capture.squeezed_sizes import REASON as squeezed_reason, squeezed_at as squeezed_where
from fxport.errors import InputSpecError
from fxport.eager.calls import Signature
from fxport.eager.inputs import InputSet


def normalize_dynamic_shapes(module: "torch.nn.Module | Signature", dynamic_shapes: Any, inputs: InputSet) -> Any:
    """Turn the simple ``{name: {axis: "dim"}}`` form into torch.export's, keyed by parameter.

    ``module`` is the model or its :class:`~fxport.eager.calls.Signature` (as in the functions below).

    Strings become ``Dim`` objects shared by name, also in torch.export's positional form
    (``({0: "batch"}, None)``); everything else passes through unchanged. Inputs of ``forward``
    that the dict form does not mention get ``None`` (static).
    """
    if dynamic_shapes is None:
        return None
    dims: dict[str, Dim] = {}

    def to_dim(value):
        if isinstance(value, str):
            if not value.isidentifier():
                raise InputSpecError(f"dynamic dimension name {value!r} is not an identifier",
                                     hint="use names like batch, seq, height")
            return dims.setdefault(value, Dim(value))
        if isinstance(value, dict):
            return {int(axis): to_dim(v) for axis, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(to_dim(v) for v in value)
        return value

    if not isinstance(dynamic_shapes, dict):
        return to_dim(dynamic_shapes)
    signature = Signature.of(module)
    parameters = signature.parameters
    unknown = [name for name in dynamic_shapes if name not in parameters]
    if unknown:
        raise InputSpecError(
            f"dynamic shapes name {', '.join(map(str, unknown))}, which forward does not take",
            hint=f"forward's parameters are: {', '.join(parameters)}",
        )
    dynamic_shapes = _checked_axes(signature, inputs, dynamic_shapes)
    return {name: to_dim(dynamic_shapes.get(name)) for name in signature.bound_names(inputs)}


def _checked_axes(signature: Signature, inputs: InputSet, dynamic_shapes: dict) -> dict:
    """The dict form with every axis checked against its tensor's rank; negative axes counted
    from the end. An axis the input does not have is a usage error, not an IndexError."""
    bound = signature.bind(inputs)
    checked = {}
    for name, spec in dynamic_shapes.items():
        value = bound.get(name)
        if not isinstance(spec, dict) or not isinstance(value, torch.Tensor):
            if isinstance(spec, dict) and spec and name in bound and value is not None:
                raise InputSpecError(f"dynamic axes are given for {name!r}, which is a "
                                     f"{type(value).__name__}, not a tensor",
                                     hint="declare dynamic axes only on tensor inputs")
            checked[name] = spec
            continue
        axes = {}
        for axis, dim in spec.items():
            if isinstance(axis, bool) or not isinstance(axis, int) or not -value.dim() <= axis < value.dim():
                raise InputSpecError(
                    f"dynamic axis {axis!r} of {name!r} does not exist: {name} has "
                    f"{value.dim()} dimension{'s' if value.dim() != 1 else ''} (shape {list(value.shape)})",
                    hint=f"use an axis from 0 to {value.dim() - 1}" if value.dim() else
                    f"{name} is a scalar; it has no axis to make dynamic",
                )
            axes[axis % value.dim()] = dim
        checked[name] = axes
    return checked


def bound_parameter_names(module: "torch.nn.Module | Signature", inputs: InputSet) -> list[str]:
    """The names of the forward parameters that ``inputs`` binds, in signature order."""
    return Signature.of(module).bound_names(inputs)


def dynamic_axes_by_input(module: "torch.nn.Module | Signature", inputs: InputSet, dynamic_shapes: Any) -> dict[int, dict[int, str]]:
    """Map flattened tensor input index → {axis: dim name} for the dynamic axes.

    Used by verification to vary exactly those sizes; dims sharing a name vary together.
    """
    return {index: {axis: dim_name(dim, name, axis) for axis, (dim, name) in axes.items()}
            for index, axes in dims_by_input(module, inputs, dynamic_shapes).items()}


def dims_by_input(module: "torch.nn.Module | Signature", inputs: InputSet, dynamic_shapes: Any) -> dict[int, dict[int, tuple]]:
    """Flattened tensor input index → {axis: (the spec's Dim/str/hint, input name)}."""
    if dynamic_shapes is None:
        return {}
    signature = Signature.of(module)
    names, bound = signature.names, signature.bind(inputs)
    per_name = dynamic_shapes if isinstance(dynamic_shapes, dict) else dict(zip(names, dynamic_shapes))
    result: dict[int, dict[int, str]] = {}
    index = 0
    for name in names:
        if name not in bound:
            continue
        value = bound[name]
        spec = per_name.get(name)
        if isinstance(value, torch.Tensor):
            if isinstance(spec, dict):
                result[index] = {axis % max(value.dim(), 1): (d, name) for axis, d in spec.items() if _is_dynamic_spec(d)}
            elif isinstance(spec, (list, tuple)):
                result[index] = {axis: (d, name) for axis, d in enumerate(spec) if _is_dynamic_spec(d)}
            index += 1
        else:
            flat, _ = torch.utils._pytree.tree_flatten(value)
            tensors = [t for t in flat if isinstance(t, torch.Tensor)]
            if isinstance(value, (list, tuple)) and isinstance(spec, (list, tuple)) and len(spec) == len(value) \
                    and len(tensors) == len(value):  # a list of tensors, one spec each
                for offset, (tensor, entry) in enumerate(zip(tensors, spec)):
                    if isinstance(entry, dict):
                        result[index + offset] = {axis % max(tensor.dim(), 1): (d, name)
                                                  for axis, d in entry.items() if _is_dynamic_spec(d)}
            index += len(tensors)
    return {i: axes for i, axes in result.items() if axes}


def _is_dynamic_spec(dim: Any) -> bool:
    """A dimension spec that may vary: a name, a Dim, Dim.AUTO/DYNAMIC (not None, an int, Dim.STATIC)."""
    return dim is not None and not isinstance(dim, int) and getattr(getattr(dim, "type", None), "name", "") != "STATIC"


def dim_name(dim: Any, input_name: str, axis: int) -> str:
    """A dimension's name: the Dim's, a derived Dim's expression (``8*h8``, shared by every axis
    declared with it), or ``input_axis``."""
    if isinstance(dim, str):
        return dim
    if _is_derived(dim):
        return str(dim.__name__)
    name = getattr(dim, "__name__", None)
    return name if isinstance(name, str) and name.isidentifier() else f"{input_name}_{axis}"


def _is_derived(dim: Any) -> bool:
    return hasattr(dim, "root") and callable(getattr(dim, "fn", None))


def dim_step(dim: Any) -> tuple[int, int]:
    """``(step, offset)``: the sizes a derived Dim takes are ``offset + step * k`` (``8 * Dim("h8")``
    → (8, 0)); (1, 0) for any other dimension or a derivation that is not linear.

    >>> dim_step(8 * torch.export.Dim("h8")), dim_step(torch.export.Dim("n"))
    ((8, 0), (1, 0))
    """
    if not _is_derived(dim):
        return 1, 0
    values = [int(dim.fn(k)) for k in (0, 1, 2)]  # torch derives with +, -, * of ints (linear)
    step = values[1] - values[0]
    return (step, values[0]) if step > 0 and values[2] - values[1] == step else (1, 0)


#: Stands for "no upper bound" in size ranges.
UNBOUNDED = 2**62


class DimRange(tuple):
    """``(low, high)``: the sizes one dynamic input dimension of a captured program is valid for.

    It unpacks like the plain pair, and also says what the user declared (``declared``, the
    Dim's min/max; 0..unbounded in the simple form), the dimension's ``name``, and when the
    capture narrowed the declared range, ``where`` (the user's file:line, or None) and
    ``reason``.

    Example::

        >>> r = DimRange(2, UNBOUNDED, (0, UNBOUNDED), "batch")
        >>> low, high = r
        >>> r.narrowed, r.describe(), r.describe(r.declared)
        (True, '2..inf', '0..inf')
    """

    def __new__(cls, low, high, declared=(0, UNBOUNDED), name=None, where=None, reason=None, step=(1, 0)):
        self = super().__new__(cls, (int(low), int(high)))
        self.declared = (int(declared[0]), int(declared[1]))
        self.name, self.where, self.reason = name, where, reason
        self.step = (int(step[0]), int(step[1]))  #: (step, offset): sizes offset + step·k (dim_step)
        return self

    def __reduce__(self):
        return DimRange, (self[0], self[1], self.declared, self.name, self.where, self.reason, self.step)

    @property
    def narrowed(self) -> bool:
        """The valid range is smaller than the declared one."""
        return self[0] > self.declared[0] or self[1] < self.declared[1]

    def describe(self, bounds: tuple[int, int] | None = None) -> str:
        low, high = bounds if bounds is not None else self
        return f"{low}..{'inf' if high >= UNBOUNDED else high}"


_RANGES_KEY = "fxport.dim_ranges"


def _declared_range(dim: Any) -> tuple[int, int]:
    low, high = getattr(dim, "min", None), getattr(dim, "max", None)
    low = 0 if low is None or not is_finite(low) else int(low)
    high = UNBOUNDED if high is None or not is_finite(high) else int(high)
    return low, high


def is_finite(value: Any) -> bool:
    if isinstance(value, int):
        return value < UNBOUNDED
    return bool(getattr(value, "is_Integer", False)) and int(value) < UNBOUNDED


def annotate_dim_ranges(program, module, inputs: InputSet, normalized, narrowed_at, mode: str,
                         adopted: dict, fallback: str | None = None, squeezed: dict | None = None,
                         zero_sides: dict | None = None) -> None:
    """Store, on each user-input placeholder, the range of each dynamic axis (see DimRange).

    ``adopted``: dimension name → where the model bounds it, for ranges taken from torch.export's
    suggested fixes. ``squeezed``: input size (``L['x'].size()[1]``) → the model's line whose
    ``squeeze`` a size-oblivious capture computed as if that size were not 1: the range starts
    at 2 there (fxport/capture/squeezed_sizes.py). ``zero_sides``: dimension name → the ``if``
    whose side only size 0 takes made the capture start it at 1 (fxport/capture/size_zero_branches.py).
    """
    dims = dims_by_input(module, inputs, normalized)
    for index, node, value in _user_input_values(program):
        ranges = {}
        for axis, size in enumerate(value.shape):
            if not isinstance(size, torch.SymInt):
                continue
            low, high = _valid_range(size)
            spec = dims.get(index, {}).get(axis)
            declared = _declared_range(spec[0]) if spec is not None else (0, UNBOUNDED)
            name = dim_name(spec[0], spec[1], axis) if spec is not None else f"input{index}_{axis}"
            where = reason = None
            squeezed_at = squeezed_where(squeezed, size)
            zero_side = name in (zero_sides or {}) and declared[0] == 0
            if zero_side:  # the capture ran its size-0 if as Python: from 1, whatever torch's range says
                low = max(low, 1)
            if squeezed_at is not None and low < 2 <= high and declared[1] >= 2:
                low, where, reason = 2, squeezed_at, squeezed_reason.format(where=squeezed_at)
            elif zero_side and low == 1 and high == declared[1]:
                where = zero_sides[name]
                reason = zero_side_reason(where)
            elif low > declared[0] or high < declared[1]:
                where = narrowed_at.get(symbol_key(size.node.shape_env, size.node.expr)) or adopted.get(name)
                if name in adopted:
                    reason = "bounded by the model" + (f" at {where}" if where is not None else "")
                elif where is not None:
                    reason = f"narrowed by the model at {where}"
                elif mode == "specialised" and low == 2 and declared[0] < 2:
                    reason = "limited by torch.export's 0/1 specialisation" + (f" ({fallback})" if fallback else "")
                else:
                    reason = "narrowed by torch.export"
            ranges[axis] = {"low": low, "high": high, "declared": declared, "name": name,
                            "where": str(where) if where is not None else None, "reason": reason,
                            "step": dim_step(spec[0]) if spec is not None else (1, 0)}
        if ranges:
            node.meta[_RANGES_KEY] = ranges


def _valid_range(size: torch.SymInt) -> tuple[int, int]:
    shape_env = size.node.shape_env
    bounds = shape_env.bound_sympy(size.node.expr)
    return max(_sympy_int(bounds.lower, 0), 0), min(_sympy_int(bounds.upper, UNBOUNDED), UNBOUNDED)


def _sympy_int(value: Any, infinite: int) -> int:
    """``int(value)`` for a sympy integer bound; ``infinite`` for torch's int_oo or sympy's oo."""
    return int(value) if getattr(value, "is_Integer", False) else infinite


def _user_input_values(program: torch.export.ExportedProgram):
    """``(tensor index, placeholder node, fake value)`` for the program's user tensor inputs."""
    user_inputs = set(program.graph_signature.user_inputs)
    index = 0
    for node in program.graph.nodes:
        if node.op != "placeholder" or node.name not in user_inputs:
            continue
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor):
            yield index, node, value
            index += 1


def narrowing_notes(program: torch.export.ExportedProgram, grown: bool = False) -> list[str]:
    """One line per dynamic dimension whose valid range is narrower than the declared one."""
    groups: dict[tuple, list[str]] = {}
    for axes in dynamic_dim_bounds(program).values():
        for dim in axes.values():
            key = (dim.reason or "narrowed by torch.export", dim.describe(), dim.describe(dim.declared),
                   grown and dim[0] == 2, not narrowed_by_a_zero_side(dim))
            if dim.narrowed and dim.name not in groups.get(key, []):
                groups.setdefault(key, []).append(dim.name)
    notes = []
    for (how, valid, declared, copied, both_sides), names in groups.items():
        subject = (f"dynamic dimension {names[0]!r} is" if len(names) == 1 else
                   f"dynamic dimensions {', '.join(map(repr, names))} are")
        copy = ", captured from a copy of the example grown to size 2" if copied else ""
        checks = "verification checks both sides of the bound and " if both_sides else ""
        notes.append(f"{subject} {how}: exported for sizes {valid} only (declared {declared}{copy}); "
                     f"{checks}the ONNX metadata records the range")
    return notes


def record_dynamic_ranges(model: Any, program: torch.export.ExportedProgram) -> None:
    """Write the valid range of every dynamic dimension into ``model``'s ONNX metadata.

    Key ``fxport.dynamic_ranges``: JSON ``{name: {"valid": [low, high], "declared": [low,
    high], "narrowed": reason}}`` (``high`` null when unbounded). A runtime can refuse sizes the
    file was not exported for.
    """
    ranges = {}
    for axes in dynamic_dim_bounds(program).values():
        for dim in axes.values():
            def pair(bounds):
                return [bounds[0], None if bounds[1] >= UNBOUNDED else bounds[1]]
            ranges.setdefault(dim.name, {"valid": pair(dim), "declared": pair(dim.declared),
                                         "narrowed": dim.reason if dim.narrowed else None})
    if not ranges:
        return
    for prop in list(model.metadata_props):
        if prop.key == "fxport.dynamic_ranges":
            model.metadata_props.remove(prop)
    entry = model.metadata_props.add()
    entry.key, entry.value = "fxport.dynamic_ranges", json.dumps(ranges, sort_keys=True)


def dynamic_dim_bounds(program: torch.export.ExportedProgram) -> dict[int, dict[int, DimRange]]:
    """Tensor input index → {axis: DimRange} for every symbolic input dimension.

    A :class:`DimRange` unpacks as ``(lowest, highest)``: the sizes the program is valid for,
    read from the shape environment torch traced with (``range_constraints`` reports 0..inf
    even where 0/1 specialisation or a guard made the graph valid for fewer sizes). It also
    carries the declared range and where the capture narrowed it (:func:`capture` records
    that; for a program exported elsewhere the declared range is taken as 0..unbounded).
    """
    result: dict[int, dict[int, DimRange]] = {}
    for index, node, value in _user_input_values(program):
        stored = node.meta.get(_RANGES_KEY, {})
        for axis, size in enumerate(value.shape):
            if axis in stored:
                r = stored[axis]
                result.setdefault(index, {})[axis] = DimRange(r["low"], r["high"], r["declared"], r["name"],
                                                              r["where"], r["reason"], r.get("step", (1, 0)))
            elif isinstance(size, torch.SymInt):
                low, high = _valid_range(size)
                result.setdefault(index, {})[axis] = DimRange(low, high, (0, UNBOUNDED), f"input{index}_{axis}")
    return result
