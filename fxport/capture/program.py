"""The capture stage: torch.export of the (rewritten) model, retried where sizes need it.

:func:`capture` exports non-strict, first with dynamic sizes kept symbolic down to 0 and 1, then
falling back as described in its docstring; the spec forms and the valid ranges live in
fxport/capture/dynamic_dims.py, failures are classified in fxport/capture/failures.py, and the
spec a failure refines for the next export is fxport/capture/spec_refinement.py's.

Example::

    >>> import torch
    >>> from fxport.eager.inputs import InputSet
    >>> ep = capture(torch.nn.Softmax(dim=-1), InputSet((torch.randn(2, 3),)), {"input": {0: "batch"}})
    >>> [str(d) for d in ep.graph_module.graph.find_nodes(op="placeholder")[0].meta["val"].shape]
    ['s...', '3']
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch
import torch.fx.experimental._config as _shape_config
from torch.export import Dim

from fxport.capture.dynamic_dims import annotate_dim_ranges, dims_by_input, narrowing_notes, normalize_dynamic_shapes
from fxport.capture.narrowings import watch_range_narrowing
from fxport.capture.failures import classify_capture_failure, pinned_location, source_unavailable, why_oblivious_failed
from fxport.capture.recurrent import refreshed_at_each_call
from fxport.capture.hinted_guards import refuse_unenforced_guards
from fxport.capture.size_one_stop import specialises_size_one, stopping_at_size_one_guards
from fxport.capture.squeezed_sizes import watching_squeezes
from fxport.capture.spec_refinement import (adopt_suggested_bounds, as_dynamic_hints, excluding_size_zero, excluding_zero_sides,
                                            has_derived_dims, has_dim_hints, limits, map_dims)
from fxport.eager.calls import Signature
from fxport.errors import ConversionError
from fxport.common.frames import chain_stops_at_caller, exception_chain as _exception_chain
from fxport.eager.inputs import InputSet, number_as_tensor
from fxport.common.quiet import quiet_torch


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
    ``signature``: ``module``'s (:class:`~fxport.eager.calls.Signature`), when the caller has it.
    """
    signature = signature or Signature.of(module)
    normalized = normalize_dynamic_shapes(signature, dynamic_shapes, inputs)
    dims = dims_by_input(signature, inputs, normalized)
    plan = _Attempts(inputs, dims, normalized)
    with watch_range_narrowing() as narrowed_at:
        while plan.queue:
            mode, example = plan.queue.pop(0)
            captured = _attempt(module, mode, example, plan, convert_library)
            if captured is None:
                continue
            program, spec, adopted, squeezed = captured
            if has_dim_hints(spec):  # torch keeps the guards it cannot word as a range unchecked
                refuse_unenforced_guards(program, dims)
            annotate_dim_ranges(program, signature, inputs, normalized, narrowed_at, mode, adopted,
                                fallback=why_oblivious_failed(plan.failure) if mode == "specialised" else None,
                                squeezed=squeezed, zero_sides=plan.zero_sides)
            if notes is not None:
                notes.extend(narrowing_notes(program, grown=example is not inputs))
            return program
    _raise_classified(plan.failure, module, pinned_location(plan.failure, narrowed_at, dims))


class _Attempts:
    """The captures :func:`capture` has left and what the failed ones taught the next.

    ``queue`` holds ``(mode, example)`` pairs: the size-oblivious capture of the example, then
    the classic one from the example grown to size 2 (only the latter without dynamic dims).
    ``bounded`` is the spec with the model's own bounds adopted, learned once for every attempt
    (``adopted``: dimension name → the user's file:line that bounds it); ``oblivious_left``
    whether a size-oblivious capture may still run; ``failure`` the last export's exception.
    """

    def __init__(self, inputs: InputSet, dims: dict, normalized: Any):
        self.inputs, self.dims = inputs, dims
        self.queue = [("oblivious", inputs), ("specialised", _grown_example(inputs, dims))] if dims \
            else [("specialised", inputs)]
        self.bounded, self.adopted = normalized, {}
        self.oblivious_left = bool(dims)
        self.failure: Exception | None = None
        self.zero_sides: dict = {}  # dimension → the if whose size-0 side made it start at 1
        self.zero_sources: set = set()  # the input sizes those dimensions are (L['x'].size()[0])

    def without_zero_sides(self, exc: ConversionError, spec: Any) -> Any:
        """The spec to export with after a refused ``if`` that only size 0 of declared dimensions
        takes (fxport/capture/size_zero_branches.py): those from 1, in every attempt after this
        one too; None where ``exc`` is no such refusal."""
        refined = excluding_zero_sides(exc, spec, self.zero_sides, self.zero_sources)
        if refined is not None and spec is self.bounded:
            self.bounded = refined
        return refined

    def first_spec(self, mode: str) -> tuple[Any, bool]:
        """The spec an attempt starts with, and whether it is ``Dim.DYNAMIC`` hints: the last
        capture left declares torch's own ranges first (one export where fixes take two)."""
        hinted = mode == "specialised" and bool(self.dims) and not self.oblivious_left \
            and not has_derived_dims(self.bounded)
        return (map_dims(self.bounded, lambda dim: Dim.DYNAMIC(**limits(dim))), True) if hinted \
            else (self.bounded, False)

    def refined_after(self, exc: Exception, spec: Any, adopted: dict, mode: str, example: InputSet) -> Any:
        """The spec to export with after ``exc``: suggested bounds adopted, size 0 left out, or
        ``Dim.DYNAMIC`` hints; None ends the attempt (the queue says what runs next)."""
        oblivious = mode == "oblivious"
        refined = adopt_suggested_bounds(exc, spec, adopted, oblivious=oblivious)
        if refined is not None and spec is self.bounded:
            self.bounded, self.adopted = refined, dict(adopted)
            if mode == "specialised" and self.oblivious_left:  # a bound learned from the grown example:
                # the size-oblivious capture once more, to keep sizes 0 and 1
                self.queue[:0], self.oblivious_left = [("oblivious", self.inputs), (mode, example)], False
                return None
        if oblivious and specialises_size_one(exc):  # no spec makes it pass: on to the grown
            self.oblivious_left = False  # example, with the bounds learned here
            return None
        if refined is None and oblivious:
            refined = excluding_size_zero(exc, spec, adopted)
        if refined is None:
            refined = as_dynamic_hints(exc, spec, keep_bounds=oblivious)
        return refined


def _attempt(module, mode: str, example: InputSet, plan: _Attempts,
             convert_library: Callable[[BaseException], bool] | None) -> tuple[Any, Any, dict, dict] | None:
    """One capture attempt: the export, again after each failure with the spec the failure
    refines (five times at most). ``(program, spec, adopted bounds, squeezed sizes)``, or None
    when it failed; the squeezed sizes are the input sizes that may be 1 which the model's
    ``squeeze`` saw in the export that succeeded (fxport/capture/squeezed_sizes.py)."""
    spec, hinted = plan.first_spec(mode)
    adopted = dict(plan.adopted)
    for _ in range(5):  # again with suggested bounds, without size 0, with guards left to torch
        squeezed: dict = {}
        try:
            with watching_squeezes(squeezed, enabled=mode == "oblivious"):
                program = _export_converting_libraries(module, example, spec, mode == "oblivious", convert_library,
                                                       plan.zero_sources)
        except ConversionError as exc:
            spec = plan.without_zero_sides(exc, spec)
            if spec is None:
                raise
            continue
        except Exception as exc:
            plan.failure = exc
            if hinted:  # a specialised dimension, or a failure the named Dims word better
                hinted, spec = False, plan.bounded
                continue
            spec = plan.refined_after(exc, spec, adopted, mode, example)
            if spec is None:
                return None
            continue
        return program, spec, adopted, squeezed
    return None


def _raise_classified(exc: Exception, module: torch.nn.Module | None = None, pinned_at=None) -> None:
    error = classify_capture_failure(exc, pinned_at)
    if error.where is None and module is not None:  # no line to show: code without source?
        error = source_unavailable(module) or error
    if error in _exception_chain(exc):  # fxport's own error that torch wrapped: no second cause
        raise error from None
    raise error from exc


def _export_converting_libraries(module, example: InputSet, spec, oblivious: bool,
                                 convert_library: Callable[[BaseException], bool] | None, without_zero=()):
    """:func:`_export`, again after each failure ``convert_library`` answers by converting a
    library function (it bounds how many). ``without_zero``: the input sizes exported from 1
    (fxport/capture/size_zero_branches.py)."""
    from fxport.controlflow.operators.size_zero_sides import sizes_without_zero

    while True:
        try:
            with _rolled_back_on_failure(), sizes_without_zero(without_zero):
                return _export(module, example, spec, oblivious=oblivious)
        except ConversionError:
            raise
        except Exception as exc:
            if convert_library is None or not convert_library(exc):
                raise


def _export(module, inputs: InputSet, dynamic_shapes, oblivious: bool = False) -> torch.export.ExportedProgram:
    with quiet_torch(), _shape_config.patch(backed_size_oblivious=oblivious), \
            stopping_at_size_one_guards(enabled=oblivious and not has_dim_hints(dynamic_shapes)), \
            refreshed_at_each_call(module):
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
