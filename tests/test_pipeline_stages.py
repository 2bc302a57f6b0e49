"""The pipeline as stages: Options as one value, runs that stop at a stage, the caller's module
left as it was, and a new stage added without touching the engine."""

import dataclasses

import pytest
import torch

import fxport
from fxport.engine import stages
from fxport.engine.options import Options
from fxport.engine.pipeline import run, scan_model
from fxport.report.result import iter_nodes

CASES = "tests/models/cli_cases.py"


class Branchy(torch.nn.Module):
    """A data-dependent branch, dropout (train-mode sensitive) and a running buffer."""

    def __init__(self):
        super().__init__()
        self.drop = torch.nn.Dropout(0.5)
        self.register_buffer("seen", torch.zeros(3))

    def forward(self, x):
        if x.sum() > 0:
            y = torch.sin(x) * 2
        else:
            y = torch.cos(x) - 1
        return self.drop(y) + self.seen


def test_run_until_capture_stops_there_and_leaves_the_module_as_it_was():
    model = Branchy().train()
    seen_before = model.seen.clone()
    job = run(model, (torch.randn(4, 3),), until="capture")
    assert job.completed == ["eager", "capture"]
    assert job.program is not None and job.lowered is None and job.onnx_model is None
    assert any(rewrite.rule.startswith("if-to-") for rewrite in job.rewrites), "the branch was converted"
    assert model.training and model.drop.training, "train mode restored after a partial run"
    assert torch.equal(model.seen, seen_before)
    with pytest.raises(RuntimeError, match="needs the lower stage"):
        job.result()


def test_unknown_stage_is_a_usage_error_naming_the_stages():
    with pytest.raises(fxport.UsageError, match="unknown stage 'lowering'") as info:
        run(Branchy(), (torch.randn(2, 3),), until="lowering")
    assert "capture" in info.value.hint


def test_options_value_and_keywords_are_the_same_conversion():
    example = (torch.randn(3, 3),)
    by_value = fxport.convert(Branchy().eval(), example, options=Options(verify=False, optimize="none"))
    by_keyword = fxport.convert(Branchy().eval(), example, verify=False, optimize=False)
    assert by_value.verification == [] == by_keyword.verification
    assert by_value.optimize == by_keyword.optimize == "none"
    assert "verify" not in by_value.timings
    assert "eager" not in by_value.timings, "the eager reference is verification's: skipped without it"


def test_options_are_checked_once_when_built():
    with pytest.raises(fxport.UsageError, match="--atol -1"):
        Options(atol=-1)
    with pytest.raises(fxport.UsageError, match="only apply to --precision int8"):
        Options(calibration=[(torch.randn(1),)])
    with pytest.raises(TypeError, match="unknown conversion option.*verfy"):
        fxport.convert(Branchy(), (torch.randn(2, 3),), verfy=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        Options().verify = False


def test_ops_scans_a_model_with_data_dependent_control_flow():
    """`fxport ops` runs the same stages as convert (through rewrite): the branch is converted."""
    assert scan_model(f"{CASES}:BranchyMissingOp") == []
    missing = scan_model(f"{CASES}:BranchyMissingOp", disable=("aten::erfinv",))
    assert [entry.op for entry in missing] == ["aten::erfinv"]


def test_a_new_stage_runs_in_order_without_editing_the_engine(monkeypatch):
    """What a newcomer does: one Stage in fxport.engine.stages.STAGES, after the stage it builds on."""
    def count_onnx_nodes(job):
        job.artifacts["onnx_nodes"] = sum(1 for _ in iter_nodes(job.onnx_model.graph))

    position = [stage.name for stage in stages.STAGES].index("lower") + 1
    extended = (*stages.STAGES[:position], stages.Stage("count", count_onnx_nodes), *stages.STAGES[position:])
    monkeypatch.setattr(stages, "STAGES", extended)
    result = fxport.convert(Branchy().eval(), (torch.randn(3, 3),), verify=False)
    assert result.artifacts["onnx_nodes"] == sum(1 for _ in iter_nodes(result.model.graph))
    assert list(result.timings)[:4] == ["capture", "rewrite", "lower", "count"]


@pytest.mark.slow
def test_control_flow_conversions_disabled_by_their_rule_names_from_the_cli(tmp_path):
    """`--disable ifexp-to-where` makes the conditional expression a cond (If), still verified,
    in the capture and in the coverage pass alike."""
    import json

    from tests.conftest import run_cli

    done = run_cli("convert", "examples/gated_mlp.py:GatedMLP", "-o", str(tmp_path / "m.onnx"),
                   "--disable", "ifexp-to-where", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    rules = [rewrite["rule"] for rewrite in report["rewrites"]]
    assert "ifexp-to-cond" in rules and "ifexp-to-where" not in rules
    assert report["op_counts"].get("If", 0) == 2, "both conditions are ONNX If now"
    assert all(row["passed"] for row in report["verification"])


def test_a_stage_placed_before_what_it_reads_is_refused_naming_the_fields(monkeypatch):
    """Stages say what they read and add; a stage before the stage adding its reads never runs."""
    ran = []
    early = stages.Stage("early", lambda job: ran.append(job.lowered), reads=("lowered",))
    monkeypatch.setattr(stages, "STAGES", (stages.STAGES[0], early, *stages.STAGES[1:]))
    with pytest.raises(RuntimeError, match="stage 'early' reads lowered, which no earlier stage"):
        run(Branchy().eval(), (torch.randn(2, 3),), until="lower")
    assert ran == []


def test_every_stage_reads_only_what_set_up_or_earlier_stages_add():
    from fxport.engine.conversion import SET_UP, Conversion

    fields = {field.name for field in dataclasses.fields(Conversion)}
    available = set(SET_UP)
    for stage in stages.STAGES:
        assert set(stage.reads) <= available, stage.name
        assert set(stage.adds) <= fields, stage.name
        available |= set(stage.adds)


def test_the_signature_is_computed_once_per_conversion_and_carried(monkeypatch):
    import fxport.eager.calls

    calls = []
    original = fxport.eager.calls.forward_parameters
    monkeypatch.setattr(fxport.eager.calls, "forward_parameters", lambda module: calls.append(module) or original(module))
    job = run(Branchy().eval(), (torch.randn(3, 3),), dynamic_shapes={"x": {0: "batch"}}, until="lower", verify=False)
    assert len(calls) == 1 and job.signature.names == ["x"]
    assert job.axis_names == {0: {0: "batch"}}


def test_objects_older_than_the_conversion_are_frozen_only_while_it_runs():
    """Full collector passes skip what was alive before the conversion (torch's own objects)
    while it runs, those objects are handed back after, and a caller's own freeze is left alone."""
    import gc

    frozen_during = []

    def progress(stage, what):
        if what == "start":
            frozen_during.append(gc.get_freeze_count())

    class Net(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) * 2

    assert gc.get_freeze_count() == 0
    fxport.engine.pipeline.run(Net(), (torch.randn(2, 3),), until="rewrite", progress=progress)
    assert frozen_during and all(count > 0 for count in frozen_during)
    assert gc.get_freeze_count() == 0
    gc.freeze()
    try:
        fxport.engine.pipeline.run(Net(), (torch.randn(2, 3),), until="rewrite")
        assert gc.get_freeze_count() > 0  # not handed back (frozen objects since freed leave the count)
    finally:
        gc.unfreeze()
