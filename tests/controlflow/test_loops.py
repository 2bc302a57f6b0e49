"""Loops → while_loop (ONNX Loop): eager vs ONNX Runtime for trip counts 0, 1, 2 and larger."""

import dataclasses
import re
from typing import Callable

import pytest
import torch

from fxport.controlflow import convert_control_flow
from fxport.errors import ControlFlowError
from tests.controlflow import loop_models as m
from tests.controlflow._util import assert_matches_eager, coverage, export_to_ort, line_in_source, trip_counts

D = m.D


def n(value):
    return torch.tensor(value)


def rand(*shape, seed=0):
    return torch.rand(*shape, generator=torch.Generator().manual_seed(seed)) - 0.25


@dataclasses.dataclass
class Case:
    make: Callable[[], torch.nn.Module]
    example: tuple
    inputs: list
    trips: set  # trip counts the inputs must cover for the converted loop(s)
    loops: int = 1  # ONNX Loop nodes expected (0: plain Python, unrolled)
    dynamic: object = None


X = rand(3, 4)
SCALARS = (None,)
CASES = {
    "while_tensor_condition": Case(
        m.WhileTensorCondition, (X + 1,), [(X + 100,), (X + 10,), (X + 4,), (X * 0.01,), (rand(5, 4) + 1,)], {0, 1, 2, 4},
        dynamic=({0: D},),
    ),
    "for_range_int": Case(m.ForRangeInt, (X, n(3)), [(X, n(k)) for k in (0, 1, 2, 7)] + [(rand(6, 4), n(2))], {0, 1, 2, 7},
                          dynamic=({0: D}, None)),
    "for_range_item": Case(m.ForRangeItem, (X, n(3)), [(X, n(k)) for k in (0, 1, 2, 5)], {0, 1, 2, 5}),
    "for_range_dynamic_dim": Case(m.ForRangeDynamicDim, (rand(3, 4),), [(rand(k, 4, seed=k),) for k in (0, 1, 2, 9)], {0, 1, 2, 9},
                                  dynamic=({0: D},)),
    "conv_n_times": Case(m.ConvNTimes, (rand(2, 2, 5, 5), n(2)), [(rand(1, 2, 5, 5), n(k)) for k in (0, 1, 2, 6)] + [(rand(2, 2, 7, 3), n(3))],
                         {0, 1, 2, 6}, dynamic=({0: D, 2: D, 3: D}, None)),
    "loop_index_in_body": Case(m.LoopIndexInBody, (rand(8, 4), n(3)), [(rand(8, 4), n(k)) for k in (0, 1, 2, 8)], {0, 1, 2, 8}),
    "break_in_while": Case(
        m.BreakInWhile, (rand(6), n(1.0)), [(rand(6), n(lim)) for lim in (-1.0, 0.01, 0.5, 100.0)] + [(rand(9), n(1.5)), (rand(0), n(1.0))], {0, 1, 2, 6},
        dynamic=({0: D}, None),
    ),
    "continue_in_for": Case(m.ContinueInFor, (rand(5),), [(rand(k, seed=k),) for k in (0, 1, 2, 9)], {0, 1, 2, 9}, dynamic=({0: D},)),
    "nested_loops": Case(m.NestedLoops, (X, n(2), n(2)), [(X, n(a), n(b)) for a, b in ((0, 3), (1, 0), (2, 1), (4, 3))], {0, 1, 2, 3, 4},
                         loops=2),
    "loop_in_branch": Case(m.LoopInBranch, (X, n(2)), [(X, n(k)) for k in (0, 1, 2, 5)] + [(X - 1, n(3))], {0, 1, 2, 5}),
    "branch_in_loop": Case(m.BranchInLoop, (X, n(2)), [(X, n(k)) for k in (0, 1, 2, 9)], {0, 1, 2, 9}),
    "append_then_stack": Case(m.AppendThenStack, (rand(3, 4),), [(rand(k, 4, seed=k),) for k in (1, 2, 7)], {1, 2, 7}, dynamic=({0: D},)),
    "append_then_cat": Case(m.AppendThenCat, (X, n(2)), [(X, n(k)) for k in (1, 2, 6)], {1, 2, 6}),
    "buffer_write": Case(m.BufferWrite, (rand(3, 4),), [(rand(k, 4, seed=k),) for k in (0, 1, 2, 8)], {0, 1, 2, 8}, dynamic=({0: D},)),
    "count_iterations": Case(m.CountIterations, (X * 5,), [(X * 0.5,), (X * 3,), (X * 7,), (X * 300,)], {0, 1, 3, 8}),
    "number_promoted_to_float": Case(m.NumberPromotedToFloat, (X, n(2)), [(X, n(k)) for k in (0, 1, 2, 5)], {0, 1, 2, 5}),
    "while_counter_below_tensor": Case(m.WhileCounterBelowTensor, (X, n(2)), [(X, n(k)) for k in (0, 1, 2, 6)], {0, 1, 2, 6}),
    "iterate_rows": Case(m.IterateRows, (rand(3, 4),), [(rand(k, 4, seed=k),) for k in (0, 1, 2, 6)], {0, 1, 2, 6}, dynamic=({0: D},)),
    "negative_step": Case(m.NegativeStep, (X, n(2)), [(X, n(k)) for k in (0, 1, 2, 6)], {0, 1, 2, 6}),
    "start_stop_range": Case(m.StartStopRange, (X, n(1), n(3)), [(X, n(a), n(b)) for a, b in ((3, 3), (5, 2), (2, 3), (1, 3), (-2, 4))],
                             {0, 1, 2, 6}),
    "while_test_becomes_tensor": Case(m.ConditionBecomesTensor, (X * 8,), [(X * 0.1,), (X * 3,), (X * 9,), (X * 1e20,)], {2, 3, 5, 51},
                                      dynamic=({0: D},)),
    "rnn_append_stack_dim1": Case(m.TinyRNN, (rand(2, 4, 3),), [(rand(b, k, 3, seed=k),) for b in (1, 3) for k in (1, 2, 7)], {1, 2, 7},
                                  dynamic=({0: D, 1: D},)),
    "index_read_after_loop": Case(m.IndexReadAfterLoop, (X, n(3)), [(X, n(k)) for k in (0, 1, 2, 5)], {0, 1, 2, 5}),
    "index_read_after_static_loop": Case(m.IndexReadAfterStaticLoop, (X,), [(rand(5, 4),)], {3}, loops=0, dynamic=({0: D},)),
    "loop_then_loop_in_branch": Case(m.LoopThenLoopInBranch, (X, n(2)), [(X - 2, n(k)) for k in (0, 1, 2, 4)] + [(rand(6, 4), n(1))],
                                     {0, 1, 2, 3, 4, 6}, loops=2, dynamic=({0: D}, None)),
    "return_in_tensor_loop": Case(m.ReturnInTensorLoop, (X, n(3)),
                                  [(X * 0.1, n(k)) for k in (0, 1, 2, 6)] + [(X, n(5)), (X * 3, n(4)), (X * 3, n(0))], {0, 1, 2, 6}),
    "return_in_while": Case(m.ReturnInWhile, (X, n(3)), [(X, n(k)) for k in (0, 1, 2)] + [(X * 0.1, n(5)), (X, n(5)), (X * 20, n(3))],
                            {0, 1, 2, 5}),
    "return_in_while_then_submodule": Case(m.ReturnInWhileThenSubmodule, (X, n(3)),
                                           [(X * s, n(k)) for s in (1, 4) for k in (0, 1, 2, 5)] + [(X - 5, n(6)), (rand(6, 4) - 5, n(6))],
                                           {0, 1, 2, 4}, dynamic=({0: D}, None)),
    "return_in_loop_in_branch": Case(m.ReturnInLoopInBranch, (X + 1, n(0)), [(X + 0.2, n(0)), (X + 1.0, n(0)), (X - 1, n(0))],
                                     {1, 2}),  # the static range's tensor break continues as a Loop
    "return_row_from_rows": Case(m.FirstRowAbove, (rand(3, 4),),
                                 [(rand(k, 4, seed=k) + shift,) for k in (1, 2, 5) for shift in (-0.5, 0.0, 0.5)],
                                 {1, 2, 5}, dynamic=({0: D},)),
    "static_range_unrolled": Case(m.StaticRange, (X,), [(rand(5, 4),)], {3}, loops=0, dynamic=({0: D},)),
    "module_list_unrolled": Case(m.ModuleListIteration, (X,), [(rand(5, 4),)], {3}, loops=0, dynamic=({0: D},)),
    "return_in_python_loop": Case(m.ReturnInPythonLoop, (X,), [(rand(5, 4),)], {2}, loops=0, dynamic=({0: D},)),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_loop_pattern_matches_eager(name):
    case = CASES[name]
    model = case.make()
    covered = set().union(*trip_counts(model, case.inputs).values())
    assert case.trips <= covered, f"inputs cover trip counts {sorted(covered)}, need {sorted(case.trips)}"
    exported = export_to_ort(model, case.example, case.dynamic)
    assert_matches_eager(model, exported, [case.example] + case.inputs)
    assert exported.ops.get("Loop", 0) == case.loops, f"expected {case.loops} Loop node(s): {exported.ops}"
    if case.loops:
        loop_records = [r for r in exported.records if r.data.get("construct") in ("for", "while")]
        assert loop_records and all("while_loop" in r.data["lowering"] for r in loop_records)
        assert all("carried" in r.data for r in loop_records)


@pytest.mark.parametrize("name", ["return_in_tensor_loop", "return_in_while", "return_in_while_then_submodule",
                                  "return_in_loop_in_branch", "return_row_from_rows"])
def test_early_return_inputs_take_both_paths(name):
    """The inputs of the early-return cases return from inside the loop and also fall through."""
    case = CASES[name]
    outcomes = coverage(case.make(), [case.example] + case.inputs)
    branches = {line: seen for (kind, line), seen in outcomes.items() if kind == "if"}
    assert branches and all(seen == {False, True} for seen in branches.values()), branches


def _decoder_with_varied_lengths():
    """A decoder whose outputs, over some start states, stop after 1, 2, ... and max_len steps."""
    candidates = [(torch.randn(1, 8, generator=torch.Generator().manual_seed(s)), torch.tensor([s % 6])) for s in range(60)]
    for seed in range(20):
        model = m.GreedyDecoder(seed=seed).eval()
        with torch.no_grad():
            lengths = {model(*args).shape[1]: args for args in candidates}
        if {1, 2, model.max_len} <= set(lengths) and len(lengths) >= 4:
            return model, lengths
    pytest.fail("no decoder seed gives varied lengths")


def test_greedy_decoder_stops_at_end_token():
    model, lengths = _decoder_with_varied_lengths()
    example = lengths[model.max_len]
    exported = export_to_ort(model, example)
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, list(lengths.values()))


def test_buffer_length_boundaries():
    """Off-by-one guard: the stacked result has exactly one row per iteration, for 1, 2 and N."""
    model = m.AppendThenStack()
    exported = export_to_ort(model, (rand(4, 4),), ({0: D},))
    for rows in (1, 2, 3, 4, 5, 11):
        x = rand(rows, 4, seed=rows)
        assert_matches_eager(model, exported, [(x,)])


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_loop_record_names_carried_variables():
    model = m.BreakInWhile()
    exported = export_to_ort(model, (rand(6), n(1.0)), ({0: D}, None))
    (record,) = [r for r in exported.records if r.rule == "while-to-while_loop"]
    assert set(record.data["carried"]) >= {"i", "total"}
    assert record.location.lineno == line_in_source(m.BreakInWhile.forward, "while i < x.shape[0]")
    assert "while_loop" in record.detail


ERRORS = {
    "carried_dtype_changes": (m.CarriedDtypeChanges, r"for: loop variable 'x' changes dtype from float32 to bool at .*loop_models.py:(\d+); cast"),
    "extends_outer_list": (m.ExtendsOuterList, r"for on a tensor condition has a side effect .*found.extend\(\) on outer 'found' .* at .*loop_models.py:(\d+);"),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_unconvertible_loop_reports_line(name):
    cls, pattern = ERRORS[name]
    model = cls()
    with pytest.raises(ControlFlowError) as info:
        with convert_control_flow(model):
            torch.export.export(model, (X, n(3)), strict=False)
    message = str(info.value)
    assert "\n" not in message
    match = re.search(pattern, message)
    assert match, message
    assert int(match.group(1)) == line_in_source(cls.forward, "# error-line")
    assert "forward" not in model.__dict__


def test_off_by_one_in_the_loop_test_is_caught(monkeypatch):
    """The differential test is sharp: a loop that runs one extra iteration fails it."""
    from fxport.controlflow.operators.loops import while_loop as loop_lowering

    monkeypatch.setattr(loop_lowering, "_in_range", lambda counter, stop, step: counter <= stop)
    model = m.ForRangeInt()
    exported = export_to_ort(model, (X, n(3)), ({0: D}, None))
    with pytest.raises(AssertionError):
        assert_matches_eager(model, exported, [(X, n(k)) for k in (0, 1, 2)])
