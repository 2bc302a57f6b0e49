"""Verification as an ordered chain of judges with one plan (issue 48, item 2).

The judges (fxport/verify/judges/) are asked in order while a set still fails; which of them take
part follows from the plan (fxport/verify/plan.py), whose passes are the file's precision; the
decisions the replay may take are a tier of the rule set, listed by `fxport rules` and left out
with `--disable`.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import onnx
import pytest
import torch

import fxport
from fxport.eager.inputs import InputSet
from fxport.lower.lowering import lower
from fxport.verify.compare import Acceptance, Comparison, OutputComparison
from fxport.verify.judges import JUDGES, Bench, SetRun, open_judges, verdict
from fxport.verify.plan import VerificationPlan
from fxport.verify.precision import DEFAULT_MIN_COSINE, Pass
from fxport.verify.verification import verify_model
from tests.conftest import perturbed


def _names(bench: Bench) -> list[str]:
    return [judge.name for judge in open_judges(bench)]


# --- the chain -------------------------------------------------------------------------------

def test_the_judges_are_data_in_the_order_they_are_asked():
    assert [judge.name for judge in JUDGES] == ["tolerance", "tied rows", "float64 noise", "decision replay"]


def test_which_judges_take_part_follows_from_the_criteria():
    module, proto = torch.nn.Tanh(), onnx.ModelProto()
    everything = dict(module=module, model=proto, program=object(), open_runner=lambda source: None)
    assert _names(Bench(Acceptance(), **everything)) == ["tolerance", "tied rows", "float64 noise", "decision replay"]
    # the user's tolerances and float16 keep their fixed bounds: no float64 judge
    assert "float64 noise" not in _names(Bench(Acceptance(atol=1e-3), **everything))
    assert "float64 noise" not in _names(Bench(Acceptance(tolerance_dtype=torch.float16), **everything))
    # a cosine criterion (int8) is judged by the cosine alone
    assert _names(Bench(Acceptance(min_cosine=0.99), **everything)) == ["tolerance"]
    # no program, or a file with external data (a path): nothing to replay
    assert "decision replay" not in _names(Bench(Acceptance(), **{**everything, "program": None}))
    assert "decision replay" not in _names(Bench(Acceptance(), **{**everything, "model": "net.onnx"}))


@dataclasses.dataclass
class _Scripted:
    """A judge that passes or fails as told, and records that it was asked."""

    name: str
    passes: bool
    asked: list

    def judge(self, run, failed):
        self.asked.append(self.name)
        return Comparison([OutputComparison("output[0]", 0.0, 0.0, self.passes)], 1.0)


def test_judges_are_asked_in_order_only_while_the_set_still_fails():
    asked: list[str] = []
    chain = [_Scripted("first", False, asked), _Scripted("second", True, asked), _Scripted("third", False, asked)]
    assert verdict(SetRun(InputSet(()), None, []), chain).passed
    assert asked == ["first", "second"]


# --- a judge fixed in its own file: the float64 clause is no noise on an integer output --------

class Argmax(torch.nn.Module):
    def forward(self, x):
        return x * 2, x.argmax(-1)


class Argmin(torch.nn.Module):
    def forward(self, x):
        return x * 2, x.argmin(-1)


class Shifted(torch.nn.Module):
    def forward(self, x):
        return x * 2 + 0.01, x.argmax(-1)


def _refusal(file_of: torch.nn.Module) -> fxport.VerificationError:
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(0))
    model = lower(torch.export.export(file_of, (x,)))
    with pytest.raises(fxport.VerificationError) as refused:
        verify_model(Argmax(), model, [InputSet((x,))], generate=False)
    return refused.value


def test_a_set_refused_on_an_integer_output_says_nothing_of_float64_noise():
    """The float64 run judges float outputs only: an arg-max that differs is no rounding noise."""
    refused = _refusal(Argmin())
    assert refused.report[0].mismatched_outputs == ["output[1]"]
    assert "float64" not in refused.message and refused.report[0].onnx_error is None


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_float_output_the_float64_run_refuses_keeps_the_clause():
    refused = _refusal(Shifted())
    assert refused.report[0].mismatched_outputs == ["output[0]"]
    assert "vs a float64 run: onnx 0.01" in refused.message and refused.report[0].onnx_error is not None


# --- one plan ---------------------------------------------------------------------------------

def test_the_plan_is_frozen_and_built_once_from_options():
    plan = VerificationPlan.build(atol=1e-3, rtol=1e-2, precision="int8", dynamic_axes={0: {0: "batch"}})
    assert (plan.acceptance.atol, plan.acceptance.rtol) == (1e-3, 1e-2)
    assert [(p.label, p.min_cosine, p.float_model) for p in plan.passes] == [
        (" fp32", None, True), (" int8", DEFAULT_MIN_COSINE, False)]
    assert plan.acceptance_of(plan.passes[1]).min_cosine == DEFAULT_MIN_COSINE
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.device = "cuda"
    fp16 = VerificationPlan.build(precision="fp16").passes
    assert [p.tolerance_dtype for p in fp16] == [torch.float16, None]
    assert not any(p.replay for p in fp16) and fp16[1].optional_reference


def test_verify_model_takes_a_plan_or_its_settings():
    x = torch.randn(2, 3)
    model = lower(torch.export.export(torch.nn.Tanh(), (x,)))
    plan = VerificationPlan(generate=False, passes=(Pass(), Pass(label=" again")))
    rows = verify_model(torch.nn.Tanh(), model, [InputSet((x,))], plan)
    assert [row.name for row in rows] == ["example", "example again"] and all(row.passed for row in rows)
    with pytest.raises(TypeError, match="a plan or its settings"):
        verify_model(torch.nn.Tanh(), model, [InputSet((x,))], plan, generate=False)


# --- decisions are rules ----------------------------------------------------------------------

def test_fxport_rules_lists_the_decision_rules():
    from typer.testing import CliRunner

    from fxport.cli import app

    result = CliRunner().invoke(app, ["rules", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)["rules"]}
    assert rows["decision:aten::topk"]["tier"] == "decision" and rows["decision:aten::topk"]["target"] == "aten::topk"
    assert {"decision:aten::sort", "decision:aten::gt", "decision:aten::round"} <= set(rows)


class TopBoxes(torch.nn.Module):
    def forward(self, scores, boxes):
        return boxes[(scores * 2.0).topk(3).indices] + 1.0


def test_a_disabled_decision_rule_is_not_replayed():
    scores, boxes = torch.tensor([2.5, 2.0, 1.50000012, 1.5, 0.5]), torch.arange(20.0).reshape(5, 4)
    result = fxport.convert(TopBoxes(), (scores, boxes), verify=False, keep_artifacts=True)
    noisy = perturbed(result.model, "mul", np.array([0, 0, 0, 1e-6, 0]))  # keys tied for third place
    program, sets = result.artifacts["translated_program"], [InputSet((scores, boxes))]
    rows = verify_model(TopBoxes(), noisy, sets, generate=False, program=program)
    assert rows[0].passed and "top-k at" in rows[0].note
    without = tuple(fxport.rules.resolve(disable=["decision:aten::topk"]).of_tier("decision"))
    with pytest.raises(fxport.VerificationError):
        verify_model(TopBoxes(), noisy, sets, generate=False, program=program, decisions=without)


def test_the_verify_stage_replays_the_decisions_of_the_conversions_rule_set():
    from fxport.engine.options import Options
    from fxport.engine.pipeline import run
    from fxport.verify.stage import verification_plan

    job = run(TopBoxes(), (torch.rand(5), torch.rand(5, 4)), until="lower",
              options=Options(disable_rules=("decision:aten::topk",)))
    decisions = {rule.name for rule in verification_plan(job).decisions}
    assert "decision:aten::sort" in decisions and "decision:aten::topk" not in decisions


def test_a_decision_rule_of_yours_overrides_the_builtin_for_its_op():
    @fxport.decision("aten::topk", label="my top-k", outputs=(1,), name="my-top-k")
    def take_topk(args, kwargs, own, taken, limits):
        """Never admissible."""
        return own, "mine says no"

    ruleset = fxport.rules.resolve(take_topk)
    assert [rule.name for rule in ruleset.of_tier("decision") if rule.op == "aten::topk"] == ["my-top-k"]
    assert any(rule.name == "decision:aten::topk" for rule in ruleset.shadowed)
