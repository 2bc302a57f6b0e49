"""ONNX Runtime crashes are a set's failure, never fxport's end; an edge size nobody asked for that
ONNX Runtime cannot run narrows the range instead of refusing the model (issue 50, items 1-2).

``nn.GRU`` at batch 0 is a real ONNX Runtime abort ("terminate called without an active
exception", SIGABRT) on the onnxruntime this project pins; a child killed by a signal stands in
for any other crash.
"""

from __future__ import annotations

import json
import os
import signal
import textwrap

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper

import fxport
from fxport.capture.dynamic_dims import UNBOUNDED, DimRange
from fxport.errors import VerificationError
from fxport.eager.inputs import InputSet
from fxport.verify import verification as verify
from fxport.verify.isolated import ChildSession, SessionCrashed, SessionSettings
from fxport.verify.verification import verify_model
from tests.conftest import run_cli


class Gru(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.gru = torch.nn.GRU(4, 4, batch_first=True)

    def forward(self, x):
        return self.gru(x)[0]


def _relu_model() -> bytes:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_a_child_killed_by_a_signal_is_named_and_the_next_run_starts_a_new_one(start_method):
    x = np.array([-1.0, 2.0], "float32")
    with ChildSession([_relu_model()], SessionSettings(), start_method=start_method) as session:
        assert session.run({"x": x})[0].tolist() == [0.0, 2.0]
        os.kill(session._process.pid, signal.SIGSEGV)
        with pytest.raises(SessionCrashed) as info:
            session.run({"x": x})
        assert info.value.how == "SIGSEGV"
        assert session.run({"x": x})[0].tolist() == [0.0, 2.0] and session.starts == 2


def test_an_onnx_runtime_abort_in_a_user_set_is_a_failed_row_not_a_dead_process():
    """A size the user gave (an input set at batch 0) still refuses: the crash is that set's
    failure, named with its signal, and this process lives on to say so."""
    x = torch.randn(1, 3, 4)
    with pytest.raises(VerificationError, match=r"ONNX Runtime crashed \(SIGABRT\) on user-1") as info:
        fxport.convert(Gru(), (x,), dynamic_shapes={"x": {0: "b"}}, verify_inputs=[(torch.randn(0, 3, 4),)])
    assert "\n" not in str(info.value)


def test_onnx_runtime_crashing_at_a_made_up_batch_0_narrows_the_range(tmp_path):
    module, x = Gru(), torch.randn(1, 3, 4)
    result = fxport.convert(module, (x,), dynamic_shapes={"x": {0: "b"}}, output=tmp_path / "g.onnx")
    excluded = [row for row in result.verification if row.note.startswith("skipped: excluded")]
    assert [row.input_shapes[0][0] for row in excluded] == [0]
    assert "SIGABRT" in excluded[0].note and excluded[0].passed
    narrowing = [w for w in result.warnings if "'b'" in w]
    assert len(narrowing) == 1 and "narrowed to 1..inf" in narrowing[0] and "b=0" in narrowing[0]
    ranges = json.loads(dict((p.key, p.value) for p in onnx.load(tmp_path / "g.onnx").metadata_props)
                        ["fxport.dynamic_ranges"])
    assert ranges["b"]["valid"] == [1, None] and ranges["b"]["declared"] == [0, None]
    session = ort.InferenceSession(str(tmp_path / "g.onnx"), providers=["CPUExecutionProvider"])
    for batch in (1, 2, 5):
        inputs = torch.randn(batch, 3, 4)
        got = session.run(None, {session.get_inputs()[0].name: inputs.numpy()})[0]
        np.testing.assert_allclose(got, module(inputs).detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_the_gru_converts_from_the_cli_with_one_warning(tmp_path):
    (tmp_path / "gru.py").write_text(textwrap.dedent("""
        import torch

        class G(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.gru = torch.nn.GRU(4, 4, batch_first=True)

            def forward(self, x):
                return self.gru(x)[0]
    """))
    done = run_cli("convert", "gru.py:G", "-i", "x=1x3x4", "--dynamic", "x:0=b", "-o", "g.onnx", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "b=0" in warnings[0] and "SIGABRT" in warnings[0], done.stderr
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]


def _tanh_file():
    return fxport.convert(torch.nn.Tanh(), (torch.randn(3, 4),), dynamic_shapes={"input": {0: "batch"}}, verify=False).model


def _failing_at(monkeypatch, batch: int):
    """ONNX Runtime errs (as on a Reshape it cannot do) on every set at ``batch``."""
    real_run = verify.OnnxRunner.run

    def run(self, inputs, limit=None):
        if inputs.tensors()[0].shape[0] == batch:
            raise VerificationError(f"ONNX Runtime failed on the {inputs.name} inputs: Reshape node failed",
                                    hint="")
        return real_run(self, inputs, limit)

    monkeypatch.setattr(verify.OnnxRunner, "run", run)


def test_an_onnx_runtime_error_at_a_made_up_size_leaves_that_row_out(monkeypatch):
    _failing_at(monkeypatch, 0)
    x = torch.randn(3, 4)
    rows = verify_model(torch.nn.Tanh(), _tanh_file(), [InputSet((x,))], dynamic_axes={0: {0: "batch"}},
                        bounds={0: {0: DimRange(0, UNBOUNDED, (0, UNBOUNDED), "batch")}})
    excluded = [row for row in rows if row.note.startswith("skipped: excluded")]
    assert [row.input_shapes[0][0] for row in excluded] == [0] and "Reshape" in excluded[0].note
    assert all(row.passed for row in rows) and len(rows) > 2


def test_a_declared_minimum_still_refuses(monkeypatch):
    _failing_at(monkeypatch, 1)
    x = torch.randn(3, 4)
    with pytest.raises(VerificationError, match="size\\[batch=1\\]"):
        verify_model(torch.nn.Tanh(), _tanh_file(), [InputSet((x,))], dynamic_axes={0: {0: "batch"}},
                     bounds={0: {0: DimRange(1, UNBOUNDED, (1, UNBOUNDED), "batch")}})


def test_a_failure_at_a_size_between_the_users_sizes_still_refuses(monkeypatch):
    """Batch 2 fails where the user's sets run 1 and 3: no range can leave 2 out and keep them."""
    _failing_at(monkeypatch, 2)
    with pytest.raises(VerificationError, match="size\\[batch=2\\]"):
        verify_model(torch.nn.Tanh(), _tanh_file(), [InputSet((torch.randn(1, 4),)), InputSet((torch.randn(3, 4),))],
                     dynamic_axes={0: {0: "batch"}})


class WrongAtOne(torch.nn.Module):
    """Eager differs from the Tanh file only at batch 1, a size fxport makes up."""

    def forward(self, x):
        return torch.tanh(x) + (1.0 if x.shape[0] == 1 else 0.0)


def test_a_wrong_value_at_a_made_up_size_still_refuses():
    with pytest.raises(VerificationError, match="differs from eager") as info:
        verify_model(WrongAtOne(), _tanh_file(), [InputSet((torch.randn(3, 4),))], dynamic_axes={0: {0: "batch"}})
    assert any(not row.passed and row.input_shapes[0][0] == 1 for row in info.value.report)
