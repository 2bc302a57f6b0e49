"""Variables None on some paths once that is data (issue #47, "None in loop state / None in one
branch"): a pair (value, is-set flag) where the paths merge, the None-check a tensor condition,
the first trip of a loop that always sets it peeled. Each model is compared eager vs ONNX
Runtime on inputs that take every branch, trip counts 0, 1, 2, N and every exit; what stays
refused is one line at the user's line."""

from __future__ import annotations

import re

import pytest
import torch

import fxport
from tests.controlflow import none_models as m
from tests.controlflow._util import (assert_every_branch_taken, assert_matches_eager, export_to_ort, line_in_source,
                                     loop_exits, trip_counts)


def test_a_mask_none_on_one_side_is_selected_and_its_check_is_a_where():
    model = m.MaskNoneOnOneSide()
    q = torch.randn(3, 2, generator=torch.Generator().manual_seed(0)).abs()
    exported = export_to_ort(model, (q,), dynamic_shapes={"q": {0: "n"}})
    inputs = [(q,), (-q,), (torch.rand(5, 2) + 0.1,), (-torch.ones(1, 2),), (torch.ones(1, 2),), (torch.ones(2, 2),)]
    assert_every_branch_taken(model, inputs)
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Where") and not exported.ops.get("If")


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_a_value_a_while_loop_may_set_before_its_break_is_checked_after_it():
    model = m.FirstOverThreshold()
    x = torch.tensor([0.1, 0.5, 0.9, 0.3])
    exported = export_to_ort(model, (x, torch.tensor(0.6)), dynamic_shapes={"x": {0: "n"}, "thr": None})
    inputs = [(x, torch.tensor(0.0)),            # set on trip 1, break
              (x, torch.tensor(0.2)),            # trip 2, break
              (x, torch.tensor(0.6)),            # trip 3, break
              (x, torch.tensor(2.0)),            # never set: the loop's test ends it after N trips
              (torch.tensor([5.0]), torch.tensor(1.0)),
              (torch.tensor([0.5, 0.7]), torch.tensor(1.0))]
    exits = set().union(*loop_exits(model, inputs).values())
    assert {"left by a break", "left by its test"} <= exits
    assert {1, 2, 3, 4} <= set().union(*trip_counts(model, inputs).values())
    assert_every_branch_taken(model, inputs)
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_a_hidden_state_none_until_kept_is_passed_to_the_rnn_as_none_or_as_the_value():
    model = m.HiddenNoneUntilKept()
    signs = torch.tensor([1.0, -1, -1, 1, 1, -1]).reshape(6, 1, 1)  # frames kept at 0, 3, 4
    xs = torch.rand(6, 1, 3, generator=torch.Generator().manual_seed(1)) * 3 * signs
    exported = export_to_ort(model, (xs, torch.tensor(4)), dynamic_shapes={"x": {0: "t"}, "n": None})
    inputs = [(xs, torch.tensor(0)),            # no frame: None after the loop
              (xs, torch.tensor(1)),            # kept at the first frame
              (-xs, torch.tensor(3)),           # kept from the second frame on
              (xs, torch.tensor(6)), (-xs, torch.tensor(6)),
              (-xs.abs(), torch.tensor(5))]     # never kept: the RNN always gets None
    assert {0, 1, 3, 5, 6} <= set().union(*trip_counts(model, inputs).values())
    assert_every_branch_taken(model, inputs)  # kept at some frames, not at others; None after the loop or not
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_torch_functions_read_the_value_after_a_none_check_that_continues():
    model = m.SumSinceFirstPositive()
    v = torch.tensor([-1.0, 2.0, -3.0, 4.0, 0.5])
    exported = export_to_ort(model, (v, torch.tensor(4)), dynamic_shapes={"x": {0: "t"}, "n": None})
    inputs = [(v, torch.tensor(0)), (v, torch.tensor(1)), (v, torch.tensor(2)), (v, torch.tensor(5)),
              (-v.abs(), torch.tensor(5)), (v.abs(), torch.tensor(3))]
    assert_every_branch_taken(model, inputs)
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


def test_a_value_every_trip_assigns_first_is_none_again_after_no_trip():
    model = m.AssignedEveryTrip()
    x = torch.randn(2, 3, generator=torch.Generator().manual_seed(3))
    exported = export_to_ort(model, (x, torch.tensor(3)), dynamic_shapes={"x": {0: "b"}, "n": None})
    inputs = [(x, torch.tensor(0)), (x, torch.tensor(1)), (torch.randn(4, 3), torch.tensor(2)), (x, torch.tensor(5))]
    assert {0, 1, 2, 5} <= set().union(*trip_counts(model, inputs).values())
    assert_matches_eager(model, exported, inputs)  # n = 0: -x, not zeros
    assert exported.ops.get("Loop")


@pytest.mark.parametrize("cls", [m.SetOnFirstTrip, m.SetOnFirstTripOfARange])
@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_a_value_the_first_trip_always_sets_is_peeled_into_an_if(cls):
    model = cls()
    x = torch.randn(2, 3, generator=torch.Generator().manual_seed(2))
    exported = export_to_ort(model, (x, torch.tensor(3)), dynamic_shapes={"x": {0: "b"}, "n": None})
    inputs = [(x, torch.tensor(0)), (torch.randn(1, 3), torch.tensor(1)), (torch.randn(4, 3), torch.tensor(2)),
              (x, torch.tensor(6))]
    assert {0, 1, 2, 6} <= set().union(*trip_counts(model, inputs).values())
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("If") and exported.ops.get("Loop")
    assert any("first iteration peeled" in r.detail for r in exported.records)


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_state_none_before_a_loop_over_rows_is_built_by_the_peeled_first_row():
    model = m.StateNoneBeforeRows()
    exported = export_to_ort(model, (torch.tensor([1, 2, 3]),), dynamic_shapes={"ids": {0: "L"}})
    inputs = [(torch.zeros(0, dtype=torch.long),),  # no row: the first row is never read (an empty Gather fails)
              (torch.tensor([4]),), (torch.tensor([5, 0]),), (torch.tensor([1, 2, 3, 4, 5, 0]),)]
    assert {0, 1, 2, 6} <= set().union(*trip_counts(model, inputs).values())
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("If") and exported.ops.get("Loop")


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_cache_none_before_a_growing_loop_is_made_by_the_peeled_first_trip():
    model = m.CacheNoneBeforeAGrowingLoop()
    tokens = torch.tensor([3, 1, 4])
    exported = export_to_ort(model, (tokens, torch.tensor(3)), dynamic_shapes={"tokens": {0: "L"}, "n": None})
    inputs = [(tokens, torch.tensor(0)), (tokens, torch.tensor(1)), (torch.tensor([5, 2]), torch.tensor(2)),
              (torch.tensor([1, 2, 3, 4, 5]), torch.tensor(6)), (torch.tensor([6]), torch.tensor(3))]
    assert_matches_eager(model, exported, inputs)  # output lengths L + n compared too
    assert exported.ops.get("If") and exported.ops.get("Loop")


def test_a_torch_function_given_it_as_its_input_reads_the_value():
    model = m.NoneAsATorchInput()
    exported = export_to_ort(model, (torch.rand(2, 3),), dynamic_shapes={"x": {0: "b"}})
    inputs = [(torch.rand(2, 3),), (-torch.rand(3, 3),), (torch.rand(1, 3),)]
    assert_every_branch_taken(model, inputs)
    assert_matches_eager(model, exported, inputs)


REFUSED = {
    "library_module_without_none": (m.NoneToALibraryModuleThatNeedsAValue,
                                    r"a value that is None on some paths \(argument 1\) is passed to Bilinear, which does "
                                    r"not take None there at .*none_models.py:(\d+); give it a value"),
    "beside_a_torch_input": (m.NoneBesideATorchInput,
                             r"a value that is None on some paths is passed to linear beside its input, where None may "
                             r"mean something of its own at .*none_models.py:(\d+);"),
    "returned": (m.ReturnsMaybeNone,
                 r"the model returns a value that this statement leaves None on some inputs and a tensor on others "
                 r"at .*none_models.py:(\d+); return a tensor on every path"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_what_stays_refused_is_one_line_at_the_users_line(name):
    cls, pattern = REFUSED[name]
    with pytest.raises(fxport.ConversionError) as info:
        fxport.convert(cls(), (torch.rand(2, 3),), dynamic_shapes={"x": {0: "b"}})
    message = str(info.value)
    assert "\n" not in message
    match = re.search(pattern, message)
    assert match, message
    assert int(match.group(1)) == line_in_source(cls.forward, "# error-line")
