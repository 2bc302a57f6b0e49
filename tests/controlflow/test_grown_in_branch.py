"""A loop whose state grows (a shrinking ``order``, a list read back) inside one branch of an
``if`` on a tensor or size condition: ``torch.cond`` cannot trace it, so both branches run and
are selected with ``where``, the outputs padded to one size and cut back to the taken side's
(issue #47; the public detector wrapper ``_nms`` of the corpus: ``if boxes.numel() == 0:
return torch.empty(0)`` before a py-faster-rcnn loop).

At 0 boxes the untaken side (the loop's first trip reads ``order[0]``) makes ONNX Runtime fail:
verification narrows the range to exclude 0 with a warning, as for any made-up edge size."""

from __future__ import annotations

import torch
from torch import nn

import fxport
from tests.controlflow._util import assert_matches_eager, export_to_ort, loop_exits


class NmsWithEarlyReturn(nn.Module):
    def forward(self, boxes, scores):
        if boxes.numel() == 0:
            return torch.empty((0,), dtype=torch.long)
        order = torch.argsort(scores, descending=True)
        keep = []
        while order.numel() > 0:
            current = order[0]
            keep.append(current)
            if order.numel() == 1:
                break
            rest = order[1:]
            top_left = torch.maximum(boxes[current, :2], boxes[rest, :2])
            bottom_right = torch.minimum(boxes[current, 2:], boxes[rest, 2:])
            inter = (bottom_right - top_left).clamp(min=0).prod(1)
            area = (boxes[:, 2:] - boxes[:, :2]).prod(1)
            iou = inter / (area[current] + area[rest] - inter)
            order = rest[iou <= 0.5]
        return torch.stack(keep)


def _boxes(*rows):
    return torch.tensor(rows, dtype=torch.float32).reshape(-1, 4)


def test_a_shrinking_loop_after_an_early_return_on_a_size_equals_eager_at_every_exit_of_the_loop():
    model = NmsWithEarlyReturn()
    boxes = _boxes([0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [21, 19, 31, 29], [50, 50, 60, 60])
    scores = torch.tensor([0.7, 0.3, 0.4, 0.6, 0.1])
    exported = export_to_ort(model, (boxes, scores), dynamic_shapes={"boxes": {0: "n"}, "scores": {0: "n"}})
    inputs = [(boxes, scores),
              (_boxes([0, 0, 1, 1]), torch.tensor([0.5])),  # one box: the numel() == 1 break
              (_boxes([0, 0, 1, 1], [0, 0, 1, 1]), torch.tensor([0.5, 0.4])),  # the rest suppressed: emptied
              (_boxes([0, 0, 1, 1], [5, 5, 6, 6], [9, 9, 10, 10]), torch.tensor([0.1, 0.9, 0.5]))]
    exits = set().union(*loop_exits(model, inputs).values())
    assert len(exits) >= 2, exits
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop") and exported.ops.get("Where")


def test_at_zero_boxes_verification_narrows_the_range_and_says_so():
    model = NmsWithEarlyReturn()
    boxes = _boxes([0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30])
    result = fxport.convert(model, (boxes, torch.tensor([0.7, 0.3, 0.4])),
                            dynamic_shapes={"boxes": {0: "n"}, "scores": {0: "n"}})
    assert result.verified
    assert any("'n' is narrowed to 1.." in w and "n=0" in w for w in result.warnings), result.warnings
