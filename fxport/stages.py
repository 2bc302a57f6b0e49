"""The pipeline's stages, in order: eager → capture → rewrite → lower → precision → verify →
coverage → write.

Each stage is a function of the :class:`~fxport.conversion.Conversion` (it reads what earlier
stages produced and adds its own product) plus a predicate saying whether it applies to this run.
:data:`STAGES` is the order :func:`fxport.pipeline.run` follows; a new stage is one function and
one entry there.

Example::

    >>> [stage.name for stage in STAGES]
    ['eager', 'capture', 'rewrite', 'lower', 'precision', 'verify', 'coverage', 'write']
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
from typing import Any, Callable, Iterator

import torch
import torch.utils._pytree as pytree

from fxport.capture import capture
from fxport.capture_failures import failure_location, stopped_in_library
from fxport.dynamic_dims import dynamic_axes_by_input, dynamic_dim_bounds, record_dynamic_ranges
from fxport.controlflow import convert_control_flow
from fxport.controlflow.libraries import converting_libraries
from fxport.controlflow.libraries import installed_for as library_functions_installed_for
from fxport.conversion import Conversion
from fxport.domain import input_domains
from fxport.eager import Signature, register_output_dataclasses, run_eager
from fxport.errors import VerificationError
from fxport.exercise import exercise_control_flow
from fxport.grown_loops import capture_loop_bodies
from fxport.external import load_weights_into
from fxport.files import write_atomically
from fxport.lower import check_onnx, lower, name_dynamic_axes, name_outputs
from fxport.precision import apply_precision, exported_at_precision, verify_at_precision
from fxport.report import AppliedRewrite, iter_nodes
from fxport.serialized import ModelBytes
from fxport.ties import sorted_output_indices
from fxport.verified_ranges import widen_verified_ranges
from fxport.verify import generate_input_sets


@dataclasses.dataclass(frozen=True)
class Stage:
    """A named step of the pipeline; ``applies`` says whether this run needs it.

    ``reads`` names the :class:`~fxport.conversion.Conversion` fields the stage needs: set-up
    fields (:data:`~fxport.conversion.SET_UP`) or fields an earlier stage ``adds``; the engine
    checks that before running it (:func:`fxport.pipeline.run`).
    """

    name: str
    run: Callable[[Conversion], None]
    reads: tuple[str, ...] = ()
    adds: tuple[str, ...] = ()
    applies: Callable[[Conversion], bool] = lambda job: True
    #: the name its time is recorded under, when it is not ``name`` (``fp16`` for precision)
    timing_name: Callable[[Conversion], str] | None = None

    def timed_as(self, job: Conversion) -> str:
        return self.timing_name(job) if self.timing_name else self.name


def run_eager_reference(job: Conversion) -> None:
    """The model runs eagerly on the example (a failure here is the model's, not the export's);
    its outputs, copied, are verification's reference for the example."""
    outputs = run_eager(job.model, job.example)
    register_output_dataclasses(outputs)
    job.example_outputs = pytree.tree_map(lambda leaf: leaf.clone() if isinstance(leaf, torch.Tensor) else leaf, outputs)


def capture_program(job: Conversion) -> None:
    """``torch.export`` with patch rules and control-flow conversion installed (docs/control-flow.md)."""
    export_model, export_example = exported_at_precision(job.model, job.example, job.options.precision)
    job.program = capture_with_rewrites(export_model, export_example, job.dynamic_shapes, job.ruleset,
                                        job.rewrites, job.options.converts_control_flow, job.warnings,
                                        convert_libraries=job.options.convert_libraries, signature=job.signature)
    if job.options.keep_artifacts:
        job.artifacts["exported_program_before"] = snapshot_graph_module(job.program)


def rewrite_graphs(job: Conversion) -> None:
    """Graph passes (``.item()`` predicates made tensors among them), then graph rules, on every
    graph of the captured aten program: top level, cond branches, loop and scan bodies."""
    job.program = job.ruleset.apply_graph_rules(job.program, job.rewrites,
                                                control_flow=job.options.converts_control_flow is not None)
    capture_loop_bodies(job.program, lambda body: job.ruleset.apply_graph_rules(body, job.rewrites))  # growing loops
    if job.options.keep_artifacts:
        job.artifacts["exported_program_after"] = job.program


def lower_to_onnx(job: Conversion) -> None:
    """The dynamo exporter with the rules' op translations; dynamic axes named and bounded."""
    options = job.options
    programs: dict[str, Any] = {}
    job.onnx_model = job.float_model = lower(
        job.program, opset=options.opset, optimize=options.optimize,
        translation_table=job.ruleset.translation_table(), node_counts=job.node_counts,
        external_data=options.external_data, stage=job.staging, fusions=job.fusions, programs=programs,
        check=False)  # checked below, once the axes and outputs carry their names
    job.translated_program = programs.get("translated")
    if options.keep_artifacts:
        job.artifacts["translated_program"] = job.translated_program
    job.ruleset.record_op_rules_fired(job.onnx_model, job.rewrites)
    job.axis_names = dynamic_axes_by_input(job.signature, job.example, job.dynamic_shapes)
    if options.rewrites:  # without rewrites (fxport diff's stock baseline) the file stays as the exporter wrote it
        name_dynamic_axes(job.onnx_model, job.axis_names)
        name_outputs(job.onnx_model, job.model)  # after forward's return where known, not clone_2
        record_dynamic_ranges(job.onnx_model, job.program)  # the sizes the file is valid for
    if not job.staging.home(job.onnx_model):  # a staged pair was checked as a file by lower
        job.model_bytes = ModelBytes(job.onnx_model)  # the graph is final: serialised once from here
        if options.precision == "fp32":  # written while the checker and verification run; committed if they pass
            job.staging.begin_file(job.model_bytes.pieces(job.onnx_model))
            job.model_bytes.head_file = job.staging.early_head  # ONNX Runtime maps the weights from it
        fused = options.optimize == "ort"  # ORT's default-domain contrib ops: the checker sees a copy
        check_onnx(job.onnx_model if fused else job.model_bytes(job.onnx_model), ort=fused)


def convert_precision(job: Conversion) -> None:
    """fp16 islands or int8 quantisation of the lowered float model."""
    precision = job.options.precision
    job.onnx_model = apply_precision(job.float_model, precision, job.calibration_sets, stage=job.staging)
    job.node_counts[precision] = sum(1 for _ in iter_nodes(job.onnx_model.graph))


def verify_outputs(job: Conversion) -> None:
    """ONNX Runtime against eager on the example, generated sets in the model's domain, the caller's."""
    job.domains, job.bounds = input_domains(job.program, job.example), dynamic_dim_bounds(job.program)
    job.generated = generate_input_sets(job.example, job.axis_names, bounds=job.bounds, domains=job.domains)
    try:
        job.verification = verify_at_precision(job.model, runnable(job), job.input_sets, **verify_options(job))
    except VerificationError as exc:
        _point_at_user_rules(exc, job)
        raise
    if widen_verified_ranges(job.program, job.verification, job.warnings, job.onnx_model):
        job.bounds = dynamic_dim_bounds(job.program)


def _point_at_user_rules(exc: VerificationError, job: Conversion) -> None:
    """A mismatch where the user's own rules rewrote the model: the hint names them first
    (their maths is the likeliest cause), not "report the model"."""
    from fxport.rules.base import BUILTIN_PRIORITY

    mine = []
    for record in job.rewrites:
        try:
            rule = job.ruleset.get(record.rule)
        except KeyError:
            continue
        described = f"{rule.name} ({rule.defined_at})" if rule.defined_at else rule.name
        if rule.priority != BUILTIN_PRIORITY and rule.tier != "control-flow" and described not in mine:
            mine.append(described)
    if mine and exc.hint and "report the model" in exc.hint:
        exc.hint = (f"your rule{'s' if len(mine) > 1 else ''} {', '.join(mine)} rewrote this model: check "
                    f"{'their' if len(mine) > 1 else 'its'} maths first (--disable it to compare), then report the model")
        exc.args = (exc.message,)


def exercise_converted_control_flow(job: Conversion) -> None:
    """Which side of each converted ``if`` and which loop trip counts the sets reached; search for
    sets that reach the rest and verify them too (docs/control-flow.md, "What verification exercised")."""
    fired = {record.rule for record in job.rewrites if record.tier == "patch"}
    # library code converted at capture runs converted here too, and so does code the capture's
    # patch rules ran (fxport's generator in place of transformers' generate())
    with library_functions_installed_for(job.rewrites), job.ruleset.patches_applied([], only=fired):
        exercised = exercise_control_flow(job.model, job.rewrites, job.input_sets, job.example, job.domains,
                                          strategy=job.options.if_strategy,
                                          disabled=job.ruleset.disabled_control_flow, made_up=job.generated)
    if exercised.found_sets:
        try:
            job.verification += verify_at_precision(job.model, runnable(job), exercised.found_sets,
                                                    generate=False, **verify_options(job))
        except VerificationError as exc:  # the table shows every row, not only the searched ones
            exc.report = job.verification + exc.report
            raise
    job.coverage = [construct.to_dict() for construct in exercised.constructs]
    refuse_or_warn_uncovered(exercised.warnings(), job.options.strict_coverage, job.verification, job.warnings)


def write_output(job: Conversion) -> None:
    """The model (and its external data) at the output path, atomically; in memory without one."""
    home = job.staging.home(job.onnx_model)
    if job.output is None:
        job.onnx_model = load_weights_into(job.onnx_model, home)
    else:
        job.output_path = (job.staging.commit(job.onnx_model) if home
                           else job.staging.commit_file(job.onnx_model, job.model_bytes)
                           or write_atomically(job.onnx_model, job.output, job.model_bytes))


def _converted_control_flow(job: Conversion) -> bool:
    return job.options.verify and any(rewrite.tier == "control-flow" for rewrite in job.rewrites)


#: The pipeline, in order.
STAGES: tuple[Stage, ...] = (
    Stage("eager", run_eager_reference, reads=("model", "example"), adds=("example_outputs",)),
    Stage("capture", capture_program, reads=("model", "signature", "example", "dynamic_shapes", "ruleset"),
          adds=("program", "rewrites")),
    Stage("rewrite", rewrite_graphs, reads=("program", "ruleset"), adds=("program", "rewrites")),
    Stage("lower", lower_to_onnx, reads=("program", "ruleset", "signature", "example", "dynamic_shapes", "staging"),
          adds=("onnx_model", "float_model", "axis_names", "node_counts", "fusions", "translated_program",
                "model_bytes")),
    Stage("precision", convert_precision, reads=("float_model", "calibration_sets", "staging"),
          adds=("onnx_model", "node_counts"), applies=lambda job: job.options.precision != "fp32",
          timing_name=lambda job: job.options.precision),
    Stage("verify", verify_outputs, reads=("model", "program", "onnx_model", "float_model", "example", "extra_sets",
                                          "axis_names", "device", "translated_program", "example_outputs",
                                          "model_bytes"),
          adds=("domains", "bounds", "generated", "verification"), applies=lambda job: job.options.verify),
    Stage("coverage", exercise_converted_control_flow,
          reads=("model", "rewrites", "onnx_model", "model_bytes", "example", "extra_sets", "generated", "domains",
                 "verification"),
          adds=("coverage", "verification"), applies=_converted_control_flow),
    Stage("write", write_output, reads=("onnx_model", "model_bytes", "output", "staging"), adds=("output_path",),
          applies=lambda job: job.output is not None or bool(job.staging.home(job.onnx_model))),
)


def stage_table(stages: tuple[Stage, ...] = None) -> str:
    """The stages as docs/architecture.md's markdown table (a test keeps the page equal to it).

    Example::

        >>> print(stage_table(STAGES[:1]))
        | stage | function | reads | adds to the `Conversion` |
        | --- | --- | --- | --- |
        | eager | `stages.run_eager_reference` | `model`, `example` | `example_outputs` |
    """
    def names(fields: tuple[str, ...]) -> str:
        return ", ".join(f"`{field}`" for field in fields) or "—"

    rows = ["| stage | function | reads | adds to the `Conversion` |", "| --- | --- | --- | --- |"]
    for stage in STAGES if stages is None else stages:
        rows.append(f"| {stage.name} | `stages.{stage.run.__name__}` | {names(stage.reads)} | {names(stage.adds)} |")
    return "\n".join(rows)


def verify_options(job: Conversion) -> dict[str, Any]:
    """The keyword arguments every verification call of this run shares."""
    options = job.options
    return dict(
        precision=options.precision, float_model=job.staging.model_path(job.float_model)
        if job.staging.home(job.float_model) else job.float_model, min_cosine=options.min_cosine,
        device=job.device, dynamic_axes=job.axis_names, bounds=job.bounds, domains=job.domains,
        generated_sets=job.generated, notes=job.warnings, atol=options.atol, rtol=options.rtol,
        sort_keys=sorted_output_indices(job.program) if job.program is not None else None,
        program=job.translated_program,  # its node names are the file's value names (decision replay)
        on_input_set=lambda name: job.timer.note("verify", f"running {name}"),
        known_outputs={id(job.example): job.example_outputs} if job.example_outputs is not None else None,
        model_bytes=job.model_bytes,
    )


def runnable(job: Conversion) -> "Any":
    """What ONNX Runtime loads: the proto, or for external data the staged model file beside its data."""
    model = job.onnx_model
    return job.staging.model_path(model) if job.staging.home(model) else model


def refuse_or_warn_uncovered(lines: list[str], strict: bool, rows: list, warnings_out: list[str]) -> None:
    """Converted constructs no input set fully exercised: warnings, or with ``strict`` an error."""
    if lines and strict:
        raise VerificationError(lines[0].replace("; add input sets", " (--strict-coverage); add input sets"),
                                report=rows, hint="or leave out --strict-coverage to accept it with a warning")
    warnings_out.extend(lines)


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
