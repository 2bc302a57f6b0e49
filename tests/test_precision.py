"""--precision fp16 and int8 on CPU: differential against eager PyTorch on unseen inputs."""

import numpy as np
import onnx
import pytest
import torch

import fxport
from fxport.errors import UsageError, VerificationError
from fxport.capture.half_precision import half_copy, half_inputs
from fxport.lower.precision import quantize_int8
from fxport.eager.inputs import InputSet
from tests.conftest import op_counts, run_cli

FLOAT16 = onnx.TensorProto.FLOAT16


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 16))

    def forward(self, x):
        return torch.softmax(self.body(x), dim=-1), self.body(x).argmax(-1)


class ConvNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(8)
        self.conv2 = torch.nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x):
        return self.conv2(torch.relu(self.norm(self.conv1(x))))


def float_types(model):
    """Element types of graph inputs, outputs and float initializers/constants."""
    io = [v.type.tensor_type.elem_type for v in [*model.graph.input, *model.graph.output]]
    inits = {i.data_type for i in model.graph.initializer
             if i.data_type in (onnx.TensorProto.FLOAT, FLOAT16, onnx.TensorProto.DOUBLE)}
    return io, inits


def run_fp16(model, x):
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x.half().numpy()})


@pytest.fixture(scope="module")
def mlp_fp16():
    torch.manual_seed(0)
    model = MLP().eval()
    return model, fxport.convert(model, (torch.randn(4, 32),), dynamic_shapes={"x": {0: "batch"}}, precision="fp16")


def test_fp16_model_is_half_throughout_and_type_checks(mlp_fp16):
    _, result = mlp_fp16
    io, inits = float_types(result.model)
    assert io == [FLOAT16, FLOAT16, onnx.TensorProto.INT64]
    assert inits == {FLOAT16}
    onnx.checker.check_model(result.model)
    onnx.shape_inference.infer_shapes(result.model, strict_mode=True, check_type=True)
    assert result.precision == "fp16"


def test_fp16_softmax_runs_in_float32_between_casts(mlp_fp16):
    _, result = mlp_fp16
    nodes = list(result.model.graph.node)
    producer = {out: node for node in nodes for out in node.output}
    softmax = next(node for node in nodes if node.op_type == "Softmax")
    feeding = producer[softmax.input[0]]
    assert feeding.op_type == "Cast" and feeding.attribute[0].i == onnx.TensorProto.FLOAT
    consumers = [node for node in nodes if softmax.output[0] in node.input]
    assert [(c.op_type, c.attribute[0].i) for c in consumers] == [("Cast", FLOAT16)]
    assert result.node_counts["fp16"] == result.node_counts["optimized"] + 2


def test_float32_islands_keep_graph_output_names_and_types():
    from fxport.lower.precision import keep_ops_in_float32

    class SoftmaxOut(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x * 2, -1)

    half = fxport.convert(SoftmaxOut(), (torch.randn(2, 5),), precision="fp16", verify=False).model
    again = keep_ops_in_float32(half)  # idempotent: the Softmax now runs in float32 already
    for model in (half, again):
        onnx.shape_inference.infer_shapes(model, strict_mode=True, check_type=True)
        assert [(o.name, o.type.tensor_type.elem_type) for o in model.graph.output] == [("softmax", FLOAT16)]
    assert len(again.graph.node) == len(half.graph.node)


def test_fp16_verified_against_eager_fp32_and_eager_fp16(mlp_fp16):
    _, result = mlp_fp16
    names = [row.name for row in result.verification]
    assert "example" in names and "example vs eager fp16" in names
    assert result.verified
    fp32_rows = [r for r in result.verification if "eager fp16" not in r.name and _has_elements(r)]
    assert all(0 < r.max_abs_error < 1e-2 for r in fp32_rows), "fp16 differs from fp32, within fp16 tolerance"


def test_fp16_matches_eager_fp32_on_unseen_batch(mlp_fp16):
    model, result = mlp_fp16
    x = torch.randn(9, 32)
    probabilities, labels = run_fp16(result.model, x)
    expected = model(x)
    assert probabilities.dtype == np.float16
    np.testing.assert_allclose(probabilities.astype(np.float32), expected[0].detach().numpy(), atol=2e-3)
    assert (labels == expected[1].numpy()).mean() >= 0.8  # argmax of near-ties may flip in fp16


def test_fp16_conv_with_batchnorm_and_dynamic_spatial_dims():
    torch.manual_seed(0)
    model = ConvNet().eval()
    result = fxport.convert(model, (torch.rand(2, 3, 10, 12),), precision="fp16",
                            dynamic_shapes={"x": {0: "batch", 2: "h", 3: "w"}})
    assert result.verified
    x = torch.rand(1, 3, 7, 9)
    (actual,) = run_fp16(result.model, x)
    np.testing.assert_allclose(actual.astype(np.float32), model(x).detach().numpy(), atol=1e-2, rtol=1e-2)


def test_fp16_never_changes_the_users_module():
    model = MLP().eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fxport.convert(model, (torch.randn(2, 32),), precision="fp16", verify=False)
    assert all(v.dtype == torch.float32 and torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_fp16_overflow_fails_verification():
    """Values beyond float16's range (65504) become inf: a mismatch, never a pass."""

    class Overflows(torch.nn.Module):
        def forward(self, x):
            return x * 50000.0

    with pytest.raises(VerificationError, match="differs from eager"):
        fxport.convert(Overflows(), (torch.rand(3) + 1.5,), precision="fp16")


def test_half_helpers_leave_integers_and_originals_alone():
    net = torch.nn.Linear(2, 2)
    inputs = InputSet((torch.ones(2), torch.arange(2)), {"scale": torch.tensor(2.0, dtype=torch.float64)})
    half = half_inputs(inputs)
    assert [t.dtype for t in half.tensors()] == [torch.float16, torch.int64, torch.float16]
    assert inputs.args[0].dtype == torch.float32
    assert half_copy(net).weight.dtype == torch.float16 and net.weight.dtype == torch.float32


# --- int8 -----------------------------------------------------------------------------------

class Dense(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 64)
        self.fc2 = torch.nn.Linear(64, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def test_int8_dynamic_reports_accuracy_delta_vs_fp32():
    torch.manual_seed(0)
    model = Dense().eval()
    result = fxport.convert(model, (torch.randn(4, 32),), dynamic_shapes={"x": {0: "batch"}}, precision="int8")
    counts = op_counts(result.model)
    assert counts.get("MatMulInteger") == 2 and "DynamicQuantizeLinear" in counts
    assert result.node_counts["int8"] > result.node_counts["optimized"]
    fp32_rows = [r for r in result.verification if r.name.endswith(" fp32")]
    int8_rows = [r for r in result.verification if r.name.endswith(" int8")]
    assert fp32_rows and len(int8_rows) == len(fp32_rows)
    assert all(r.max_abs_error < 1e-4 for r in fp32_rows)
    assert all(r.max_abs_error > 1e-4 and 0.99 <= r.cosine_similarity < 1.0 for r in int8_rows if _has_elements(r))
    assert any(_has_elements(r) for r in int8_rows)
    assert result.verified


def outlier_model():
    """One huge weight on a unit the output ignores: per-tensor int8 scales flush every other
    weight (and activation) to zero, so the int8 output collapses while fp32 is unaffected."""
    torch.manual_seed(0)
    model = Dense().eval()
    with torch.no_grad():
        model.fc1.weight[0, 0] = 1e4
        model.fc2.weight[:, 0] = 0.0
        model.fc1.bias.zero_()
        model.fc2.bias.zero_()
    return model


def test_int8_fails_below_min_cosine_and_threshold_is_adjustable():
    model = outlier_model()
    with pytest.raises(VerificationError, match=r"cosine .* < 0.99"):
        fxport.convert(model, (torch.randn(4, 32),), precision="int8")
    result = fxport.convert(model, (torch.randn(4, 32),), precision="int8", min_cosine=0.0)
    assert result.verified
    assert min(r.cosine_similarity for r in result.verification if r.name.endswith(" int8")) < 0.99


def test_int8_static_with_calibration_inputs_is_qdq():
    torch.manual_seed(0)
    model = Dense().eval()
    calibration = [(torch.randn(4, 32),) for _ in range(8)]
    result = fxport.convert(model, (torch.randn(4, 32),), dynamic_shapes={"x": {0: "batch"}},
                            precision="int8", calibration=calibration)
    counts = op_counts(result.model)
    assert counts.get("QuantizeLinear") and counts.get("DequantizeLinear") and "MatMulInteger" not in counts
    assert result.verified


class SharedLinear(torch.nn.Module):
    """One square Linear used twice, and in both branches of a torch.cond."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(32, 32)

    def forward(self, x):
        h = self.fc(torch.relu(self.fc(x)))
        return torch.cond(h.sum() > 0, lambda v: torch.relu(self.fc(v)), lambda v: torch.tanh(self.fc(v)), (h,))


def test_int8_with_a_shared_weight_stays_correct():
    """onnxruntime's quantiser transposes a Gemm weight in place once per use; fxport gives each
    use its own copy (without it, this model's int8 cosine is about 0.16)."""
    torch.manual_seed(0)
    model = SharedLinear().eval()
    result = fxport.convert(model, (torch.randn(4, 32),), precision="int8")
    assert result.verified
    assert op_counts(result.model).get("MatMulInteger") == 2  # If bodies stay float32
    assert min(r.cosine_similarity for r in result.verification) > 0.999


def test_calibration_set_of_the_wrong_arity_is_a_usage_error():
    model = Dense().eval()
    with pytest.raises(UsageError, match="calibration set"):
        fxport.convert(model, (torch.randn(4, 32),), precision="int8",
                       calibration=[(torch.randn(4, 32), torch.randn(4, 32))], verify=False)


def test_quantize_int8_on_a_conv_model():
    from fxport.capture.program import capture
    from fxport.lower.lowering import lower

    model = ConvNet().eval()
    program = capture(model, InputSet((torch.rand(1, 3, 8, 8),)), None)
    quantized = quantize_int8(lower(program))
    assert "ConvInteger" in op_counts(quantized)


@pytest.mark.parametrize("options, message", [
    ({"precision": "fp8"}, "unknown precision"),
    ({"precision": "fp16", "calibration": [(torch.randn(2, 32),)]}, "only apply to --precision int8"),
    ({"precision": "int8", "min_cosine": 1.5}, "outside"),
    ({"precision": "fp16", "min_cosine": 0.9}, "only applies to --precision int8"),
])
def test_precision_usage_errors(options, message):
    with pytest.raises(UsageError, match=message):
        fxport.convert(Dense(), (torch.randn(2, 32),), **options)


# --- CLI ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_cli_fp16_end_to_end(tmp_path):
    path = tmp_path / "m.onnx"
    done = run_cli("convert", "tests/models/basic.py:Scale", "--precision", "fp16", "-o", str(path))
    assert done.returncode == 0, done.stderr
    assert "vs eager fp16" in done.stdout and "Nodes (fp16):" in done.stdout
    assert onnx.load(path).graph.input[0].type.tensor_type.elem_type == FLOAT16


@pytest.mark.slow
def test_cli_int8_static_with_calibrate_function(tmp_path):
    calib = tmp_path / "calib.py"
    # representative calibration (16 sets of 8 rows, seeded): 4 sets of 2 rows left the static
    # ranges so narrow that an unlucky draw of the (unseeded) model fell below the cosine bound
    calib.write_text("import torch\n\ndef sets():\n    g = torch.Generator().manual_seed(0)\n"
                     "    return [(torch.randn(8, 4, generator=g),) for _ in range(16)]\n")
    done = run_cli("convert", "tests/models/basic.py:Scale", "--precision", "int8",
                   "--calibrate", f"{calib}:sets", "--min-cosine", "0.95", "--json")
    assert done.returncode == 0, done.stderr
    import json

    report = json.loads(done.stdout)
    assert report["precision"] == "int8" and "QuantizeLinear" in report["op_counts"]
    assert all(row["passed"] for row in report["verification"])


def _has_elements(row) -> bool:
    """A row whose inputs hold values (verification also runs empty batches: size[batch=0])."""
    return not row.note and all(0 not in shape for shape in row.input_shapes)
