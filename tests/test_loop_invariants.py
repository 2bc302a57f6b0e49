"""Loop-invariant nodes leave ``Loop`` bodies (fxport/lower/loop_invariants.py): the transposed weight a
body reads moves in front of the loop, what may fail or reads the body's own values stays, and
the model computes the same at trip counts 0, 1, 2 and 5."""

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from fxport.lower.loop_invariants import hoist_loop_invariants


def loop_model():
    """y = x; repeat n times: y = y @ W^T + Reshape(b, shape)[0] — W^T and the cast of W are
    invariant; the Reshape is invariant too but may fail, so it stays."""
    body = helper.make_graph(
        [helper.make_node("Transpose", ["W"], ["wt"], perm=[1, 0]),
         helper.make_node("Cast", ["wt"], ["wt32"], to=TensorProto.FLOAT),
         helper.make_node("MatMul", ["y_in", "wt32"], ["product"]),
         helper.make_node("Reshape", ["b", "shape"], ["b2"]),
         helper.make_node("Add", ["product", "b2"], ["y_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_in", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_out", TensorProto.FLOAT, ["batch", 3])])
    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "keep", "x"], ["y"], body=body)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3]),
         helper.make_tensor_value_info("n", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        initializer=[numpy_helper.from_array(rng.standard_normal((3, 3)).astype(np.float32) / 2, "W"),
                     numpy_helper.from_array(rng.standard_normal(3).astype(np.float32), "b"),
                     numpy_helper.from_array(np.array([1, 3], dtype=np.int64), "shape"),
                     numpy_helper.from_array(np.array(True), "keep")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def run(model, x, n):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"x": x, "n": np.array(n, dtype=np.int64)})[0]


def test_invariant_transpose_and_cast_leave_the_body_and_the_results_stay():
    original = loop_model()
    model = ir.serde.deserialize_model(original)
    moved = hoist_loop_invariants(model.graph)
    hoisted = ir.serde.serialize_model(model)
    onnx.checker.check_model(hoisted, full_check=True)
    assert moved == 2
    assert [node.op_type for node in hoisted.graph.node] == ["Transpose", "Cast", "Loop"]
    body_ops = [node.op_type for node in hoisted.graph.node[-1].attribute[0].g.node]
    assert "Reshape" in body_ops and "Transpose" not in body_ops, body_ops
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    for trips in (0, 1, 2, 5):
        np.testing.assert_allclose(run(hoisted, x, trips), run(original, x, trips), rtol=1e-6)


@pytest.mark.parametrize("op", ["Reshape", "Gather", "Div"])
def test_ops_that_can_fail_stay_in_the_body(op):
    """A loop that runs zero times never runs its body: a node that can raise stays inside."""
    inputs = {"Reshape": ["b", "shape"], "Gather": ["b", "shape"], "Div": ["b", "b"]}[op]
    body = helper.make_graph(
        [helper.make_node(op, inputs, ["v"]), helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["y_in"], ["y_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_in", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("y_out", TensorProto.FLOAT, [3])])
    model = ir.serde.deserialize_graph(helper.make_graph(
        [helper.make_node("Loop", ["n", "keep", "x"], ["y"], body=body)], "g",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [3]) for name in ("x", "b")]
        + [helper.make_tensor_value_info("shape", TensorProto.INT64, [2]),
           helper.make_tensor_value_info("n", TensorProto.INT64, []),
           helper.make_tensor_value_info("keep", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])]))
    assert hoist_loop_invariants(model) == 0
    assert [node.op_type for node in model] == ["Loop"]
