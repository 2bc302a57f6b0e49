"""Outputs a sort orders are compared tie-tolerantly (fxport/verify/ties.py): rows whose keys are equal
within tolerance may come out in another order, and nothing else may move."""

from __future__ import annotations

import numpy as np
import torch

from fxport.verify.compare import Acceptance, compare
from fxport.verify.ties import align_tied_rows, sorted_output_indices


def detections(scores, labels, boxes):
    return [{"boxes": torch.tensor(boxes, dtype=torch.float32),
             "scores": torch.tensor(scores, dtype=torch.float32),
             "labels": torch.tensor(labels)}]


EAGER = detections([0.9, 0.500004, 0.5, 0.1], [1, 2, 3, 4],
                   [[0, 0, 1, 1], [0, 0, 2, 2], [5, 5, 9, 9], [1, 1, 3, 3]])


def onnx_rows(order, scores=None):
    flat = [EAGER[0]["boxes"].numpy(), EAGER[0]["scores"].numpy(), EAGER[0]["labels"].numpy()]
    moved = [values[list(order)] for values in flat]
    if scores is not None:
        moved[1] = np.asarray(scores, np.float32)
    return moved


def test_rows_of_tied_keys_are_paired_and_the_report_says_so():
    result = compare(EAGER, onnx_rows([0, 2, 1, 3]), Acceptance(sort_keys=frozenset({1})))
    assert result.passed, result.failure()
    assert result.notes == ["output[0..2]: 2 rows with sort keys equal within tolerance (key "
                            "output[1]) came out in another order; compared after pairing them"]


def test_rows_in_eagers_order_need_no_pairing():
    result = compare(EAGER, onnx_rows([0, 1, 2, 3]), Acceptance(sort_keys=frozenset({1})))
    assert result.passed and result.notes == []


def test_rows_whose_keys_differ_never_move():
    # 0.9 and 0.5 are not tied: swapping those rows is a wrong order, not a tie
    result = compare(EAGER, onnx_rows([1, 0, 2, 3]), Acceptance(sort_keys=frozenset({1})))
    assert not result.passed
    reversed_order = compare(EAGER, onnx_rows([3, 2, 1, 0]), Acceptance(sort_keys=frozenset({1})))
    assert not reversed_order.passed


def test_a_tied_row_that_differs_in_content_still_fails():
    wrong = onnx_rows([0, 2, 1, 3])
    wrong[0] = wrong[0].copy()
    wrong[0][1] += 1.0  # the paired box is off by a pixel
    assert not compare(EAGER, wrong, Acceptance(sort_keys=frozenset({1}))).passed


def test_outputs_no_sort_orders_are_compared_position_by_position():
    result = compare(EAGER, onnx_rows([0, 2, 1, 3]), Acceptance(sort_keys=frozenset()))
    assert not result.passed


def test_without_a_program_any_sorted_float_vector_may_be_the_key():
    aligned = align_tied_rows(EAGER, onnx_rows([0, 2, 1, 3]), Acceptance().limits)
    assert [a.tolist() for a in aligned.outputs][2] == [1, 2, 3, 4]


def test_each_image_is_paired_within_its_own_dict():
    two = EAGER + EAGER
    flat = onnx_rows([0, 2, 1, 3]) + onnx_rows([0, 1, 2, 3])
    result = compare(two, flat, Acceptance(sort_keys=frozenset({1, 4})))
    assert result.passed and len(result.notes) == 1 and result.notes[0].startswith("output[0..2]")


def test_sorted_outputs_are_read_from_the_program_through_other_ops_and_subgraphs():
    def double(v):
        return v * 2

    def ascending(v):
        return v.sort().values

    class Net(torch.nn.Module):
        def forward(self, x):
            values, indices = x.sort(descending=True)
            kept = torch.cond(x.sum() > 0, double, ascending, (x,))
            return values + 1, indices, x * 3, kept

    program = torch.export.export(Net(), (torch.randn(5),))
    assert sorted_output_indices(program) == frozenset({0, 1, 3})
