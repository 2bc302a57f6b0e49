"""The pipeline: load → capture (with rewrites) → lower → verify → write → report.

:func:`convert` is fxport's Python entry point; the CLI is a thin layer over it.

Example::

    >>> import torch, fxport
    >>> class Net(torch.nn.Module):
    ...     def forward(self, x):
    ...         return torch.tanh(x) + 1
    >>> result = fxport.convert(Net(), (torch.randn(4, 3),), dynamic_shapes={"x": {0: "batch"}})
    >>> result.verified, sorted(result.op_counts())
    (True, ['Add', 'Tanh'])
"""

from __future__ import annotations

import contextlib
import copy
import os
import tempfile
import time
from typing import Any, Callable, Iterator

import onnx
import torch

from fxport.capture import capture, dynamic_axes_by_input, dynamic_dim_bounds, record_dynamic_ranges
from fxport.controlflow import convert_control_flow
from fxport.controlflow.tensorize import tensorize_item_predicates
from fxport.domain import input_domains
from fxport.exercise import exercise_control_flow
from fxport.errors import ConversionError, OutputWriteError, UsageError, VerificationError
from fxport.external import Staging, load_weights_into
from fxport.load import InputSet, forward_parameters, register_output_dataclasses, run_eager, to_input_sets
from fxport.lower import lower, name_dynamic_axes
from fxport.ort_optimize import optimize_level
from fxport.precision import (apply_precision, check_precision, exported_at_precision, load_calibration,
                              verify_at_precision)
from fxport.report import AppliedRewrite, ConversionResult, iter_nodes
from fxport.rules import resolve as resolve_rules
from fxport.verify import generate_input_sets, resolve_device

#: ``progress(stage, state)``: state ``"start"`` or ``"done"``, or a short note of what the
#: running stage is doing now (``"running left-padded mask"``); the CLI draws it.
ProgressCallback = Callable[[str, str], None]


def convert(
    model: torch.nn.Module,
    args: Any = (),
    *,
    kwargs: dict[str, Any] | None = None,
    dynamic_shapes: Any = None,
    output: str | os.PathLike | None = None,
    opset: int | None = None,
    verify: bool = True,
    device: str = "auto",
    rules: Any = None,
    disable_rules: Any = (),
    if_strategy: str = "auto",
    control_flow: bool = True,
    optimize: bool | str = "generic",
    verify_inputs: list[Any] | None = None,
    progress: ProgressCallback | None = None,
    keep_artifacts: bool = False,
    precision: str = "fp32",
    calibration: Any = None,
    min_cosine: float | None = None,
    external_data: bool | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    strict_coverage: bool = False,
) -> ConversionResult:
    """Convert ``model`` to ONNX, rewriting what the stock exporter refuses, and verify it.

    Args:
        model: the module to convert; it is not modified (a module in train mode is exported in
            eval mode, with a warning, and switched back afterwards).
        args, kwargs: example inputs used for capture.
        dynamic_shapes: torch.export's format (``Dim`` objects) or ``{"x": {0: "batch"}}``.
        output: where to write the model (atomically); None keeps it in memory.
        opset: ONNX opset; None lets the exporter choose.
        verify: compare ONNX Runtime with eager PyTorch on the example, fresh values and other
            sizes along dynamic dimensions (plus ``verify_inputs``).
        device: ``"auto"``, ``"cpu"`` or ``"cuda"`` for verification.
        rules: extra rewrite rules (see docs/rules.md): decorated functions/classes, modules,
            rule-file paths, or a list of those; the built-ins in rewrites/ always apply.
        disable_rules: names of rules to leave out (``fxport rules`` lists them).
        if_strategy: how tensor-conditioned ``if`` statements are converted: ``"auto"`` (where
            for pure cheap branches, cond otherwise), ``"where"`` or ``"cond"``.
        control_flow: convert data-dependent Python control flow (see docs/control-flow.md);
            ``False`` captures the model's code as it is.
        optimize: ``"generic"`` (default; ``True``): the exporter's ONNX optimiser (constant
            folding, dead code, CSE); ``"none"`` (``False``): the raw export; ``"ort"``: the
            optimiser, then onnxscript's ONNX Runtime fusions (fused attention, skip-layer-norm,
            rotary embeddings, GELU: ORT-only ``com.microsoft`` ops), counted in
            ``result.fusions`` and verified like any output (docs/optimize.md).
        verify_inputs: more input sets to verify with: tuples of args or dicts of kwargs.
        progress: called as ``progress(stage, "start"|"done")``.
        keep_artifacts: also return intermediate artefacts in ``result.artifacts``:
            ``"exported_program_before"`` (a GraphModule snapshot of the captured aten program
            before graph rules, which edit the program in place) and ``"exported_program_after"``
            (the ExportedProgram that was lowered). ``fxport diff`` uses them.
        precision: ``"fp32"``, ``"fp16"`` (a float16 copy is exported; verified against eager
            float32 with float16 tolerances and against eager float16) or ``"int8"``
            (onnxruntime quantisation; accuracy vs float32 reported). See docs/precision.md.
        calibration: int8 only: ``"FILE.py:FUNC"`` or a list of input sets; switches dynamic
            quantisation to static (calibrated) quantisation.
        min_cosine: int8 only: fail below this cosine similarity to eager float32 (default 0.99).
        external_data: store the weights in ``OUTPUT.data`` beside ``output`` (the ONNX
            external-data convention). None (default): when they exceed 1.5 GiB, as the stock
            exporter does (protobuf cannot hold 2 GiB); True: always; False: never (an error for
            a model over 2 GiB). The pair is written atomically (fxport/external.py). For such a
            model ``result.model`` holds the graph with references into that file; without
            ``output`` the weights are read into ``result.model`` in memory.

        atol, rtol: element tolerances for float outputs, replacing the dtype's defaults
            (docs/getting-started.md); recorded in ``result.tolerances``. For a model whose
            outputs are legitimately sensitive — never to hide a real mismatch.
        strict_coverage: refuse the model (VerificationError) when some side of a converted
            ``if`` or some trip count of a converted loop (0, 2+) was reached by no input set,
            generated, searched or given; by default that is a warning at your file:line
            (see docs/control-flow.md, "What verification exercised").

    Returns:
        A :class:`~fxport.report.ConversionResult`.

    Raises:
        fxport.ConversionError: a subclass naming the stage, the user's file:line and a fix;
        its ``partial`` holds what the stages that ran produced (timings, rewrites, warnings).
    """
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"model is a {type(model).__name__}, not a torch.nn.Module",
                         hint="pass an nn.Module instance")
    forward_parameters(model)  # a forward without a Python signature is a usage error here
    example = InputSet(tuple(args) if isinstance(args, (tuple, list)) else (args,), dict(kwargs or {}))
    extra_sets = to_input_sets(list(verify_inputs), "verify_inputs") if verify_inputs else []
    for index, input_set in enumerate(extra_sets, start=1):
        input_set.name = f"user-{index}"
    timer = StageTimer(progress)
    result_warnings: list[str] = []
    rewrites: list[AppliedRewrite] = []
    verify_device = resolve_device(device)
    ruleset = resolve_rules(rules, disable=disable_rules, opset=opset, device=verify_device)
    artifacts: dict[str, Any] = {}
    check_precision(precision, calibration, min_cosine)
    calibration_sets = load_calibration(calibration) if calibration is not None else None
    node_counts: dict[str, int] = {}
    fusions: dict[str, int] = {}
    optimize = optimize_level(optimize)
    stage = Staging(output)  # where a pair over 2 GB is written and verified before its commit

    check_tolerances(atol, rtol)
    with failure_keeps_progress(timer, rewrites, result_warnings), eval_mode(model, result_warnings), \
            contextlib.closing(stage):
        with timer("eager"):
            register_output_dataclasses(run_eager(model, example))
        export_model, export_example = exported_at_precision(model, example, precision)
        with timer("capture"):
            program = capture_with_rewrites(export_model, export_example, dynamic_shapes, ruleset, rewrites,
                                            if_strategy if control_flow else None, result_warnings)
        if keep_artifacts:
            artifacts["exported_program_before"] = snapshot_graph_module(program)
        with timer("rewrite"):
            program = ruleset.apply_graph_rules(program, rewrites)
        if keep_artifacts:
            artifacts["exported_program_after"] = program
        with timer("lower"):
            onnx_model = float_model = lower(program, opset=opset, optimize=optimize,
                                             translation_table=ruleset.translation_table(),
                                             node_counts=node_counts, external_data=external_data,
                                             stage=stage, fusions=fusions)
            ruleset.record_op_rules_fired(onnx_model, rewrites)
            axis_names = dynamic_axes_by_input(model, example, dynamic_shapes)
            name_dynamic_axes(onnx_model, axis_names)
            record_dynamic_ranges(onnx_model, program)  # the sizes the file is valid for
        if precision != "fp32":
            with timer(precision):
                onnx_model = apply_precision(float_model, precision, calibration_sets, stage=stage)
            node_counts[precision] = sum(1 for _ in iter_nodes(onnx_model.graph))
        verification, coverage = [], []
        if verify:
            domains, bounds = input_domains(program, example), dynamic_dim_bounds(program)
            generated = generate_input_sets(example, axis_names, bounds=bounds, domains=domains)
            verify_options = dict(
                precision=precision, float_model=runnable(float_model, stage), min_cosine=min_cosine,
                device=verify_device, dynamic_axes=axis_names, bounds=bounds, domains=domains,
                generated_sets=generated, notes=result_warnings, atol=atol, rtol=rtol,
                on_input_set=(lambda name: progress("verify", f"running {name}")) if progress else None,
            )
            with timer("verify"):
                verification = verify_at_precision(model, runnable(onnx_model, stage), [example, *extra_sets],
                                                   **verify_options)
            if any(rewrite.tier == "control-flow" for rewrite in rewrites):
                with timer("coverage"):
                    exercised = exercise_control_flow(model, rewrites, [example, *extra_sets, *generated],
                                                      example, domains, strategy=if_strategy)
                    if exercised.found_sets:
                        try:
                            verification += verify_at_precision(model, runnable(onnx_model, stage),
                                                                exercised.found_sets, generate=False, **verify_options)
                        except VerificationError as exc:  # the table shows every row, not only the searched ones
                            exc.report = verification + exc.report
                            raise
                    coverage = [construct.to_dict() for construct in exercised.constructs]
                    refuse_or_warn_uncovered(exercised.warnings(), strict_coverage, verification, result_warnings)
        output_path = None
        if output is not None:
            with timer("write"):
                output_path = stage.commit(onnx_model) if stage.home(onnx_model) else write_atomically(onnx_model, output)
        elif stage.home(onnx_model):
            onnx_model = load_weights_into(onnx_model, stage.home(onnx_model))
    return ConversionResult(
        model=onnx_model,
        output_path=output_path,
        rewrites=rewrites,
        verification=verification,
        timings=timer.seconds,
        opset=default_opset(onnx_model),
        warnings=result_warnings,
        artifacts=artifacts,
        precision=precision,
        node_counts=node_counts,
        optimize=optimize,
        fusions=fusions,
        tolerances={"atol": atol, "rtol": rtol} if atol is not None or rtol is not None else {},
        coverage=coverage,
    )


def refuse_or_warn_uncovered(lines: list[str], strict: bool, rows: list, warnings_out: list[str]) -> None:
    """Converted constructs no input set fully exercised: warnings, or with ``strict`` an error."""
    if lines and strict:
        raise VerificationError(lines[0].replace("; add input sets", " (--strict-coverage); add input sets"),
                                report=rows, hint="or leave out --strict-coverage to accept it with a warning")
    warnings_out.extend(lines)


def check_tolerances(atol: float | None, rtol: float | None) -> None:
    """Tolerances are finite non-negative numbers (a usage error otherwise)."""
    for flag, value in (("--atol", atol), ("--rtol", rtol)):
        if value is not None and not (value >= 0 and value != float("inf")):
            raise UsageError(f"{flag} {value} is not a finite non-negative number",
                             hint=f"pass e.g. {flag} 1e-3, or leave it out for the dtype's default")


@contextlib.contextmanager
def failure_keeps_progress(timer: "StageTimer", rewrites: list[AppliedRewrite], warnings_out: list[str]) -> Iterator[None]:
    """Attach what the stages that ran produced to a ConversionError on its way out.

    ``--report`` and ``--json`` write it for a failed run: timings per stage, rewrites that
    fired, warnings (the verification table travels on the VerificationError itself).
    """
    try:
        yield
    except ConversionError as exc:
        exc.partial = {"timings": dict(timer.seconds), "rewrites": list(rewrites), "warnings": list(warnings_out)}
        raise


def runnable(model: onnx.ModelProto, stage: Staging) -> "onnx.ModelProto | str":
    """What ONNX Runtime loads: the proto, or for external data the staged model file beside its data."""
    return stage.model_path(model) if stage.home(model) else model


def snapshot_graph_module(program: torch.export.ExportedProgram) -> torch.fx.GraphModule:
    """A copy of ``program``'s graph (sharing its weights) that later in-place rewrites leave alone."""
    graph = torch.fx.Graph()
    output = graph.graph_copy(program.graph, {})
    graph.output(output)
    snapshot = torch.fx.GraphModule(program.graph_module, graph)
    snapshot.meta["graph_signature"] = copy.deepcopy(program.graph_signature)
    return snapshot


def capture_with_rewrites(model: torch.nn.Module, example: InputSet, dynamic_shapes: Any, ruleset,
                          records: list[AppliedRewrite], if_strategy: str | None,
                          notes: list[str]) -> torch.export.ExportedProgram:
    """The capture stage as every command runs it: patch rules and control-flow conversion
    installed around ``torch.export``, ``.item()`` predicates made tensors; ``records``
    collects the rewrites. ``if_strategy`` None leaves the model's control flow as written.
    ``fxport convert``, ``fxport ops`` and ``fxport diff`` all capture through here.
    """
    with ruleset.patches_applied(records), capture_rewrites(model, records, if_strategy):
        program = capture(model, example, dynamic_shapes, notes=notes)
        if if_strategy is not None:
            tensorize_item_predicates(program, records)
    return program


@contextlib.contextmanager
def capture_rewrites(model: torch.nn.Module, records: list[AppliedRewrite], if_strategy: str | None) -> Iterator[None]:
    """Install the source-level rewrites for the duration of capture; ``records`` collects them.

    ``if_strategy`` None leaves the model's control flow as written.
    """
    with contextlib.ExitStack() as stack:
        if if_strategy is not None:
            records_cf = stack.enter_context(convert_control_flow(model, strategy=if_strategy))
            stack.callback(lambda: records.extend(records_cf))
        yield


class StageTimer:
    """Times pipeline stages and reports them to a progress callback."""

    def __init__(self, progress: ProgressCallback | None = None):
        self.seconds: dict[str, float] = {}
        self.progress = progress

    @contextlib.contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        if self.progress:
            self.progress(stage, "start")
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start
        if self.progress:
            self.progress(stage, "done")


@contextlib.contextmanager
def eval_mode(model: torch.nn.Module, warnings_out: list[str]) -> Iterator[None]:
    """Run the block with every submodule in eval mode, restoring each one's flag afterwards."""
    training = {name: m.training for name, m in model.named_modules()}
    if any(training.values()):
        warnings_out.append(
            f"{type(model).__name__} is in train mode; exported and verified in eval mode "
            "(dropout off, batch-norm running statistics), and switched back afterwards"
        )
        model.eval()
    try:
        yield
    finally:
        for name, m in model.named_modules():
            m.training = training.get(name, m.training)


def write_atomically(model: onnx.ModelProto, path: str | os.PathLike) -> str:
    """Write ``model`` to ``path`` through a temporary file and a rename.

    A failure leaves no partial file and never clobbers an existing one.
    """
    return write_bytes_atomically(model.SerializeToString(), path)


def write_text_atomically(text: str, path: str | os.PathLike) -> str:
    """Write ``text`` (UTF-8) to ``path`` atomically, like :func:`write_atomically`."""
    return write_bytes_atomically(text.encode("utf-8"), path)


def write_bytes_atomically(data: bytes, path: str | os.PathLike) -> str:
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise OutputWriteError(f"cannot write {path}: directory {directory} does not exist",
                               hint="create the directory or choose another path")
    try:
        fd, temp_path = tempfile.mkstemp(prefix=".fxport-", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise OutputWriteError(f"cannot write {path}: {exc.strerror}",
                               hint="choose a writable path") from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(temp_path, output_mode(path))
        os.replace(temp_path, path)
    except (OSError, ValueError) as exc:
        with contextlib.suppress(OSError):
            os.unlink(temp_path)
        raise OutputWriteError(f"cannot write {path}: {exc}", hint="choose a writable path") from exc
    return path


def output_mode(path: str | os.PathLike) -> int:
    """The permission bits a file written to ``path`` gets: an existing file's, else 0666 minus umask.

    ``mkstemp`` creates 0600 files; without this an output would be private whatever the umask,
    and overwriting a shared 0644 model would make it private.
    """
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def default_opset(model: onnx.ModelProto) -> int | None:
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
