"""Eager runs on inputs fxport made up are bounded (issue 25 item 6): no hang, one warning
naming the loop."""

import time

import pytest
import torch

import fxport
from fxport.eager.limits import EagerRunStopped, time_limit
from tests.conftest import line_of


class Newton(torch.nn.Module):
    """sqrt by Newton's method: never converges on negative values (the search negates inputs)."""

    def forward(self, a):
        x = a.clone()
        err = (x * x - a).abs().max()
        while err > 1e-6:  # loop-line
            x = 0.5 * (x + a / x)
            err = (x * x - a).abs().max()
        return x


@pytest.mark.slow
def test_coverage_search_stops_a_loop_that_never_ends_and_names_it():
    a = torch.tensor([1.0, 2.0, 4.0, 9.0])
    start = time.monotonic()
    result = fxport.convert(Newton().eval(), (a,))
    assert time.monotonic() - start < 120
    stopped = [w for w in result.warnings if "ran past" in w]
    assert len(stopped) == 1, result.warnings
    assert "the while loop ran past 10000 iterations at" in stopped[0] and line_of(__file__, "while err > 1e-6") in stopped[0]
    assert "search: negated values" in stopped[0] and "\n" not in stopped[0]
    assert result.verification and all(row.passed for row in result.verification)


def test_time_limit_names_the_users_line():
    def spin():
        while True:
            pass

    start = time.monotonic()
    try:
        with time_limit(0.2):
            spin()
    except EagerRunStopped as stop:
        assert stop.where is not None and stop.where.function == "spin"
    else:
        raise AssertionError("not stopped")
    assert time.monotonic() - start < 5


class GrowsUntilLarge(torch.nn.Module):
    """Ends on every batch but 0, where the sum stays 0: eager never finishes there."""

    def forward(self, x):
        while x.sum() < 10:  # empty-line
            x = x * 2 + 1
        return x


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_generated_size_on_which_the_loop_never_ends_is_skipped_not_hung(monkeypatch):
    """size[batch=0] never finishes in eager: verification stops it at its time limit and the
    coverage run at the iteration cap, each with one warning naming the loop; the file is written."""
    monkeypatch.setattr("fxport.eager.limits.SECONDS", 3.0)
    start = time.monotonic()
    result = fxport.convert(GrowsUntilLarge().eval(), (torch.rand(4, 3),),
                            dynamic_shapes=({0: torch.export.Dim("batch")},))
    assert time.monotonic() - start < 100
    stopped = [w for w in result.warnings if "ran past" in w and "size[batch=0]" in w]
    assert len(stopped) == 2, result.warnings
    assert all(line_of(__file__, "empty-line") in w and "\n" not in w for w in stopped)
    assert any(w.startswith("coverage: the while loop ran past 10000 iterations") for w in stopped)
    assert result.model is not None and all(row.passed for row in result.verification if "batch=0" not in row.name)


def test_a_limit_inside_a_running_one_leaves_the_outer_timer_alone():
    """time_limit_unless_bounded sets no second timer under a running limit (which would cancel
    it): the outer limit still stops the block, and the caller is told it was not its own."""
    from fxport.eager.limits import time_limit_unless_bounded

    with time_limit_unless_bounded(5) as own:
        assert own is True
    with pytest.raises(EagerRunStopped), time_limit(0.3):
        with time_limit_unless_bounded(60) as own:
            assert own is False
        time.sleep(5)  # still bounded by the outer 0.3 s


# --- ONNX Runtime's run and the float64 reference of a made-up set: budgets from the example ----

def _counting_loop() -> bytes:
    """An ONNX Loop adding 1 to ``x`` ``trips`` times: as slow as it is asked to be."""
    from onnx import TensorProto, helper

    value = lambda name, dtype, shape: helper.make_tensor_value_info(name, dtype, shape)  # noqa: E731
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Add", ["v_in", "one"], ["v_out"])],
        "body", [value("i", TensorProto.INT64, []), value("cond_in", TensorProto.BOOL, []),
                 value("v_in", TensorProto.FLOAT, ["n"])],
        [value("cond_out", TensorProto.BOOL, []), value("v_out", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])])
    graph = helper.make_graph([helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body)], "g",
                              [value("trips", TensorProto.INT64, []), value("x", TensorProto.FLOAT, ["n"])],
                              [value("y", TensorProto.FLOAT, ["n"])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]).SerializeToString()


def test_onnx_runtimes_run_of_a_made_up_set_is_stopped_at_the_examples_budget_not_a_flat_minute():
    """A made-up set's ONNX Runtime run (the caller's flat 60 s) is narrowed to the budget
    eager's run has (20× the example's 1 ms, at least 2 s); a user's set (no limit) is never
    bounded; without a measured example the caller's limit stands."""
    import numpy as np

    from fxport.eager.limits import ExampleCost, measured
    from fxport.verify.isolated import ChildSession, SessionError, SessionSettings

    x = np.zeros(4, "float32")
    with ChildSession([_counting_loop()], SessionSettings()) as session, \
            measured(ExampleCost(seconds=0.001, elements=5)):
        assert session.run({"trips": np.array(1000), "x": x}, None)[0].tolist() == [1000.0] * 4
        start = time.monotonic()
        with pytest.raises(SessionError, match=r"ONNX Runtime ran past 2 s") as info:
            session.run({"trips": np.array(10 ** 12), "x": x}, 60.0)
        assert info.value.terminated and info.value.limit == 2.0 and time.monotonic() - start < 10
        assert session.run({"trips": np.array(3), "x": x}, 60.0)[0].tolist() == [3.0] * 4  # the child lives on


def test_verifications_message_names_the_budget_applied_not_the_callers_limit():
    """The runner's one line names the seconds the run was given (the made-up set's 2 s budget),
    not the caller's flat 60 s."""
    import numpy as np
    import onnx

    from fxport.eager.limits import ExampleCost, measured
    from fxport.errors import VerificationError
    from fxport.eager.inputs import InputSet
    from fxport.verify.onnx_runner import OnnxRunner

    runner = OnnxRunner(onnx.load_from_string(_counting_loop()), isolated=True)
    try:
        with measured(ExampleCost(seconds=0.001, elements=5)), pytest.raises(VerificationError) as info:
            runner.run(InputSet((torch.tensor(10 ** 12), torch.zeros(4)), name="size[n=4]"), 60.0)
    finally:
        runner.close()
    assert info.value.what.startswith("ONNX Runtime ran past 2 s on the size[n=4] inputs"), info.value.what


class SlowInFloat64(torch.nn.Module):
    """Doubles its input; its float64 copy (the reference) takes half a minute."""

    def forward(self, x):
        if x.dtype == torch.float64:
            time.sleep(30)
        return x * 2


def test_the_float64_reference_of_a_made_up_set_is_stopped_in_proportion_to_its_eager_run(monkeypatch):
    """The reference of a made-up set whose eager run took 5 ms may take 100× that (with the
    floor lowered to 0.2 s here), not a flat minute; stopped, the set stays failed and says so."""
    import numpy as np

    from fxport.eager.limits import ExampleCost, measured
    from fxport.eager.inputs import InputSet
    from fxport.verify.compare import Acceptance
    from fxport.verify.judges import Bench, SetRun, verdict
    from fxport.verify.judges import float64_noise
    from fxport.verify.judges.tolerance import FixedTolerance

    monkeypatch.setattr(float64_noise, "REFERENCE_FLOOR", 0.2)
    module, x = SlowInFloat64(), torch.rand(4, 8)
    inputs = InputSet((x,), name="larger[n=8]")
    bench = Bench(Acceptance(), module=module, candidates=(inputs,))
    chain = [FixedTolerance.open(bench), float64_noise.Float64Noise.open(bench)]
    wrong = [module(x).numpy() + np.float32(0.5)]
    run = SetRun(inputs, module(x), wrong, bounded=True, eager_seconds=0.005)
    start = time.monotonic()
    with measured(ExampleCost(seconds=0.005, elements=32)):
        judged = verdict(run, chain)
    assert time.monotonic() - start < 5
    assert not judged.passed and any("float64 reference was stopped (eager PyTorch ran past 0.5 s at" in note
                                      for note in judged.notes), judged.notes
