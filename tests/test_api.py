"""fxport.convert end to end: capture, lower, verify, write; errors as data."""

import os

import onnx
import pytest
import torch

import fxport
from fxport.errors import CaptureError, EagerRunError, OutputWriteError, UnsupportedOpsError, UsageError
from tests.conftest import MODELS, assert_matches_eager, line_of, op_counts
from tests.models.basic import DataDependent, MissingOp, RaisesInForward, Scale, StaticLoop


BASIC = os.path.join(MODELS, "basic.py")


class SRCNN(torch.nn.Module):
    """The seed article's super-resolution net: dynamic batch, height and width."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 16, 9, padding=4)
        self.conv2 = torch.nn.Conv2d(16, 8, 1)
        self.conv3 = torch.nn.Conv2d(8, 3, 5, padding=2)

    def forward(self, x):
        x = torch.nn.functional.interpolate(x, scale_factor=3, mode="bicubic", align_corners=False)
        return self.conv3(torch.relu(self.conv2(torch.relu(self.conv1(x)))))


@pytest.fixture(scope="module")
def srcnn_result():
    torch.manual_seed(0)
    model = SRCNN().eval()
    result = fxport.convert(model, (torch.rand(1 + 1, 3, 12, 10),),
                            dynamic_shapes={"x": {0: "batch", 2: "height", 3: "width"}})
    return model, result


def test_cnn_with_dynamic_axes_verifies_on_unseen_sizes(srcnn_result):
    model, result = srcnn_result
    assert result.verified
    names = [row.name for row in result.verification]
    # fresh values at other sizes: no separate run of fresh values at the example's own sizes
    assert names[:3] == ["example", "larger[batch=3,height=18,width=15]", "smaller[batch=2,height=6,width=5]"]
    assert result.verification[1].input_shapes == [[3, 3, 18, 15]]
    # independently of fxport's own verifier: an odd size never seen at export
    assert_matches_eager(model, result.model, torch.rand(1, 3, 7, 13), atol=1e-4)
    assert op_counts(result.model)["Conv"] == 3
    assert set(result.timings) >= {"capture", "lower", "verify"}
    graph_input = result.model.graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param for d in graph_input] == ["batch", "", "height", "width"]
    output_dims = [d.dim_param for d in result.model.graph.output[0].type.tensor_type.shape.dim]
    assert output_dims[0] == "batch" and "height" in output_dims[2], output_dims


def test_static_loop_unrolls_and_matches():
    model = StaticLoop().eval()
    result = fxport.convert(model, model.example_args)
    assert result.verified
    assert op_counts(result.model).get("Tanh") == 3
    assert "Loop" not in op_counts(result.model)


def test_user_module_is_not_modified():
    model = Scale()
    model.train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = fxport.convert(model, (torch.randn(2, 4),))
    assert model.training, "train mode restored"
    assert not any("train mode" in w for w in result.warnings), "no dropout or batch norm: nothing to warn about"
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert "forward" not in vars(model)


def test_kwargs_and_extra_verify_inputs():
    class WithKw(torch.nn.Module):
        def forward(self, x, *, scale):
            return x * scale

    model = WithKw()
    result = fxport.convert(model, (torch.randn(3),), kwargs={"scale": torch.tensor(2.0)},
                            verify_inputs=[{"x": torch.randn(3), "scale": torch.tensor(-1.5)}])
    assert [row.name for row in result.verification][-1] == "user-1"
    assert result.verified


def test_torch_export_dim_objects_pass_through():
    from torch.export import Dim

    result = fxport.convert(Scale(), (torch.randn(3, 4),), dynamic_shapes={"x": {0: Dim("n", min=2, max=64)}})
    names = [row.name for row in result.verification]
    assert result.verified and len(names) == 4, names
    # the declared minimum (also the smaller size) and maximum; never below the declared range
    assert "size[n=64] max" in names and min(row.input_shapes[0][0] for row in result.verification) == 2


def test_positional_dynamic_shapes_accept_dimension_names():
    result = fxport.convert(Scale(), (torch.randn(3, 4),), dynamic_shapes=({0: "batch"},))
    assert result.verified
    assert result.model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    batch_sizes = {row.input_shapes[0][0] for row in result.verification}
    assert len(batch_sizes) >= 3, f"verification varied batch only over {batch_sizes}"


def test_output_written_atomically_and_loadable(tmp_path):
    path = tmp_path / "scale.onnx"
    result = fxport.convert(Scale(), (torch.randn(2, 4),), output=path)
    assert result.output_path == str(path)
    onnx.checker.check_model(onnx.load(path))
    assert [p for p in os.listdir(tmp_path) if p.startswith(".fxport-")] == []


def test_failed_conversion_never_clobbers_existing_output(tmp_path):
    path = tmp_path / "good.onnx"
    path.write_bytes(b"previous good model")
    with pytest.raises(UnsupportedOpsError):
        fxport.convert(MissingOp(), MissingOp.example_args, output=path)
    assert path.read_bytes() == b"previous good model"
    assert os.listdir(tmp_path) == ["good.onnx"]


def lower_relu_as_sigmoid(monkeypatch) -> None:
    """A wrong lowering for the rest of the test: every Relu of the file becomes a Sigmoid."""
    from fxport.lower import stage

    real_lower = stage.lower_model

    def corrupting_lower(program, **kwargs):
        lowered = real_lower(program, **kwargs)
        for node in lowered.proto.graph.node:
            if node.op_type == "Relu":
                node.op_type = "Sigmoid"
        return lowered

    monkeypatch.setattr(stage, "lower_model", corrupting_lower)


def test_file_begun_during_verification_is_removed_when_verification_refuses(monkeypatch, tmp_path):
    """The file is written while verification runs (fxport.common.files.EarlyFile) and renamed into
    place only when it passes: a refused model leaves the previous file and no temporary."""
    path = tmp_path / "good.onnx"
    path.write_bytes(b"previous good model")
    lower_relu_as_sigmoid(monkeypatch)
    with pytest.raises(fxport.VerificationError):
        fxport.convert(Scale(), (torch.randn(2, 4),), output=path)
    assert path.read_bytes() == b"previous good model" and os.listdir(tmp_path) == ["good.onnx"]


def test_file_begun_during_verification_carries_what_verification_recorded(monkeypatch, tmp_path):
    """The early file's last piece (the top-level fields after the graph) is written at commit:
    the ranges verification widened are in the file, which equals the returned model."""
    from fxport.write import stage as write

    def no_second_write(*args, **kwargs):
        raise AssertionError("the write stage wrote the model anew instead of committing the early file")

    monkeypatch.setattr(write, "write_atomically", no_second_write)
    path = tmp_path / "scale.onnx"
    result = fxport.convert(Scale(), (torch.randn(3, 4),), dynamic_shapes=({0: "batch"},), output=path)
    assert path.read_bytes() == result.model.SerializeToString()
    assert any(prop.key.startswith("fxport") for prop in onnx.load(path).metadata_props)


def test_early_file_left_for_a_full_write_when_the_model_changed(tmp_path):
    from fxport.common.files import EarlyFile

    path = tmp_path / "m.onnx"
    early = EarlyFile([b"head", b"graph", b"tail"], path)
    assert early.commit([b"other head", b"graph", b"tail"]) is None
    assert os.listdir(tmp_path) == []


def test_unwritable_output(tmp_path):
    with pytest.raises(OutputWriteError, match="does not exist"):
        fxport.convert(Scale(), (torch.randn(2, 4),), output=tmp_path / "no" / "dir" / "m.onnx", verify=False)


def test_every_missing_op_listed_at_once_with_user_lines():
    with pytest.raises(UnsupportedOpsError) as info:
        fxport.convert(MissingOp(), MissingOp.example_args)
    ops = {op: str(where) for op, where in info.value.ops}
    assert set(ops) == {"aten::i0", "aten::copysign"}
    assert ops["aten::i0"].endswith(line_of(BASIC, "torch.special.i0"))
    assert ops["aten::copysign"].endswith(line_of(BASIC, "torch.copysign"))
    assert "\n" not in str(info.value)


def test_eager_failure_points_at_user_code():
    with pytest.raises(EagerRunError) as info:
        fxport.convert(RaisesInForward(), RaisesInForward.example_args)
    assert line_of(BASIC, "x @ torch.randn(4, 4)") in str(info.value)


def test_stock_capture_failure_on_data_dependent_branch_is_located():
    """The capture stage alone (no rewrites) names the user's line of the tensor branch."""
    from fxport.capture.program import capture
    from fxport.eager.inputs import InputSet

    with pytest.raises(CaptureError) as info:
        capture(DataDependent(), InputSet(DataDependent.example_args))
    assert "data-dependent control flow" in str(info.value)
    assert line_of(BASIC, "if x.sum() > 0") in str(info.value)


def test_not_a_module():
    with pytest.raises(UsageError, match="not a torch.nn.Module"):
        fxport.convert(lambda x: x, (torch.randn(2),))


def test_verification_failure_raises_with_table(monkeypatch):
    """A model whose ONNX differs from eager must fail, never warn."""
    lower_relu_as_sigmoid(monkeypatch)
    with pytest.raises(fxport.VerificationError) as info:
        fxport.convert(Scale(), (torch.randn(2, 4),))
    assert len(info.value.report) == 2 and not any(row.passed for row in info.value.report)
