"""Unit tests of the diff's parts: SVG layout, source diffs, the op-rule stand-in, terminal folding."""

from onnx import TensorProto, helper

from fxport.diff.onnx_diff import diff_onnx, with_untranslated_ops
from fxport.diff.render_terminal import _fold_rule_runs
from fxport.diff.source_diff import definition_at, unified_source_diff
from fxport.diff.svg_graph import GraphBox, order_layers, render_svg
from fxport.errors import SourceLocation


def test_layers_follow_longest_paths_and_survive_cycles():
    layers = order_layers(["a", "b", "c", "d"], [("a", "b"), ("b", "c"), ("a", "c"), ("c", "b"), ("a", "d")])
    assert layers[0] == ["a"]
    assert sorted(k for layer in layers for k in layer) == ["a", "b", "c", "d"]
    svg = render_svg([GraphBox(k, k.upper(), "added" if k == "d" else "same") for k in "abcd"],
                     [("a", "b"), ("b", "c")])
    assert svg == render_svg([GraphBox(k, k.upper(), "added" if k == "d" else "same") for k in "abcd"],
                             [("a", "b"), ("b", "c")]), "deterministic"
    assert svg.count("<path class=\"edge\"") == 2 and 'class="node added"' in svg


def test_labels_are_escaped_and_shortened():
    svg = render_svg([GraphBox("x", "<script>" + "y" * 80, "changed")], [])
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "…" in svg


def test_source_hunks_use_file_line_numbers():
    lines = unified_source_diff("def f(x):\n    return x\n", "def f(x):\n    return -x\n", "m.py", first_line=40)
    assert lines[2] == "@@ -40,2 +40,2 @@" and "-    return x" in lines and "+    return -x" in lines


def test_definition_at_finds_the_decorated_replacement(tmp_path):
    rules = tmp_path / "rules.py"
    rules.write_text("import fxport\n\n\n@fxport.patch('m.f')\ndef better(x):\n    return x * 2\n\n\nOTHER = 1\n")
    source, first = definition_at(SourceLocation(str(rules), 4))
    assert first == 4 and source.splitlines() == ["@fxport.patch('m.f')", "def better(x):", "    return x * 2"]
    assert definition_at(SourceLocation(str(rules), 9)) is None


def _node(op, inputs, outputs, name, rule=None):
    node = helper.make_node(op, inputs, outputs, name=name)
    if rule:
        node.metadata_props.add(key="fxport.rule", value=rule)
        node.metadata_props.add(key="pkg.torch.onnx.fx_node",
                                value="%erfinv : [num_users=1] = call_function[target=torch.ops.aten.erfinv.default](args = (%x,))")
    return node


def test_op_rule_translation_folds_back_into_the_untranslated_op():
    half = helper.make_tensor("half", TensorProto.FLOAT, [], [0.5])
    graph = helper.make_graph(
        [_node("Mul", ["x", "half"], ["t"], "a", "erfinv-rule"), _node("Sqrt", ["t"], ["erfinv"], "b", "erfinv-rule"),
         _node("Mul", ["erfinv", "x"], ["y"], "node_mul")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])], initializer=[half])
    model = helper.make_model(graph)
    folded = with_untranslated_ops(model, {"erfinv-rule"})
    assert [(n.domain, n.op_type, list(n.input), list(n.output)) for n in folded.graph.node] == [
        ("aten", "erfinv", ["x"], ["erfinv"]), ("", "Mul", ["erfinv", "x"], ["y"])]
    assert [t.name for t in folded.graph.initializer] == [], "the translation's own constant goes too"
    deltas = {c.op: c.delta for c in diff_onnx(folded, model).op_deltas()}
    assert deltas == {"Mul": 1, "Sqrt": 1, "aten::erfinv": -1}
    assert with_untranslated_ops(model, {"other-rule"}) is None


def test_runs_of_one_rules_nodes_fold_into_one_line():
    rows = [(0, "added", f"v{i} = {'Mul' if i % 2 else 'Add'}(a)", [], "m.py:3", "erfinv") for i in range(7)]
    rows.append((0, "changed", "y = Mul(v6)", ["inputs"], "m.py:4", None))
    folded = _fold_rule_runs(rows)
    assert [row[2] for row in folded] == ["7 nodes from rule erfinv: Add×4, Mul×3", "y = Mul(v6)"]
    assert _fold_rule_runs(rows[:3] + rows[7:]) == rows[:3] + rows[7:], "short runs stay listed"
