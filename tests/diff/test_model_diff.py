"""fxport diff on models: the stock baseline, the captured-graph and ONNX diffs, attribution per rule."""

import json

import pytest
import torch

from fxport.diff.model_diff import diff_model, stock_baseline
from fxport.eager.inputs import InputSet
from tests.conftest import line_of, run_cli
from tests.diff.models import IfElse, Plain

MODELS_PY = "tests/diff/models.py"


def test_model_needing_no_rewrite_diffs_empty():
    diff = diff_model(Plain(), Plain.example_args, verify=False)
    assert diff.rewrites == [] and diff.notes == []
    assert diff.onnx.identical and not diff.onnx.op_deltas()
    assert [stage.title for stage in diff.graph_stages] == ["capture"]
    assert diff.graph_stages[0].diff.identical
    assert diff.onnx_before_label == "torch.onnx.export(dynamo=True)"


@pytest.fixture(scope="module")
def if_else_baseline():
    with torch.no_grad():
        return stock_baseline(IfElse(), InputSet(IfElse.example_args), IfElse.example_dynamic_shapes)


def test_stock_capture_failure_falls_back_to_the_trace(if_else_baseline):
    baseline = if_else_baseline
    assert baseline.program is None
    assert "data-dependent" in baseline.capture_error
    assert line_of(MODELS_PY, "if y.sum() > 0:") in baseline.capture_error
    trace_ops = [node.kind() for node in baseline.trace_graph.nodes() if node.kind().startswith("aten::")]
    assert trace_ops == ["aten::tanh", "aten::mul", "aten::add"], "the trace baked in the then-branch"
    legacy_ops = [node.op_type for node in baseline.onnx_model.graph.node]
    assert "If" not in legacy_ops and "Mul" in legacy_ops and "Sub" not in legacy_ops


@pytest.mark.slow
def test_cli_diff_target_json_and_terminal():
    as_json = run_cli("diff", "tests/diff/models.py:Plain", "--no-verify", "--json")
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["rewrites"] == [] and data["onnx"]["summary"]["added"] == 0
    assert {"op": "Gemm", "before": 1, "after": 1, "delta": 0} in data["onnx"]["op_counts"]
    terminal = run_cli("diff", "tests/diff/models.py:Plain", "--no-verify")
    assert terminal.returncode == 0, terminal.stderr
    assert "Rewrites: none applied" in terminal.stdout and "Op counts: unchanged" in terminal.stdout


def test_no_trace_either_is_said_not_hidden():
    from fxport.diff.model_diff import capture_stage
    from tests.diff.models import Untraceable

    baseline = stock_baseline(Untraceable(), InputSet(Untraceable.example_args), None)
    assert baseline.program is None and baseline.trace_graph is None
    stage = capture_stage(baseline, None)
    assert stage.note.startswith("neither torch.export nor torch.jit.trace could capture the model: RuntimeError")
