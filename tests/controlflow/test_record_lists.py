"""A list of records (namedtuples of numbers) grown in a data-dependent loop, reversed and read
back field by field (issue #47, found in pytorch/audio's forced-alignment tutorial ``backtrack``:
``path = [Point(j, t, score)]``, ``path.append(Point(j, t, prob))`` in ``while j > 0``,
``path[::-1]``, then ``torch.tensor([[p.token_index, p.time_index] for p in path])``).

A namedtuple before the loop used to leak a TypeError (its constructor takes fields, not an
iterable), ``[::-1]`` of a grown list a tensor's "step must be greater than zero", and the
comprehension a refusal. The list is now the stack of its records' rows; ``path[::-1]`` is the
rows last first, and a comprehension that reads only fields is every element at once, each field
a column of the dtype ``torch.tensor`` gives its numbers. Differential: eager vs ONNX Runtime on
walks of 1, 2 and 5 steps, ended by either side of the ``and``; walks of no step (one row or one
column, which this test's ``min=1`` ranges leave out) are tests/controlflow/test_zero_trip_size_loops.py's.
"""

from __future__ import annotations

from collections import namedtuple

import pytest
import torch

from fxport.controlflow import converted_source
from tests.controlflow._util import assert_matches_eager, export_to_ort, trip_counts

Step = namedtuple("Step", ["index", "time", "score"])


class WalkBack(torch.nn.Module):
    """From the last column back to column 0, one step left where the row's value beats the one
    above it, recording (column, time, value) at every step; returned oldest first."""

    def forward(self, table):
        t, j = table.size(0) - 1, table.size(1) - 1
        path = [Step(j, t, table[t, j].item())]
        while j > 0 and t > 0:
            t -= 1
            if table[t, j] > table[t, j - 1]:
                j -= 1
            path.append(Step(j, t, table[t, j].item()))
        path = path[::-1]
        return (torch.tensor([[p.index, p.time] for p in path], dtype=torch.long),
                torch.tensor([p.score * 2 for p in path]))


def _tables():
    gen = torch.Generator().manual_seed(0)
    return [(torch.tensor([[0.0, 0.0], [1.0, 0.0]]),),  # one step, then t reaches 0
            (torch.tensor([[0.0, 0.0, 0.0], [0.0, 2.0, 1.0], [0.0, 1.0, 2.0]]),),  # two steps
            (torch.tensor([[2.0, 1.0, 0.0]]).repeat(6, 1),),  # never left: 5 steps, until t reaches 0
            (torch.rand(6, 3, generator=gen),), (torch.rand(3, 6, generator=gen),)]


@pytest.mark.slow  # 4.5 s or more (2026-12-03, third session): it runs with the slow set in CI
def test_records_grown_in_a_loop_reversed_and_read_by_field_equal_eager_at_every_trip_count():
    model = WalkBack()
    tables = _tables()
    trips = set().union(*trip_counts(model, tables).values())
    assert {1, 2} <= trips and max(trips) > 2, trips  # no step: test_zero_trip_size_loops.py
    assert "_fx.lists.columns.tensor_of(lambda p: [p.index, p.time], path, dtype=torch.long)" in converted_source(WalkBack.forward)
    exported = export_to_ort(model, tables[-2], dynamic_shapes=({0: torch.export.Dim("t", min=1, max=64),
                                                                 1: torch.export.Dim("j", min=1, max=64)},))
    assert exported.ops.get("Loop"), exported.ops
    assert_matches_eager(model, exported, tables)
    ids, scores = model(*tables[3])
    assert ids.dtype == torch.long and scores.dtype == torch.float32
