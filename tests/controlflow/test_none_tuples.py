"""A tuple holding ``None`` as loop state (issue #47): SpeechBrain's ``memory = (None, c)`` before
a decoding loop whose body sets ``memory = (hs, c)``, a list of per-layer LSTM states ``[None,
None]`` rebuilt each step, an entry that stays None. Each None entry an iteration sets is carried
as a value and a flag (``hs is None`` in the body is the flag; a callee given it runs as for a
variable None on some paths); an entry None on every trip stays a fixed part of the structure.
Each model equals eager at 0, 1, 2 and N trips and every exit, and the file holds the Loop; a
tuple whose structure changes, and a None entry returned from the model, are refused in one line.

Also here: ``t.data`` in a loop's peeled first trip (Sketch-RNN's ``self.pi.data[0, 0, :]`` in
the method its body calls, with ``hidden_cell = None`` before the loop), which torch's non-strict
export cannot trace as ``.data``."""

from __future__ import annotations

import pytest
import torch

import fxport
from tests.controlflow._util import assert_matches_eager, export_to_ort, line_in_source, loop_exits, trip_counts


class _Cell(torch.nn.Module):
    """SpeechBrain's GRUCell wrapper: ``hx`` None means zeros."""

    def __init__(self, n):
        super().__init__()
        self.cell = torch.nn.GRUCell(n, n)

    def forward(self, x, hx=None):
        if hx is None:
            hx = x.new_zeros(x.shape[0], x.shape[1])
        h = self.cell(x, hx)
        return h, h * 0.5


class MemoryNoneEntry(torch.nn.Module):
    """``memory = (None, c)`` before ``for t in range(x.shape[0])`` with a break when what ``c``
    accumulates passes a limit; the body unpacks ``hs, c = memory`` and passes ``hs`` to the cell."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.rnn = _Cell(3)
        self.out = torch.nn.Linear(3, 3)

    def step(self, inp, memory):
        hs, c = memory
        h, hs = self.rnn(inp + c, hs)
        return self.out(h), (hs, c + h)

    def forward(self, x, limit):
        memory = (None, x.new_zeros(x.shape[1:]))
        y = x.new_zeros(x.shape[1:])
        for t in range(x.shape[0]):
            y, memory = self.step(x[t] + y, memory)
            if memory[1].abs().sum() > limit:
                break
        return y, memory[1]


class LayerStatesNone(torch.nn.Module):
    """Per-layer ``nn.LSTM`` states ``[None, None]`` rebuilt each step (``nn.LSTM(x, None)``
    means zeros), in a ``while`` loop on a tensor test."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.layers = torch.nn.ModuleList([torch.nn.LSTM(2, 2), torch.nn.LSTM(2, 2)])

    def forward(self, x, limit):
        states = [None, None]
        y = x
        n = torch.zeros((), dtype=torch.int64)
        while y.abs().sum() < limit and n < 6:
            new = []
            inp = y
            for layer, state in zip(self.layers, states):
                inp, state = layer(inp, state)
                new.append(state)
            states = new
            y = inp * 3 + y
            n = n + 1
        first = states[0]
        return y, n, (first[0] if first is not None else x[:1] * 0)


class FixedNoneEntry(torch.nn.Module):
    """``state = (None, h)`` whose first entry an iteration sets only when the data says so
    (``hs if ... else None``: None on some trips) and whose nested entry stays None."""

    def forward(self, x):
        state = (None, (x, None))
        i = torch.zeros((), dtype=torch.int64)
        while i < x.shape[0]:
            hs, (h, rest) = state
            h = h + x[i]
            if hs is not None:
                h = h + hs
            state = (h * 0.5 if h.sum() > 0 else None, (h, rest))
            i = i + 1
        hs, (h, _) = state
        return h if hs is None else h + hs


class StructureChanges(torch.nn.Module):
    def forward(self, x):
        memory = (None, x)
        while x.sum() < 10:
            x = x + 1
            memory = (x, x, x)
        return x, memory[1]


class ReturnsTheNoneEntry(torch.nn.Module):
    def forward(self, x):
        memory = (None, x)
        for t in range(x.shape[0]):
            memory = (memory[1] * 2, memory[1] + 1)
        return memory[0]


class DataInPeeledTrip(torch.nn.Module):
    """Sketch-RNN's shape: ``hidden = None`` before a static ``range`` whose break becomes a tensor
    on the first trip; the body sets ``self.y`` and a method reads ``self.y.data``."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.gru = torch.nn.GRU(3, 3)
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        s = x
        outs = []
        hidden = None
        for _ in range(5):
            o, hidden = self.gru(s.unsqueeze(0), hidden)
            self.y = self.lin(o[0])
            s, q = self.next_state()
            outs.append(s)
            if q == 2:
                break
        return torch.stack(outs)

    def next_state(self):
        y = self.y.data[0, :]
        return y.view(1, -1), int(torch.argmax(y))


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_a_tuple_with_a_none_entry_is_carried_with_a_flag_and_equals_eager_at_every_exit():
    model = MemoryNoneEntry()
    inputs = [(torch.ones(0, 2, 3), torch.tensor(0.0)),           # no trip: memory stays (None, c)
              (torch.full((1, 2, 3), 0.5), torch.tensor(99.0)),   # one trip (the bound)
              (torch.full((4, 1, 3), 2.0), torch.tensor(0.5)),    # break on the first trip
              (torch.full((5, 2, 3), 0.5), torch.tensor(2.0)),    # break on the second trip
              (torch.full((5, 2, 3), 0.5), torch.tensor(3.0)),    # break on the third trip
              (torch.full((6, 3, 3), -1.0), torch.tensor(99.0))]  # the bound, 6 trips
    trips = set().union(*trip_counts(model, inputs).values())
    assert {0, 1, 2, 3, 6} <= trips, trips
    assert {"left by a break", "left at its trip bound"} <= set().union(*loop_exits(model, inputs).values())
    exported = export_to_ort(model, (torch.randn(3, 2, 3), torch.tensor(0.5)),
                             dynamic_shapes={"x": {0: "steps", 1: "batch"}, "limit": None})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")
    record = next(r for r in exported.records if "memory" in r.detail)
    assert "while_loop" in record.detail


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_per_layer_lstm_states_none_before_the_loop_are_passed_to_the_lstm_as_none_or_the_value():
    model = LayerStatesNone()
    x = torch.tensor([[0.3, -0.2]])
    inputs = [(x, torch.tensor(0.1)), (x, torch.tensor(0.7)), (x * 0.1, torch.tensor(3.0)), (x, torch.tensor(1e6))]
    assert {0, 1, 6} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, (x, torch.tensor(2.0)))
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_an_entry_none_on_some_trips_and_one_none_on_every_trip_stay_none_where_eager_has_none():
    model = FixedNoneEntry()
    inputs = [(torch.ones(0, 2),), (torch.ones(1, 2),), (-torch.ones(1, 2),),
              (torch.tensor([[1.0, 2.0], [-9.0, 1.0], [3.0, 3.0]]),), (torch.randn(7, 2),)]
    assert {0, 1, 3, 7} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, (torch.randn(4, 2),), dynamic_shapes={"x": {0: "n"}})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop") and exported.ops.get("Where")


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_data_of_an_attribute_in_a_peeled_first_trip_is_exported():
    model = DataInPeeledTrip()
    inputs = [(torch.randn(1, 3) * 3,) for _ in range(12)]
    trips = set().union(*trip_counts(model, inputs).values())
    assert 1 in trips and len(trips) >= 2, trips
    exported = export_to_ort(model, (torch.randn(1, 3),))
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


@pytest.mark.parametrize("cls, text, words", [
    (StructureChanges, "while x.sum() < 10", ("'memory'", "another structure")),
    (ReturnsTheNoneEntry, "for t in range", ("None on some inputs",)),
])
def test_what_stays_refused_is_one_line_at_the_users_line(cls, text, words):
    with pytest.raises(fxport.ConversionError) as raised:
        fxport.convert(cls(), (torch.ones(3, 2),), dynamic_shapes={"x": {0: "n"}}, verify=False)
    message = str(raised.value)
    assert "\n" not in message and all(w in message for w in words), message
    assert f"test_none_tuples.py:{line_in_source(cls.forward, text)};" in message, message
