"""A test on a converted loop's counter that its range decides (issue #47, torch-nmt's beam
search: "first iteration unlike the rest"). ``for t in range(N)`` whose body starts with ``if t ==
0:`` (the batch repeated per beam, the predictions made) and later breaks on a tensor: the first
trip runs as Python, and the rest becomes a loop over ``range(1, N)``. There ``t == 0`` is False
for every value the counter takes, so the comparison is answered in Python
(``fxport/controlflow/operators/counters.py`` ``decided``), not traced into a ``cond`` whose
branches give the state two batch sizes. A test the range leaves open (``t < 2``) stays a
tensor condition, and the file still equals eager."""

from __future__ import annotations

import torch

from tests.controlflow._util import assert_every_branch_taken, assert_matches_eager, export_to_ort, loop_exits, \
    trip_counts


class FirstTripRepeats(torch.nn.Module):
    """torch-nmt ``beam_predict`` shape: the state doubles its batch on the first trip only; a
    cache grows by ``cat``; the loop ends when every row's norm falls under a bound, or at 5 trips."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.cell = torch.nn.GRUCell(4, 4)

    def forward(self, x, bound):
        h = x
        ys = x[:, :1] * 0
        for t in range(5):
            if t == 0:
                step_in = torch.tanh(x).repeat(2, 1)
                h = h.repeat(2, 1)
                ys = ys.repeat(2, 1)
            else:
                step_in = torch.tanh(ys[:, -1:]).expand(-1, 4)
            h = self.cell(step_in, h)
            ys = torch.cat([ys, h[:, :1]], dim=1)
            if bool((h.abs().sum(-1) < bound).all()):
                break
        return ys, h


class OpenCounterTest(torch.nn.Module):
    """``t < 2`` inside ``range(n)`` over a dynamic size: true on some trips only."""

    def forward(self, x):
        total = torch.zeros(x.shape[1])
        for t in range(x.shape[0]):
            if t < 2:
                total = total + x[t] * 2
            else:
                total = total - x[t]
            if bool(total.sum() > 50):
                break
        return total


def test_a_first_trip_test_on_the_counter_is_false_in_the_rest_of_the_loop():
    model = FirstTripRepeats().eval()
    inputs = [(torch.randn(b, 4), torch.tensor(bound)) for b, bound in ((1, 0.0), (2, 100.0), (3, 1.5), (1, 1.9))]
    with torch.no_grad():
        exits, trips = loop_exits(model, inputs), trip_counts(model, inputs)
    assert {"left by a break", "left at its trip bound"} <= set().union(*exits.values()), exits
    assert {1, 5} <= set().union(*trips.values()) and len(set().union(*trips.values())) >= 3, trips
    exported = export_to_ort(model, (torch.randn(2, 4), torch.tensor(0.0)), dynamic_shapes={"x": {0: "batch"}})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


def test_a_counter_test_the_range_leaves_open_stays_a_tensor_condition():
    model = OpenCounterTest()
    inputs = [(torch.randn(n, 3),) for n in (1, 2, 3, 6)] + [(torch.full((5, 3), 9.0),)]
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, (torch.randn(4, 3),), dynamic_shapes={"x": {0: "n"}})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")
