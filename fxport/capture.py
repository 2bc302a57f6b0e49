"""The capture stage: torch.export of the (rewritten) model, with failures classified.

Dynamic shapes come in two spellings. The torch.export format (``Dim`` objects, ``Dim.AUTO``,
per-argument dicts or tuples) passes through unchanged. The simple form names the axes:
``{"x": {0: "batch", 2: "height"}}``; axes with the same name share one ``Dim``.

Example::

    >>> import torch
    >>> from fxport.load import InputSet
    >>> ep = capture(torch.nn.Softmax(dim=-1), InputSet((torch.randn(2, 3),)), {"input": {0: "batch"}})
    >>> [str(d) for d in ep.graph_module.graph.find_nodes(op="placeholder")[0].meta["val"].shape]
    ['s...', '3']
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import traceback
from typing import Any

import torch
import torch.fx.experimental._config as _shape_config
from torch.export import Dim

from fxport.errors import (
    CaptureError,
    ControlFlowError,
    ConversionError,
    InputSpecError,
    SourceLocation,
    is_user_file,
    user_location_from_exception,
    user_location_from_stack,
)
from fxport.frames import exception_chain as _exception_chain
from fxport.frames import user_location_in
from fxport.load import InputSet, forward_parameters
from fxport.quiet import quiet_torch


def normalize_dynamic_shapes(module: torch.nn.Module, dynamic_shapes: Any, inputs: InputSet) -> Any:
    """Turn the simple ``{name: {axis: "dim"}}`` form into torch.export's, keyed by parameter.

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
    parameters = forward_parameters(module)
    unknown = [name for name in dynamic_shapes if name not in parameters]
    if unknown:
        raise InputSpecError(
            f"dynamic shapes name {', '.join(map(str, unknown))}, which forward does not take",
            hint=f"forward's parameters are: {', '.join(parameters)}",
        )
    dynamic_shapes = _checked_axes(module, inputs, dynamic_shapes)
    return {name: to_dim(dynamic_shapes.get(name)) for name in bound_parameter_names(module, inputs)}


def _checked_axes(module: torch.nn.Module, inputs: InputSet, dynamic_shapes: dict) -> dict:
    """The dict form with every axis checked against its tensor's rank; negative axes counted
    from the end. An axis the input does not have is a usage error, not an IndexError."""
    bound = dict(zip(forward_parameters(module), inputs.args))
    bound.update(inputs.kwargs)
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


def bound_parameter_names(module: torch.nn.Module, inputs: InputSet) -> list[str]:
    """The names of the forward parameters that ``inputs`` binds, in signature order."""
    names = list(forward_parameters(module))
    positional = names[: len(inputs.args)]
    return positional + [n for n in names[len(inputs.args):] if n in inputs.kwargs]


def dynamic_axes_by_input(module: torch.nn.Module, inputs: InputSet, dynamic_shapes: Any) -> dict[int, dict[int, str]]:
    """Map flattened tensor input index → {axis: dim name} for the dynamic axes.

    Used by verification to vary exactly those sizes; dims sharing a name vary together.
    """
    return {index: {axis: _dim_name(dim, name, axis) for axis, (dim, name) in axes.items()}
            for index, axes in _dims_by_input(module, inputs, dynamic_shapes).items()}


def _dims_by_input(module: torch.nn.Module, inputs: InputSet, dynamic_shapes: Any) -> dict[int, dict[int, tuple]]:
    """Flattened tensor input index → {axis: (the spec's Dim/str/hint, input name)}."""
    if dynamic_shapes is None:
        return {}
    names = list(forward_parameters(module))
    bound = dict(zip(names, inputs.args))
    bound.update(inputs.kwargs)
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
            index += sum(isinstance(t, torch.Tensor) for t in flat)
    return {i: axes for i, axes in result.items() if axes}


def _is_dynamic_spec(dim: Any) -> bool:
    """A dimension spec that may vary: a name, a Dim, Dim.AUTO/DYNAMIC (not None, an int, Dim.STATIC)."""
    return dim is not None and not isinstance(dim, int) and getattr(getattr(dim, "type", None), "name", "") != "STATIC"


def _dim_name(dim: Any, input_name: str, axis: int) -> str:
    if isinstance(dim, str):
        return dim
    name = getattr(dim, "__name__", None)
    return name if isinstance(name, str) and name.isidentifier() else f"{input_name}_{axis}"


def capture(
    module: torch.nn.Module,
    inputs: InputSet,
    dynamic_shapes: Any = None,
    notes: list[str] | None = None,
) -> torch.export.ExportedProgram:
    """``torch.export.export`` (non-strict) with failures turned into one-line CaptureErrors.

    Dynamic dimensions stay symbolic down to sizes 0 and 1 (docs/architecture.md, "Dynamic
    sizes"): the first capture runs with torch's ``backed_size_oblivious``, so an example of
    batch 1 is captured as it is and ``if x.shape[0] > 1:`` stays a symbolic condition that
    control-flow conversion turns into where/cond. When that capture fails on a size question,
    the model is captured the classic way, from the example grown to size 2 along dynamic
    dimensions of size 0/1 (torch.export specialises those sizes); the range it is valid for
    then starts at 2, and verification checks sizes on both sides of that bound.

    When the model bounds a dimension that the simple form declared dynamic (e.g. a sequence
    length limited by a position table), the bound torch.export suggests is adopted; a
    dimension the model specialises to one value is an error. Every narrowed range is a note
    naming the range and, where torch's trace has one, the user's file:line; the program
    carries the ranges (:func:`dynamic_dim_bounds`, :func:`record_dynamic_ranges`).
    """
    normalized = normalize_dynamic_shapes(module, dynamic_shapes, inputs)
    dims = _dims_by_input(module, inputs, normalized)
    attempts = [("oblivious", inputs), ("specialised", _grown_example(inputs, dims))] if dims \
        else [("specialised", inputs)]
    failure = None
    with _watch_range_narrowing() as narrowed_at:
        for mode, example in attempts:
            spec, adopted = normalized, {}
            for _ in range(3):  # again with the bounds torch.export suggests, or without size 0
                try:
                    with _rolled_back_on_failure():
                        program = _export(module, example, spec, oblivious=mode == "oblivious")
                except ConversionError:
                    raise
                except Exception as exc:
                    failure = exc
                    refined = _adopt_suggested_bounds(exc, dynamic_shapes, spec, adopted)
                    if refined is None and mode == "oblivious":
                        refined = _excluding_size_zero(exc, spec, adopted)
                    spec = refined
                    if spec is None:
                        break
                    continue
                _annotate_dim_ranges(program, module, inputs, normalized, narrowed_at, mode, adopted,
                                     fallback=_why_oblivious_failed(failure) if mode == "specialised" else None)
                if notes is not None:
                    notes.extend(narrowing_notes(program, grown=example is not inputs))
                return program
    _raise_classified(failure)


def _why_oblivious_failed(exc: BaseException | None) -> str | None:
    """Why the size-oblivious capture failed, in a few words with the user's line if known."""
    if exc is None:
        return None
    text = "\n".join(str(e) for e in _exception_chain(exc))
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    first = _TORCH_BANNER.sub("", first).strip()[:120]
    guard = re.search(r"satisfy the generated guard (.+?)\.?$", text, re.M)
    if guard:
        first = "it needs " + re.sub(r"L\['(\w+)'\]\.size\(\)\[(\d+)\]", r"\1.shape[\2]", guard.group(1))[:120]
    where = _location_named_in_message(text) or _traced_location_from_exception(exc)
    return f"the size-oblivious capture failed{f' at {where}' if where else ''}: {first}"


def _raise_classified(exc: Exception) -> None:
    error = classify_capture_failure(exc)
    if error in _exception_chain(exc):  # fxport's own error that torch wrapped: no second cause
        raise error from None
    raise error from exc


def _export(module, inputs: InputSet, dynamic_shapes, oblivious: bool = False) -> torch.export.ExportedProgram:
    with quiet_torch(), _shape_config.patch(backed_size_oblivious=oblivious):
        program = torch.export.export(module, inputs.args, inputs.kwargs or None,
                                      dynamic_shapes=dynamic_shapes, strict=False)
    constant_outputs_as_tensors(program)
    return program


@contextlib.contextmanager
def _rolled_back_on_failure():
    """Control-flow records of a capture attempt that fails are dropped (the retry makes its own)."""
    from fxport.controlflow.operators import records_rolled_back_on_failure

    with records_rolled_back_on_failure():
        yield


def _grown_example(inputs: InputSet, dims: dict[int, dict[int, tuple]]) -> InputSet:
    """``inputs`` with every dynamic axis of size 0 or 1 grown to 2 (rows repeated; zeros for 0).

    torch.export specialises a dimension whose example size is 0 or 1 to that size; a copy of
    size 2 captures the general case. Repeating rows keeps values in the model's domain (ids,
    padding masks). Returns ``inputs`` itself when nothing needs growing.
    """
    flat, spec = torch.utils._pytree.tree_flatten((inputs.args, inputs.kwargs))
    index, changed, grown = 0, False, []
    for value in flat:
        if isinstance(value, torch.Tensor):
            for axis in dims.get(index, {}):
                if value.shape[axis] < 2:
                    value = _repeat_rows(value, axis, 2)
                    changed = True
            index += 1
        grown.append(value)
    if not changed:
        return inputs
    args, kwargs = torch.utils._pytree.tree_unflatten(grown, spec)
    return InputSet(args, kwargs, inputs.name)


def _repeat_rows(tensor: torch.Tensor, axis: int, size: int) -> torch.Tensor:
    if tensor.shape[axis] == 0:
        shape = list(tensor.shape)
        shape[axis] = size
        return tensor.new_zeros(shape)
    rows = torch.arange(size, device=tensor.device) % tensor.shape[axis]
    return tensor.index_select(axis, rows)


# --- the sizes a captured program is valid for -----------------------------------------------

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

    def __new__(cls, low, high, declared=(0, UNBOUNDED), name=None, where=None, reason=None):
        self = super().__new__(cls, (int(low), int(high)))
        self.declared = (int(declared[0]), int(declared[1]))
        self.name, self.where, self.reason = name, where, reason
        return self

    def __reduce__(self):
        return DimRange, (self[0], self[1], self.declared, self.name, self.where, self.reason)

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
    low = 0 if low is None or not _is_finite(low) else int(low)
    high = UNBOUNDED if high is None or not _is_finite(high) else int(high)
    return low, high


def _is_finite(value: Any) -> bool:
    if isinstance(value, int):
        return value < UNBOUNDED
    return bool(getattr(value, "is_Integer", False)) and int(value) < UNBOUNDED


def _annotate_dim_ranges(program, module, inputs: InputSet, normalized, narrowed_at, mode: str,
                         adopted: dict, fallback: str | None = None) -> None:
    """Store, on each user-input placeholder, the range of each dynamic axis (see DimRange).

    ``adopted``: dimension name → where the model bounds it, for ranges taken from torch.export's
    suggested fixes.
    """
    dims = _dims_by_input(module, inputs, normalized)
    for index, node, value in _user_input_values(program):
        ranges = {}
        for axis, size in enumerate(value.shape):
            if not isinstance(size, torch.SymInt):
                continue
            low, high = _valid_range(size)
            spec = dims.get(index, {}).get(axis)
            declared = _declared_range(spec[0]) if spec is not None else (0, UNBOUNDED)
            name = _dim_name(spec[0], spec[1], axis) if spec is not None else f"input{index}_{axis}"
            where = reason = None
            if low > declared[0] or high < declared[1]:
                where = narrowed_at.get(_symbol_key(size.node.shape_env, size.node.expr)) or adopted.get(name)
                if name in adopted:
                    reason = "bounded by the model" + (f" at {where}" if where is not None else "")
                elif where is not None:
                    reason = f"narrowed by the model at {where}"
                elif mode == "specialised" and low == 2 and declared[0] < 2:
                    reason = "limited by torch.export's 0/1 specialisation" + (f" ({fallback})" if fallback else "")
                else:
                    reason = "narrowed by torch.export"
            ranges[axis] = {"low": low, "high": high, "declared": declared, "name": name,
                            "where": str(where) if where is not None else None, "reason": reason}
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
                   grown and dim[0] == 2)
            if dim.narrowed and dim.name not in groups.get(key, []):
                groups.setdefault(key, []).append(dim.name)
    notes = []
    for (how, valid, declared, copied), names in groups.items():
        subject = (f"dynamic dimension {names[0]!r} is" if len(names) == 1 else
                   f"dynamic dimensions {', '.join(map(repr, names))} are")
        copy = ", captured from a copy of the example grown to size 2" if copied else ""
        notes.append(f"{subject} {how}: exported for sizes {valid} only (declared {declared}{copy}); "
                     "verification checks both sides of the bound and the ONNX metadata records the range")
    return notes


@contextlib.contextmanager
def _watch_range_narrowing():
    """Collect where a size symbol's range is narrowed while the model is traced.

    Yields a dict :func:`_symbol_key` → SourceLocation of the first narrowing with a frame of
    the user's code inside the traced call (torch keeps only its own frame for the range; the
    user's line is what a message needs). Keys name the input size (``L['x'].size()[0]``), so
    a narrowing seen in a failed attempt still locates the range of the one that succeeds.
    """
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    found: dict = {}
    original = ShapeEnv._update_var_to_range

    def update(self, symbol, vr, vr_sloc=None, **kwargs):
        before = self.var_to_range.get(symbol)
        original(self, symbol, vr, vr_sloc, **kwargs)
        key = _symbol_key(self, symbol)
        if before is not None and key not in found and self.var_to_range.get(symbol) != before:
            where = _traced_user_frame()
            if where is not None:
                found[key] = where

    ShapeEnv._update_var_to_range = update
    try:
        yield found
    finally:
        ShapeEnv._update_var_to_range = original


_THIS_FILE = os.path.abspath(__file__)


def _source_name(source) -> str:
    name = source.name
    return name() if callable(name) else str(name)


def _symbol_key(shape_env, symbol) -> Any:
    """The input sizes a size symbol stands for (``("L['x'].size()[0]",)``), else the symbol."""
    sources = getattr(shape_env, "var_to_sources", {}).get(symbol)
    return tuple(sorted(_source_name(source) for source in sources)) if sources else (id(shape_env), symbol)


def _traced_user_frame():
    """The innermost user frame of the current stack below fxport's call to torch.export."""
    frames = traceback.extract_stack()
    start = max((i for i, f in enumerate(frames)
                 if f.name == "_export" and os.path.abspath(f.filename) == _THIS_FILE), default=-1)
    return user_location_from_stack(frames[start + 1:])


def _traced_location_from_exception(exc: BaseException):
    """The innermost user frame of ``exc``'s tracebacks below fxport's call to torch.export (not
    the script that called fxport)."""
    found = None
    for error in _exception_chain(exc):
        frames = traceback.extract_tb(error.__traceback__)
        start = max((i for i, f in enumerate(frames)
                     if f.name == "_export" and os.path.abspath(f.filename) == _THIS_FILE), default=None)
        if start is not None:
            found = user_location_from_stack(frames[start + 1:]) or found
    return found


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


def number_as_tensor(value: bool | int | float) -> torch.Tensor:
    """A Python number as the 0-d tensor an exported model returns for it (int64, float32, bool).

    Example::

        >>> number_as_tensor(3).dtype, number_as_tensor(2.5).dtype, number_as_tensor(True).dtype
        (torch.int64, torch.float32, torch.bool)
    """
    dtype = torch.bool if isinstance(value, bool) else torch.int64 if isinstance(value, int) else torch.float32
    return torch.tensor(value, dtype=dtype)


def constant_outputs_as_tensors(program: torch.export.ExportedProgram) -> None:
    """Turn Python-number outputs (``return x, 3``) into 0-d tensor outputs, in place.

    torch.export keeps a constant output as a constant, which the ONNX exporter cannot write;
    an ONNX model only returns tensors, so the number becomes an int64 / float32 / bool scalar
    (verification compares eager's number with it as a value). Symbolic sizes (``x.shape[1] +
    1`` on a dynamic axis) are already graph values and stay as they are.

    Example::

        >>> class Size(torch.nn.Module):
        ...     def forward(self, x):
        ...         return x * 2, 3
        >>> program = torch.export.export(Size(), (torch.ones(2),))
        >>> constant_outputs_as_tensors(program)
        >>> [type(spec.arg).__name__ for spec in program.graph_signature.output_specs]
        ['TensorArgument', 'TensorArgument']
    """
    from torch.export.graph_signature import ConstantArgument, OutputKind, TensorArgument

    output_node = next(node for node in program.graph.nodes if node.op == "output")
    values = list(output_node.args[0])
    specs = program.graph_signature.output_specs
    changed = False
    for position, spec in enumerate(specs):
        value = spec.arg.value if isinstance(spec.arg, ConstantArgument) else None
        if spec.kind != OutputKind.USER_OUTPUT or not isinstance(value, (bool, int, float)):
            continue
        constant = number_as_tensor(value)
        with program.graph.inserting_before(output_node):
            node = program.graph.call_function(torch.ops.aten.scalar_tensor.default, (value,),
                                               {"dtype": constant.dtype})
        node.meta["val"] = constant
        values[position] = node
        spec.arg = TensorArgument(name=node.name)
        changed = True
    if changed:
        output_node.args = (tuple(values),)
        program.graph_module.recompile()


_SUGGESTED_DIM = re.compile(r"^\s*(\w+) = Dim\('(\w+)'((?:, (?:min|max)=\d+)*)\)\s*$", re.M)
_SUGGESTED_CONSTANT = re.compile(r"^\s*(\w+) = (\d+)\s*$", re.M)


def _adopt_suggested_bounds(exc, user_spec, normalized, adopted: dict) -> Any:
    """Re-create simple-form Dims with the min/max torch.export suggests; None when not applicable.

    ``adopted`` receives dimension name → the user's file:line that bounds it (or None).
    """
    text = str(exc)
    if "Suggested fixes" not in text or not _is_simple_form(user_spec) or _SUGGESTED_CONSTANT.search(text):
        return None
    bounds = {}
    for match in _SUGGESTED_DIM.finditer(text.split("Suggested fixes", 1)[1]):
        limits = dict(part.strip().split("=") for part in match.group(3).split(",") if part.strip())
        bounds[match.group(2)] = {k: int(v) for k, v in limits.items()}
    if not bounds:
        return None
    dims: dict[str, Dim] = {}

    def refine(value):
        if isinstance(value, dict):
            return {axis: refine(v) for axis, v in value.items()}
        if isinstance(value, Dim) and value.__name__ in bounds:
            return dims.setdefault(value.__name__, Dim(value.__name__, **bounds[value.__name__]))
        return value

    where = _location_named_in_message(text) or _traced_location_from_exception(exc)
    for name in bounds:
        adopted[name] = where
    return {name: refine(spec) for name, spec in normalized.items()}


def _excluding_size_zero(exc, spec, adopted: dict) -> Any:
    """The spec with min=1 for the Dims a size-oblivious capture found a guard on; None if none.

    Most such guards only exclude the empty size (``interpolate`` needs an output of at least
    one row: ``trunc(3.0*w) != 0``); declaring min=1 lets the capture keep 1 and above symbolic.
    """
    names = set(re.findall(r"Not all values of (\w+) = ", str(exc)))
    if not names or not isinstance(spec, dict):
        return None
    dims: dict[str, Dim] = {}
    changed = []

    def refine(value):
        if isinstance(value, dict):
            return {axis: refine(v) for axis, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(refine(v) for v in value)
        if isinstance(value, Dim) and not hasattr(value, "root") and value.__name__ in names and value.min == 0:
            if value.__name__ not in dims:
                high = value.max if _is_finite(value.max) else None
                dims[value.__name__] = Dim(value.__name__, min=1, **({"max": int(high)} if high is not None else {}))
                changed.append(value.__name__)
            return dims[value.__name__]
        return value

    refined = {name: refine(value) for name, value in spec.items()}
    if not changed:
        return None
    where = _traced_location_from_exception(exc)
    for name in changed:
        adopted.setdefault(name, where)
    return refined


def _is_simple_form(dynamic_shapes: Any) -> bool:
    if not isinstance(dynamic_shapes, dict):
        return False
    leaves, _ = torch.utils._pytree.tree_flatten(dynamic_shapes)
    return bool(leaves) and all(isinstance(leaf, str) for leaf in leaves)


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
                                                              r["where"], r["reason"])
            elif isinstance(size, torch.SymInt):
                low, high = _valid_range(size)
                result.setdefault(index, {})[axis] = DimRange(low, high, (0, UNBOUNDED), f"input{index}_{axis}")
    return result


def classify_capture_failure(exc: BaseException) -> ConversionError:
    """Name the kind of failure and the user's file:line; failures are data, not strings.

    fxport's own errors raised during capture (a control-flow construct the converter refuses,
    a patch rule's error), however deeply torch wrapped them, are the answer as they are.
    """
    own = next((e for e in _exception_chain(exc) if isinstance(e, ConversionError)), None)
    if own is not None:
        return own
    text = "\n".join(str(e) for e in _exception_chain(exc))
    where = _location_named_in_message(text) or user_location_from_exception(exc)
    first_line = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    first_line = _TORCH_BANNER.sub("", first_line).strip() or type(exc).__name__
    if _is_data_dependent(exc, text) and where is not None and (where.function or "").startswith("_fx_"):
        return ControlFlowError(
            "a Python number read from a tensor (.item(), float(), int()) is used as a number inside "
            "a converted branch or loop body, which torch.cond/while_loop cannot trace",
            where=where,
            hint="keep it a tensor (x * x.max() rather than x * float(x.max().item()))",
        )
    if _is_data_dependent(exc, text) and where is not None and where.function == "<lambda>":
        return ControlFlowError(
            "a tensor condition inside a lambda cannot be converted (fxport converts def functions "
            "and methods; a lambda's source is not reliably its own)",
            where=where,
            hint="write the lambda as a def function or a method, or use torch.where in it",
        )
    library = library_location_from_exception(exc)
    if _is_data_dependent(exc, text) and library is not None:
        return CaptureError(
            f"data-dependent control flow in library code at {_package_relative(library)} cannot be "
            "captured (fxport converts your own code, not installed packages)",
            where=where,
            hint="pick an implementation of the library without it if it has one (transformers: "
            "config experts_implementation / attn_implementation), or patch that function with a rule",
        )
    if _is_data_dependent(exc, text):
        return CaptureError(
            "data-dependent control flow (a Python branch or loop on a tensor value, or a number read "
            "from a tensor with .item(), float(), int()) cannot be captured",
            where=where,
            hint="keep values read from tensors as tensors (x * t rather than x * float(t)); with "
            "--no-control-flow, turn conversion back on; or rewrite it with torch.where/torch.cond",
        )
    if "Constraints violated" in text or "specialized" in text.lower() and "dim" in text.lower():
        pinned = list(dict.fromkeys(f"{m.group(1)!r} to {m.group(2)}"
                                    for m in _SUGGESTED_CONSTANT.finditer(text.split("Suggested fixes", 1)[-1])))
        what = (f"the model specialises dynamic dimension {', '.join(pinned)}" if pinned and "Suggested fixes" in text
                else f"a dimension declared dynamic was specialised by the model: {first_line}")
        return CaptureError(
            what,
            where=where,
            hint="drop that axis from the dynamic shapes (the model runs at one size only), or "
            "make the code that fixes it size-generic",
        )
    return CaptureError(f"torch.export failed: {type(exc).__name__}: {first_line}", where=where,
                        hint="run with --debug for the full trace")


#: torch's advice about its own logging, which a user of fxport cannot act on (--debug shows all).
_TORCH_BANNER = re.compile(r"\s*(For more information, run with TORCH_LOGS|Set TORCH_LOGS|Set TORCHDYNAMO_VERBOSE"
                           r"|For more details about this graph break|The error above occurred when)[^\n]*")


def _location_named_in_message(text: str):
    """torch names the call that raised a data-dependent guard in its message; the last user frame."""
    return user_location_in(text)


def _is_data_dependent(exc: BaseException, text: str) -> bool:
    names = {type(e).__name__ for e in _exception_chain(exc)}
    return bool(names & {"GuardOnDataDependentSymNode", "DataDependentOutputException"}) or (
        "data-dependent" in text.lower() or "data dependent" in text.lower()
    )


def library_location_from_exception(exc: BaseException) -> SourceLocation | None:
    """The innermost frame in an installed package other than torch (transformers' modeling
    code, say) below the user's code in the deepest exception's traceback, or None."""
    import traceback as tb_module

    deepest = list(_exception_chain(exc))[-1]
    found = None
    for frame, lineno in tb_module.walk_tb(deepest.__traceback__):
        filename = frame.f_code.co_filename
        if is_user_file(filename):
            found = None  # only library frames called from (below) the user's code count
        elif _is_other_library(filename):
            found = SourceLocation(filename, lineno, frame.f_code.co_name)
    return found


def _package_relative(location: SourceLocation) -> str:
    """``transformers/models/mixtral/modeling_mixtral.py:80`` rather than the site-packages path."""
    parts = os.path.abspath(location.filename).split(os.sep)
    marker = "site-packages" if "site-packages" in parts else "dist-packages"
    return f"{'/'.join(parts[parts.index(marker) + 1:])}:{location.lineno}"


def _is_other_library(filename: str) -> bool:
    path = os.path.abspath(filename)
    parts = path.split(os.sep)
    if "site-packages" not in parts and "dist-packages" not in parts:
        return False
    package = parts[(parts.index("site-packages") if "site-packages" in parts else parts.index("dist-packages")) + 1]
    return package not in ("torch", "fxport", "onnxscript", "onnx", "onnx_ir", "sympy", "functorch", "typing_extensions")

