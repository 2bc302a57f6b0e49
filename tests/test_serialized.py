"""The lowered model is serialised once (fxport/lower/serialized.py): the bytes the checker, ONNX
Runtime and the file get equal ``SerializeToString()`` of the model as it is at each use."""

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

import fxport
from fxport.lower.serialized import ModelBytes


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


def _session_outputs(source: bytes, x: np.ndarray, directory: str | None = None) -> list:
    import onnxruntime as ort

    options = ort.SessionOptions()
    if directory is not None:
        options.add_session_config_entry("session.model_external_initializers_file_folder_path", directory)
    return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"]).run(None, {"x": x})


def _model_with_a_branch() -> onnx.ModelProto:
    """Two 32×32 weights (4 KB each: over the embedded threshold), a small bias kept in the
    graph, and an If whose branch holds its own large initializer (subgraphs keep theirs)."""
    weights = [numpy_helper.from_array(np.random.rand(32, 32).astype(np.float32), f"w{i}") for i in range(2)]
    weights += [numpy_helper.from_array(np.arange(32, dtype=np.float32), "small"),
                numpy_helper.from_array(np.array(True), "flag")]
    nodes = [helper.make_node("MatMul", ["x", "w0"], ["y0"]), helper.make_node("MatMul", ["y0", "w1"], ["y1"]),
             helper.make_node("Add", ["y1", "small"], ["y2"])]
    branch = helper.make_graph([helper.make_node("MatMul", ["y2", "c"], ["z"])], "then", [],
                               [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["b", 32])],
                               [numpy_helper.from_array(np.random.rand(32, 32).astype(np.float32), "c")])
    other = helper.make_graph([helper.make_node("Neg", ["y2"], ["z2"])], "else", [],
                              [helper.make_tensor_value_info("z2", TensorProto.FLOAT, ["b", 32])])
    nodes.append(helper.make_node("If", ["flag"], ["out"], then_branch=branch, else_branch=other))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", 32])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["b", 32])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="p")
    model.metadata_props.add(key="range", value="2..inf")
    return model


def test_by_reference_runs_the_weights_in_the_file_the_output_is_made_of(tmp_path):
    model = _model_with_a_branch()
    model_bytes = ModelBytes(model)
    head = tmp_path / "early.tmp"
    head.write_bytes(b"".join(model_bytes.pieces(model)[:-1]))
    model_bytes.head_file = lambda pieces: str(head)
    model.metadata_props[0].value = "1..inf"  # a top-level edit after the file was begun
    source, directory = model_bytes.by_reference(model)
    referred = onnx.ModelProto.FromString(source)
    external = {t.name for t in referred.graph.initializer if t.data_location == TensorProto.EXTERNAL}
    assert external == {"w0", "w1"}  # "small", "flag" and the branch's "c" stay in the graph
    assert len(source) < len(model.SerializeToString()) - 2 * 4000 and referred.metadata_props[0].value == "1..inf"
    x = np.random.rand(2, 32).astype(np.float32)
    expected = _session_outputs(model.SerializeToString(), x)
    np.testing.assert_array_equal(_session_outputs(source, x, directory)[0], expected[0])


def test_by_reference_without_a_file_or_for_another_model_is_none():
    model = _model()
    model_bytes = ModelBytes(model)
    assert model_bytes.by_reference(model) is None  # no file begun
    model_bytes.head_file = lambda pieces: None  # the file's head no longer matches
    assert model_bytes.by_reference(model) is None
    model_bytes.head_file = lambda pieces: "/unused"
    assert model_bytes.by_reference(_model()) is None  # another proto: serialised whole


def test_verification_reads_the_bytes_the_output_file_holds(tmp_path, monkeypatch):
    """A weight corrupted on its way to disk is seen by verification, which runs the file's bytes:
    the conversion is refused and nothing is written."""
    from fxport.common import files
    from fxport.errors import VerificationError

    def corrupting_write(self):  # the pieces kept for the commit's check stay as they were
        marker = np.full(64, 0.25, np.float32).tobytes()  # the start of the weight's raw data
        for piece in self._head:
            self._handle.write(piece.replace(marker, np.full(64, 9.0, np.float32).tobytes(), 1))
        self._handle.flush()

    monkeypatch.setattr(files.EarlyFile, "_write_head", corrupting_write)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.full((64, 64), 0.25))

        def forward(self, x):
            return x @ self.weight

    path = tmp_path / "net.onnx"
    try:
        fxport.convert(Net(), (torch.randn(2, 64),), dynamic_shapes={"x": {0: "batch"}}, output=str(path))
    except VerificationError as exc:
        assert "differs from eager" in str(exc)
    else:
        raise AssertionError("a file with a corrupted weight passed verification")
    assert not path.exists()


def test_an_early_file_names_its_head_only_while_the_model_begins_with_it(tmp_path):
    from fxport.common.files import EarlyFile

    path = tmp_path / "m.onnx"
    early = EarlyFile([b"head", b"graph", b"tail"], path)
    assert early.head_path([b"head", b"other graph", b"tail"]) is None
    begun = early.head_path([b"head", b"graph", b"new tail"])
    assert open(begun, "rb").read() == b"headgraph"  # whole, flushed, for a reader that opens it by name
    assert early.commit([b"head", b"graph", b"new tail"]) == str(path) and path.read_bytes() == b"headgraphnew tail"
    assert early.head_path([b"head", b"graph", b"new tail"]) is None  # committed: no temporary file any more


def test_a_session_that_cannot_map_the_file_loads_the_bytes(tmp_path):
    """A file ONNX Runtime cannot read by reference (here: removed before the load) costs the
    mapping, not the verification: the session loads the model's own bytes."""
    from fxport.verify.onnx_runner import OnnxRunner

    model = _model_with_a_branch()
    model_bytes = ModelBytes(model)
    model_bytes.head_file = lambda pieces: str(tmp_path / "gone.tmp")
    x = np.random.rand(2, 32).astype(np.float32)
    from fxport.eager.inputs import InputSet

    outputs = OnnxRunner(model, model_bytes=model_bytes).run(InputSet((torch.from_numpy(x),)))
    np.testing.assert_array_equal(outputs[0], _session_outputs(model.SerializeToString(), x)[0])


def test_a_model_the_checker_refuses_leaves_no_file_begun(tmp_path, monkeypatch):
    """The file is begun before the checker runs (the write overlaps it): a refusal removes it."""
    import fxport.lower.stage as stages
    from fxport.errors import LoweringError

    def refuse(model, ort=False):
        raise LoweringError("the exported ONNX model is invalid: test", hint="none")

    monkeypatch.setattr(stages, "check_onnx", refuse)

    class Net(torch.nn.Module):
        def forward(self, x):
            return x * 2

    path = tmp_path / "net.onnx"
    try:
        fxport.convert(Net(), (torch.randn(2, 3),), output=str(path))
    except LoweringError:
        pass
    else:
        raise AssertionError("the refused model was converted")
    assert list(tmp_path.iterdir()) == []
