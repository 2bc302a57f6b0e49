"""The capture stage: ``torch.export`` with patch rules and control-flow conversion installed."""

from __future__ import annotations

import contextlib
import copy
from typing import Any, Callable, Iterator

import torch

from fxport.capture.failures import failure_location, stopped_in_library
from fxport.capture.half_precision import exported_at_precision
from fxport.capture.program import capture
from fxport.controlflow import convert_control_flow
from fxport.controlflow.libraries import converting_libraries
from fxport.controlflow.operators.left_out import take_markers, warnings_for
from fxport.controlflow.operators.rule_names import rule_name
from fxport.engine.conversion import Conversion
from fxport.eager.calls import Signature, run_eager
from fxport.errors import CaptureError
from fxport.report.result import AppliedRewrite


def capture_program(job: Conversion) -> None:
    """``torch.export`` with patch rules and control-flow conversion installed (docs/control-flow.md).

    Without verification the eager stage does not run; a capture that fails then runs the model
    eagerly on the example once, so that a model that fails in eager too is reported as the
    model's own error (:class:`~fxport.errors.EagerRunError`), as with verification."""
    export_model, export_example = exported_at_precision(job.model, job.example, job.options.precision)
    try:
        job.program = capture_with_rewrites(export_model, export_example, job.dynamic_shapes, job.ruleset,
                                            job.rewrites, job.options.converts_control_flow, job.warnings,
                                            convert_libraries=job.options.convert_libraries,
                                            signature=job.signature)
    except CaptureError:
        if job.example_outputs is None:
            _raise_if_eager_fails(job)
        raise
    if job.options.keep_artifacts:
        job.artifacts["exported_program_before"] = snapshot_graph_module(job.program)


def _raise_if_eager_fails(job: Conversion) -> None:
    """Raise the model's own :class:`~fxport.errors.EagerRunError` when it fails eagerly on the
    example too (the capture's failure is then not the export's)."""
    run_eager(job.model, job.example)


def left_out_rule(info) -> str:
    """The rule of a check the file leaves out (``assert-on-tensor``, ``raise-on-tensor``)."""
    return rule_name(info.kind, "dropped")


def capture_with_rewrites(model: torch.nn.Module, example, dynamic_shapes: Any, ruleset,
                          records: list[AppliedRewrite], if_strategy: str | None,
                          notes: list[str], convert_libraries: bool = True,
                          signature: Signature | None = None) -> torch.export.ExportedProgram:
    """Patch rules and control-flow conversion installed around ``torch.export``; ``records``
    collects the rewrites. ``if_strategy`` None leaves the model's control flow as written;
    ``convert_libraries`` converts library functions capture stops in (with control flow on).
    """
    with ruleset.patches_applied(records), \
            capture_rewrites(model, records, if_strategy, ruleset.disabled_control_flow), \
            library_conversion(records, if_strategy is not None and convert_libraries) as convert_library:
        program = capture(model, example, dynamic_shapes, notes=notes, convert_library=convert_library,
                          signature=signature)
    left_out = take_markers(program, left_out_rule)  # asserts on tensors: a warning each, no node
    records += left_out
    notes += warnings_for(left_out, notes)
    return program


@contextlib.contextmanager
def library_conversion(records: list[AppliedRewrite], enabled: bool) -> Iterator[Callable | None]:
    """The capture's hook for data-dependent control flow in library code (None when off):
    it converts the library function capture stopped in, installs it until the block ends and
    records it (docs/control-flow.md, "Library code")."""
    if not enabled:
        yield None
        return
    with converting_libraries(records) as libraries:
        def convert(exc: BaseException) -> bool:
            stopped = stopped_in_library(exc)
            if stopped is None:
                return False
            libraries.convert(*stopped, user_where=failure_location(exc))
            return True

        yield convert


@contextlib.contextmanager
def capture_rewrites(model: torch.nn.Module, records: list[AppliedRewrite], if_strategy: str | None,
                     disabled: frozenset[str] = frozenset()) -> Iterator[None]:
    """Install the source-level rewrites for the duration of capture; ``records`` collects them.

    ``if_strategy`` None leaves the model's control flow as written; ``disabled`` names
    control-flow conversions switched off (``--disable if-to-where``).
    """
    with contextlib.ExitStack() as stack:
        if if_strategy is not None:
            records_cf = stack.enter_context(convert_control_flow(model, strategy=if_strategy, disabled=disabled))
            stack.callback(lambda: records.extend(records_cf))
        yield


def snapshot_graph_module(program: torch.export.ExportedProgram) -> torch.fx.GraphModule:
    """A copy of ``program``'s graph (sharing its weights) that later in-place rewrites leave alone."""
    graph = torch.fx.Graph()
    output = graph.graph_copy(program.graph, {})
    graph.output(output)
    snapshot = torch.fx.GraphModule(program.graph_module, graph)
    snapshot.meta["graph_signature"] = copy.deepcopy(program.graph_signature)
    return snapshot
