"""Branch strategies, round nine (issue #47, loops in the wild), each against eager in ONNX Runtime
on inputs taking both branches, with the file's graph holding its ``If``/``Where``:

- an ``if`` whose side appends to a list grown by a data-dependent loop and may fail where it is
  not taken (an arg-max of the empty slice at a counter past the end, after the other side's
  ``t += 1; continue``: icefall's transducer greedy search) is an ``If`` carrying the list as its
  tensors, not a ``Where`` that runs both sides: in a ``while_loop`` body (the list a count, then
  a buffer) and in a loop whose state grows (the list read inside it);
- an object of the user's class returned from both sides of an ``if`` on a tensor or size
  condition (mmdetection's ``return AssignResult(...)`` under ``if num_gts == 0 or ...``) is
  carried as its fields, through ``cond`` and ``where``; of another class on the other side it is
  refused in one line;
- a value whose rank depends on the condition (``torch.cat(crops)`` beside ``new_zeros((0,))``) is
  refused in one line at the ``if``, with the empty shape to give instead.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import fxport
from tests.controlflow._util import assert_every_branch_taken, assert_matches_eager, export_to_ort, line_in_source

_T = {"x": {0: "T"}}


def _frames(*symbols) -> torch.Tensor:
    """One row of 4 scores per frame, the frame's symbol scoring highest (0: blank)."""
    x = torch.full((len(symbols), 4), -1.0)
    for row, symbol in enumerate(symbols):
        x[row, symbol] = 1.0
    return x


# --- appends beside a side that fails where it is not taken --------------------------------------


class GreedyFrames(nn.Module):
    """Up to two symbols per frame, the frame's arg-max each time (icefall's greedy_search): after
    ``t += 1; continue`` at the last frame, the rest of the body slices ``x[t:t + 1]`` empty."""

    def forward(self, x):
        T = x.shape[0]
        t = 0
        n = 0
        hyp = [0]
        while t < T:
            if n >= 2:
                n = 0
                t += 1
                continue
            y = x[t:t + 1].argmax().item()
            if y != 0:
                hyp.append(y)
                x = x - 0.5
                n += 1
            else:
                n = 0
                t += 1
        return torch.tensor(hyp, dtype=torch.int64)


class GreedyFramesReadingBack(nn.Module):
    """The same with the last symbol read inside the loop (``hyp[-1]``): a loop whose state grows."""

    def forward(self, x):
        T = x.shape[0]
        t = 0
        n = 0
        hyp = [0]
        while t < T:
            if n >= 2:
                n = 0
                t += 1
                continue
            y = (x[t:t + 1] + hyp[-1] * 0.01).argmax().item()
            if y != 0:
                hyp.append(y)
                n += 1
            else:
                n = 0
                t += 1
        return torch.tensor(hyp, dtype=torch.int64)


#: a blank frame, one symbol then blank, two symbols then the per-frame cap (``continue``) at the
#: last frame, symbols on every frame
_GREEDY_INPUTS = [(_frames(0),), (_frames(2),), (_frames(2, 0, 3),), (_frames(1, 1, 0, 2),), (_frames(3, 3),)]


@pytest.mark.slow  # 6 s or more: the fast set stays under 12 minutes
@pytest.mark.parametrize("cls", [GreedyFrames, GreedyFramesReadingBack])
def test_appends_beside_a_side_that_fails_where_it_is_not_taken_are_an_if(cls):
    model = cls()
    assert_every_branch_taken(model, _GREEDY_INPUTS)
    exported = export_to_ort(model, (_frames(2, 0, 3),), dynamic_shapes=_T)
    assert exported.ops.get("If") and exported.ops.get("Loop"), exported.ops
    assert_matches_eager(model, exported, _GREEDY_INPUTS)


# --- user objects out of a branch ------------------------------------------------------------------


class Assignment:
    """A plain result object (mmdetection's AssignResult): a size, tensors, an optional one."""

    def __init__(self, num_gts, gt_inds, max_overlaps, labels=None):
        self.num_gts = num_gts
        self.gt_inds = gt_inds
        self.max_overlaps = max_overlaps
        self.labels = labels
        self._extra_properties = {}


def _assign(overlaps, labels):
    num_gts, num_boxes = overlaps.size(0), overlaps.size(1)
    inds = overlaps.new_full((num_boxes,), -1, dtype=torch.long)
    if num_gts == 0 or num_boxes == 0:
        if num_gts == 0:
            inds[:] = 0
        return Assignment(num_gts, inds, overlaps.new_zeros((num_boxes,)), labels=overlaps.new_full((num_boxes,), -1,
                                                                                                     dtype=torch.long))
    best, which = overlaps.max(dim=0)
    inds[best < 0.3] = 0
    keep = best >= 0.5
    inds[keep] = which[keep] + 1
    got = labels[(inds - 1).clamp(min=0)]
    return Assignment(num_gts, inds, best, labels=torch.where(inds > 0, got, -1))


class AssignOnSizes(nn.Module):
    """``if num_gts == 0 or num_boxes == 0: return Assignment(...)`` (a size condition: an If)."""

    def forward(self, overlaps, labels):
        result = _assign(overlaps, labels)
        return result.gt_inds, result.max_overlaps, result.labels


_OVERLAPS = {"overlaps": {0: "gts", 1: "boxes"}, "labels": {0: "gts"}}


def _overlaps(gts, boxes, seed=0):
    return torch.rand(gts, boxes, generator=torch.Generator().manual_seed(seed))


def _assign_inputs():
    return [(_overlaps(0, 4), torch.zeros(0, dtype=torch.long)), (_overlaps(3, 0), torch.tensor([1, 2, 3])),
            (_overlaps(0, 0), torch.zeros(0, dtype=torch.long)), (_overlaps(2, 5, 1), torch.tensor([4, 7])),
            (_overlaps(3, 6, 2), torch.tensor([1, 2, 3])), (_overlaps(1, 1, 3), torch.tensor([9]))]


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_user_object_returned_from_both_sides_of_a_size_condition_is_carried_as_its_fields():
    model = AssignOnSizes()
    exported = export_to_ort(model, (_overlaps(3, 6), torch.tensor([1, 2, 3])), dynamic_shapes=_OVERLAPS)
    assert exported.ops.get("If"), exported.ops
    assert_matches_eager(model, exported, _assign_inputs())


class ScoredPair:
    def __init__(self, score, tag, count):
        self.score, self.tag, self.count = score, tag, count


class PickOnValue(nn.Module):
    """Cheap sides on a tensor condition, each making a ScoredPair: selected field by field."""

    def forward(self, x):
        if x.sum() > 0:
            pair = ScoredPair(x * 2, "pair", 2)
        else:
            pair = ScoredPair(x - 1, "pair", 3)
        return pair.score * pair.count


def test_user_objects_of_cheap_sides_are_selected_field_by_field():
    model = PickOnValue()
    inputs = [(torch.ones(3),), (-torch.ones(3),), (torch.tensor([0.5, -2.0]),), (torch.zeros(0),)]
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, (torch.ones(3),), dynamic_shapes=_T)
    assert exported.ops.get("Where") and not exported.ops.get("If"), exported.ops
    assert_matches_eager(model, exported, inputs)


class ObjectOfAnotherClass(nn.Module):
    def forward(self, overlaps, labels):
        if overlaps.size(0) == 0:
            result = ScoredPair(overlaps.new_zeros(overlaps.size(1)), "none", 0)
        else:
            result = _assign(overlaps, labels)
        return result.labels if isinstance(result, Assignment) else result.score


class ObjectOfAnotherClassForFewRows(nn.Module):
    """As :class:`ObjectOfAnotherClass`, the other class at fewer than 2 rows: a side sizes above 0
    take too, which the file cannot leave out."""

    def forward(self, overlaps, labels):
        if overlaps.size(0) < 2:
            result = ScoredPair(overlaps.new_zeros(overlaps.size(1)), "none", 0)
        else:
            result = _assign(overlaps, labels)
        return result.labels if isinstance(result, Assignment) else result.score


def test_objects_of_different_classes_on_the_two_sides_are_refused_in_one_line():
    model = ObjectOfAnotherClassForFewRows()
    with pytest.raises(fxport.ConversionError) as error:
        fxport.convert(model, (_overlaps(3, 6), torch.tensor([1, 2, 3])), dynamic_shapes=_OVERLAPS, verify=False)
    message = str(error.value).splitlines()[0]
    assert any(words in message for words in (
        "differently structured values for 'result'", "'result' is a ScoredPair on one side and a Assignment",
        "'result' is a Assignment on one side and a ScoredPair")), message
    assert f":{line_in_source(model.forward, 'if overlaps.size(0) < 2:')}" in message, message


@pytest.mark.slow
def test_objects_of_different_classes_at_size_0_only_export_the_rows_from_1():
    """The other class only at 0 rows: the file covers 1.. (tests/controlflow/test_size_zero_sides.py)."""
    model = ObjectOfAnotherClass()
    result = fxport.convert(model, (_overlaps(3, 6), torch.tensor([1, 2, 3])), dynamic_shapes=_OVERLAPS, verify=False)
    line = line_in_source(model.forward, 'if overlaps.size(0) == 0:')
    assert any(f":{line}" in w and "exported for sizes 1..inf only" in w for w in result.warnings), result.warnings


# --- a rank that depends on the condition ------------------------------------------------------------


class CropsOrNothing(nn.Module):
    """mmtracking's crop_imgs: ``torch.cat(crops)`` (4-d) or ``img.new_zeros((0,))`` (1-d)."""

    def forward(self, img, boxes):
        crops = []
        for box in boxes[boxes[:, -1] > 0.5]:
            x1, x2 = int(box[0]), int(box[1])
            crops.append(F.interpolate(img[:, :, :, x1:x2], size=(2, 2), mode="bilinear", align_corners=False))
        if len(crops) > 0:
            return torch.cat(crops, dim=0)
        return img.new_zeros((0,))


class RankOnValue(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            y = x.sum(0)
        else:
            y = x
        return y + 1


@pytest.mark.parametrize("model, args, dynamic, line, wanted", [
    (CropsOrNothing(), (torch.rand(1, 2, 3, 6), torch.tensor([[0.0, 2.0, 0.9], [2.0, 5.0, 0.1]])), {"img": None, "boxes": {0: "n"}},
     "if len(crops) > 0:", "the value returned is a 4-d tensor"),
    (RankOnValue(), (torch.rand(3, 4),), _T, "if x.sum() > 0:", "'y' is a 1-d tensor (4,) in the true branch but a 2-d"),
])
def test_a_value_whose_rank_depends_on_the_condition_is_refused_at_the_if(model, args, dynamic, line, wanted):
    with pytest.raises(fxport.ConversionError) as error:
        fxport.convert(model, args, dynamic_shapes=dynamic, verify=False)
    message = str(error.value).splitlines()[0]
    assert wanted in message and "its rank would depend on the condition" in message, message
    assert f":{line_in_source(model.forward, line)}" in message, message


def test_the_early_return_object_of_test_size_zero_branches_now_converts_and_equals_eager():
    """tests/controlflow/test_size_zero_branches.py's ObjectOnEmpty, refused before this round."""
    from tests.controlflow.test_size_zero_branches import ObjectOnEmpty, _boxes

    model = ObjectOnEmpty()
    exported = export_to_ort(model, (_boxes(2, 3, 0),), dynamic_shapes={"overlaps": {0: "k"}})
    assert exported.ops.get("If"), exported.ops
    assert_matches_eager(model, exported, [(_boxes(k, 3, seed),) for seed, k in enumerate((0, 1, 2, 5))])
