"""Lists appended to under a tensor condition outside any converted loop (issue #47's largest
class in the public-loop corpus): an unrolled loop's ``if c: xs.append(v)``, the first Python
trips of a ``while`` whose test becomes a tensor later (wenet's remove_duplicates_and_blank), a
converted loop inside a branch (CenterTrack's greedy assignment), and the tutorial NMS that reads
``order[0].item()`` and ``(iou <= t).nonzero().squeeze()`` and returns ``torch.LongTensor(keep)``.
Each equals eager on inputs that take every branch and exit, and the ones that cannot convert
are refused in one line at the user's line."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from fxport.errors import ControlFlowError
from tests.controlflow._util import assert_matches_eager, export_to_ort, line_in_source, loop_exits, trip_counts


class UnrolledConditionalAppend(nn.Module):
    """A static loop (4 rows) appending the positive rows, doubled; empty when none is."""

    def forward(self, x):
        kept = []
        for i in range(4):
            if x[i].sum() > 0:
                kept.append(x[i] * 2)
        return torch.stack(kept) if kept else x[:0]


class CollapseRepeatsAndBlanks(nn.Module):
    """wenet-e2e/wenet ``remove_duplicates_and_blank``, on a tensor of ids: the outer test is a
    Python value on the first trip (``0 < len(hyp)``) and a tensor afterwards."""

    def forward(self, hyp):
        new_hyp = []
        cur = 0
        while cur < len(hyp):
            if hyp[cur] != 0:
                new_hyp.append(hyp[cur])
            prev = cur
            while cur < len(hyp) and hyp[cur] == hyp[prev]:
                cur += 1
        return torch.stack(new_hyp) if new_hyp else hyp[:0]


def greedy_assignment(dist):
    matched_indices = []
    if dist.shape[1] == 0:
        return torch.tensor(matched_indices, dtype=torch.int32).reshape(-1, 2)
    for i in range(dist.shape[0]):
        j = dist[i].argmin()
        if dist[i][j] < 1e16:
            dist[:, j] = 1e18
            matched_indices.append([i, j])
    return torch.tensor(matched_indices, dtype=torch.int32).reshape(-1, 2)


class GreedyAssignment(nn.Module):
    """CenterTrack's ``greedy_assignment``: a list appended to in a converted ``for`` that runs
    in one branch of an ``if`` on a size, returned as ``torch.tensor(list).reshape(-1, 2)``."""

    def forward(self, dist):
        return greedy_assignment(dist.clone())


class TutorialNms(nn.Module):
    """The tutorial NMS: ``keep.append(order[0].item())``, ``idx = (iou <= t).nonzero().squeeze()``
    (0-d when one box is left), ``return torch.LongTensor(keep)``."""

    def forward(self, boxes, scores):
        x1, y1, x2, y2 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
        areas = (x2 - x1) * (y2 - y1)
        _, order = scores.sort(0, descending=True)
        keep = []
        while order.numel() > 0:
            if order.numel() == 1:
                i = order.item()
                keep.append(i)
                break
            else:
                i = order[0].item()
                keep.append(i)
            xx1 = x1[order[1:]].clamp(min=x1[i])
            yy1 = y1[order[1:]].clamp(min=y1[i])
            xx2 = x2[order[1:]].clamp(max=x2[i])
            yy2 = y2[order[1:]].clamp(max=y2[i])
            inter = (xx2 - xx1).clamp(min=0) * (yy2 - yy1).clamp(min=0)
            iou = inter / (areas[i] + areas[order[1:]] - inter)
            idx = (iou <= 0.5).nonzero().squeeze()
            if idx.numel() == 0:
                break
            order = order[idx + 1]
        return torch.LongTensor(keep)


class TutorialNmsAppendThenBreak(TutorialNms):
    """The same NMS with the one-box case written ``keep.append(...); break`` and no else: an
    append under a tensor condition in a loop whose state shrinks."""

    def forward(self, boxes, scores):
        x1, y1, x2, y2 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
        areas = (x2 - x1) * (y2 - y1)
        _, order = scores.sort(0, descending=True)
        keep = []
        while order.numel() > 0:
            if order.numel() == 1:
                keep.append(order.item())
                break
            i = order[0].item()
            keep.append(i)
            inter = ((x2[order[1:]].clamp(max=x2[i]) - x1[order[1:]].clamp(min=x1[i])).clamp(min=0)
                     * (y2[order[1:]].clamp(max=y2[i]) - y1[order[1:]].clamp(min=y1[i])).clamp(min=0))
            iou = inter / (areas[i] + areas[order[1:]] - inter)
            idx = (iou <= 0.5).nonzero().squeeze()
            if idx.numel() == 0:
                break
            order = order[idx + 1]
        return torch.LongTensor(keep)


class CountsInsideTheLoop(nn.Module):
    def forward(self, x):
        found = []
        if x[0] > 0:
            found.append(x[0])
        i = 0
        while i < x.shape[0] and x[i] > -5:  # error-line (the loop that grows it)
            if len(found) > 3:
                break
            found.append(x[i])
            i += 1
        return torch.stack(found)


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_an_unrolled_loop_appending_under_a_tensor_condition_equals_eager():
    model = UnrolledConditionalAppend()
    exported = export_to_ort(model, (torch.randn(4, 3),))
    rows = torch.arange(12.0).reshape(4, 3)
    inputs = [(rows - 6,), (-rows - 1,), (rows + 1,), (torch.randn(4, 3, generator=torch.Generator().manual_seed(1)),)]
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Where")


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_appends_in_the_python_trips_of_a_while_join_those_of_its_loop():
    model = CollapseRepeatsAndBlanks()
    example = (torch.tensor([0, 3, 3, 0, 4, 4, 4, 0, 1]),)
    exported = export_to_ort(model, example, dynamic_shapes={"hyp": {0: "t"}})
    inputs = [example, (torch.tensor([0]),), (torch.tensor([2]),), (torch.tensor([5, 5]),), (torch.tensor([0, 0, 0]),),
              (torch.randint(0, 3, (20,), generator=torch.Generator().manual_seed(2)),)]
    assert {1, 2} <= set().union(*trip_counts(model, inputs).values())
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_a_list_grown_in_a_loop_inside_a_branch_on_a_size_equals_eager():
    model = GreedyAssignment()
    example = torch.tensor([[1.0, 1e18, 3.0], [0.5, 2.0, 1e18], [1e18, 1e18, 1e18]])
    exported = export_to_ort(model, (example,), dynamic_shapes={"dist": {0: "n", 1: "m"}})
    inputs = [(example,), (torch.full((2, 2), 1e18),), (torch.tensor([[4.0]]),),
              (torch.rand(5, 4, generator=torch.Generator().manual_seed(3)),), (torch.rand(2, 6),)]
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


def _boxes(*rows):
    return torch.tensor(rows, dtype=torch.float32)


@pytest.mark.parametrize("model", [TutorialNms(), TutorialNmsAppendThenBreak()], ids=["if-else", "append-then-break"])
@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_the_tutorial_nms_equals_eager_when_one_box_is_left_and_at_every_exit(model):
    boxes = _boxes([0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [21, 19, 31, 29], [50, 50, 60, 60])
    scores = torch.tensor([0.7, 0.3, 0.4, 0.6, 0.1])
    exported = export_to_ort(model, (boxes, scores), dynamic_shapes={"boxes": {0: "n"}, "scores": {0: "n"}})
    inputs = [(boxes, scores),
              (_boxes([0, 0, 1, 1]), torch.tensor([0.5])),  # one box: the numel() == 1 break at once
              (_boxes([0, 0, 1, 1], [0, 0, 1, 1]), torch.tensor([0.5, 0.4])),  # all suppressed: idx empty
              (_boxes([0, 0, 1, 1], [5, 5, 6, 6]), torch.tensor([0.5, 0.4])),  # one left: squeeze() to 0-d
              (_boxes([0, 0, 1, 1], [5, 5, 6, 6], [9, 9, 10, 10]), torch.tensor([0.1, 0.9, 0.5]))]
    exits = set().union(*loop_exits(model, inputs).values())
    assert len(exits) >= 2, exits
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


def test_len_inside_a_loop_of_a_list_appended_under_a_condition_before_it_is_refused_at_the_line():
    with pytest.raises(ControlFlowError) as info:
        export_to_ort(CountsInsideTheLoop(), (torch.arange(6.0) - 1,), dynamic_shapes={"x": {0: "n"}})
    message = str(info.value)
    assert "\n" not in message
    match = re.search(r"list 'found' is read \(len\(\)\) inside a data-dependent loop.* at .*test_selected_lists.py:(\d+); ",
                      message)
    assert match, message
    assert int(match.group(1)) == line_in_source(CountsInsideTheLoop.forward, "# error-line")


class ViterbiBacktrack(nn.Module):
    """The BiLSTM-CRF tutorial's Viterbi (pytorch/tutorials advanced_tutorial.py), tags fixed at
    3: per-step lists of arg-maxes read back with ``.item()``, ``for bptrs_t in
    reversed(backpointers)``, ``best_path.pop()`` and ``best_path.reverse()`` after the loop."""

    def forward(self, feats, transitions):
        backpointers = []
        forward_var = feats[0]
        for feat in feats[1:]:
            bptrs_t = []
            for next_tag in range(3):
                bptrs_t.append(torch.argmax(forward_var + transitions[next_tag]).item())
            backpointers.append(bptrs_t)
            forward_var = (forward_var[None] + transitions).max(1).values + feat
        best = torch.argmax(forward_var).item()
        best_path = [best]
        for bptrs_t in reversed(backpointers):
            best = bptrs_t[best]
            best_path.append(best)
        first = best_path.pop()
        best_path.reverse()
        return torch.tensor(best_path), first


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_viterbi_backtrack_over_a_reversed_grown_list_with_pop_and_reverse_equals_eager():
    model = ViterbiBacktrack()
    generator = torch.Generator().manual_seed(4)
    example = (torch.rand(5, 3, generator=generator), torch.rand(3, 3, generator=generator))
    exported = export_to_ort(model, example, dynamic_shapes={"feats": {0: "t"}, "transitions": None})
    inputs = [example] + [(torch.rand(t, 3, generator=generator), torch.rand(3, 3, generator=generator))
                          for t in (1, 2, 9)]
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


class SlicedHistory(nn.Module):
    """pytorch-crf's ``for hist in reversed(history[:seq_ends[idx]])``: a slice of a grown list by
    a traced bound, iterated backwards."""

    def forward(self, emissions, n):
        history = []
        score = emissions[0]
        for i in range(1, emissions.shape[0]):
            score, indices = (score[:, None] + emissions[i][None, :]).max(0)
            history.append(indices)
        best = score.argmax()
        tags = [best]
        for hist in reversed(history[:n]):
            best = hist[best]
            tags.append(best)
        return torch.stack(tags)


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_slice_of_a_grown_list_by_a_traced_bound_iterated_backwards_equals_eager():
    model = SlicedHistory()
    generator = torch.Generator().manual_seed(5)
    example = (torch.rand(6, 4, generator=generator), torch.tensor(3))
    exported = export_to_ort(model, example, dynamic_shapes={"emissions": {0: "t"}, "n": None})
    inputs = [example, (example[0], torch.tensor(0)), (example[0], torch.tensor(5)), (example[0], torch.tensor(9)),
              (torch.rand(1, 4, generator=generator), torch.tensor(2)), (torch.rand(3, 4, generator=generator), torch.tensor(1))]
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


class ItemNotInOptions(nn.Module):
    """icefall's transducer search: ``y = logits.argmax().item()``, ``if y not in (blank_id,
    unk_id): hyp.append(y)`` on ``hyp = [blank_id] * context_size``, then
    ``torch.tensor([hyp[-context_size:]])``."""

    def forward(self, x):
        hyp = [0] * 2
        y = x.argmax().item()
        if y not in (0, 1):
            hyp.append(y)
        return torch.tensor([hyp[-2:]]).reshape(1, 2), torch.tensor(hyp)


def test_a_number_read_with_item_tested_with_in_appends_to_a_list_of_numbers():
    model = ItemNotInOptions()
    example = (torch.tensor([0.1, 0.2, 0.9, 0.3, 0.0, 0.5]),)
    exported = export_to_ort(model, example, dynamic_shapes={"x": {0: "n"}})
    inputs = [example, (torch.tensor([0.9, 0.2, 0.1]),), (torch.tensor([0.1, 0.9]),),
              (torch.tensor([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.9]),), (torch.tensor([0.3]),)]
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Where")  # the if on the number read with .item() was converted
