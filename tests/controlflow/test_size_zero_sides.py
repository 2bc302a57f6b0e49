"""An early return at size 0 whose value has another structure or rank than the function's other
return (issue #47: amdegroot/ssd.pytorch's ``nms``: ``if boxes.numel() == 0: return keep`` beside
the loop's ``return keep, count``). No graph computes a value whose structure or rank depends on a
size, so the ``if`` was refused ("if: the branches produce differently structured values"). Where
the test is true only at size 0 of a declared dynamic dimension, the capture exports that
dimension from 1 (fxport/capture/size_zero_branches.py): there the side is never taken, so the
file is exact on its range; the warning names the ``if``'s line and the range 1..inf, the ONNX
metadata records it, and verification makes up no set of size 0. A size read from data, and a
test true at sizes above 0, stay refused with the message they had."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

import fxport
from fxport.errors import ControlFlowError
from tests.controlflow._util import assert_matches_eager, export_to_ort, line_in_source, loop_exits, trip_counts


def _greedy(scores):
    """ssd.pytorch's ``nms`` reduced: ``keep`` for no scores, else ``keep, count`` after a loop
    whose carried ``order`` is filtered (its size read from data) on every trip."""
    keep = scores.new_zeros(scores.shape[0], dtype=torch.long)
    if scores.numel() == 0:
        return keep
    order = scores.argsort(descending=True)
    count = 0
    while order.numel() > 0:
        i = order[0]
        keep[count] = i
        count += 1
        rest = order[1:]
        order = rest[(scores[rest] - scores[i]).abs() > 0.25]
    return keep, count


class KeepCount(torch.nn.Module):
    """The caller unpacks two values: eager itself fails at 0 scores."""

    def forward(self, scores):
        ids, count = _greedy(scores)
        return scores[ids[:count]] * 2


def _rows_or_empty(x):
    """``len(x) == 0`` → a 1-d empty tensor, else the 2-d rows a loop appends (mmtracking's
    ``crop_imgs`` shape): another rank on each side."""
    if len(x) == 0:
        return x.new_zeros((0,))
    rows = []
    for row in x:
        rows.append(row[:2] * row[2:3])
    return torch.stack(rows)


class RowsOrEmpty(torch.nn.Module):
    def forward(self, x):
        return _rows_or_empty(x) + 1


class EmptyOrPair(torch.nn.Module):
    """The size-0 side is the else of ``x.shape[0] > 0``; no loop: the where refuses the structure."""

    def forward(self, x):
        if x.shape[0] > 0:
            return x.cumsum(0), x.amax(0)
        return x.sum(0)


class FoundOrPair(torch.nn.Module):
    """The size tested is read from data (a filtered count), not a declared dimension: refused."""

    def forward(self, x):
        found = x[x > 0]
        if found.numel() == 0:
            return found
        total = found[:1] * 0
        while found.numel() > 0:
            total = total + found[:1]
            found = found[1:][found[1:] > found[0]]
        return total, found


class FewOrPair(torch.nn.Module):
    """``x.shape[0] < 2`` is true at 1 as well: leaving that side out would lose size 1, refused."""

    def forward(self, x):
        if x.shape[0] < 2:
            return x * 2
        return x[:1], x[1:]


_SCORE_SETS = [
    torch.tensor([0.9]),                              # one score: 1 trip
    torch.tensor([0.9, 0.8]),                         # the rest filtered out after trip 1
    torch.tensor([0.9, 0.1]),                         # 2 trips
    torch.tensor([0.3, 0.9, 0.6, 0.05, 0.5]),         # several trips, some filtered
    torch.linspace(0.0, 1.0, 7),                      # N trips
]


def _convert(model, example, dynamic_shapes, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fxport.convert(model, example, dynamic_shapes=dynamic_shapes, **kwargs)


def _ranges(result) -> dict:
    found = [p.value for p in result.model.metadata_props if p.key == "fxport.dynamic_ranges"]
    return json.loads(found[0]) if found else {}


def _narrowing(result, name: str) -> str:
    notes = [w for w in result.warnings if f"dynamic dimension {name!r}" in w]
    assert len(notes) == 1, result.warnings
    return notes[0]


@pytest.mark.slow
def test_an_early_return_of_another_structure_beside_a_grown_loop_converts_from_size_1():
    model = KeepCount()
    result = _convert(model, (torch.tensor([0.3, 0.9, 0.6, 0.05, 0.5]),), {"scores": {0: "n"}})
    assert result.verified
    line = line_in_source(_greedy, "if scores.numel() == 0:")
    note = _narrowing(result, "n")
    assert f"test_size_zero_sides.py:{line}" in note and "exported for sizes 1..inf only (declared 0..inf)" in note
    assert _ranges(result)["n"]["valid"] == [1, None] and _ranges(result)["n"]["declared"] == [0, None]
    assert all(row.input_shapes[0][0] >= 1 for row in result.verification), [r.name for r in result.verification]
    exported = export_to_ort(model, (torch.tensor([0.3, 0.9, 0.6, 0.05, 0.5]),), dynamic_shapes={"scores": {0: "n"}})
    inputs = [(scores,) for scores in _SCORE_SETS]
    assert {1, 2, 3} <= set().union(*trip_counts(model, inputs).values())
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop"), exported.ops


def test_the_loop_is_left_by_its_test_after_each_number_of_trips():
    """Every way the loop ends inside the range: emptied after 1 trip, after 2, after N."""
    model = KeepCount()
    exits = loop_exits(model, [(scores,) for scores in _SCORE_SETS])
    assert exits and all(exits.values()), exits


@pytest.mark.slow
def test_an_empty_result_of_another_rank_beside_a_grown_list_converts_from_size_1():
    model = RowsOrEmpty()
    example = (torch.rand(4, 3, generator=torch.Generator().manual_seed(0)),)
    result = _convert(model, example, {"x": {0: "n"}})
    assert result.verified
    assert "exported for sizes 1..inf only" in _narrowing(result, "n")
    assert all(row.input_shapes[0][0] >= 1 for row in result.verification)
    exported = export_to_ort(model, example, dynamic_shapes={"x": {0: "n"}})
    inputs = [(torch.rand(n, 3, generator=torch.Generator().manual_seed(n)),) for n in (1, 2, 3, 8)]
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop") or exported.ops.get("Scan"), exported.ops


@pytest.mark.slow
def test_a_size_0_input_set_the_user_gives_is_still_refused():
    """Size 0 is outside the file's range; a set of it asked for by the user cannot pass."""
    model = RowsOrEmpty()
    with pytest.raises(fxport.ConversionError) as caught:
        _convert(model, (torch.rand(4, 3),), {"x": {0: "n"}}, verify_inputs=[(torch.rand(0, 3),)])
    message = str(caught.value)
    assert "\n" not in message and "size 0 is outside the file's range" in message, message
    line = line_in_source(_rows_or_empty, "if len(x) == 0:")
    assert f"narrowed by the model at tests/controlflow/test_size_zero_sides.py:{line}" in message, message


def test_the_size_0_side_may_be_the_else_of_a_positive_size_test():
    model = EmptyOrPair()
    result = _convert(model, (torch.rand(3, 2),), {"x": {0: "n"}})
    assert result.verified and "exported for sizes 1..inf only" in _narrowing(result, "n")
    exported = export_to_ort(model, (torch.rand(3, 2),), dynamic_shapes={"x": {0: "n"}})
    assert_matches_eager(model, exported, [(torch.rand(n, 2),) for n in (1, 2, 5)])


@pytest.mark.slow
def test_a_declared_minimum_of_1_needs_no_narrowing():
    model = KeepCount()
    result = _convert(model, (torch.tensor([0.3, 0.9, 0.6]),), {"scores": {0: torch.export.Dim("n", min=1)}})
    assert result.verified
    assert not any("narrowed" in w for w in result.warnings), result.warnings


def test_a_size_read_from_data_is_not_narrowed_and_stays_refused():
    with pytest.raises(ControlFlowError) as caught:
        _convert(FoundOrPair(), (torch.tensor([0.5, -1.0, 2.0, 0.7]),), {"x": {0: "n"}})
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("if: the branches produce differently structured values"), message
    assert f"test_size_zero_sides.py:{line_in_source(FoundOrPair.forward, 'if found.numel() == 0:')}" in message


def test_a_size_test_true_above_0_is_not_narrowed_and_stays_refused():
    with pytest.raises(ControlFlowError) as caught:
        _convert(FewOrPair(), (torch.rand(4, 2),), {"x": {0: "n"}})
    message = str(caught.value)
    assert "\n" not in message and message.startswith("if: the branches produce differently structured values"), message
