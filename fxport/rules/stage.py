"""The rewrite stage: graph passes and graph rules on every graph of the captured program."""

from __future__ import annotations

from fxport.capture.loop_bodies import capture_loop_bodies
from fxport.conversion import Conversion


def rewrite_graphs(job: Conversion) -> None:
    """Graph passes (``.item()`` predicates made tensors among them), then graph rules, on every
    graph of the captured aten program: top level, cond branches, loop and scan bodies."""
    job.program = job.ruleset.apply_graph_rules(job.program, job.rewrites,
                                                control_flow=job.options.converts_control_flow is not None)
    capture_loop_bodies(job.program, job.grown_loops, lambda body: job.ruleset.apply_graph_rules(body, job.rewrites))
    if job.options.keep_artifacts:
        job.artifacts["exported_program_after"] = job.program
