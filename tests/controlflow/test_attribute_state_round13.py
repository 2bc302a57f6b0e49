"""State in attributes of the user's objects that a converted loop or branch changes, directly or
through the methods it calls (issue #47, round thirteen: torchaudio's ``Fade`` made in
hybrid Demucs' ``separate_sources`` and its ``fade.fade_in_len = int(overlap_frames)`` under
``if start == 0``; Chase1325's ``priorityQ_torch`` whose ``push``/``pop`` rebind ``self.q``
inside Dijkstra's ``while not q.isEmpty()``). The object's attributes are carried like locals,
its methods run on an overlay of them (``fxport/controlflow/converters/method_state.py``), a
Python int attribute the data decides becomes an int64 tensor (``operators/targets.py``); each
model equals eager at every exit and the file holds the Loop."""

from __future__ import annotations

import pytest
import torch

from fxport.controlflow.engine import convert_function
from fxport.errors import ConversionError
from tests.controlflow._util import assert_matches_eager, export_to_ort, loop_exits, trip_counts


class Accumulator:
    """A plain object keeping a running total in an attribute its methods rebind and read."""

    def __init__(self, width, start):
        self.total = torch.zeros(width) + start
        self.count = 0

    def add(self, row):
        self.total = self.total + row
        self.count = self.count + 1

    def level(self):
        return self.total.sum()


class AccumulateUntil(torch.nn.Module):
    """``while i < n and acc.level() < limit: acc.add(x[i])``: the test reads the object through
    a method, the body rebinds its tensor and int attributes through another."""

    def forward(self, x, limit):
        acc = Accumulator(x.shape[1], x[0, 0] * 0)
        i = 0
        while i < x.shape[0] and acc.level() < limit:
            acc.add(x[i])
            i += 1
        return acc.total, acc.count + 0 * acc.total.sum(), i + 0 * acc.total.sum()


def _accumulate_inputs():
    """The limit met at once (0 trips), after 1 and 2 rows, never (every row: the bound)."""
    ones = torch.ones(4, 3)
    return [(ones, torch.tensor(-1.0)), (ones, torch.tensor(2.0)), (ones, torch.tensor(5.0)),
            (ones, torch.tensor(100.0)), (torch.ones(1, 3), torch.tensor(100.0)),
            (torch.ones(6, 3) * 0.5, torch.tensor(5.5))]


class Shift(torch.nn.Module):
    """A module of the user's holding Python ints its forward reads as numbers: a factor and a
    slice length (torchaudio's ``Fade`` reads ``self.fade_in_len`` so)."""

    def __init__(self, shift, width):
        super().__init__()
        self.shift = shift
        self.width = width

    def forward(self, row):
        return row * self.shift + row[: self.width].sum() + self.width


class ShiftedSum(torch.nn.Module):
    """``shift = Shift(0, 1)`` made in the function, called on each row, its int attributes set
    under a tensor condition in the loop (one side from a constant, the other from itself)."""

    def forward(self, x):
        shift = Shift(0, 1)
        total = torch.zeros(x.shape[1])
        for t in range(x.shape[0]):
            total = total + shift(x[t])
            if x[t].sum() > 0:
                shift.shift = 2
                shift.width = 3
            else:
                shift.shift = shift.shift + 1
                shift.width = 0
        return total, shift.shift + 0 * total


class Best:
    """A plain object whose method changes its attributes under a tensor condition of its own
    (the method's ``if`` is converted too, on the overlay the loop's trip runs it on)."""

    def __init__(self, first):
        self.value = first
        self.index = 0

    def offer(self, value, index):
        if value > self.value:
            self.value = value
            self.index = index


class ArgMaxScan(torch.nn.Module):
    """``best.offer(row.sum(), t)`` for each row: the arg-max of the rows' sums, kept in an object."""

    def forward(self, x):
        best = Best(x[0].sum())
        for t in range(x.shape[0]):
            best.offer(x[t].sum(), t)
        return best.value, best.index + 0 * best.value


class Queue:
    """Chase1325's ``priorityQ_torch`` in small: ``push`` grows the tensor, ``pop`` shrinks it."""

    def __init__(self, first):
        self.q = first.unsqueeze(0)

    def push(self, row):
        self.q = torch.cat([self.q, row.unsqueeze(0)])

    def pop(self):
        self.q = self.q[1:]

    def empty(self):
        return self.q.shape[0] == 0


class PushUnderCondition(torch.nn.Module):
    """A push on one side of a tensor condition: the queue grows on some trips only (a tensor
    attribute grown through a method, carried as the loop's growing state)."""

    def forward(self, x):
        queue = Queue(x[0])
        for t in range(x.shape[0]):
            if x[t].sum() > 0:
                queue.push(x[t])
        return queue.q.sum(0)


@pytest.mark.slow  # 7 to 10 s on the shared cores (2026-12-04)
def test_a_plain_objects_methods_rebind_its_attributes_in_the_loop_and_its_test():
    model = AccumulateUntil()
    inputs = _accumulate_inputs()
    trips = trip_counts(model, inputs)
    assert set().union(*trips.values()) >= {0, 1, 2, 4}, trips
    exported = export_to_ort(model, (torch.ones(3, 3), torch.tensor(4.0)), dynamic_shapes={"x": {0: "n"}, "limit": None})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


def test_the_methods_of_a_local_object_run_on_its_overlay():
    text = convert_function(AccumulateUntil.forward).source.after
    assert "_fx.targets.overlay(acc, ('count', 'total')" in text  # in the loop's test: read only
    assert "_fx_self_acc = _fx.targets.overlay(acc" in text and "_fx.call(_fx_self_acc.add)" in text
    assert "_fx.targets.store(acc, 'total', 'attr', _fx_v_acc_total, False" in text


_SHIFT_INPUTS = [(torch.ones(1, 3),), (-torch.ones(2, 3),), (torch.ones(2, 3),),
                 (torch.tensor([[1., 2, 3], [-1, -2, -3], [-1, 0, 0], [4, 5, 6], [0.5, 0, 0]]),),
                 (torch.tensor([[-1., 2, 3], [-1, -2, -3], [-1, 0, 0], [-4, 5, 6]]),)]


@pytest.mark.slow  # 5 to 12 s on the shared cores (2026-12-04)
def test_int_attributes_a_tensor_condition_sets_are_int64_tensors_their_uses_read():
    """``shift.shift = 2`` / ``shift.shift + 1`` and ``shift.width = 3`` / ``0`` under ``if
    x[t].sum() > 0``: once refused ("a Python int changed under a tensor condition"), now
    carried as int64 tensors that ``Shift.forward`` reads as a factor and a slice length."""
    model = ShiftedSum()
    branches = {t for trips in trip_counts(model, _SHIFT_INPUTS).values() for t in trips}
    assert {1, 2, 4, 5} <= branches, branches
    exported = export_to_ort(model, (torch.randn(3, 3),), dynamic_shapes={"x": {0: "n"}})
    assert_matches_eager(model, exported, _SHIFT_INPUTS)
    assert exported.ops.get("Loop") and exported.ops.get("Where")


def test_a_method_with_its_own_tensor_if_changes_the_objects_attributes():
    model = ArgMaxScan()
    inputs = [(torch.ones(1, 2),), (torch.tensor([[1., 0], [3, 0], [2, 0]]),), (torch.tensor([[5., 0], [1, 0]]),),
              (torch.tensor([[-1., 0], [-2, 0], [4, 0], [4, 0], [0, 9]]),)]
    exported = export_to_ort(model, (torch.randn(3, 2),), dynamic_shapes={"x": {0: "n"}})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


@pytest.mark.slow  # about 8 s on the shared cores (2026-12-04)
def test_a_queue_object_grown_by_its_method_under_a_condition_equals_eager():
    model = PushUnderCondition()
    inputs = [(torch.ones(1, 3),), (-torch.ones(2, 3),), (torch.ones(2, 3),),
              (torch.tensor([[1., 2, 3], [-1, -2, -3], [-1, 0, 0], [4, 5, 6], [0.5, 0, 0]]),)]
    exported = export_to_ort(model, (torch.randn(3, 3),), dynamic_shapes={"x": {0: "n"}})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop") and exported.ops.get("If")


def _refusal(model, example) -> str:
    with pytest.raises(ConversionError) as caught:
        export_to_ort(model, example, dynamic_shapes={"x": {0: "n"}})
    message = str(caught.value)
    assert "\n" not in message and "test_attribute_state_round13.py:" in message, message
    return message


class _Gain(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gain = 1.0

    def forward(self, row):
        return row * self.gain


class FloatGain(torch.nn.Module):
    def forward(self, x):
        g = _Gain()
        total = torch.zeros(x.shape[1])
        for t in range(x.shape[0]):
            total = total + g(x[t])
            if x[t].sum() > 0:
                g.gain = 0.5
        return total


class _Ramp(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, row):
        return row[0] * torch.linspace(0, 1, self.n).sum()


class RampLength(torch.nn.Module):
    """torchaudio's ``torch.linspace(0, 1, self.fade_in_len)`` in small: a count the data decides."""

    def forward(self, x):
        ramp = _Ramp(2)
        total = torch.zeros(())
        for t in range(x.shape[0]):
            total = total + ramp(x[t])
            if x[t].sum() > 0:
                ramp.n = 4
        return total


@pytest.mark.slow  # about 6 s on the shared cores (2026-12-04)
def test_what_an_attribute_the_data_decides_cannot_be_is_refused_in_one_line():
    assert "g.gain is a Python float changed under a tensor condition" in _refusal(FloatGain(), (torch.randn(3, 3),))
    message = _refusal(RampLength(), (torch.randn(3, 3),))  # a count torch.linspace reads: the use is named
    assert "is used as a Python int" in message and "torch.linspace(0, 1, self.n)" in message, message


def test_the_models_own_int_counter_under_a_tensor_condition_converts():
    """``self.steps += 1`` under ``if x.sum() > 0`` (tests/controlflow/mutation_models.py): refused
    before this round as a Python int changed under a tensor condition; the file returns what
    forward returns (the counter's new value is the model's state, not an output, as a buffer's)."""
    from tests.controlflow import mutation_models

    model = mutation_models.PythonIntAttributeCounter()
    exported = export_to_ort(model, (torch.ones(4, 3),), dynamic_shapes={"x": {0: "batch"}})
    assert isinstance(model.steps, int)  # the caller's module holds a Python int, not a traced value
    assert_matches_eager(model, exported, [(torch.ones(2, 3),), (-torch.ones(1, 3),), (torch.ones(5, 3),)])
    assert exported.ops == {"Mul": 1}  # the counter reaches no output: the file is x * 2
