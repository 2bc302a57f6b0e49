"""The capture stage: torch.export of the (rewritten) model, retried where sizes need it.

:func:`capture` exports non-strict, first with dynamic sizes kept symbolic down to 0 and 1, then
falling back as described in its docstring; the spec forms and the valid ranges live in
fxport/capture/dynamic_dims.py, failures are classified in fxport/capture/failures.py.

Example::

    >>> import torch
    >>> from fxport.inputs import InputSet
    >>> ep = capture(torch.nn.Softmax(dim=-1), InputSet((torch.randn(2, 3),)), {"input": {0: "batch"}})
    >>> [str(d) for d in ep.graph_module.graph.find_nodes(op="placeholder")[0].meta["val"].shape]
    ['s...', '3']
"""

from __future__ import annotations

import contextlib
import re
from typing import Any, Callable

import torch
import torch.fx.experimental._config as _shape_config
from torch.export import Dim
from torch.export.dynamic_shapes import _DimHint, _DimHintType

from fxport.capture.failures import (
    SUGGESTED_CONSTANT,
    classify_capture_failure,
    guards_at_sizes,
    location_named_in_message,
    pinned_location,
    source_unavailable,
    traced_location_from_exception,
    why_oblivious_failed,
)
from fxport.capture.dynamic_dims import (annotate_dim_ranges, dims_by_input, is_finite, narrowing_notes,
                                 normalize_dynamic_shapes, watch_range_narrowing)
from fxport.errors import ConversionError
from fxport.frames import chain_stops_at_caller, exception_chain as _exception_chain
from fxport.capture.hinted_guards import refuse_unenforced_guards
from fxport.eager import Signature
from fxport.inputs import InputSet, number_as_tensor
from fxport.quiet import quiet_torch
from fxport.capture.size_one_stop import specialises_size_one, stopping_at_size_one_guards


@chain_stops_at_caller
def capture(
    module: torch.nn.Module,
    inputs: InputSet,
    dynamic_shapes: Any = None,
    notes: list[str] | None = None,
    convert_library: Callable[[BaseException], bool] | None = None,
    signature: Signature | None = None,
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
    dimension the model specialises to one value is an error. The last capture left declares
    ``Dim.DYNAMIC`` hints first (torch narrows the ranges itself: one export where a suggested
    fix takes two), the named Dims when that fails; a guard torch keeps unchecked under a hint
    that fails inside the range refuses the capture (fxport/capture/hinted_guards.py). Every narrowed range is a note
    naming the range and, where torch's trace has one, the user's file:line; the program
    carries the ranges (:func:`dynamic_dim_bounds`, :func:`record_dynamic_ranges`).

    ``convert_library(exc)`` is asked about each failure first: True when it converted the
    library function capture stopped in (docs/control-flow.md, "Library code"), and the same
    export is retried; it may raise a ConversionError, which ends the capture.
    ``signature``: ``module``'s (:class:`~fxport.eager.Signature`), when the caller has it.
    """
    signature = signature or Signature.of(module)
    normalized = normalize_dynamic_shapes(signature, dynamic_shapes, inputs)
    dims = dims_by_input(signature, inputs, normalized)
    attempts = [("oblivious", inputs), ("specialised", _grown_example(inputs, dims))] if dims \
        else [("specialised", inputs)]
    failure, oblivious_left = None, bool(dims)
    bounded, bounds_adopted = normalized, {}  # the model's own bounds, learned once for every attempt
    with watch_range_narrowing() as narrowed_at:
        while attempts:
            mode, example = attempts.pop(0)
            spec, adopted = bounded, dict(bounds_adopted)
            hinted = mode == "specialised" and bool(dims) and not oblivious_left and not _has_derived_dims(bounded)
            if hinted:  # the last capture left: torch's own ranges first (one export where fixes take two)
                spec = _map_dims(bounded, lambda dim: Dim.DYNAMIC(**_limits(dim)))
            for _ in range(5):  # again with suggested bounds, without size 0, with guards left to torch
                try:
                    program = _export_converting_libraries(module, example, spec, mode == "oblivious",
                                                           convert_library)
                except ConversionError:
                    raise
                except Exception as exc:
                    failure = exc
                    if hinted:  # a specialised dimension, or a failure the named Dims word better
                        hinted, spec = False, bounded
                        continue
                    refined = _adopt_suggested_bounds(exc, spec, adopted, oblivious=mode == "oblivious")
                    if refined is not None and spec is bounded:
                        bounded, bounds_adopted = refined, dict(adopted)
                        if mode == "specialised" and oblivious_left:  # a bound learned from the grown
                            # example: the size-oblivious capture once more, to keep sizes 0 and 1
                            attempts[:0], oblivious_left = [("oblivious", inputs), (mode, example)], False
                            break
                    if mode == "oblivious" and specialises_size_one(exc):  # no spec makes it pass:
                        oblivious_left = False  # on to the grown example, with the bounds learned here
                        break
                    if refined is None and mode == "oblivious":
                        refined = _excluding_size_zero(exc, spec, adopted)
                    if refined is None:
                        refined = _as_dynamic_hints(exc, spec, keep_bounds=mode == "oblivious")
                    spec = refined
                    if spec is None:
                        break
                    continue
                if _has_dim_hints(spec):  # torch keeps the guards it cannot word as a range unchecked
                    refuse_unenforced_guards(program, dims)
                annotate_dim_ranges(program, signature, inputs, normalized, narrowed_at, mode, adopted,
                                     fallback=why_oblivious_failed(failure) if mode == "specialised" else None)
                if notes is not None:
                    notes.extend(narrowing_notes(program, grown=example is not inputs))
                return program
    _raise_classified(failure, module, pinned_location(failure, narrowed_at, dims))


def _raise_classified(exc: Exception, module: torch.nn.Module | None = None, pinned_at=None) -> None:
    error = classify_capture_failure(exc, pinned_at)
    if error.where is None and module is not None:  # no line to show: code without source?
        error = source_unavailable(module) or error
    if error in _exception_chain(exc):  # fxport's own error that torch wrapped: no second cause
        raise error from None
    raise error from exc


def _export_converting_libraries(module, example: InputSet, spec, oblivious: bool,
                                 convert_library: Callable[[BaseException], bool] | None):
    """:func:`_export`, again after each failure ``convert_library`` answers by converting a
    library function (it bounds how many)."""
    while True:
        try:
            with _rolled_back_on_failure():
                return _export(module, example, spec, oblivious=oblivious)
        except ConversionError:
            raise
        except Exception as exc:
            if convert_library is None or not convert_library(exc):
                raise


def _export(module, inputs: InputSet, dynamic_shapes, oblivious: bool = False) -> torch.export.ExportedProgram:
    with quiet_torch(), _shape_config.patch(backed_size_oblivious=oblivious), \
            stopping_at_size_one_guards(enabled=oblivious and not _has_dim_hints(dynamic_shapes)):
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


_SUGGESTED_DIM = re.compile(r"^\s*(\w+) = Dim\('(\w+)'((?:, (?:min|max)=\d+)*)\)\s*$", re.M)


def _adopt_suggested_bounds(exc, normalized, adopted: dict, oblivious: bool = False) -> Any:
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
    for match in _SUGGESTED_DIM.finditer(text.split("Suggested fixes", 1)[1]):
        limits = {k.strip(): int(v) for k, v in (part.split("=") for part in match.group(3).split(",") if part.strip())}
        if oblivious and limits.get("max", 2) < 2:
            continue
        bounds[match.group(2)] = limits
    dims: dict[str, Dim] = {}

    def refine(dim: Dim) -> Dim:
        if dim.__name__ not in bounds:
            return dim
        if dim.__name__ not in dims:
            dims[dim.__name__] = Dim(dim.__name__, **{**_limits(dim), **bounds[dim.__name__]})
        return dims[dim.__name__]

    refined = _map_dims(normalized, refine)
    if not dims:
        return None
    where = location_named_in_message(text) or traced_location_from_exception(exc)
    for name in dims:
        adopted[name] = where
    return refined


def _excluding_size_zero(exc, spec, adopted: dict) -> Any:
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
            dims[dim.__name__] = Dim(dim.__name__, **{**_limits(dim), "min": 1})
            changed.append(dim.__name__)
        return dims[dim.__name__]

    refined = _map_dims(spec, refine)
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


def _as_dynamic_hints(exc, spec, keep_bounds: bool = False) -> Any:
    """The spec with ``Dim.DYNAMIC`` (same min/max) for the named Dims whose guards torch could
    not prove over their range and had no fix to suggest for (``1 % (96*(w // 4)) != 0`` for w ≥ 64);
    None when there are none. The stock exporter declares every dimension this way: torch keeps
    the guards it can check, and a dimension the model really specialises still fails the capture.
    The program's ranges, not the spec's, say what the file is valid for. ``keep_bounds``: not for a
    guard that fails at large sizes (BERT's ``min(64, seq) == seq``): a size-oblivious capture drops
    it, the capture from the grown example words it as a bound to adopt.

    Example::

        >>> _as_dynamic_hints(RuntimeError("Constraints violated (w)! ..."), {"x": {3: Dim("w", min=64)}})
        {'x': {3: DimHint(DYNAMIC, min=64)}}
    """
    text = str(exc)
    match = _VIOLATED.search(text)
    names = {name.strip() for name in match.group(1).split(",")} if match else set()
    if _SOLVER_CRASH in text:  # torch's solver failed to word its fixes: the Dims its guard names
        names = set(re.findall(r"[A-Za-z_]\w*", text.split(_SOLVER_CRASH, 1)[1]))
    fixes = text.split("Suggested fixes", 1)[1] if "Suggested fixes" in text else ""
    names -= {m.group(2) for m in _SUGGESTED_DIM.finditer(fixes)} | {m.group(1) for m in SUGGESTED_CONSTANT.finditer(fixes)}
    if keep_bounds:
        names -= {name for name, (at_large,) in guards_at_sizes(text, 2 ** 20) if at_large is False}
    changed = []

    def hint(dim: Dim) -> Any:
        if dim.__name__ not in names:
            return dim
        changed.append(dim.__name__)
        return Dim.DYNAMIC(**_limits(dim))

    refined = _map_dims(spec, hint)
    return refined if changed else None


def _map_dims(spec: Any, fn: Callable[[Dim], Any]) -> Any:
    """``spec`` (dicts, lists, tuples of Dims) with ``fn`` applied to each named, non-derived Dim.

    >>> _map_dims({"x": (Dim("b"), None)}, lambda dim: dim.__name__)
    {'x': ('b', None)}
    """
    if isinstance(spec, dict):
        return {key: _map_dims(value, fn) for key, value in spec.items()}
    if isinstance(spec, (list, tuple)):
        return type(spec)(_map_dims(value, fn) for value in spec)
    if isinstance(spec, Dim) and not hasattr(spec, "root"):
        return fn(spec)
    return spec


def _has_derived_dims(spec: Any) -> bool:
    """Whether ``spec`` holds a derived Dim (``8 * Dim("h8")``), which needs its root as a Dim."""
    return _any_dim(spec, lambda dim: hasattr(dim, "root"))


def _has_dim_hints(spec: Any) -> bool:
    """Whether ``spec`` holds a ``Dim.DYNAMIC``/``Dim.AUTO`` hint (torch may specialise it)."""
    return _any_dim(spec, lambda dim: isinstance(dim, _DimHint) and dim.type != _DimHintType.STATIC)


def _any_dim(spec: Any, test: Callable[[Any], bool]) -> bool:
    if isinstance(spec, dict):
        return any(_any_dim(value, test) for value in spec.values())
    if isinstance(spec, (list, tuple)):
        return any(_any_dim(value, test) for value in spec)
    return test(spec)


def _limits(dim: Dim) -> dict[str, int]:
    """A Dim's declared bounds as ``Dim(...)`` keywords (an unbounded max left out)."""
    return {"min": dim.min, **({"max": int(dim.max)} if is_finite(dim.max) else {})}


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
