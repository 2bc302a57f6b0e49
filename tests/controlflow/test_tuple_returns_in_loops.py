"""``return (a, *rest)`` inside a data-dependent loop, and a tuple first bound inside it (issue #47:
a public bisection script returns ``(middle, *other)`` from inside ``while 0.5 * (upper - lower) >
tol:`` and again after it, ``other = vals[2:]`` first assigned in the body). The carried return
value and the unbound variable are tuples of zeros of the body's types before any trip sets
them; the return flag picks the tuple where a trip returned, and where no trip ran the eager
model raises (``other`` unbound) and so is outside what the file promises."""

from __future__ import annotations

import pytest
import torch

from tests.controlflow._util import assert_matches_eager, export_to_ort, loop_exits, trip_counts


class BisectionTuple(torch.nn.Module):
    """The public script's shape: ``func`` returns three values, the last ones carried as a tuple."""

    def __init__(self, extra: int):
        super().__init__()
        self.extra = extra

    def forward(self, lower, upper, c):
        def func(lower, middle):
            return (lower ** 3 - c, middle ** 3 - c, *[middle ** (k + 2) for k in range(self.extra)])
        middle = 0.5 * (lower + upper)
        while 0.5 * (upper - lower) > 1e-3:
            vals = func(lower, middle)
            other = vals[2:]
            if vals[1] == 0:
                return (middle, *other)
            elif vals[0] * vals[1] < 0:
                upper = middle
            else:
                lower = middle
            middle = 0.5 * (lower + upper)
        return (middle, *other)


class ReturnsCountAndValue(torch.nn.Module):
    """A search that returns ``(index, value)`` from inside the loop, a number and a tensor."""

    def forward(self, x, threshold):
        i = 0
        total = torch.zeros(())
        while i < x.shape[0]:
            total = total + x[i]
            if total > threshold:
                return (total, i)
            i += 1
        return (total, -1)


def _sets():
    t = torch.tensor
    return [(t(0.0), t(2.0), t(1.0)),    # middle hits the root on the first trip: the return inside
            (t(0.0), t(2.0), t(2.0)),    # many trips, left by the test
            (t(0.0), t(0.003), t(0.0)),  # one trip, then the test
            (t(-1.0), t(3.0), t(8.0))]   # the root at a later middle: the return after trips


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
@pytest.mark.parametrize("extra", [1, 2, 0])
def test_a_tuple_returned_inside_a_while_converts_and_equals_eager_on_each_exit(extra):
    model = BisectionTuple(extra)
    sets = _sets()
    assert {1, 2} <= set().union(*trip_counts(model, sets).values())
    exported = export_to_ort(model, (torch.tensor(0.0), torch.tensor(2.0), torch.tensor(3.0)))
    assert exported.ops.get("Loop", 0) == 1, exported.ops
    assert_matches_eager(model, exported, sets)


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_number_and_a_tensor_returned_from_inside_a_loop_over_a_size():
    model = ReturnsCountAndValue()
    sets = [(torch.tensor([0.5, 0.7, 0.2]), torch.tensor(1.0)),   # returns at i = 1
            (torch.tensor([2.0]), torch.tensor(1.0)),             # returns at i = 0
            (torch.tensor([0.1, 0.1]), torch.tensor(5.0)),        # runs out: -1
            (torch.zeros(0), torch.tensor(0.0))]                  # no trip
    exits = loop_exits(model, sets)
    assert len(set().union(*exits.values())) >= 2, exits
    exported = export_to_ort(model, (torch.rand(4), torch.tensor(1.0)), dynamic_shapes={"x": {0: "n"}, "threshold": None})
    assert exported.ops.get("Loop", 0) == 1, exported.ops
    assert_matches_eager(model, exported, sets)


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_tuple_returned_under_an_if_in_a_for_over_a_number_read_from_a_tensor():
    from tests.controlflow import loop_models as m

    model = m.ReturnTupleInTensorLoop()
    sets = [(torch.full((2, 3), 0.5), torch.tensor(0.0)), (torch.full((2, 3), 0.5), torch.tensor(2.0)),
            (torch.full((2, 3), -0.5), torch.tensor(3.0)), (torch.full((2, 3), 0.25), torch.tensor(5.0))]
    exported = export_to_ort(model, (torch.rand(2, 3), torch.tensor(3.0)))
    assert exported.ops.get("Loop", 0) == 1, exported.ops
    assert_matches_eager(model, exported, sets)
