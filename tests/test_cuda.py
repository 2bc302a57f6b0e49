"""CUDA verification: provider placement is detected and reported; CUDA tests skip cleanly."""

import os

import pytest
import torch

import fxport
from fxport.errors import ConversionError
from fxport.eager.inputs import InputSet
from fxport.verify.verification import OnnxRunner, fallback_warning, verify_model
from fxport.verify.providers import describe_placement, node_placement
from tests.conftest import run_cli
from tests.models.basic import Scale


def _has_cuda() -> bool:
    import onnxruntime as ort

    return torch.cuda.is_available() and "CUDAExecutionProvider" in ort.get_available_providers()


HAS_CUDA = _has_cuda()

CUDA, CPU = "CUDAExecutionProvider", "CPUExecutionProvider"


def event(name, op, provider):
    return {"cat": "Node", "name": f"{name}_kernel_time", "args": {"op_name": op, "provider": provider}}


FAKE_PROFILE = [
    {"cat": "Session", "name": "model_loading_array", "args": {}},
    event("mm", "MatMul", CUDA), {"cat": "Node", "name": "mm_fence_before", "args": {}},
    event("erf", "Erfinv", CPU), event("shape", "Shape", CPU), event("add", "Add", CUDA),
    event("mm", "MatMul", CUDA),  # the same node in a second run is counted once
]


def test_node_placement_from_a_profile():
    placement = node_placement(FAKE_PROFILE)
    assert placement == {CUDA: ["MatMul(mm)", "Add(add)"], CPU: ["Erfinv(erf)", "Shape(shape)"]}


def test_cpu_fallback_is_described_and_warned():
    placement = node_placement(FAKE_PROFILE)
    assert describe_placement(placement, CUDA) == f"{CUDA} (2 of 4 nodes on CPU: Erfinv, Shape)"
    assert "fell back to CPU" in fallback_warning(placement, CUDA)
    assert fallback_warning({CUDA: ["MatMul(mm)"]}, CUDA) is None
    everything_on_cpu = {CPU: ["MatMul(mm)"]}
    assert describe_placement(everything_on_cpu, CUDA) == CPU
    assert "every node on" in fallback_warning(everything_on_cpu, CUDA)


def test_real_profile_on_cpu_places_every_node_and_cleans_up():
    result = fxport.convert(Scale(), (torch.randn(2, 4),), verify=False)
    runner = OnnxRunner(result.model, "cpu", profile_placement=True)
    runner.run(InputSet((torch.randn(2, 4),)))
    assert set(runner.placement) == {CPU}
    ran = {n.split("(")[0] for n in runner.placement[CPU]}
    assert "Mul" in ran and ran & {"Gemm", "FusedGemm"}  # as ORT optimised the graph (Gemm+Relu fused)
    assert runner.provider == CPU
    assert not os.path.exists(runner._profile_dir)


def test_fallback_reaches_the_result_warnings(monkeypatch):
    """verify_model turns a mixed placement into a warning (a CUDA run faked on CPU)."""
    import fxport.verify.onnx_runner as onnx_runner
    import fxport.verify.verification as verify

    class FakeCudaRunner(verify.OnnxRunner):
        def __init__(self, model, device, **options):
            super().__init__(model, "cpu", profile_placement=True, **options)
            self.providers = [CUDA, CPU]

    monkeypatch.setattr(verify, "OnnxRunner", FakeCudaRunner)
    monkeypatch.setattr(onnx_runner, "node_placement", lambda events: node_placement(FAKE_PROFILE))
    module = Scale()
    model = fxport.convert(module, (torch.randn(2, 4),), verify=False).model
    notes = []
    rows = verify_model(module, model, [InputSet((torch.randn(2, 4),))], notes=notes)
    assert all(row.provider == f"{CUDA} (2 of 4 nodes on CPU: Erfinv, Shape)" for row in rows)
    assert len(notes) == 1 and "fell back to CPU" in notes[0]


@pytest.mark.skipif(HAS_CUDA, reason="checks the message shown when CUDA is absent")
@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_device_cuda_without_cuda_is_one_clear_line():
    with pytest.raises(ConversionError, match="--device cuda") as info:
        fxport.convert(Scale(), (torch.randn(2, 4),), device="cuda")
    assert "\n" not in str(info.value)
    done = run_cli("convert", "tests/models/basic.py:Scale", "--device", "cuda")
    assert done.returncode == 2, "asking for a device the machine lacks is a usage error"
    assert done.stderr.count("\n") == 1 and "--device cuda" in done.stderr


@pytest.mark.cuda
@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device or onnxruntime-gpu")
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_cuda_verification_runs_on_cuda(precision):
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).eval()
    result = fxport.convert(module, (torch.randn(4, 16),), dynamic_shapes={"input": {0: "batch"}},
                            device="cuda", precision=precision)
    assert result.verified
    assert all(row.provider.startswith(CUDA) for row in result.verification)
    assert next(module.parameters()).device.type == "cpu", "the user's module stays where it was"
    if precision == "fp16":
        assert any("vs eager fp16" in row.name and not row.note for row in result.verification)

