"""A tuple or list of tensors as loop state (issue #47: the ``(h, c)`` of an ``nn.LSTMCell`` in a
decoder's ``while True`` loop, per-layer states in a list): each tensor is carried on its own and
the tuple rebuilt in the body and after the loop. Each model equals eager at every exit, and
the file holds the Loop; a state whose structure changes is refused in one line."""

from __future__ import annotations

import pytest
import torch

import fxport
from tests.controlflow._util import assert_matches_eager, export_to_ort, trip_counts


class LstmCellDecoder(torch.nn.Module):
    """``state = self.cell(y, state)`` with ``state = (h, c)``; stops on a limit or after 5 steps."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.cell = torch.nn.LSTMCell(3, 3)
        self.out = torch.nn.Linear(3, 3)

    def forward(self, x, limit):
        state = (torch.zeros_like(x), torch.zeros_like(x))
        outs = []
        y = x
        while True:
            state = self.cell(y, state)
            y = self.out(state[0])
            outs.append(y)
            if y.abs().sum() > limit or len(outs) >= 5:
                break
        return torch.stack(outs), state[1]


class LayerStates(torch.nn.Module):
    """A list of per-layer hidden states, rebuilt each step by a comprehension, in a ``for``
    with a data-dependent ``break``."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.cells = torch.nn.ModuleList([torch.nn.GRUCell(2, 2), torch.nn.GRUCell(2, 2)])

    def forward(self, x, steps):
        hidden = [torch.zeros_like(x), torch.zeros_like(x)]
        for t in range(6):
            inp = x
            new = []
            for cell, h in zip(self.cells, hidden):
                inp = cell(inp, h)
                new.append(inp)
            hidden = new
            if t + 1 >= steps:
                break
        return hidden[0] + hidden[1] * 2


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_an_lstm_cells_tuple_state_is_carried_and_equals_eager_at_every_exit():
    model = LstmCellDecoder()
    inputs = [(torch.full((1, 3), 2.0), torch.tensor(0.01)), (torch.full((1, 3), 2.0), torch.tensor(0.9)),
              (torch.full((2, 3), 0.5), torch.tensor(2.1)), (torch.full((3, 3), -1.0), torch.tensor(3.0)),
              (torch.full((1, 3), 0.1), torch.tensor(99.0))]
    trips = set().union(*trip_counts(model, inputs).values())
    assert 1 in trips and 5 in trips and len(trips) >= 3, trips
    exported = export_to_ort(model, (torch.randn(2, 3), torch.tensor(1.0)),
                             dynamic_shapes={"x": {0: "batch"}, "limit": None})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_list_of_per_layer_states_is_carried():
    model = LayerStates()
    x = torch.tensor([[0.5, -1.0]])
    inputs = [(x, torch.tensor(1)), (x, torch.tensor(2)), (x * 2, torch.tensor(4)), (x, torch.tensor(10))]
    assert {1, 2, 4, 6} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, (x, torch.tensor(3)))
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


class StructureChanges(torch.nn.Module):
    def forward(self, x):
        state = (x, x)
        while state[0].sum() < 10:
            state = (state[0] + 1,)  # one tensor fewer
        return state[0]


def test_a_tuple_whose_structure_changes_is_refused_in_one_line():
    with pytest.raises(fxport.ConversionError) as raised:
        fxport.convert(StructureChanges(), (torch.ones(2),), verify=False)
    message = str(raised.value)
    assert "\n" not in message and "'state'" in message and "test_tuple_state.py:" in message
