"""Eager runs on sets fxport made up are budgeted from the example's own run (issue 50 item 8):
the budget grows with the example's seconds and the set's size, a run past it is skipped with a
warning naming the budget, a model with converted loops runs its declared maximum only where
that is affordable, and the user's own inputs are never bounded. No timing asserts: the sleeps
below are far from every budget they are meant to stay under or to hit."""

from __future__ import annotations

import contextlib
import time
import types
import weakref

import pytest
import torch

import fxport.eager.limits as limits
from fxport.capture.dynamic_dims import UNBOUNDED, DimRange
from fxport.eager.calls import run_eager
from fxport.eager.limits import EagerRunStopped, ExampleCost, budgeted, time_limit
from fxport.eager.inputs import InputSet
from fxport.verify.inputs.generated import generate_input_sets
from tests.conftest import line_of


@pytest.fixture
def measure():
    """``measure(cost)``: budget eager runs from ``cost`` for the rest of the test, as the verify
    and coverage stages do with the conversion's ``example_cost`` (``limits.measured``)."""
    with contextlib.ExitStack() as stack:
        yield lambda cost: stack.enter_context(limits.measured(cost))


def test_the_budget_is_proportional_to_the_examples_run_and_the_sets_size():
    cost = ExampleCost(seconds=0.01, elements=100)
    assert cost.budget(2_000) == pytest.approx(2 * cost.budget(1_000)) == pytest.approx(4.0)
    assert ExampleCost(0.02, 100).budget(1_000) == pytest.approx(2 * cost.budget(1_000))
    assert cost.budget(10) == cost.budget(100) == limits.BUDGET_FLOOR  # smaller sets: the floor
    assert cost.budget(10**9) == limits.SECONDS  # never past the flat limit
    assert cost.describe(2_000) == "20× the example's 10 ms × 20 for its inputs' size"


class SleepsOnLargerBatches(torch.nn.Module):
    """tanh, with a Python pause on batches over 4 (the example's): a run that never ends in time."""

    def forward(self, x):
        if x.shape[0] > 4:
            time.sleep(30)  # sleep-line
        return torch.tanh(x)


class PausesOnLargerBatches(torch.nn.Module):
    """tanh, with a half-second pause on batches over 4: past every budget the test sets."""

    def forward(self, x):
        if x.shape[0] > 4:
            time.sleep(0.5)
        return torch.tanh(x)


def _tanh_file():
    from fxport.lower.lowering import lower

    x = torch.randn(4, 3)
    program = torch.export.export(torch.nn.Tanh(), (x,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    return lower(program)


def test_a_generated_set_past_its_budget_is_skipped_with_the_budget_named(monkeypatch, measure):
    from fxport.verify.verification import verify_model

    model, example = SleepsOnLargerBatches(), InputSet((torch.randn(4, 3),), name="example")
    measure(ExampleCost.of(model, example, 0.01))  # budget for batch 6: 20 × 10 ms × 1.5
    monkeypatch.setattr(limits, "BUDGET_FLOOR", 0.1)
    notes: list[str] = []
    rows = verify_model(model, _tanh_file(), [example], dynamic_axes={0: {0: "batch"}}, notes=notes)
    larger = next(row for row in rows if row.name.startswith("larger["))
    assert larger.skipped and "ran past 0.3 s (20× the example's 10 ms × 1.5 for its inputs' size)" in larger.note
    stopped = [note for note in notes if "ran past" in note]
    assert len(stopped) == 1 and "\n" not in stopped[0] and line_of(__file__, "sleep-line") in stopped[0]
    assert all(row.passed for row in rows)


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_the_users_own_inputs_are_never_bounded(monkeypatch, measure):
    """The example and a user set at batch 6 (which sleeps past any budget set here) both run."""
    from fxport.verify.verification import verify_model

    model, example = PausesOnLargerBatches(), InputSet((torch.randn(4, 3),), name="example")
    measure(ExampleCost.of(model, example, 1e-6))
    monkeypatch.setattr(limits, "BUDGET_FLOOR", 0.01)
    user = InputSet((torch.randn(6, 3),), name="user-1")
    rows = verify_model(model, _tanh_file(), [example, user], dynamic_axes={0: {0: "batch"}}, generate=False)
    assert [row.name for row in rows] == ["example", "user-1"] and all(row.passed and not row.skipped for row in rows)
    assert run_eager(model, user).shape == (6, 3)  # outside a limit: never narrowed


def test_a_limit_given_seconds_is_not_narrowed(monkeypatch, measure):
    """The float64 reference's own limit (seconds given) is no generated set's budget."""
    net = torch.nn.Tanh()
    measure(ExampleCost(1e-6, 1, model=weakref.ref(net)))
    monkeypatch.setattr(limits, "BUDGET_FLOOR", 0.01)
    with time_limit(30), budgeted(net, 1):
        time.sleep(0.3)
    with pytest.raises(EagerRunStopped) as stop, time_limit(), budgeted(net, 1):
        time.sleep(30)
    assert stop.value.what.startswith("eager PyTorch ran past 10 ms (at least 10 ms;")


def test_the_flat_switch_keeps_the_flat_limit(monkeypatch, measure):
    net = torch.nn.Tanh()
    measure(ExampleCost(1e-6, 1, model=weakref.ref(net)))
    monkeypatch.setattr(limits, "PROPORTIONAL", False)
    assert limits.example_cost(model=net) is None
    with time_limit(), budgeted(net, 1):
        time.sleep(0.2)  # the floor (2 s) would not stop it either; the budget is not even asked


def _boxes_with_max(measure, seconds: float, loops: bool, notes: list[str] | None = None):
    """A 12-box example with ``n`` declared up to 4096, measured at ``seconds``; ``loops``: the
    conversion converted a while loop."""
    example = InputSet((torch.rand(12, 4), torch.rand(12)), name="example")
    records = [types.SimpleNamespace(tier="control-flow", rule="while-to-while_loop")] if loops else []
    measure(ExampleCost.of(torch.nn.Identity(), example, seconds, rewrites=records, notes=notes))
    axes = {0: {0: "n"}, 1: {0: "n"}}
    bound = DimRange(0, 4096, (0, 4096), "n")
    return example, axes, {0: {0: bound}, 1: {0: bound}}


def _names(sets):
    return [s.name for s in sets]


def test_a_loop_models_declared_maximum_too_slow_in_eager_is_replaced_by_the_largest_affordable_size(measure):
    notes: list[str] = []
    example, axes, bounds = _boxes_with_max(measure, 0.01, loops=True, notes=notes)  # 4096 boxes: 3.4 s estimated
    names = _names(generate_input_sets(example, axes, bounds=bounds))
    assert "size[n=4096] max" not in names
    chosen = [name for name in names if "in place of max 4096" in name]
    assert chosen == ["size[n=256] in place of max 4096"], names  # 0.21 s estimated; 512: 0.43 s
    assert len(notes) == 1 and "tries n up to 256, not at its declared max 4096" in notes[0] and "\n" not in notes[0]
    assert "an estimated 3.4 s there (the example's 10 ms × 341)" in notes[0]


def test_the_declared_maximum_stays_when_cheap_or_without_loops(measure):
    example, axes, bounds = _boxes_with_max(measure, 1e-5, loops=True)  # 4096 boxes: ~3 ms estimated
    assert "size[n=4096] max" in _names(generate_input_sets(example, axes, bounds=bounds))
    example, axes, bounds = _boxes_with_max(measure, 0.01, loops=False)
    assert "size[n=4096] max" in _names(generate_input_sets(example, axes, bounds=bounds))
    with limits.measured(None):  # nothing measured (a direct call): as before
        assert "size[n=4096] max" in _names(generate_input_sets(example, axes, bounds=bounds))


def test_an_unbounded_dimension_has_no_maximum_to_replace(measure):
    example, axes, _ = _boxes_with_max(measure, 10.0, loops=True)
    bound = DimRange(0, UNBOUNDED, (0, UNBOUNDED), "n")
    names = _names(generate_input_sets(example, axes, bounds={0: {0: bound}, 1: {0: bound}}))
    assert not any("max" in name for name in names) and any(name.startswith("larger[") for name in names)


def test_the_coverage_pass_runs_loop_models_on_half_the_threads(monkeypatch):
    from fxport.verify.exercise import fewer_threads_for_loops

    monkeypatch.setattr(torch, "get_num_threads", lambda: 4)
    set_to: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", set_to.append)
    with fewer_threads_for_loops(loops=True):
        assert set_to == [2]
    assert set_to == [2, 4]
    with fewer_threads_for_loops(loops=False):
        pass
    assert set_to == [2, 4]


class PythonNms(torch.nn.Module):
    """The tutorials' Python NMS: one trip per kept box, each over the boxes left."""

    def forward(self, boxes, scores):
        order = scores.argsort(descending=True)
        keep = []
        while order.numel() > 0:
            i = order[0]
            keep.append(i)
            if order.numel() == 1:
                break
            rest = boxes[order[1:]]
            top_left = torch.maximum(boxes[i, :2], rest[:, :2])
            bottom_right = torch.minimum(boxes[i, 2:], rest[:, 2:])
            inter = (bottom_right - top_left).clamp(min=0).prod(1)
            area = (boxes[i, 2:] - boxes[i, :2]).prod()
            iou = inter / (area + (rest[:, 2:] - rest[:, :2]).prod(1) - inter)
            order = order[1:][iou <= 0.3]
        return torch.stack(keep)


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_a_conversion_measures_its_example_and_chooses_the_loop_models_large_size(monkeypatch):
    """End to end: the eager stage's measurement reaches the generated sizes of the verify stage."""
    import fxport

    monkeypatch.setattr(limits, "LARGE_SET_SECONDS", 1e-4)  # affordable: 8 example runs, whatever
    monkeypatch.setattr(limits, "LARGE_SET_EXAMPLES", 8)     # the example took: 64 boxes (128: 10.7)
    corner = torch.rand(12, 2, generator=torch.Generator().manual_seed(0)) * 50
    boxes = torch.cat([corner, corner + 8], 1)
    n = torch.export.Dim("n", max=4096)
    result = fxport.convert(PythonNms().eval(), (boxes, torch.rand(12)),
                            dynamic_shapes={"boxes": {0: n}, "scores": {0: n}})
    names = [row.name for row in result.verification]
    assert not any(name.startswith("size[n=4096]") for name in names), names
    assert "size[n=64] in place of max 4096" in names, names
    assert any(w.startswith("verification tries n up to") for w in result.warnings), result.warnings
