"""The pipeline's stages, in order: eager → capture → rewrite → lower → precision → verify →
coverage → write.

Each stage is a function of the :class:`~fxport.engine.conversion.Conversion` (it reads what earlier
stages produced and adds its own product) plus a predicate saying whether it applies to this run.
:data:`STAGES` is the order :func:`fxport.engine.pipeline.run` follows; a new stage is one function and
one entry there.

Example::

    >>> [stage.name for stage in STAGES]
    ['eager', 'capture', 'rewrite', 'lower', 'precision', 'verify', 'coverage', 'write']
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from fxport.capture.stage import capture_program
from fxport.engine.conversion import Conversion
from fxport.eager.stage import run_eager_reference
from fxport.lower.stage import convert_precision, lower_to_onnx
from fxport.rules.stage import rewrite_graphs
from fxport.verify.stage import converted_control_flow, exercise_converted_control_flow, verify_outputs
from fxport.write.stage import write_output, writes


@dataclasses.dataclass(frozen=True)
class Stage:
    """A named step of the pipeline; ``applies`` says whether this run needs it.

    ``reads`` names the :class:`~fxport.engine.conversion.Conversion` fields the stage needs: set-up
    fields (:data:`~fxport.engine.conversion.SET_UP`) or fields an earlier stage ``adds``; the engine
    checks that before running it (:func:`fxport.engine.pipeline.run`).
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


#: The pipeline, in order.
STAGES: tuple[Stage, ...] = (
    Stage("eager", run_eager_reference, reads=("model", "example"), adds=("example_outputs", "example_cost"),
          applies=lambda job: job.options.verify),
    Stage("capture", capture_program, reads=("model", "signature", "example", "dynamic_shapes", "ruleset"),
          adds=("program", "rewrites")),
    Stage("rewrite", rewrite_graphs, reads=("program", "ruleset", "grown_loops"), adds=("program", "rewrites")),
    Stage("lower", lower_to_onnx, reads=("program", "ruleset", "grown_loops", "signature", "example", "dynamic_shapes",
                                          "staging"),
          adds=("lowered", "axis_names")),
    Stage("precision", convert_precision, reads=("lowered", "calibration_sets", "staging", "model"),
          adds=("lowered",), applies=lambda job: job.options.precision != "fp32",
          timing_name=lambda job: job.options.precision),
    Stage("verify", verify_outputs, reads=("model", "program", "lowered", "example", "extra_sets", "axis_names",
                                          "device", "example_outputs", "example_cost", "staging"),
          adds=("domains", "bounds", "generated", "verification"), applies=lambda job: job.options.verify),
    Stage("coverage", exercise_converted_control_flow,
          reads=("model", "rewrites", "lowered", "example", "extra_sets", "generated", "domains", "verification",
                 "example_cost", "staging"),
          adds=("coverage", "verification"), applies=converted_control_flow),
    Stage("write", write_output, reads=("lowered", "output", "staging"), adds=("output_path", "lowered"),
          applies=writes),
)


def stage_table(stages: tuple[Stage, ...] = None) -> str:
    """The stages as docs/architecture.md's markdown table (a test keeps the page equal to it).

    Example::

        >>> print(stage_table(STAGES[:1]))
        | stage | function | reads | adds to the `Conversion` |
        | --- | --- | --- | --- |
        | eager | `eager.stage.run_eager_reference` | `model`, `example` | `example_outputs`, `example_cost` |
    """
    def names(fields: tuple[str, ...]) -> str:
        return ", ".join(f"`{field}`" for field in fields) or "—"

    rows = ["| stage | function | reads | adds to the `Conversion` |", "| --- | --- | --- | --- |"]
    for stage in STAGES if stages is None else stages:
        rows.append(f"| {stage.name} | `{stage.run.__module__.removeprefix('fxport.')}.{stage.run.__name__}` | {names(stage.reads)} | {names(stage.adds)} |")
    return "\n".join(rows)
