"""fxport diff on models exercising each rule tier: the rule named, the lines changed, the op deltas."""

import json

import pytest

from fxport.diff import diff_model
from fxport.diff.onnx_diff import iter_changes
from fxport.diff.render_html import render_html
from tests.conftest import line_of, run_cli
from tests.diff.browser import count_color, dump_dom, screenshot_pixels
from tests.diff import rule_models
from tests.diff.models import DoubleUntil, IfElse, MissingOp

MODELS_PY = "tests/diff/models.py"


@pytest.fixture(scope="module")
def if_else(tmp_path_factory):
    page = tmp_path_factory.mktemp("ifelse") / "if_else.html"
    result = run_cli("diff", f"{MODELS_PY}:IfElse", "--no-verify", "--json", "--html", str(page))
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), str(page)


@pytest.mark.slow
def test_control_flow_rule_named_with_source_lines(if_else):
    data, _ = if_else
    [rewrite] = data["rewrites"]
    assert rewrite["tier"] == "control-flow" and rewrite["rule"] == "if-to-where"
    assert rewrite["location"] == "tests/diff/" + line_of(MODELS_PY, "if y.sum() > 0:")
    assert "-    if y.sum() > 0:" in rewrite["source_diff"] and "-    else:" in rewrite["source_diff"]
    assert any(line.startswith("+") and "if_stmt(y.sum() > 0" in line for line in rewrite["source_diff"])
    assert any(name.startswith("node_where") for name in rewrite["onnx_nodes"])


@pytest.mark.slow
def test_control_flow_before_is_the_trace_that_baked_the_branch(if_else):
    data, _ = if_else
    capture = data["graph_stages"][0]
    assert capture["before"] == "torch.jit.trace (legacy)" and "baked in" in capture["note"]
    trace_lines = [n["before"] for n in capture["nodes"] if n["before"]]
    assert not any("aten::sub" in line or "aten::gt" in line for line in trace_lines), "one branch, no test"
    added = [n["after"] for n in capture["nodes"] if n["status"] == "added"]
    assert any("aten::gt.Scalar" in line for line in added) and any("aten::where" in line for line in added)
    deltas = {c["op"]: c["delta"] for c in data["onnx"]["op_counts"] if c["delta"]}
    assert deltas["Where"] == 1 and deltas["Sub"] == 1 and deltas["Greater"] == 1 and deltas["ReduceSum"] == 1
    assert data["onnx"]["before"].startswith("torch.onnx.export(dynamo=False)")


@pytest.mark.slow
def test_control_flow_html_renders_in_browser(if_else):
    _, page = if_else
    dom = dump_dom(page)
    assert 'data-rule="if-to-where"' in dom
    assert '<td class="code del">    if y.sum() &gt; 0:</td>' in dom, "the removed if line, left column"
    assert dom.count('<g class="node added"') >= 3
    image = screenshot_pixels(page)
    assert count_color(image, (0xFF, 0xEB, 0xE9)) > 500, "removed source lines painted red"


def test_cond_strategy_nests_both_bodies_in_graph_and_onnx():
    diff = diff_model(IfElse(), IfElse.example_args, dynamic_shapes=IfElse.example_dynamic_shapes,
                      verify=False, if_strategy="cond")
    [view] = diff.rewrites
    assert view.rewrite.rule == "if-to-cond"
    cond = next(c for c in diff.graph_stages[0].diff.nodes if c.status == "added" and c.after.op == "cond")
    bodies = [[n.after.op for n in body.nodes] for body in cond.subgraphs.values()]
    assert len(bodies) == 2 and "aten::mul.Tensor" in bodies[0] and "aten::sub.Tensor" in bodies[1]
    nested = {change.node.op_type: depth for depth, change in iter_changes(diff.onnx) if change.status == "added"}
    assert nested["If"] == 0 and nested["Sub"] == 1, "the else body is listed under the If node"
    assert {c.op: c.delta for c in diff.onnx.op_deltas()}["If"] == 1
    if_node = next(c.node.name for _, c in iter_changes(diff.onnx) if c.node.op_type == "If")
    assert if_node in view.onnx_nodes, "the If is attributed to the rewrite"


@pytest.mark.slow
def test_op_rule_shows_the_untranslated_op_replaced():
    diff = diff_model(MissingOp(), MissingOp.example_args, verify=False)
    [view] = diff.rewrites
    assert (view.rewrite.rule, view.rewrite.tier) == ("aten::erfinv", "op")
    assert str(view.rewrite.location) == "tests/diff/" + line_of(MODELS_PY, "torch.special.erfinv(x)")
    assert view.graph_nodes == ["special_erfinv"], "the captured node the rule translated"
    deltas = {c.op: c.delta for c in diff.onnx.op_deltas()}
    assert deltas["aten::erfinv"] == -1 and deltas.get("Log", 0) >= 1
    summary = diff.onnx.summary()
    assert summary["removed"] == 1 and summary["added"] == len(view.onnx_nodes) > 5
    assert "untranslated" in diff.onnx_before_label
    section = render_html(diff).split('data-rule="aten::erfinv"', 1)[1].split("</details>", 1)[0]
    assert '<g class="node removed"' in section and "aten::erfinv(val_" in section, \
        "the rule's picture shows the untranslated op it replaced"


@pytest.fixture(scope="module")
def patched():
    return diff_model(rule_models.PatchedAndRewritten(), rule_models.PatchedAndRewritten.example_args,
                      verify=False, rules=rule_models.RULES)


def test_patch_is_recorded_with_control_flow_conversion_on(patched):
    assert "patch" in [view.rewrite.tier for view in patched.rewrites]


def test_patch_rule_shows_target_and_replacement_source(patched):
    view = next(v for v in patched.rewrites if v.rewrite.tier == "patch")
    assert "opaque_double" in view.rewrite.rule
    assert "-    return torch.from_numpy(x.detach().numpy() * 2)" in view.source_diff
    assert "+    return x * 2" in view.source_diff
    assert view.source_diff[1] == f"+++ tests/diff/{line_of('tests/diff/rule_models.py', '@fxport.patch(')} (patch rule)"
    legacy_inputs = [v for v in patched.onnx.values if v.kind == "input"]
    assert [(v.before, v.after) for v in legacy_inputs] == [(None, "float32[3, 4]")], \
        "the trace baked the NumPy result in as a constant: its ONNX model has no input"


def test_graph_rule_shows_the_replaced_pattern(patched):
    stage = next(s for s in patched.graph_stages if s.title == "graph rules")
    removed = [c.before.op for c in stage.diff.nodes if c.status == "removed"]
    assert removed == ["aten::exp", "aten::add.Tensor", "aten::log"]
    [softplus] = [c.after for c in stage.diff.nodes if c.status == "added"]
    assert (softplus.op, softplus.rule) == ("aten::softplus", "stable_softplus")
    view = next(v for v in patched.rewrites if v.rewrite.tier == "graph")
    assert view.rewrite.rule == "stable_softplus" and view.graph_nodes == ["softplus"]
    made = [c.after for _, c in iter_changes(patched.onnx) if c.after is not None and c.after.rule == "stable_softplus"]
    assert "Softplus" in [n.op_type for n in made] and sorted(view.onnx_nodes) == sorted(n.name for n in made)
    deltas = {c.op: c.delta for c in patched.onnx.op_deltas()}
    assert deltas["Softplus"] == 1


def test_while_loop_trace_unrolls_the_trip_count_and_the_loop_body_is_nested():
    diff = diff_model(DoubleUntil(), DoubleUntil.example_args, verify=False)
    [view] = diff.rewrites
    assert view.rewrite.tier == "control-flow" and view.rewrite.rule.startswith("while-to-")
    trace_ops = [c.before.op for c in diff.graph_stages[0].diff.nodes if c.before and c.before.op != "input"]
    assert trace_ops == ["aten::mul"] * 6 + ["output"], "1+2=3 doubles 6 times to pass 100: baked in"
    nested = [(depth, c.status, c.node.op_type) for depth, c in iter_changes(diff.onnx) if c.status == "added"]
    assert (0, "added", "Loop") in nested and (1, "added", "Mul") in nested, "the Loop body is nested"
    assert {c.op: c.delta for c in diff.onnx.op_deltas()}["Mul"] == -5, "six unrolled Muls become one in the body"
