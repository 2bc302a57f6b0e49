"""A loop body's probe tells torch nothing about sizes (issue #47: a file that broke at run time
and passed verification). fxport runs a loop body once outside the loop to learn its state's
types; that probe is dead code, yet its ``order[0]`` made torch assume the unbacked length of
``order`` is at least 1, and the loop's test ``order.numel() > 0`` was folded to True. An NMS
whose candidates come from a score threshold then ran its body on no box in ONNX Runtime
("Gather ... indices element out of data bounds") whenever no score passed — and verification,
whose inputs always had some box pass, called the file verified."""

from __future__ import annotations

import pytest
import torch

import fxport
import fxport.testing
from tests.controlflow._util import assert_matches_eager, export_to_ort, trip_counts


class ThresholdedNms(torch.nn.Module):
    """The tutorials' NMS after ``order = order[scores[order] > 0.5]``: the loop's state starts
    with a length the data decides, 0 included."""

    def forward(self, boxes, scores):
        order = scores.argsort(descending=True)
        order = order[scores[order] > 0.5]
        keep = boxes[:0]
        while order.numel() > 0:
            i = order[0]
            keep = torch.cat([keep, boxes[i][None]])
            x1 = torch.maximum(boxes[i, 0], boxes[order[1:], 0])
            x2 = torch.minimum(boxes[i, 2], boxes[order[1:], 2])
            inter = (x2 - x1).clamp(min=0)
            iou = inter / ((boxes[i, 2] - boxes[i, 0]) + (boxes[order[1:], 2] - boxes[order[1:], 0]) - inter)
            order = order[1:][iou <= 0.3]
        return keep


BOXES = torch.tensor([[0.0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [40, 40, 50, 50]])


def _nms_inputs():
    """No score above the threshold (0 trips), one (1), overlapping pairs (2, 3), all apart (4)."""
    apart = BOXES.clone()
    apart[1] = torch.tensor([60.0, 60, 70, 70])
    return [(BOXES, torch.tensor([0.1, 0.2, 0.3, 0.4])), (BOXES, torch.tensor([0.9, 0.2, 0.3, 0.4])),
            (BOXES, torch.tensor([0.9, 0.8, 0.7, 0.4])), (BOXES, torch.tensor([0.9, 0.8, 0.7, 0.6])),
            (apart, torch.tensor([0.9, 0.8, 0.7, 0.6])), (BOXES[:2], torch.tensor([0.3, 0.2]))]


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_loop_whose_state_starts_empty_does_not_run_in_the_file():
    model = ThresholdedNms()
    inputs = _nms_inputs()
    assert {0, 1, 2, 3, 4} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, (BOXES, torch.tensor([0.9, 0.8, 0.7, 0.6])),
                             dynamic_shapes={"boxes": {0: "n"}, "scores": {0: "n"}})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_the_verified_file_from_the_api_equals_eager_with_no_box_above_the_threshold():
    model = ThresholdedNms()
    result = fxport.convert(model, (BOXES, torch.tensor([0.9, 0.8, 0.7, 0.6])),
                            dynamic_shapes={"boxes": {0: "n"}, "scores": {0: "n"}})
    assert result.verified
    for args in _nms_inputs():
        fxport.testing.compare_with_eager(model, result.model, args, atol=1e-6, rtol=1e-5)
