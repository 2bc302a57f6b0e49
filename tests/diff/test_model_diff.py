"""fxport diff on models: the stock baseline, the captured-graph and ONNX diffs, attribution per rule."""

import inspect
import json
import textwrap

import pytest
import torch

from fxport.diff.model_diff import assemble, diff_model, stock_baseline
from fxport.diff.render_html import render_html
from fxport.errors import SourceLocation
from fxport.load import InputSet
from fxport.pipeline import convert
from fxport.report import AppliedRewrite
from tests.conftest import line_of, run_cli
from tests.diff.models import IfElse, IfElseByHand, Plain

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


def test_control_flow_record_shows_source_graph_and_onnx(if_else_baseline):
    """With a control-flow record like the converter's (IfElseByHand is what it produces)."""
    result = convert(IfElseByHand(), IfElse.example_args, dynamic_shapes=IfElse.example_dynamic_shapes,
                     keep_artifacts=True, verify=False)
    if_line = int(line_of(MODELS_PY, "if y.sum() > 0:").split(":")[1])
    result.rewrites.append(AppliedRewrite(
        "if-to-cond", "control-flow", SourceLocation(MODELS_PY, if_line, "forward"), "if → torch.cond",
        {"source_before": textwrap.dedent(inspect.getsource(IfElse.forward)),
         "source_after": textwrap.dedent(inspect.getsource(IfElseByHand.forward))}))
    diff = assemble("IfElse", result, if_else_baseline)

    view = diff.rewrites[0]
    assert view.source_diff[2].startswith(f"@@ -{if_line - 2},"), "hunks count lines of the user's file"
    assert "-    if y.sum() > 0:" in view.source_diff and "-        z = y - 1" in view.source_diff
    assert any(line.startswith("+    z = torch.cond(") for line in view.source_diff)

    capture = diff.graph_stages[0]
    assert capture.before_label == "torch.jit.trace (legacy)" and "baked in" in capture.note
    removed = [c.before.op for c in capture.diff.nodes if c.status == "removed"]
    added = [c.after.op for c in capture.diff.nodes if c.status == "added"]
    assert removed == ["aten::mul"] and added[:3] == ["aten::sum", "aten::gt.Scalar", "cond"]
    cond = next(c for c in capture.diff.nodes if c.status == "added" and c.after.op == "cond")
    assert [[n.after.op for n in body.nodes] for body in cond.subgraphs.values()] == [
        ["input", "aten::mul.Tensor", "output"], ["input", "aten::sub.Tensor", "output"]]

    deltas = {c.op: c.delta for c in diff.onnx.op_deltas()}
    assert deltas == {"Constant": -1, "Greater": 1, "If": 1, "ReduceSum": 1, "Sub": 1}
    assert diff.onnx_before_label.startswith("torch.onnx.export(dynamo=False)")

    page = render_html(diff)
    assert 'data-rule="if-to-cond"' in page and "torch.cond(y.sum() &gt; 0" in page


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
