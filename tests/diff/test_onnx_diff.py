"""ONNX-vs-ONNX structural diff: op counts, node matching, attributes, initializers, I/O, bodies."""

import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from fxport.diff.onnx_diff import diff_onnx, iter_changes
from tests.conftest import run_cli


def make_model(nodes, *, x_dims=("n", 4), weight_shape=(4,), weight_dtype=np.float32, extra_inits=()):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_dims))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    inits = [numpy_helper.from_array(np.ones(weight_shape, dtype=weight_dtype), "w"), *extra_inits]
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def if_node(then_op):
    then_body = helper.make_graph([helper.make_node(then_op, ["x"], ["t"], name="then_op")], "then", [],
                                  [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    else_body = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="else_op")], "else", [],
                                  [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    return helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_body, else_branch=else_body)


BEFORE_NODES = [
    helper.make_node("Mul", ["x", "w"], ["m"], name="scale"),
    helper.make_node("Softmax", ["m"], ["s"], name="soft", axis=-1),
    helper.make_node("ReduceSum", ["s"], ["r"], name="total", keepdims=0),
    helper.make_node("Greater", ["r", "r"], ["c"], name="test"),
    if_node("Relu"),
]
AFTER_NODES = [
    helper.make_node("Mul", ["x", "w"], ["m"], name="scale"),
    helper.make_node("Softmax", ["m"], ["s"], name="soft", axis=0),          # attribute changed
    helper.make_node("Tanh", ["s"], ["s2"], name="squash"),                  # added
    helper.make_node("ReduceSum", ["s2"], ["r"], name="total", keepdims=0),  # input changed
    helper.make_node("Greater", ["r", "r"], ["c"], name="test"),
    if_node("Sigmoid"),                                                      # body changed
]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("onnx")
    before = make_model(BEFORE_NODES)
    after = make_model(AFTER_NODES, x_dims=("batch", 4), weight_shape=(1, 4), weight_dtype=np.float16,
                       extra_inits=[numpy_helper.from_array(np.zeros(3, np.int64), "k")])
    onnx.save(before, folder / "a.onnx")
    onnx.save(after, folder / "b.onnx")
    return str(folder / "a.onnx"), str(folder / "b.onnx")


def test_nodes_are_matched_and_changes_named(files):
    diff = diff_onnx(*(onnx.load(f) for f in files))
    by_name = {change.node.name: change for _, change in iter_changes(diff)}
    assert by_name["scale"].status == "same"
    assert by_name["soft"].status == "changed" and by_name["soft"].changes == ["axis: -1 → 0"]
    assert by_name["squash"].status == "added"
    assert by_name["total"].changes == ["inputs (s) → (s2)"]
    assert by_name["branch"].changes == ["subgraph then_branch changed"]
    assert by_name["then_op"].status == "changed" and by_name["then_op"].changes == ["op Relu → Sigmoid"]
    assert by_name["else_op"].status == "same"
    depths = {change.node.name: depth for depth, change in iter_changes(diff)}
    assert depths["then_op"] == 1 and depths["branch"] == 0, "If bodies are nested under their node"
    assert diff.summary() == {"added": 1, "removed": 0, "changed": 4, "same": 3}


def test_op_counts_values_and_initializers(files):
    diff = diff_onnx(*(onnx.load(f) for f in files))
    assert [(c.op, c.before, c.after) for c in diff.op_deltas()] == [("Relu", 1, 0), ("Sigmoid", 0, 1), ("Tanh", 0, 1)]
    values = {(v.kind, v.name): (v.status, v.before, v.after) for v in diff.changed_values()}
    assert values[("input", "x")] == ("changed", "float32[n, 4]", "float32[batch, 4]")
    assert values[("initializer", "w")] == ("changed", "float32[4]", "float16[1, 4]")
    assert values[("initializer", "k")] == ("added", None, "int64[3]")
    assert ("output", "y") not in values


def test_identical_models_diff_empty(files):
    model = onnx.load(files[0])
    diff = diff_onnx(model, model)
    assert diff.identical and not diff.op_deltas() and diff.summary()["same"] == 7


@pytest.mark.slow
def test_cli_two_files_json_is_stable(files):
    first = run_cli("diff", *files, "--json")
    second = run_cli("diff", *files, "--json")
    assert first.returncode == 0, first.stderr
    assert first.stdout == second.stdout, "same inputs, same output"
    data = json.loads(first.stdout)
    assert data["ok"] and data["onnx"]["summary"] == {"added": 1, "removed": 0, "changed": 4, "same": 3}
    assert {"op": "Tanh", "before": 0, "after": 1, "delta": 1} in data["onnx"]["op_counts"]


def test_cli_two_files_terminal(files):
    result = run_cli("diff", *files)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "+1 -0 ~4 =3" in out
    assert "+ s2 = Tanh(s)" in out and "axis: -1 → 0" in out
    assert "~     t = Sigmoid(x)" in out, "the changed body node is indented under If"
    assert "float16[1, 4]" in out


@pytest.mark.parametrize("args, fragment", [
    (["diff", "a.onnx"], "one model target or two .onnx files"),
    (["diff", "missing1.onnx", "missing2.onnx"], "does not exist"),
])
def test_cli_usage_errors(args, fragment):
    result = run_cli(*args)
    assert result.returncode == 2
    assert fragment in result.stderr
