"""A branch or loop on a dynamic size being 0, where the size is held in a name (issue #47:
mmdetection's ``num_gts, num_bboxes = overlaps.size(0), overlaps.size(1)`` then ``if num_gts == 0
or num_bboxes == 0: return``). The size-oblivious capture answers ``n == 0`` as False without a
guard, so the ``if`` kept one side and the file was wrong (or failed in ONNX Runtime) at size 0.
A comparison that reads a name bound to a size (or a parameter a caller passes a size in) is now
decided by ``_fx.sizes.compare`` like ``x.shape[0] == 0``: a tensor condition where the declared
range holds 0, so each side runs its own code. Every model equals eager at sizes 0, 1, 2 and N
along each dynamic dimension, on both sides of each size test, and the file holds the If / Where
/ Loop; a declared ``min=1`` keeps the test Python (no branch for 0 in the file)."""

from __future__ import annotations

import pytest
import torch

import fxport
from fxport.controlflow import converted_source
from tests.controlflow._util import assert_every_branch_taken, assert_matches_eager, export_to_ort, line_in_source, trip_counts


class EarlyReturnOnEmpty(torch.nn.Module):
    """mmdetection's ``assign_wrt_overlaps`` reduced to tensors: the early return for no ground
    truth or no boxes (a nested ``if num_gts == 0``), else a ``max`` over the ground truths,
    which fails on 0 of them (in eager and ONNX Runtime alike)."""

    def forward(self, overlaps):
        num_gts, num_bboxes = overlaps.size(0), overlaps.size(1)
        assigned = overlaps.new_full((num_bboxes,), -1, dtype=torch.long)
        if num_gts == 0 or num_bboxes == 0:
            max_overlaps = overlaps.new_zeros((num_bboxes,))
            if num_gts == 0:
                assigned[:] = 0
            return assigned, max_overlaps
        max_overlaps, argmax = overlaps.max(dim=0)
        positive = max_overlaps >= 0.5
        assigned[positive] = argmax[positive] + 1
        return assigned, max_overlaps


class ProductOfSizes(torch.nn.Module):
    """mmdetection's ``bbox_overlaps``: ``rows = a.size(-2)`` ... ``if rows * cols == 0: return``
    an empty result; cheap sides (a ``where``)."""

    def forward(self, a, b):
        rows = a.size(-2)
        cols = b.size(-2)
        if rows * cols == 0:
            return a.new_zeros((rows, cols))
        return (a[:, None, :] - b[None, :, :]).abs().sum(-1) + 1.0


def _mean_rows(x, n):
    """A helper given the size by its caller: ``n`` is a parameter here."""
    if n == 0:
        return x.new_zeros(x.shape[1])
    return x.sum(0) / n


class SizeFromCaller(torch.nn.Module):
    def forward(self, x):
        return _mean_rows(x, x.shape[0])


class WhileBelowSize(torch.nn.Module):
    """``n = len(x); i = 0; while i < n:`` — 0 trips at size 0 (torch answers ``0 < n`` True)."""

    def forward(self, x):
        n = len(x)
        acc = torch.zeros(x.shape[1])
        i = 0
        while i < n:
            acc = acc * 0.5 + x[i]
            i += 1
        return acc


class EmptyIfExp(torch.nn.Module):
    """``a if n == 0 else b`` with ``n`` bound to a size."""

    def forward(self, x):
        n = x.shape[0]
        y = x.new_ones(x.shape[1]) if n == 0 else x.amax(0) - x.amin(0) + 2.0
        return y * 3


def _boxes(rows, cols, seed):
    return torch.rand(rows, cols, generator=torch.Generator().manual_seed(seed))


def test_an_early_return_on_no_ground_truth_or_no_boxes_equals_eager_at_0_1_2_and_n():
    model = EarlyReturnOnEmpty()
    exported = export_to_ort(model, (_boxes(2, 3, 0),), dynamic_shapes={"overlaps": {0: "k", 1: "n"}})
    inputs = [(_boxes(k, n, seed),) for seed, (k, n) in enumerate(
        [(0, 3), (2, 0), (0, 0), (0, 1), (1, 0), (1, 1), (1, 4), (2, 1), (2, 2), (3, 5), (6, 2)])]
    assert_every_branch_taken(model, inputs)
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("If"), exported.ops  # the side with the max is not run on 0 ground truths
    source = converted_source(EarlyReturnOnEmpty.forward)
    assert "_fx.sizes.compare(num_gts, '==', 0)" in source and "_fx.sizes.compare(num_bboxes, '==', 0)" in source


def test_a_product_of_sizes_tested_for_0_equals_eager_on_both_sides():
    model = ProductOfSizes()
    exported = export_to_ort(model, (torch.rand(3, 2), torch.rand(4, 2)),
                             dynamic_shapes={"a": {0: "rows"}, "b": {0: "cols"}})
    inputs = [(torch.rand(r, 2), torch.rand(c, 2)) for r, c in [(0, 3), (2, 0), (0, 0), (1, 1), (1, 2), (2, 1), (2, 5), (7, 3)]]
    assert_every_branch_taken(model, inputs)
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Where") or exported.ops.get("If"), exported.ops


def test_a_size_passed_to_a_helper_is_tested_where_the_file_runs():
    model = SizeFromCaller()
    exported = export_to_ort(model, (torch.rand(4, 3),), dynamic_shapes={"x": {0: "n"}})
    inputs = [(torch.rand(n, 3),) for n in (0, 1, 2, 5)]
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Where") or exported.ops.get("If"), exported.ops


def test_a_while_below_a_size_held_in_a_name_runs_0_times_at_size_0():
    model = WhileBelowSize()
    exported = export_to_ort(model, (torch.rand(4, 3),), dynamic_shapes={"x": {0: "n"}})
    inputs = [(torch.rand(n, 3),) for n in (0, 1, 2, 6)]
    assert {0, 1, 2, 6} <= set().union(*trip_counts(model, inputs).values())
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop"), exported.ops


def test_a_conditional_expression_on_a_size_held_in_a_name_equals_eager_at_0():
    model = EmptyIfExp()
    exported = export_to_ort(model, (torch.rand(4, 3),), dynamic_shapes={"x": {0: "n"}})
    inputs = [(torch.rand(n, 3),) for n in (0, 1, 2, 5)]
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Where") or exported.ops.get("If"), exported.ops


def test_the_product_converts_and_verifies_at_size_0_with_the_declared_range_kept():
    """Through the public API: verification's own sets (``size[rows=0]``, ...) pass, and the
    range is not narrowed."""
    model = ProductOfSizes()
    result = fxport.convert(model, (torch.rand(3, 2), torch.rand(4, 2)),
                            dynamic_shapes={"a": {0: "rows"}, "b": {0: "cols"}},
                            verify_inputs=[(torch.rand(0, 2), torch.rand(3, 2)), (torch.rand(2, 2), torch.rand(0, 2))])
    assert result.verified
    assert not any("narrowed" in w for w in result.warnings), result.warnings
    assert {"if-to-where", "if-to-cond"} & {r.rule for r in result.rewrites}


def test_a_declared_minimum_of_1_keeps_the_size_test_python():
    """``Dim(min=1)``: ``num_gts == 0`` is False over the whole range, so torch's answer stands and
    the file has no branch for 0 (no if is converted)."""
    model = EarlyReturnOnEmpty()
    k, n = torch.export.Dim("k", min=1), torch.export.Dim("n", min=1)
    exported = export_to_ort(model, (_boxes(2, 3, 0),), dynamic_shapes={"overlaps": {0: k, 1: n}})
    inputs = [(_boxes(r, c, seed),) for seed, (r, c) in enumerate([(1, 1), (1, 4), (2, 1), (3, 5)])]
    assert_matches_eager(model, exported, inputs)
    assert not exported.ops.get("If"), exported.ops
    assert not any(r.rule.startswith("if-to") for r in exported.records), [r.rule for r in exported.records]


class _Assignment:
    def __init__(self, labels, overlaps):
        self.labels, self.overlaps = labels, overlaps


class ObjectOnEmpty(torch.nn.Module):
    """The early return gives a user object (mmdetection's ``AssignResult``). Once refused (a
    converted ``if`` could not carry it); since round nine the ``if`` carries the object's fields
    and becomes a ``cond`` (``overlaps.max`` fails on 0 rows):
    tests/test_branch_strategies_round9.py checks it against eager."""

    def assign(self, overlaps):
        num_gts = overlaps.size(0)
        if num_gts == 0:
            return _Assignment(overlaps.new_zeros(overlaps.shape[1]), overlaps.sum(0))
        values, labels = overlaps.max(dim=0)
        return _Assignment(labels.float(), values)

    def forward(self, overlaps):
        result = self.assign(overlaps)
        return result.labels, result.overlaps


class RejectsEmpty(torch.nn.Module):
    """``if n == 0: raise``: the model rejects 0 rows; the other side is the model."""

    def forward(self, x):
        n = x.shape[0]
        if n == 0:
            raise ValueError("no rows")
        return x.max(0).values * 2


def test_a_size_test_that_raises_is_the_models_range_not_a_branch():
    """The raise is not a branch the file must hold (no refusal of a side effect under a tensor
    condition): torch's answer stands, the file equals eager wherever eager runs, and
    verification narrows the range at the 0 where eager raises, saying so."""
    model = RejectsEmpty()
    result = fxport.convert(model, (torch.rand(4, 3),), dynamic_shapes={"x": {0: "n"}})
    assert result.verified
    assert any("narrowed to 1..inf" in w and "eager rejects these inputs" in w for w in result.warnings), result.warnings
    exported = export_to_ort(model, (torch.rand(4, 3),), dynamic_shapes={"x": {0: "n"}})
    assert_matches_eager(model, exported, [(torch.rand(n, 3),) for n in (1, 2, 5)])
    with pytest.raises(ValueError):
        model(torch.rand(0, 3))
