"""``t.tolist()`` of an integer vector whose length is a dynamic dimension (issue #47, wenet's
``remove_duplicates_and_blank``): the list is held as the tensor (operators/lists/tensor_items.py).

Items read at a run-time counter are 0-d int64 tensors, ``len()`` the size, ``for v in xs`` a loop
over the items, ``v in xs`` a tensor test, ``torch.tensor(xs)`` the vector; comparisons of items
become the tensor conditions converted ifs and whiles take. Differential: eager vs ONNX Runtime on
lengths the export never saw (1 included), every exit of every loop, both sides of every branch.
Uses a tensor would answer otherwise than the list (``+``, ``sorted``) are refused in one line.
"""

from __future__ import annotations

import pytest
import torch

import fxport
from tests.controlflow import tensor_item_models as m
from tests.controlflow._util import assert_every_branch_taken, assert_matches_eager, export_to_ort, line_in_source, \
    loop_exits, trip_counts

T = torch.export.Dim("t", min=1, max=64)


def _ids(*values) -> tuple:
    return (torch.tensor(values, dtype=torch.long),)


#: runs of 1 and several items, blanks first, last, alone, everywhere; lengths 1 to 9
RUNS = [_ids(0), _ids(5), _ids(2, 2), _ids(0, 0, 0), _ids(1, 2), _ids(0, 1, 1, 0, 2, 2, 2, 3),
        _ids(3, 3, 3, 0, 3, 1, 0, 0, 4), _ids(4, 0, 4)]


@pytest.mark.slow
def test_runs_collapsed_by_counters_over_the_list():
    model = m.CollapseRuns()
    exported = export_to_ort(model, _ids(0, 1, 1, 0, 2, 2), ({0: T},))
    assert exported.ops.get("Loop", 0) >= 2, exported.ops  # the outer while and the run's while inside it
    trips = trip_counts(model, RUNS)
    assert {1, 2, 3} <= set().union(*trips.values()) and max(set().union(*trips.values())) >= 4, trips
    assert {"left by its test"} <= set().union(*loop_exits(model, RUNS).values())
    assert_every_branch_taken(model, RUNS)
    assert_matches_eager(model, exported, RUNS)


@pytest.mark.slow
def test_two_rows_collapsed_in_a_python_for_and_counted():
    model = m.CollapseTwoRows()
    rows = [(torch.tensor([[0], [2]]),), (torch.tensor([[1, 1, 3], [0, 0, 0]]),),
            (torch.tensor([[2, 0, 2, 2, 1], [1, 2, 3, 4, 5]]),)]
    exported = export_to_ort(model, (torch.tensor([[0, 1, 1, 0], [3, 3, 0, 1]]),), ({1: T},))
    assert exported.ops.get("Loop", 0) >= 4, exported.ops
    assert_matches_eager(model, exported, rows)


def test_first_position_by_either_side_of_the_test():
    model = m.FirstPosition()
    stop = torch.tensor(7)
    sets = [(torch.tensor([7]), stop), (torch.tensor([1]), stop), (torch.tensor([1, 7]), stop),
            (torch.tensor([1, 2, 3, 7, 7]), stop), (torch.tensor([1, 2, 3, 4, 5, 6]), stop)]
    exported = export_to_ort(model, (torch.tensor([1, 2, 7, 3]), stop), ({0: T}, None))
    assert exported.ops.get("Loop", 0) == 1, exported.ops
    assert {0, 1, 3, 6} <= set().union(*trip_counts(model, sets).values())
    assert_matches_eager(model, exported, sets)


def test_for_over_the_items_of_an_int32_vector():
    model = m.CountAbove()
    k = torch.tensor(2)
    sets = [(torch.tensor([0]), k), (torch.tensor([5]), k), (torch.tensor([3, 1]), k),
            (torch.tensor([2**31 - 1, 2**31 - 1, 5]), k), (torch.tensor([4, -3, 2, 9, 1, 0, 7]), k)]
    exported = export_to_ort(model, (torch.tensor([1, 4, 2, 6]), k), ({0: T}, None))
    assert exported.ops.get("Loop", 0) == 1, exported.ops
    assert_every_branch_taken(model, sets)
    assert_matches_eager(model, exported, sets)  # int32 items summed as Python ints (int64), no overflow


def test_in_of_the_items_is_a_tensor_condition():
    model = m.ContainsItem()
    x = torch.tensor([1.0, -2.0])
    sets = [(torch.tensor([3]), x), (torch.tensor([1]), x), (torch.tensor([1, 2, 3]), x), (torch.tensor([4, 4]), x)]
    exported = export_to_ort(model, (torch.tensor([1, 3, 2]), x), ({0: T}, None))
    assert exported.ops.get("Where", 0) + exported.ops.get("If", 0) >= 1, exported.ops
    assert_every_branch_taken(model, sets)
    assert_matches_eager(model, exported, sets)


@pytest.mark.parametrize("make, line, words", [
    (m.JoinedList, "ys = xs + [0]", "is joined with +"),
    (m.SortedList, "return torch.tensor(sorted(ids.tolist())", "is iterated outside a for statement"),
])
def test_uses_a_tensor_answers_otherwise_are_refused_at_their_line(make, line, words):
    with pytest.raises(fxport.ConversionError) as info:
        fxport.convert(make(), _ids(1, 2, 3), dynamic_shapes=({0: T},))
    message = str(info.value)
    assert "a list made by .tolist() of a tensor whose length is a dynamic dimension" in message, message
    assert words in message and f":{line_in_source(make.forward, line)}" in message, message
    assert "\n" not in message


B = torch.export.Dim("b", min=1, max=16)
#: batches of 1 to 3 rows, rows of 1 to 7 items: all blank, none blank, mixed
ROWS = [(torch.tensor([[0]]),), (torch.tensor([[4]]),), (torch.tensor([[1, 1], [0, 2], [0, 0]]),),
        (torch.tensor([[1, 0, 0, 2, 2, 0, 3]]),), (torch.tensor([[0, 0, 0], [5, 6, 7]]),)]


@pytest.mark.slow
def test_rows_listed_over_a_dynamic_batch_read_back_flat():
    model = m.RowsListedThenFlattened()
    exported = export_to_ort(model, (torch.tensor([[0, 1, 1, 0], [3, 3, 0, 1]]),), ({0: B, 1: T},))
    assert exported.ops.get("Loop", 0) >= 2, exported.ops  # the rows' loop around each row's loop
    assert {1, 2, 3, 7} <= set().union(*trip_counts(model, ROWS).values())
    assert_every_branch_taken(model, ROWS)
    assert_matches_eager(model, exported, ROWS)


def test_a_python_list_of_grown_lists_read_back_flat():
    model = m.TwoRowsFlattened()
    sets = [(torch.tensor([[0], [2]]),), (torch.tensor([[1, 1, 3], [0, 0, 0]]),), (torch.tensor([[0, 2, 0, 5], [7, 0, 1, 1]]),)]
    exported = export_to_ort(model, (torch.tensor([[0, 1, 1, 0], [3, 3, 0, 1]]),), ({1: T},))
    assert exported.ops.get("Loop", 0) >= 2, exported.ops
    assert_matches_eager(model, exported, sets)


def test_a_list_as_long_as_a_number_read_from_data_is_measured():
    """speechbrain's ``seq.narrow(0, 0, int(...)).argmax(-1).tolist()`` measured with len(): the
    length read from data is the tensor's (it was refused: no file holds such a Python list)."""
    from tests.controlflow import number_index_models as nm

    model = nm.TolistOfDataLength()
    sets = [(torch.randn(1, 4, 3), torch.tensor([0.5])), (torch.randn(3, 7, 3), torch.tensor([0.0, 1.0, 0.3])),
            (torch.randn(2, 1, 3), torch.tensor([1.0, 0.0]))]
    exported = export_to_ort(model, (torch.randn(2, 5, 3), torch.tensor([1.0, 0.4])),
                             ({0: B, 1: torch.export.Dim("frames", min=1, max=16)}, {0: B}))
    assert exported.ops.get("Loop", 0) >= 1, exported.ops
    assert_matches_eager(model, exported, sets)


def test_fxport_helpers_named_like_in_place_methods_are_not_side_effects():
    """``isinstance(v, float)`` becomes ``_fx.lists.tensor_items.isinstance_(v, float)``; its
    trailing ``_`` is not an in-place write to ``_fx.lists.tensor_items`` (espnet2's TTS loop
    and mmdet's assigner were refused as such), while ``buf[i].add_(1)`` still is."""
    import ast

    from fxport.controlflow.facts import side_effects

    helper = ast.parse("if _fx.lists.tensor_items.isinstance_(v, float):\n    y = 1").body
    write = ast.parse("self.bufs[i].add_(1)").body
    assert side_effects(helper) == []
    assert [effect.what for effect in side_effects(write)] == ["in-place write to self.bufs[i] at line 1"]
