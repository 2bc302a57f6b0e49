"""Lists grown in a data-dependent loop whose elements' lengths are data, read whole (issue #47:
pytorch_HMM's and pytorch-crf's Viterbi backtracks, ``z_star.append(z_star_i)`` per batch row, read
as ``torch.cat([torch.tensor(z, dtype=torch.long) for z in z_star])``).

Such a list is carried as its elements' concatenation: in a loop whose state grows (an ONNX Loop
around its body) the concatenation so far along the axis whose length is data, and the number of
elements; in a ``while_loop`` the two passes of ``count`` mode. A list appended as an element is its
stack. ``torch.cat`` of it, or of a comprehension whose element commutes with concatenation
(``torch.tensor(z, dtype=...)``, ``z.long()``), is exact; a read of one element is refused at its
line. Differential: eager vs ONNX Runtime on batches and lengths the export never saw (element
lengths 0, 1, 2, N; trip counts 0, 1, 2, N), the graph holding its Loops.
"""

from __future__ import annotations

import re

import pytest
import torch

from fxport.errors import ControlFlowError
from tests.controlflow import ragged_list_models as m
from tests.controlflow._util import assert_matches_eager, export_to_ort, line_in_source, loop_exits, trip_counts

BATCH = torch.export.Dim("batch", min=1, max=64)
TIME = torch.export.Dim("time", min=2, max=64)


def _psi(batch: int, time: int, seed: int, states: int = 3) -> torch.Tensor:
    return torch.randint(0, states, (batch, time, states), generator=torch.Generator().manual_seed(seed))


def _rand(*shape, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


#: (psi, lens): batch 1 and several, each row's path 1, 2, 3, N long (backtracks of 0, 1, 2, N - 1 steps)
BACKTRACKS = [(_psi(b, t, seed=10 * b + t), torch.tensor(lens)) for b, t, lens in (
    (1, 1, [1]), (3, 2, [2, 1, 2]), (1, 3, [3]), (2, 8, [8, 5]), (5, 6, [1, 6, 2, 3, 6]))]


def _backtrack_trips_covered(model) -> None:
    trips = trip_counts(model, BACKTRACKS)
    assert {0, 1, 2} <= set().union(*trips.values()) and max(set().union(*trips.values())) >= 5, trips


@pytest.mark.slow
def test_list_of_lists_grown_at_the_front_read_as_one_tensor():
    model = m.BacktrackPerRow()
    exported = export_to_ort(model, (_psi(2, 5, seed=0), torch.tensor([4, 3])), ({0: BATCH, 1: TIME}, {0: BATCH}))
    assert exported.ops.get("Loop", 0) >= 2, exported.ops  # the rows' loop around each row's backtrack
    assert any("grow" in r.detail and "paths" in r.detail for r in exported.records), [r.detail for r in exported.records]
    _backtrack_trips_covered(model)
    assert_matches_eager(model, exported, BACKTRACKS)


@pytest.mark.slow
def test_tensors_of_data_dependent_length_concatenated_and_counted():
    model = m.BacktrackTensorPerRow()
    exported = export_to_ort(model, (_psi(2, 5, seed=0), torch.tensor([4, 3])), ({0: BATCH, 1: TIME}, {0: BATCH}))
    assert exported.ops.get("Loop", 0) >= 2, exported.ops
    assert_matches_eager(model, exported, BACKTRACKS)


#: (x, lens): rows whose lists hold 0, 1, 2 and all of the steps
MAYBE_EMPTY = [(_rand(b, t, 4, seed=b + t), torch.tensor(lens)) for b, t, lens in (
    (1, 2, [0]), (1, 3, [1]), (3, 4, [2, 0, 4]), (4, 7, [7, 1, 0, 2]), (2, 5, [0, 0]))]


@pytest.mark.slow
def test_lists_that_may_be_empty_read_with_a_dtype():
    model = m.ListsThatMayBeEmpty()
    exported = export_to_ort(model, (_rand(2, 5, 4, seed=0), torch.tensor([3, 2])), ({0: BATCH, 1: TIME}, {0: BATCH}))
    assert exported.ops.get("Loop", 0) >= 2, exported.ops
    trips = set().union(*trip_counts(model, MAYBE_EMPTY).values())
    assert {0, 1, 2, 7} <= trips, trips
    assert_matches_eager(model, exported, MAYBE_EMPTY)


def _columns(b, length, n, steps, seed):
    return _rand(b, 3, length, seed=seed), torch.tensor(n), torch.tensor(steps)


#: (x, n, steps): slices of 0, 1, 2 and all columns; 0, 1, 2 and N trips
COLUMNS = [_columns(1, 4, [2], 0, 1), _columns(1, 4, [0], 1, 2), _columns(2, 3, [1, 3], 2, 3),
           _columns(3, 6, [6, 0, 2], 7, 4), _columns(4, 5, [1, 2, 0, 5], 5, 5)]


@pytest.mark.slow
@pytest.mark.parametrize("make", [m.ColumnsWhileHistoryGrows, m.ColumnsInsertedAtTheFront])
def test_slices_along_an_inner_axis_in_a_loop_whose_state_grows(make):
    model = make()
    example = _columns(2, 5, [3, 1], 3, 0)
    length = torch.export.Dim("length", min=2, max=64)
    exported = export_to_ort(model, example, ({0: BATCH, 2: length}, {0: BATCH}, None))
    assert exported.ops.get("Loop", 0) == 1, exported.ops
    assert any("grow" in r.detail and "parts" in r.detail for r in exported.records), [r.detail for r in exported.records]
    trips = set().union(*trip_counts(model, COLUMNS).values())
    assert {0, 1, 2, 7} <= trips, trips
    assert set().union(*loop_exits(model, COLUMNS).values()), "the loop's test ends every set"
    assert_matches_eager(model, exported, COLUMNS)


def _refusal(model, example, dynamic) -> str:
    with pytest.raises(ControlFlowError) as info:
        export_to_ort(model, example, dynamic)
    message = str(info.value)
    assert "\n" not in message, message
    return message


@pytest.mark.slow
@pytest.mark.parametrize("model, text, pattern", [
    (m.FirstPathRead, "first = paths[0]",
     r"paths\[0\] of list 'paths', grown in a data-dependent loop with lists of different lengths as elements, is not "
     r"supported: only their concatenation is kept at .*ragged_list_models.py:{line}; read the list whole as torch.cat"),
    (m.PathsReversedEach, "p.flip(0) for p in paths",
     r"iterating over the elements of list 'paths'.* at .*ragged_list_models.py:{line}; read the "
     r"list whole as torch.cat\(paths\)"),
    (m.UntypedListsThatMayBeEmpty, "torch.tensor(tags) for tags",
     r"an element list may be empty, and torch.tensor of an empty list is float32.* at "
     r".*ragged_list_models.py:{line}; pass dtype=torch.int64 to torch.tensor"),
])
def test_other_reads_are_refused_at_their_line(model, text, pattern):
    line = line_in_source(model.forward, text)
    if model is m.UntypedListsThatMayBeEmpty:
        example, dynamic = (_rand(2, 5, 4, seed=0), torch.tensor([3, 2])), ({0: BATCH, 1: TIME}, {0: BATCH})
    else:
        example, dynamic = (_psi(2, 5, seed=0), torch.tensor([4, 3])), ({0: BATCH, 1: TIME}, {0: BATCH})
    message = _refusal(model(), example, dynamic)
    assert re.search(pattern.format(line=line), message), message


def test_stack_of_slices_of_changing_length_is_refused_at_its_line():
    model = m.SlicesStacked()
    line = line_in_source(model.forward, "torch.stack(parts)")
    message = _refusal(model, (_rand(2, 5, seed=0), torch.tensor([3, 3]), torch.tensor(2)), ({1: TIME}, None, None))
    assert re.search(rf"torch.stack of list 'parts', .*tensors of different lengths.* at .*ragged_list_models.py:{line}; "
                     r"read the list whole as torch.cat\(parts\)", message), message


def _mask(lengths: list[int], time: int) -> torch.Tensor:
    return torch.arange(time)[:, None] < torch.tensor(lengths)[None, :]


#: (emissions, mask): time 1 (no forward trip, paths of 1), 2, 3, 7; rows of lengths 1, 2, N; batch 1..4
HISTORIES = [(_rand(t, len(lengths), 4, seed=t + len(lengths)), _mask(lengths, t)) for t, lengths in (
    (1, [1]), (2, [2, 1, 2]), (3, [3]), (7, [7, 4]), (5, [1, 5, 2, 3]))]


@pytest.mark.slow
def test_a_list_grown_before_read_in_the_body_of_a_loop_whose_state_grows():
    model = m.BacktrackThroughHistory()
    exported = export_to_ort(model, (_rand(4, 2, 4, seed=0), _mask([4, 3], 4)),
                             ({0: TIME, 1: BATCH}, {0: TIME, 1: BATCH}))
    assert exported.ops.get("Loop", 0) >= 3, exported.ops  # the forward loop, the rows' loop, each row's backtrack
    trips = set().union(*trip_counts(model, HISTORIES).values())
    assert {0, 1, 2, 6} <= trips, trips
    assert_matches_eager(model, exported, HISTORIES)


def test_a_list_of_lists_returned_is_refused_with_what_to_return():
    model = m.PathsReturned()
    line = line_in_source(model.forward, "for i in range(psi.shape[0])")
    message = _refusal(model, (_psi(2, 5, seed=0), torch.tensor([4, 3])), ({0: BATCH, 1: TIME}, {0: BATCH}))
    assert re.search(rf"the model returns list 'paths', whose number of elements and their lengths depend on the data at "
                     rf".*ragged_list_models.py:{line}; return torch.cat\(\[torch.tensor\(z\) for z in paths\]\) and a "
                     r"tensor of the elements' lengths", message), message


def _prefixes(b, length, n, steps, seed):
    return _rand(b, length, seed=seed), torch.tensor(n), torch.tensor(steps)


#: (x, n, steps): inner trips 0, 1, 2, N; outer trips 0, 1, 2, N
PREFIXES = [_prefixes(1, 3, [2], 0, 1), _prefixes(1, 3, [1], 1, 2), _prefixes(3, 4, [2, 0, 4], 3, 3),
            _prefixes(2, 6, [6, 3], 5, 4), _prefixes(4, 2, [0, 2, 1, 0], 2, 5)]


@pytest.mark.slow
def test_an_inner_loop_appends_to_the_concatenation():
    model = m.PrefixesFromAnInnerLoop()
    length = torch.export.Dim("length", min=2, max=64)
    exported = export_to_ort(model, _prefixes(2, 5, [3, 2], 3, 0), ({0: BATCH, 1: length}, {0: BATCH}, None))
    assert exported.ops.get("Loop", 0) >= 2, exported.ops
    trips = trip_counts(model, PREFIXES)
    assert all({0, 1, 2} <= t and max(t) >= 5 for t in trips.values()), trips
    assert_matches_eager(model, exported, PREFIXES)
