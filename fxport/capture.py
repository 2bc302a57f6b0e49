"""The capture stage: torch.export of the (rewritten) model, with failures classified.

Dynamic shapes come in two spellings. The torch.export format (``Dim`` objects, ``Dim.AUTO``,
per-argument dicts or tuples) passes through unchanged. The simple form names the axes:
``{"x": {0: "batch", 2: "height"}}``; axes with the same name share one ``Dim``.

Example::

    >>> ep = capture(model, InputSet((torch.randn(2, 3),)), {"x": {0: "batch"}})  # doctest: +SKIP
"""

from __future__ import annotations

import re
import traceback
from typing import Any

import torch
from torch.export import Dim

from fxport.errors import (
    CaptureError,
    ControlFlowError,
    ConversionError,
    InputSpecError,
    user_location_from_exception,
    user_location_from_stack,
)
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
    return {name: to_dim(dynamic_shapes.get(name)) for name in bound_parameter_names(module, inputs)}


def bound_parameter_names(module: torch.nn.Module, inputs: InputSet) -> list[str]:
    """The names of the forward parameters that ``inputs`` binds, in signature order."""
    names = list(forward_parameters(module))
    positional = names[: len(inputs.args)]
    return positional + [n for n in names[len(inputs.args):] if n in inputs.kwargs]


def dynamic_axes_by_input(module: torch.nn.Module, inputs: InputSet, dynamic_shapes: Any) -> dict[int, dict[int, str]]:
    """Map flattened tensor input index → {axis: dim name} for the dynamic axes.

    Used by verification to vary exactly those sizes; dims sharing a name vary together.
    """
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
                result[index] = {axis % max(value.dim(), 1): _dim_name(d, name, axis) for axis, d in spec.items() if d is not None}
            elif isinstance(spec, (list, tuple)):
                result[index] = {axis: _dim_name(d, name, axis) for axis, d in enumerate(spec) if d is not None}
            index += 1
        else:
            flat, _ = torch.utils._pytree.tree_flatten(value)
            index += sum(isinstance(t, torch.Tensor) for t in flat)
    return {i: axes for i, axes in result.items() if axes}


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

    When the model bounds a dimension that the simple form declared dynamic (e.g. a sequence
    length limited by a position table), the bound torch.export suggests is adopted and a note
    says so; a dimension the model specialises to one value is an error.
    """
    normalized = normalize_dynamic_shapes(module, dynamic_shapes, inputs)
    try:
        return _export(module, inputs, normalized)
    except ConversionError:
        raise
    except Exception as exc:
        refined = _adopt_suggested_bounds(exc, dynamic_shapes, normalized, notes)
        if refined is None:
            _raise_classified(exc)
    try:
        return _export(module, inputs, refined)
    except ConversionError:
        raise
    except Exception as exc:
        _raise_classified(exc)


def _raise_classified(exc: Exception) -> None:
    error = classify_capture_failure(exc)
    if error in _exception_chain(exc):  # fxport's own error that torch wrapped: no second cause
        raise error from None
    raise error from exc


def _export(module, inputs: InputSet, dynamic_shapes) -> torch.export.ExportedProgram:
    with quiet_torch():
        program = torch.export.export(module, inputs.args, inputs.kwargs or None,
                                      dynamic_shapes=dynamic_shapes, strict=False)
    constant_outputs_as_tensors(program)
    return program


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
        dtype = torch.bool if isinstance(value, bool) else torch.int64 if isinstance(value, int) else torch.float32
        with program.graph.inserting_before(output_node):
            node = program.graph.call_function(torch.ops.aten.scalar_tensor.default, (value,), {"dtype": dtype})
        node.meta["val"] = torch.scalar_tensor(value, dtype=dtype)
        values[position] = node
        spec.arg = TensorArgument(name=node.name)
        changed = True
    if changed:
        output_node.args = (tuple(values),)
        program.graph_module.recompile()


_SUGGESTED_DIM = re.compile(r"^\s*(\w+) = Dim\('(\w+)'((?:, (?:min|max)=\d+)*)\)\s*$", re.M)
_SUGGESTED_CONSTANT = re.compile(r"^\s*(\w+) = (\d+)\s*$", re.M)


def _adopt_suggested_bounds(exc, user_spec, normalized, notes) -> Any:
    """Re-create simple-form Dims with the min/max torch.export suggests; None when not applicable."""
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

    if notes is not None:
        for name, limits in bounds.items():
            described = ", ".join(f"{k}={v}" for k, v in limits.items())
            notes.append(f"dynamic dimension {name!r} is bounded by the model ({described}); exported with that range")
    return {name: refine(spec) for name, spec in normalized.items()}


def _is_simple_form(dynamic_shapes: Any) -> bool:
    if not isinstance(dynamic_shapes, dict):
        return False
    leaves, _ = torch.utils._pytree.tree_flatten(dynamic_shapes)
    return bool(leaves) and all(isinstance(leaf, str) for leaf in leaves)


def dynamic_dim_bounds(program: torch.export.ExportedProgram) -> dict[int, dict[int, tuple[int, int]]]:
    """Tensor input index → {axis: (lowest, highest)} for every symbolic input dimension."""
    user_inputs = set(program.graph_signature.user_inputs)
    ranges = {str(symbol): bounds for symbol, bounds in program.range_constraints.items()}
    result: dict[int, dict[int, tuple[int, int]]] = {}
    index = 0
    for node in program.graph.nodes:
        if node.op != "placeholder" or node.name not in user_inputs:
            continue
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor):
            continue
        for axis, size in enumerate(value.shape):
            bounds = ranges.get(str(size))
            if bounds is not None:
                high = int(bounds.upper) if bounds.upper.is_Integer else 2**62
                result.setdefault(index, {})[axis] = (int(bounds.lower), high)
        index += 1
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
    if _is_data_dependent(exc, text):
        return CaptureError(
            "data-dependent control flow (a Python branch or loop on a tensor value) cannot be captured",
            where=where,
            hint="leave control-flow conversion on (the default), or rewrite it with torch.where/torch.cond",
        )
    if "Constraints violated" in text or "specialized" in text.lower() and "dim" in text.lower():
        return CaptureError(
            f"a dimension declared dynamic was specialised by the model: {first_line}",
            where=where,
            hint="drop that axis from the dynamic shapes, or use an example size other than 0/1",
        )
    return CaptureError(f"torch.export failed: {type(exc).__name__}: {first_line}", where=where,
                        hint="run with --debug for the full trace")


_RAISING_CALL = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>\S+)')


def _location_named_in_message(text: str):
    """torch names the call that raised a data-dependent guard in its message; the last user frame."""
    frames = [traceback.FrameSummary(m["file"], int(m["line"]), m["name"]) for m in _RAISING_CALL.finditer(text)]
    return user_location_from_stack(frames)


def _is_data_dependent(exc: BaseException, text: str) -> bool:
    names = {type(e).__name__ for e in _exception_chain(exc)}
    return bool(names & {"GuardOnDataDependentSymNode", "DataDependentOutputException"}) or (
        "data-dependent" in text.lower() or "data dependent" in text.lower()
    )


def _exception_chain(exc: BaseException):
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__
