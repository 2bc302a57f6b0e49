"""The verify and coverage stages: ONNX Runtime against eager on the example, generated sets in
the model's domain and the caller's; then what those sets exercised of the converted control
flow, and a search for sets that reach the rest."""

from __future__ import annotations

import dataclasses
from typing import Any

from fxport.capture.dynamic_dims import dynamic_dim_bounds
from fxport.controlflow.libraries import installed_for as library_functions_installed_for
from fxport.engine.conversion import Conversion
from fxport.errors import VerificationError
from fxport.verify.compare import Acceptance
from fxport.verify.exercise import exercise_control_flow
from fxport.verify.inputs.domains import input_domains
from fxport.verify.plan import VerificationPlan
from fxport.verify.precision import precision_passes
from fxport.verify.ties import sorted_output_indices
from fxport.eager import limits as eager_limits
from fxport.verify.verification import generate_input_sets, verify_model
from fxport.verify.verified_ranges import widen_verified_ranges


def verify_outputs(job: Conversion) -> None:
    """ONNX Runtime against eager on the example, generated sets in the model's domain, the caller's."""
    job.domains, job.bounds = input_domains(job.program, job.example), dynamic_dim_bounds(job.program)
    with eager_limits.measured(job.example_cost):
        job.generated = generate_input_sets(job.example, job.axis_names, bounds=job.bounds, domains=job.domains)
        try:
            job.verification = verify_model(job.model, runnable(job), job.input_sets, verification_plan(job))
        except VerificationError as exc:
            _point_at_user_rules(exc, job)
            raise
    if widen_verified_ranges(job.program, job.verification, job.warnings, job.lowered.proto):
        job.bounds = dynamic_dim_bounds(job.program)
    measure_weight_agreement(job)


def measure_weight_agreement(job: Conversion) -> None:
    """A weight-only quantised file (int4, int8-weights) against the float32 model on the input
    sets: reported beside the verdict, which compares it with the same quantised weights."""
    record = job.lowered.weight_quantization
    if record is None:
        return
    from fxport.verify.weight_agreement import agreement_with_float32

    known = {id(job.example): job.example_outputs} if job.example_outputs is not None else {}
    with eager_limits.measured(job.example_cost):
        record.agreement = agreement_with_float32(job.lowered.proto, job.model, job.input_sets, known)


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
    with library_functions_installed_for(job.rewrites), job.ruleset.patches_applied([], only=fired), \
            eager_limits.measured(job.example_cost):
        exercised = exercise_control_flow(job.model, job.rewrites, job.input_sets, job.example, job.domains,
                                          strategy=job.options.if_strategy,
                                          disabled=job.ruleset.disabled_control_flow, made_up=job.generated)
    if exercised.found_sets:
        try:
            with eager_limits.measured(job.example_cost):
                job.verification += verify_model(job.model, runnable(job), exercised.found_sets,
                                                 dataclasses.replace(verification_plan(job), generate=False))
        except VerificationError as exc:  # the table shows every row, not only the searched ones
            exc.report = job.verification + exc.report
            raise
    job.coverage = [construct.to_dict() for construct in exercised.constructs]
    refuse_or_warn_uncovered(exercised.warnings(), job.options.strict_coverage, job.verification, job.warnings)


def converted_control_flow(job: Conversion) -> bool:
    """Whether the coverage stage applies: verification is on and control flow was converted."""
    return job.options.verify and any(rewrite.tier == "control-flow" for rewrite in job.rewrites)


def verification_plan(job: Conversion) -> VerificationPlan:
    """What every verification of this run shares, built once per stage from its options and
    what the earlier stages added (:class:`~fxport.verify.plan.VerificationPlan`)."""
    options, lowered = job.options, job.lowered
    return VerificationPlan(
        device=job.device,
        passes=precision_passes(options.precision, options.min_cosine, lowered.weight_quantization),
        acceptance=Acceptance(atol=options.atol, rtol=options.rtol,
                              sort_keys=sorted_output_indices(job.program) if job.program is not None else None),
        generated_sets=job.generated, dynamic_axes=job.axis_names, bounds=job.bounds, domains=job.domains,
        program=lowered.translated_program,  # its node names are the file's value names (decision replay)
        # the rule set's decision rules (--disable takes them); the stock path (no rules) keeps the built-ins
        decisions=tuple(job.ruleset.of_tier("decision")) if options.rewrites else None,
        float_model=lowered.float_model.runnable(job.staging),
        known_outputs={id(job.example): job.example_outputs} if job.example_outputs is not None else None,
        model_bytes=lowered.float_model.model_bytes,  # the float32 graph serialised once (the file's at fp32)
        notes=job.warnings,
        on_input_set=lambda name: job.timer.note("verify", f"running {name}"),
    )


def runnable(job: Conversion) -> "Any":
    """What ONNX Runtime loads: the proto, or for external data the staged model file beside its data."""
    return job.lowered.runnable(job.staging)


def refuse_or_warn_uncovered(lines: list[str], strict: bool, rows: list, warnings_out: list[str]) -> None:
    """Converted constructs no input set fully exercised: warnings, or with ``strict`` an error."""
    if lines and strict:
        raise VerificationError(lines[0].replace("; add input sets", " (--strict-coverage); add input sets"),
                                report=rows, hint="or leave out --strict-coverage to accept it with a warning")
    warnings_out.extend(lines)
