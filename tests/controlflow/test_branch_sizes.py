"""A branch that a size test guards sees that size as at least 1 (issue #47, detection post-processing).

``if found.numel() > 0: first = found[0]`` (BERT's WordPiece), ``while dc.shape[0]: ... if len(dc)
== 1: break; iou = iou(dc[0], dc[1:])`` (ultralytics/yolov3's per-class NMS): the branch, or the
body, runs only where the tested size is at least 1, but torch cannot trace ``found[0]`` in a
``torch.cond`` branch (it would guard on ``u0 >= 1``, a size read from a tensor), and running it
with ``where`` on the other side would index an empty tensor. fxport/controlflow/operators/
size_tests.py pads the tensors of that size to ``max(size, 1)`` on the side where the test holds:
the tensor itself wherever that side is taken, an in-range row where it is not. Every model below
equals eager on inputs that take each side (0 hits, 1, several; 1 box, boxes that all overlap, none
overlap, tied scores), and the file holds the If / Loop it was converted to.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fxport.controlflow import converted_source
from fxport.controlflow.operators.size_tests import padded_to_one, positive_side
from tests.controlflow._util import (assert_every_branch_taken, assert_matches_eager, export_to_ort, loop_exits,
                                     trip_counts)


class FirstHit(nn.Module):
    """WordPiece's ``if found.numel() > 0: cur_substr = found[0]``, on a size read from a tensor."""

    def forward(self, x):
        found = (x > 0.5).nonzero().flatten()
        first = x.new_full((), -1, dtype=torch.long)
        if found.numel() > 0:
            first = found[0] * 10 + found[-1]
        return first


class LastUnlessEmpty(nn.Module):
    """The else of ``== 0`` on a dynamic input size: ``x[0]`` and ``x[-1]`` there."""

    def forward(self, x):
        if x.shape[0] == 0:
            y = x.new_zeros(x.shape[1:])
        else:
            y = x[0] * 2 + x[-1]
        return y


class FirstRowKept(nn.Module):
    """A branch that returns the tested tensor itself (its own size, not the padded one) beside a
    row of it, and writes into it in place."""

    def forward(self, x):
        rows = x[x[:, 0] > 0.5]
        head = x.new_zeros(x.shape[1:])
        if rows.shape[0] >= 1:
            head = rows[0].clone()
            rows[0] = rows[0] * 0
        return rows, head


def _yolo_iou(box, boxes):
    top_left = torch.maximum(box[:2], boxes[:, :2])
    bottom_right = torch.minimum(box[2:4], boxes[:, 2:4])
    inter = (bottom_right - top_left).clamp(min=0).prod(1)
    area = (box[2:4] - box[:2]).prod()
    areas = (boxes[:, 2:4] - boxes[:, :2]).prod(1)
    return inter / (area + areas - inter + 1e-16)


class PerClassNms(nn.Module):
    """ultralytics/yolov3 (2019) ``non_max_suppression`` 'OR': per class ``while dc.shape[0]:
    det.append(dc[:1]); if len(dc) == 1: break; dc = dc[1:][iou < thr]``. Rows x1 y1 x2 y2 score cls."""

    def forward(self, pred):
        pred = pred[(-pred[:, 4]).argsort()]
        det = []
        for c in pred[:, -1].unique():
            dc = pred[pred[:, -1] == c]
            while dc.shape[0]:
                det.append(dc[:1])
                if len(dc) == 1:
                    break
                iou = _yolo_iou(dc[0], dc[1:])
                dc = dc[1:][iou < 0.5]
        det = torch.cat(det)
        return det[(-det[:, 4]).argsort()]


class ShrinkingOrder(nn.Module):
    """py-faster-rcnn's loop on indices: ``while order.numel() > 0: keep order[0]; if
    order.numel() == 1: break; order = rest[iou <= thr]`` (no early return before it)."""

    def forward(self, boxes, scores):
        order = torch.argsort(scores, descending=True)
        keep = []
        while order.numel() > 0:
            current = order[0]
            keep.append(current)
            if order.numel() == 1:
                break
            rest = order[1:]
            iou = _yolo_iou(boxes[current], boxes[rest])
            order = rest[iou <= 0.5]
        return torch.stack(keep)


def _points(n, seed):
    return torch.rand(n, generator=torch.Generator().manual_seed(seed))


def test_a_position_read_under_numel_greater_than_0_equals_eager_with_0_1_and_several_hits():
    model = FirstHit()
    exported = export_to_ort(model, (torch.tensor([0.1, 0.9, 0.2, 0.7]),), dynamic_shapes={"x": {0: "n"}})
    inputs = [(torch.tensor(v),) for v in ([0.1, 0.2], [0.9], [0.1, 0.9, 0.2, 0.7], [0.0], [0.6, 0.7, 0.8])] + \
             [(torch.zeros(0),), (_points(7, 1),)]
    assert_every_branch_taken(model, inputs)
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("If"), exported.ops
    assert any(r.rule == "if-to-cond" for r in exported.records), [r.rule for r in exported.records]


def test_the_else_of_size_equals_0_reads_positions_and_equals_eager_at_0_1_2_and_n():
    model = LastUnlessEmpty()
    exported = export_to_ort(model, (torch.rand(4, 3),), dynamic_shapes={"x": {0: "n"}})
    inputs = [(torch.rand(n, 3),) for n in (0, 1, 2, 5)]
    assert_every_branch_taken(model, inputs)
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("If") or exported.ops.get("Where"), exported.ops
    assert "_fx.size_tests.remembered(_fx.sizes.compare(x.shape[0], '==', 0)" in converted_source(LastUnlessEmpty.forward)


def test_the_tested_tensor_returned_and_written_in_the_branch_keeps_its_own_size():
    model = FirstRowKept()
    exported = export_to_ort(model, (torch.rand(5, 2),), dynamic_shapes={"x": {0: "n"}})
    inputs = [(x,) for x in (torch.tensor([[0.1, 1.0]]), torch.tensor([[0.9, 1.0]]),
                             torch.tensor([[0.9, 1.0], [0.2, 2.0], [0.8, 3.0]]), torch.zeros(0, 2), torch.rand(6, 2))]
    assert_every_branch_taken(model, inputs)
    assert_matches_eager(model, exported, inputs)


def _detections(boxes, scores, classes):
    return torch.cat([torch.tensor(boxes, dtype=torch.float32), torch.tensor(scores)[:, None],
                      torch.tensor(classes, dtype=torch.float32)[:, None]], 1)


_ONE = ([[0, 0, 10, 10]], [0.9], [0])
_ALL_OVERLAP = ([[0, 0, 10, 10], [1, 1, 10, 10], [0, 1, 10, 11]], [0.9, 0.8, 0.7], [0, 0, 0])
_NONE_OVERLAP = ([[0, 0, 10, 10], [20, 20, 30, 30], [40, 40, 50, 50]], [0.5, 0.9, 0.7], [1, 1, 1])
_TIES = ([[0, 0, 10, 10], [30, 30, 40, 40], [0, 0, 10, 9], [31, 30, 40, 40]], [0.8, 0.8, 0.6, 0.7], [0, 0, 0, 0])
_MIXED = ([[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60], [0, 0, 10, 10], [51, 50, 60, 60]],
          [0.9, 0.85, 0.6, 0.7, 0.65], [0, 0, 0, 1, 1])


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02, round eight)
def test_a_per_class_nms_whose_while_shrinks_its_boxes_equals_eager_on_every_exit():
    model = PerClassNms()
    example = (_detections(*_MIXED),)
    exported = export_to_ort(model, example, dynamic_shapes={"pred": {0: "n"}})
    inputs = [(_detections(*case),) for case in (_ONE, _ALL_OVERLAP, _NONE_OVERLAP, _TIES, _MIXED)]
    exits = set().union(*loop_exits(model, inputs).values())
    assert {"left by a break", "left by its test"} <= exits, exits
    assert {1, 2, 3} <= set().union(*trip_counts(model, inputs).values())
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop"), exported.ops


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02, round eight)
def test_a_while_on_numel_greater_than_0_with_a_break_at_one_left_equals_eager():
    model = ShrinkingOrder()

    def case(boxes, scores, _classes):
        return torch.tensor(boxes, dtype=torch.float32), torch.tensor(scores)

    exported = export_to_ort(model, case(*_MIXED), dynamic_shapes={"boxes": {0: "n"}, "scores": {0: "n"}})
    inputs = [case(*c) for c in (_ONE, _ALL_OVERLAP, _NONE_OVERLAP, _TIES, _MIXED)]
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop"), exported.ops


def test_positive_side_reads_the_size_tests_that_imply_a_size_of_at_least_1():
    shape_env = torch.fx.experimental.symbolic_shapes.ShapeEnv()
    u = shape_env.create_unbacked_symint()
    symbol = u.node.expr
    assert positive_side(u > 0) == (frozenset([symbol]), True)
    assert positive_side(u >= 1) == (frozenset([symbol]), True)
    assert positive_side(u != 0) == (frozenset([symbol]), True)
    assert positive_side(u == 0) == (frozenset([symbol]), False)
    assert positive_side(4 * u > 0) == (frozenset([symbol]), True)  # numel() of (u, 4)
    assert positive_side(u > -1) is None  # holds at 0 too
    assert positive_side(u - 1 > 0) is None  # not a product of sizes
    assert positive_side(torch.tensor(True)) is None  # a tensor no size test made


def test_padding_keeps_a_tensor_that_has_rows_and_gives_an_empty_one_a_row_of_zeros():
    x = torch.arange(6.0).reshape(3, 2)
    assert torch.equal(padded_to_one(x, [0]), x)
    assert torch.equal(padded_to_one(torch.zeros(0, 2), [0]), torch.zeros(1, 2))
