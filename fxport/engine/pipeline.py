"""The pipeline engine: run the stages of :mod:`fxport.engine.stages` on one model, all or up to one.

:func:`convert` is fxport's Python entry point (the CLI is a thin layer over it); :func:`run`
stops after the stage named by ``until`` and returns the :class:`~fxport.engine.conversion.Conversion`
with every product so far — ``fxport ops`` stops after ``rewrite``, tests stop after
``capture``. Whatever stage a run stops at, the caller's module is left as it was (train/eval
flags, buffers, inputs).

Example::

    >>> import torch, fxport
    >>> class Net(torch.nn.Module):
    ...     def forward(self, x):
    ...         return torch.tanh(x) + 1
    >>> result = fxport.convert(Net(), (torch.randn(4, 3),), dynamic_shapes={"x": {0: "batch"}})
    >>> result.verified, sorted(result.op_counts())
    (True, ['Add', 'Tanh'])
    >>> job = fxport.engine.pipeline.run(Net(), (torch.randn(4, 3),), until="rewrite")
    >>> job.completed, len(job.program.graph.nodes)
    (['eager', 'capture', 'rewrite'], 4)
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import os
from typing import Any, Iterator

import torch

from fxport.controlflow.operators.loops.growing import loops_made
from fxport.engine.conversion import SET_UP, Conversion, ProgressCallback, StageTimer
from fxport.errors import ConversionError, UsageError
from fxport.lower.exporter import prepare as prepare_exporter
from fxport.lower.external import Staging
from fxport.eager.inputs import InputSet, to_input_sets
from fxport.eager.calls import Signature
from fxport.generation import caches as _caches  # noqa: F401 - registers transformers' caches with the runtime
from fxport.load.targets import load_calibration  # calibration may name user code: FILE.py:FUNC
from fxport.engine.options import Options, options_from
from fxport.report.result import ConversionResult
from fxport.rules import resolve as resolve_rules
from fxport.engine import stages
from fxport.verify.verification import resolve_device


def convert(
    model: torch.nn.Module,
    args: Any = (),
    *,
    kwargs: dict[str, Any] | None = None,
    dynamic_shapes: Any = None,
    output: str | os.PathLike | None = None,
    verify_inputs: list[Any] | None = None,
    options: Options | None = None,
    progress: ProgressCallback | None = None,
    **option_overrides: Any,
) -> ConversionResult:
    """Convert ``model`` to ONNX, rewriting what the stock exporter refuses, and verify it.

    Args:
        model: the module to convert; it is not modified (a module in train mode is exported in
            eval mode, with a warning, and switched back afterwards).
        args, kwargs: example inputs used for capture.
        dynamic_shapes: torch.export's format (``Dim`` objects) or ``{"x": {0: "batch"}}``.
        output: where to write the model (atomically); None keeps it in memory.
        verify_inputs: more input sets to verify with: tuples of args, dicts of kwargs, or named InputSets.
        options: an :class:`~fxport.engine.options.Options` (its attributes say what each choice does).
        progress: called as ``progress(stage, "start"|"done"|what it is doing)``.
        **option_overrides: any :class:`~fxport.engine.options.Options` field, e.g. ``verify=False``,
            ``precision="fp16"``, ``atol=1e-3``, ``convert_libraries=False`` (leave installed
            packages' code as written); applied on top of ``options``.

    Returns:
        A :class:`~fxport.report.result.ConversionResult`.

    Raises:
        fxport.ConversionError: a subclass naming the stage, the user's file:line and a fix;
        its ``partial`` holds what the stages that ran produced (timings, rewrites, warnings).
    """
    return run(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, output=output,
               verify_inputs=verify_inputs, options=options, progress=progress, **option_overrides).result()


def run(
    model: torch.nn.Module,
    args: Any = (),
    *,
    kwargs: dict[str, Any] | None = None,
    dynamic_shapes: Any = None,
    output: str | os.PathLike | None = None,
    verify_inputs: list[Any] | None = None,
    options: Options | None = None,
    progress: ProgressCallback | None = None,
    until: str | None = None,
    **option_overrides: Any,
) -> Conversion:
    """Run the stages in order, through ``until`` (a name in :data:`fxport.engine.stages.STAGES`; None:
    all of them), and return the conversion with what they produced. Arguments as :func:`convert`.
    """
    to_run = stages_through(until)
    job = start(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, output=output,
                verify_inputs=verify_inputs, options=options_from(options, option_overrides), progress=progress)
    if any(stage.name == "lower" for stage in to_run):
        prepare_exporter(job.options.opset)  # the exporter's registry builds while eager and capture run
    produced = set(SET_UP)
    with failure_keeps_progress(job), module_left_as_it_was(job.model, job.warnings), contextlib.closing(job.staging), \
            older_objects_left_to_the_collector(), \
            loops_made() as job.grown_loops:  # the loops live as long as the job
        for stage in to_run:
            if stage.applies(job):
                check_reads(stage, produced)
                with job.timer(stage.timed_as(job)):
                    stage.run(job)
                produced.update(stage.adds)
            job.completed.append(stage.name)
    return job


@contextlib.contextmanager
def older_objects_left_to_the_collector() -> Iterator[None]:
    """The objects alive before the conversion (torch's, onnxscript's, the caller's) are left out
    of the garbage collector's full passes while it runs (``gc.freeze``), and handed back after.

    A full pass walks every object of a process that has torch and onnxscript loaded: 0.3–0.6 s
    on a 2-core machine, and a conversion set off 0 to 2 of them (r3d_18: 0.04–0.7 s of its
    5.5 s). What the conversion itself leaves as garbage is still collected. A caller that froze
    objects itself keeps them frozen: nothing is frozen or handed back then.
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def check_reads(stage: stages.Stage, produced: set[str]) -> None:
    """A stage runs only after the stages that add what it reads (a misplaced stage is a bug)."""
    missing = [field for field in stage.reads if field not in produced]
    if missing:
        raise RuntimeError(f"stage {stage.name!r} reads {', '.join(missing)}, which no earlier stage of this run "
                           "added; move it after the stage that adds them (fxport.engine.stages.STAGES)")


def start(model: torch.nn.Module, args: Any, *, kwargs, dynamic_shapes, output, verify_inputs,
          options: Options, progress: ProgressCallback | None) -> Conversion:
    """A conversion before its first stage: inputs as input sets, rules resolved, device chosen."""
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"model is a {type(model).__name__}, not a torch.nn.Module",
                         hint="pass an nn.Module instance")
    signature = Signature.of(model)  # once per conversion; a forward without a Python signature is a usage error
    example = InputSet.of(args, kwargs)
    extra_sets = to_input_sets(list(verify_inputs), "verify_inputs") if verify_inputs else []
    for index, input_set in enumerate(extra_sets, start=1):
        if input_set.name == "example":  # not named by the caller (an InputSet keeps its name)
            input_set.name = f"user-{index}"
    device = resolve_device(options.device)
    return Conversion(
        model=model, signature=signature, example=example, options=options, extra_sets=extra_sets,
        dynamic_shapes=dynamic_shapes, output=output, device=device,
        ruleset=resolve_rules(options.rules, disable=options.disable_rules, opset=options.opset, device=device)
        if options.rewrites else resolve_rules(builtins=False, entry_points=False),
        calibration_sets=load_calibration(options.calibration) if options.calibration is not None else None,
        staging=Staging(output),  # where a pair over 2 GB is written and verified before its commit
        timer=StageTimer(progress),
    )


def stages_through(until: str | None) -> tuple[stages.Stage, ...]:
    """The stages of :data:`fxport.engine.stages.STAGES` from the first through ``until`` (all when None)."""
    names = [stage.name for stage in stages.STAGES]
    if until is None:
        return stages.STAGES
    if until not in names:
        raise UsageError(f"unknown stage {until!r}", hint=f"use one of {', '.join(names)}")
    return stages.STAGES[:names.index(until) + 1]


def scan_model(target: str, *, inputs=(), dynamic=(), inputs_fn=None, opset=None, rules=None, disable=()) -> list:
    """Load ``target`` like ``fxport convert`` does, run the stages through ``rewrite`` and list
    every op still without an ONNX translation (``fxport ops``)."""
    from fxport.lower.missing_ops import find_missing_ops
    from fxport.load.targets import load_model
    from fxport.common.quiet import quiet_torch

    loaded = load_model(target, input_specs=list(inputs), dynamic_specs=list(dynamic), inputs_fn=inputs_fn)
    example = loaded.input_sets[0]
    job = run(loaded.module, example.args, kwargs=example.kwargs, dynamic_shapes=loaded.dynamic_shapes,
              until="rewrite", options=Options(opset=opset, rules=rules, disable_rules=tuple(disable), verify=False))
    with quiet_torch():
        return find_missing_ops(job.program, job.ruleset.translation_table(), opset)


@contextlib.contextmanager
def failure_keeps_progress(job: Conversion) -> Iterator[None]:
    """Attach what the stages that ran produced to a ConversionError on its way out.

    ``--report`` and ``--json`` write it for a failed run: timings per stage, rewrites that
    fired, warnings (the verification table travels on the VerificationError itself).
    """
    try:
        yield
    except ConversionError as exc:
        exc.partial = job.partial()
        exc.conversion = job  # the products so far, for a caller that goes on (fxport diff's stock baseline)
        raise


_MODE_DEPENDENT = (torch.nn.modules.dropout._DropoutNd, torch.nn.modules.batchnorm._BatchNorm,
                   torch.nn.modules.instancenorm._InstanceNorm, torch.nn.RNNBase, torch.nn.MultiheadAttention)


def _train_mode_matters(model: torch.nn.Module) -> bool:
    """True when some submodule in train mode computes differently in eval mode: dropout,
    batch/instance norm, recurrent or attention layers (their dropout), or a forward that reads
    ``self.training``. A plain fresh module (train mode by default) gets no warning."""
    for module in model.modules():
        if not module.training:
            continue
        if isinstance(module, _MODE_DEPENDENT):
            return True
        forward = getattr(type(module), "forward", None)
        try:
            if forward is not None and "training" in inspect.getsource(forward):
                return True
        except (OSError, TypeError):
            continue
    return False


@contextlib.contextmanager
def module_left_as_it_was(model: torch.nn.Module, warnings_out: list[str]) -> Iterator[None]:
    """Run the block with every submodule in eval mode, restoring each one's flag afterwards."""
    training = {name: m.training for name, m in model.named_modules()}
    if any(training.values()) and _train_mode_matters(model):
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

