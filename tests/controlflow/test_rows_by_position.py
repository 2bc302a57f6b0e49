"""Loops over ``enumerate(zip(...))`` of tensors' rows, ``in`` on tensors and on grown lists, and
an ``if`` on a data-dependent size whose branch holds a growing loop (issue #47, met in
eriklindernoren/PyTorch-YOLOv3's ``get_batch_statistics``: ``for pred_i, (pred_box, pred_label) in
enumerate(zip(pred_boxes, pred_labels)):`` with ``if len(detected_boxes) == len(annotations):
break``, ``if pred_label not in target_labels: continue`` and ``box_index not in detected_boxes``,
all under ``if len(annotations):``).

Python's ``zip``/``enumerate`` are iterators: a loop over them ran as Python at the example's
count, and a ``break`` on a tensor could not become a ``while_loop`` ("break on a tensor
condition in a loop over a zip"). They are rows read by position now (operators/loops/rows.py).
Differential: eager vs ONNX Runtime on counts 0, 1, 2 and more along the dynamic dimension, on
inputs that leave the loop by its break and by running out of rows, and that take ``in`` both
ways.
"""

from __future__ import annotations

import pytest
import torch

from fxport.controlflow import converted_source
from tests.controlflow._util import assert_matches_eager, export_to_ort, loop_exits, trip_counts


class FirstMatches(torch.nn.Module):
    """Marks each detection whose box scores above ``thr`` and whose label is positive, at most
    ``limit`` of them: a leading break on a grown list's length, ``found += [i]``."""

    def forward(self, boxes, labels, thr):
        hits = torch.zeros(boxes.shape[0])
        found = []
        for i, (box, label) in enumerate(zip(boxes, labels)):
            if len(found) == 2:
                break
            if box.sum() > thr and label > 0:
                hits[i] = 1
                found += [i]
        return hits


class CountedFromOne(torch.nn.Module):
    """``enumerate(rows, start=1)`` of one tensor, summed with the positions as weights: no break."""

    def forward(self, rows):
        total = torch.zeros(rows.shape[1])
        for k, row in enumerate(rows, start=1):
            total = total + k * row
        return total


class Greedy(torch.nn.Module):
    """YOLOv3's matcher in small: each prediction whose label is among the targets' takes its best
    target once (``in`` on a tensor, ``not in`` on the list grown in the loop), under ``if
    len(targets):`` of a data-dependent count of targets."""

    def forward(self, preds, labels, targets, target_labels):
        hits = torch.zeros(preds.shape[0])
        chosen = target_labels[target_labels >= 0]
        if len(chosen):
            taken = []
            for i, (pred, label) in enumerate(zip(preds, labels)):
                if label not in chosen:
                    continue
                best = (targets[target_labels >= 0] - pred).abs().sum(-1).argmin()
                if best not in taken:
                    hits[i] = 1
                    taken += [best]
        return hits


def _detections(seed: int, n: int):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 4, generator=g), torch.randint(0, 3, (n,), generator=g)


@pytest.mark.slow  # a while_loop capture and its ONNX export: several seconds
def test_enumerate_zip_of_rows_with_a_break_converts_and_equals_eager_at_every_exit():
    model = FirstMatches().eval()
    sets = [(*_detections(seed, n), torch.tensor(thr)) for seed, n, thr in
            ((0, 5, 0.0), (1, 0, 0.0), (2, 1, -9.0), (3, 2, -9.0), (4, 7, -9.0), (5, 6, 9.0), (6, 9, 0.5))]
    (trips,) = trip_counts(model, sets).values()
    assert {0, 1, 2, 3} <= trips, trips  # no rows, one, two, the break on the third
    exits = set().union(*loop_exits(model, sets).values())
    assert {"left by a break", "left at its trip bound"} <= exits, exits
    assert "_fx.loops.rows.enumerate_(_fx.loops.rows.zip_(boxes, labels))" in converted_source(FirstMatches.forward)
    exported = export_to_ort(model, sets[0], dynamic_shapes={"boxes": {0: "n"}, "labels": {0: "n"}, "thr": None})
    assert exported.ops.get("Loop", 0) == 1, exported.ops
    assert_matches_eager(model, exported, sets)


@pytest.mark.slow  # a while_loop capture and its ONNX export: several seconds
def test_enumerate_with_a_start_over_a_dynamic_count_of_rows_is_a_loop():
    model = CountedFromOne().eval()
    sets = [(torch.randn(n, 3, generator=torch.Generator().manual_seed(n)),) for n in (4, 0, 1, 2, 9)]
    exported = export_to_ort(model, sets[0], dynamic_shapes={"rows": {0: "n"}})
    assert exported.ops.get("Loop", 0) == 1, exported.ops
    assert_matches_eager(model, exported, sets)


@pytest.mark.slow  # a growing loop inside an If, captured on its own: several seconds
def test_in_on_a_tensor_and_on_the_grown_list_under_a_data_dependent_size_test_equals_eager():
    model = Greedy().eval()

    def case(seed, n, labels_of_targets):
        g = torch.Generator().manual_seed(seed)
        t = torch.tensor(labels_of_targets, dtype=torch.long)
        return torch.randn(n, 2, generator=g), torch.randint(0, 3, (n,), generator=g), \
            torch.randn(len(labels_of_targets), 2, generator=g), t

    sets = [case(0, 5, [0, 2, -1]), case(1, 4, [-1, -1]), case(2, 0, [1]), case(3, 1, [0, 1, 2]),
            case(4, 8, [2, -1, 1, 0]), case(5, 6, [1])]
    outputs = [model(*s) for s in sets]
    assert any(o.sum() == 0 for o in outputs) and any(0 < o.sum() < len(o) for o in outputs), outputs
    source = converted_source(Greedy.forward)
    assert "_fx.not_(_fx.in_(label, chosen))" in source and "_fx.not_(_fx.in_(best, taken))" in source, source
    exported = export_to_ort(model, sets[0], dynamic_shapes={"preds": {0: "n"}, "labels": {0: "n"},
                                                             "targets": {0: "m"}, "target_labels": {0: "m"}})
    assert exported.ops.get("If", 0) >= 1 and exported.ops.get("Loop", 0) >= 1, exported.ops
    assert_matches_eager(model, exported, sets)


def test_zip_and_enumerate_outside_export_are_pythons():
    from fxport.controlflow.operators.loops.rows import enumerate_, zip_

    assert list(enumerate_(zip_([1, 2, 3], "ab"), start=2)) == [(2, (1, "a")), (3, (2, "b"))]
    rows = torch.arange(6).reshape(3, 2)
    assert [tuple(t.tolist() for t in r) for r in zip_(rows)] == [([0, 1],), ([2, 3],), ([4, 5],)]
