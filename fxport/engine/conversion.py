"""What the pipeline's stages pass to each other: one :class:`Conversion` per run.

A stage reads what earlier stages left on the conversion and adds its own product; nothing else
travels between stages. The fields below are grouped by the stage that fills them, in order:

========== ==================================================================================
set up     ``model``, ``signature``, ``example``, ``extra_sets``, ``dynamic_shapes``, ``output``,
           ``options``, ``ruleset``, ``device``, ``staging``, ``calibration_sets``
eager      (checks the model runs; registers dataclass outputs)
capture    ``program`` (the captured ExportedProgram), ``rewrites`` (source-level records)
rewrite    ``program`` after graph rules and passes, ``rewrites`` (graph-level records)
lower      ``lowered`` (a :class:`~fxport.lower.lowered.LoweredModel`: the proto, where its
           weights live, its graph serialised once, the translated program, node counts),
           ``axis_names``
precision  ``lowered`` at fp16/int8 (its ``float32`` the model lower made)
verify     ``domains``, ``bounds``, ``generated``, ``verification`` rows
coverage   ``coverage`` per converted construct, more ``verification`` rows
write      ``output_path``
========== ==================================================================================

``warnings``, ``artifacts`` and ``timer`` collect across stages.

Example::

    >>> import torch
    >>> from fxport.engine.pipeline import run
    >>> job = run(torch.nn.Tanh(), (torch.randn(2, 3),), until="capture")
    >>> job.completed, job.lowered is None
    (['eager', 'capture'], True)
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator

from fxport.engine.options import Options

if TYPE_CHECKING:
    import onnx
    import torch

    from fxport.verify.inputs.domains import InputDomain
    from fxport.capture.dynamic_dims import DimRange
    from fxport.eager.calls import Signature
    from fxport.lower.external import Staging
    from fxport.lower.lowered import LoweredModel
    from fxport.eager.inputs import InputSet
    from fxport.report.result import AppliedRewrite, ConversionResult, VerificationRow
    from fxport.rules.registry import RuleSet

#: The fields :func:`fxport.engine.pipeline.start` fills before the first stage (and those that collect
#: across stages): any stage may read them; every other field is read only after a stage that
#: ``adds`` it ran (:class:`fxport.engine.stages.Stage`).
SET_UP = frozenset({"model", "signature", "example", "options", "ruleset", "device", "staging", "extra_sets",
                    "dynamic_shapes", "output", "calibration_sets", "timer", "warnings", "artifacts", "completed",
                    "grown_loops"})

#: ``progress(stage, state)``: state ``"start"`` or ``"done"``, or a short note of what the
#: running stage is doing now (``"running left-padded mask"``); the CLI draws it.
ProgressCallback = Callable[[str, str], None]


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

    def note(self, stage: str, text: str) -> None:
        """Tell the progress callback what ``stage`` is doing now."""
        if self.progress:
            self.progress(stage, text)


@dataclasses.dataclass
class Conversion:
    """One run of the pipeline: its inputs, its options and every stage's product so far."""

    model: "torch.nn.Module"
    signature: "Signature"
    example: "InputSet"
    options: Options
    ruleset: "RuleSet"
    device: str
    staging: "Staging"
    extra_sets: list["InputSet"] = dataclasses.field(default_factory=list)
    dynamic_shapes: Any = None  # torch.export's format, or the simple {"x": {0: "batch"}}
    output: "str | os.PathLike | None" = None
    calibration_sets: list["InputSet"] | None = None
    timer: StageTimer = dataclasses.field(default_factory=StageTimer)
    warnings: list[str] = dataclasses.field(default_factory=list)
    rewrites: list["AppliedRewrite"] = dataclasses.field(default_factory=list)
    artifacts: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: loops whose carried state grows, made while this conversion ran (``{key: GrownLoop}``): the
    #: capture stage makes them, rewrite captures their bodies, lower writes their ONNX ``Loop``
    grown_loops: dict[str, Any] = dataclasses.field(default_factory=dict)
    completed: list[str] = dataclasses.field(default_factory=list)
    # eager: the model's outputs on the example (verification compares the file with them) and
    # its timed run (verify and coverage budget their eager runs on made-up sets from it)
    example_outputs: Any = None
    example_cost: Any = None
    # capture, rewrite
    program: "torch.export.ExportedProgram | None" = None
    # lower, precision: the ONNX model and what is known about it (where its weights live, its
    # bytes, the translated program, node counts); precision's keeps lower's as its ``float32``
    lowered: "LoweredModel | None" = None
    axis_names: dict[int, dict[int, str]] = dataclasses.field(default_factory=dict)
    # verify, coverage
    domains: dict[int, "InputDomain"] = dataclasses.field(default_factory=dict)
    bounds: dict[int, dict[int, "DimRange"]] = dataclasses.field(default_factory=dict)
    generated: list["InputSet"] = dataclasses.field(default_factory=list)
    verification: list["VerificationRow"] = dataclasses.field(default_factory=list)
    coverage: list[dict] = dataclasses.field(default_factory=list)
    # write
    output_path: str | None = None

    @property
    def onnx_model(self) -> "onnx.ModelProto | None":
        """The ONNX proto so far (``lowered.proto``); None before the lower stage."""
        return self.lowered.proto if self.lowered is not None else None

    @property
    def input_sets(self) -> list["InputSet"]:
        """The example followed by the caller's own input sets."""
        return [self.example, *self.extra_sets]

    def partial(self) -> dict:
        """What a failed run still reports (``--report``, ``--json``): timings, rewrites, warnings."""
        return {"timings": dict(self.timer.seconds), "rewrites": list(self.rewrites), "warnings": list(self.warnings)}

    def result(self) -> "ConversionResult":
        """The finished run as a :class:`~fxport.report.result.ConversionResult`."""
        from fxport.report.result import ConversionResult

        if "lower" not in self.completed:
            raise RuntimeError(f"a result needs the lower stage; this run stopped after {self.completed[-1:]}")
        atol, rtol = self.options.atol, self.options.rtol
        lowered = self.lowered
        return ConversionResult(
            model=lowered.proto,
            output_path=self.output_path,
            rewrites=self.rewrites,
            verification=self.verification,
            timings=self.timer.seconds,
            opset=default_opset(lowered.proto),
            warnings=self.warnings,
            artifacts=self.artifacts,
            precision=self.options.precision,
            node_counts=dict(lowered.node_counts),
            optimize=self.options.optimize,
            fusions=dict(lowered.fusions),
            quantization=lowered.weight_quantization.summary() if lowered.weight_quantization is not None else {},
            tolerances={"atol": atol, "rtol": rtol} if atol is not None or rtol is not None else {},
            coverage=self.coverage,
        )


def default_opset(model: "onnx.ModelProto") -> int | None:
    """The model's default-domain opset version."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
