"""The lowered model is serialised once (fxport/serialized.py): the bytes the checker, ONNX
Runtime and the file get equal ``SerializeToString()`` of the model as it is at each use."""

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

import fxport
from fxport.serialized import ModelBytes


def _model() -> onnx.ModelProto:
    weights = [numpy_helper.from_array(np.random.rand(16, 16).astype(np.float32), f"w{i}") for i in range(3)]
    nodes = [helper.make_node("MatMul", ["x" if i == 0 else f"y{i - 1}", f"w{i}"], [f"y{i}"]) for i in range(3)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 16])],
                              [helper.make_tensor_value_info("y2", TensorProto.FLOAT, ["b", 16])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.x", 1)],
                              producer_name="p", doc_string="d")
    model.metadata_props.add(key="range", value="2..inf")
    return model


def test_bytes_equal_serialize_to_string_after_top_level_edits():
    model = _model()
    model_bytes = ModelBytes(model)
    assert model_bytes(model) == model.SerializeToString()
    model.metadata_props[0].value = "0..inf"  # what verification's widened ranges do
    model.metadata_props.add(key="another", value="x")
    assert model_bytes(model) == model.SerializeToString()
    assert b"".join(model_bytes.pieces(model)) == model.SerializeToString()


def test_a_graph_edit_after_the_graph_was_kept_is_serialised_again():
    model = _model()
    model_bytes = ModelBytes(model)
    model.graph.output[0].name = "renamed"
    model.graph.node[-1].output[0] = "renamed"
    assert model_bytes(model) == model.SerializeToString()
    other = _model()
    assert model_bytes(other) == other.SerializeToString()  # another proto: its own bytes


def test_the_written_file_is_the_model_the_conversion_returns(tmp_path):
    """Widened range metadata included: the file equals the returned proto, byte for byte."""
    class Net(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) * x.shape[0]

    path = tmp_path / "net.onnx"
    result = fxport.convert(Net(), (torch.randn(2, 3),), dynamic_shapes={"x": {0: "batch"}}, output=str(path))
    assert path.read_bytes() == result.model.SerializeToString()
    onnx.checker.check_model(str(path))
