"""Verification runs ONNX Runtime on its own thread, behind eager (fxport/verify/verification.py): the
session loads while eager runs, eager runs on while ONNX Runtime is busy, rows keep their
order, a set eager rejects never reaches ONNX Runtime, and a wrong file still fails."""

from __future__ import annotations

import threading

import pytest
import torch

import fxport
import fxport.verify.verification as verify
from fxport.errors import VerificationError
from fxport.eager.inputs import InputSet
from fxport.verify.verification import verify_model




class Tanh(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x)


class Sigmoid(torch.nn.Module):
    def forward(self, x):
        return torch.sigmoid(x)


def _converted(module, x):
    return fxport.convert(module, (x,), dynamic_shapes={"x": {0: "batch"}}, verify=False).model


def test_the_session_loads_while_eager_runs_the_next_sets(monkeypatch):
    module, x = Tanh(), torch.randn(3, 4)
    model = _converted(module, x)
    eager_ran = threading.Event()
    session_waited = []

    class SlowSession(verify.OnnxRunner):
        def __init__(self, *args, **kwargs):
            session_waited.append(eager_ran.wait(timeout=60))  # set only if eager runs meanwhile
            super().__init__(*args, **kwargs)

    real_run_eager = verify.run_eager

    def run_eager(*args, **kwargs):
        eager_ran.set()
        return real_run_eager(*args, **kwargs)

    monkeypatch.setattr(verify, "OnnxRunner", SlowSession)
    monkeypatch.setattr(verify, "run_eager", run_eager)
    rows = verify_model(module, model, [InputSet((x,))], dynamic_axes={0: {0: "batch"}})
    assert session_waited == [True], "eager ran no set while the session loaded"
    assert rows[0].name == "example" and all(row.passed for row in rows)
    assert len({row.name for row in rows}) == len(rows) > 3


def test_eager_runs_every_set_while_one_onnx_runtime_run_is_slow(monkeypatch):
    """The first ONNX Runtime run holds until eager has run every set: eager never waits for a
    judgement it does not need yet, and every row is still judged."""
    module, x = Tanh(), torch.randn(3, 4)
    model = _converted(module, x)
    sets = [InputSet((x,))] + verify.generate_input_sets(InputSet((x,)), {0: {0: "batch"}})
    eager_runs, all_ran, held = [], threading.Event(), []

    real_run_eager, real_run = verify.run_eager, verify.OnnxRunner.run

    def run_eager(*args, **kwargs):
        eager_runs.append(1)
        if len(eager_runs) == len(sets):
            all_ran.set()
        return real_run_eager(*args, **kwargs)

    def run(self, inputs, limit=None):
        if not held:
            held.append(all_ran.wait(timeout=60))
        return real_run(self, inputs, limit)

    monkeypatch.setattr(verify, "run_eager", run_eager)
    monkeypatch.setattr(verify.OnnxRunner, "run", run)
    rows = verify_model(module, model, [InputSet((x,))], dynamic_axes={0: {0: "batch"}}, generated_sets=sets[1:])
    assert held == [True], "eager waited for the first ONNX Runtime run"
    assert [row.name for row in rows] == [s.name for s in sets] and all(row.passed for row in rows)


def test_queued_onnx_runtime_runs_are_dropped_when_verification_stops(monkeypatch):
    module, x = Tanh(), torch.randn(3, 4)
    model = _converted(module, x)
    sets = verify.generate_input_sets(InputSet((x,)), {0: {0: "batch"}})
    started, release, runs = threading.Event(), threading.Event(), []
    real_run, real_run_eager = verify.OnnxRunner.run, verify.run_eager

    def run(self, inputs, limit=None):
        runs.append(inputs.name)
        started.set()
        release.wait(timeout=60)
        return real_run(self, inputs, limit)

    def run_eager(module_, inputs):
        if inputs.name == sets[2].name:  # the example's run is under way, two sets queued behind it
            started.wait(timeout=60)
            release.set()
            raise KeyboardInterrupt  # the user stops the conversion
        return real_run_eager(module_, inputs)

    monkeypatch.setattr(verify.OnnxRunner, "run", run)
    monkeypatch.setattr(verify, "run_eager", run_eager)
    with pytest.raises(KeyboardInterrupt):
        verify_model(module, model, [InputSet((x,))], dynamic_axes={0: {0: "batch"}}, generated_sets=sets)
    assert len(runs) == 1, runs  # the run under way finished; the one queued behind it never ran


def test_rows_keep_the_order_of_the_sets_around_sets_eager_rejects(monkeypatch):
    module, x = Tanh(), torch.randn(3, 4)
    model = _converted(module, x)
    sets = verify.generate_input_sets(InputSet((x,)), {0: {0: "batch"}})
    real_run_eager = verify.run_eager
    onnx_saw = []

    def run_eager(module, inputs):
        if inputs.tensors()[0].shape[0] % 2 == 0:
            from fxport.errors import EagerRunError
            raise EagerRunError("even batch", hint="")
        return real_run_eager(module, inputs)

    real_run = verify.OnnxRunner.run
    monkeypatch.setattr(verify, "run_eager", run_eager)
    monkeypatch.setattr(verify.OnnxRunner, "run", lambda self, inputs, limit=None: (
        onnx_saw.append(inputs.name), real_run(self, inputs, limit))[1])
    rows = verify_model(module, model, [InputSet((x,))], dynamic_axes={0: {0: "batch"}}, generated_sets=sets)
    assert [row.name for row in rows] == ["example"] + [s.name for s in sets]
    rejected = [row.name for row in rows if "eager rejects" in row.note]
    assert rejected and not set(rejected) & set(onnx_saw), "a set eager rejects reached ONNX Runtime"
    assert all(row.passed for row in rows)


def test_a_wrong_file_still_fails_on_the_sets_after_the_first():
    x = torch.randn(3, 4)
    model = _converted(Tanh(), x)
    with pytest.raises(VerificationError, match="differs from eager"):
        verify_model(Sigmoid(), model, [InputSet((x,))], dynamic_axes={0: {0: "batch"}})


def _prepacking(runner) -> bool:
    try:
        return runner.session.get_session_options().get_session_config_entry("session.disable_prepacking") != "1"
    except Exception:  # noqa: BLE001 - an entry never set: ONNX Runtime's default, prepacked
        return True


def test_weights_are_prepacked_only_for_files_that_repeat_a_body():
    """Prepacking reorders each weight at load for products that reuse it: a verification run
    uses a weight once outside a Loop (VGG loads a third faster without it); a Loop's body uses
    it every step, where unpacked products ran 3x slower (docs/control-flow.md)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from fxport.verify.onnx_runner import OnnxRunner

    weight = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    plain = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "plain", [x], [y], [weight])
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond"], ["cond_out"]), helper.make_node("MatMul", ["state", "w"], ["next"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("state", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("next", TensorProto.FLOAT, [2, 4])])
    trips = numpy_helper.from_array(np.array(3, np.int64), "trips")
    looped = helper.make_graph([helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body)],
                               "looped", [x], [y], [weight, trips])
    runners = [OnnxRunner(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
               for graph in (plain, looped)]
    assert [_prepacking(runner) for runner in runners] == [False, True]
    ones = InputSet((torch.ones(2, 4),))
    assert runners[0].run(ones)[0].tolist() == [[4.0] * 4] * 2
    assert runners[1].run(ones)[0].tolist() == [[64.0] * 4] * 2


def test_eager_runs_on_half_of_torchs_threads_beside_onnx_runtime(monkeypatch):
    """Both pools sized to the whole machine at once wait on each other's threads: eager gets
    half of torch's while ONNX Runtime works beside it, and the count is put back after,
    also when verification fails."""
    module, x = Tanh(), torch.randn(3, 4)
    model = _converted(module, x)
    threads_in_eager, real_run_eager = [], verify.run_eager

    def run_eager(*args, **kwargs):
        threads_in_eager.append(torch.get_num_threads())
        return real_run_eager(*args, **kwargs)

    monkeypatch.setattr(verify, "run_eager", run_eager)
    before = torch.get_num_threads()
    torch.set_num_threads(4)
    try:
        verify_model(module, model, [InputSet((x,)), InputSet((torch.randn(5, 4),))])
        assert len(threads_in_eager) >= 2 and set(threads_in_eager) == {2} and torch.get_num_threads() == 4
        with pytest.raises(VerificationError):
            verify_model(Sigmoid(), model, [InputSet((x,))])
        assert torch.get_num_threads() == 4
        torch.set_num_threads(1)
        threads_in_eager.clear()
        verify_model(module, model, [InputSet((x,))])
        assert set(threads_in_eager) == {1} and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
