"""The rewrite stage: graph passes and graph rules on every graph of the captured program."""

from __future__ import annotations

from fxport.capture.loop_bodies import capture_loop_bodies
from fxport.controlflow.libraries import installed_for as library_functions_installed_for
from fxport.controlflow.operators.left_out import warnings_for
from fxport.engine.conversion import Conversion
from fxport.report.result import AppliedRewrite


def rewrite_graphs(job: Conversion) -> None:
    """Graph passes (``.item()`` predicates made tensors among them), then graph rules, on every
    graph of the captured aten program: top level, cond branches, loop and scan bodies.

    The bodies of loops whose state grows are captured here, with the capture's patch rules and
    converted library functions installed again (a GRU or an ``nn.Transformer`` called in such a
    body is traced as in the program)."""
    job.program = job.ruleset.apply_graph_rules(job.program, job.rewrites,
                                                control_flow=job.options.converts_control_flow is not None)
    body_patches: list[AppliedRewrite] = []
    with library_functions_installed_for(job.rewrites), job.ruleset.patches_applied(body_patches):
        capture_loop_bodies(job.program, job.grown_loops, lambda body: job.ruleset.apply_graph_rules(body, job.rewrites))
    left_out = [record for loop in job.grown_loops.values() for record in getattr(loop, "left_out", ())]
    job.rewrites += [record for record in left_out if not any(
        r.rule == record.rule and r.location == record.location for r in job.rewrites)]
    job.warnings += warnings_for(left_out, job.warnings)  # checks the bodies held (docs/control-flow.md, "assert")
    fired = {record.rule for record in job.rewrites if record.tier == "patch"}
    job.rewrites += [record for record in body_patches if record.rule not in fired]
    if job.options.keep_artifacts:
        job.artifacts["exported_program_after"] = job.program
