"""A loop whose state grows (a shrinking ``order``, a list read back) inside one branch of an
``if`` on a tensor or size condition (the corpus's detector wrapper ``_nms``: ``if
boxes.numel() == 0: return torch.empty(0)`` before a py-faster-rcnn loop) is refused in one line
at the loop. ``torch.cond`` cannot trace such a loop, and running both branches with ``where``
would run the loop on the side eager does not take, on values eager never computes: a ``while``
there may not end, and ONNX Runtime failed on such a side in the fuzzer's CI profile (a loop
after a loop that returns). Issue #47 keeps the class open."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from fxport.errors import ControlFlowError
from tests.controlflow._util import export_to_ort, line_in_source


class NmsWithEarlyReturn(nn.Module):
    def forward(self, boxes, scores):
        if boxes.numel() == 0:
            return torch.empty((0,), dtype=torch.long)
        order = torch.argsort(scores, descending=True)
        keep = []
        while order.numel() > 0:  # error-line
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


def test_a_shrinking_loop_inside_a_branch_is_refused_in_one_line_at_the_loop():
    boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30]], dtype=torch.float32)
    with pytest.raises(ControlFlowError) as info:
        export_to_ort(NmsWithEarlyReturn(), (boxes, torch.tensor([0.7, 0.3, 0.4])),
                      dynamic_shapes={"boxes": {0: "n"}, "scores": {0: "n"}})
    message = str(info.value)
    assert "\n" not in message
    match = re.search(r"a loop whose state grows inside a converted branch .* at .*test_grown_in_branch.py:(\d+); ", message)
    assert match, message
    assert int(match.group(1)) == line_in_source(NmsWithEarlyReturn.forward, "# error-line")
