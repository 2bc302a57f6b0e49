"""A list repeated a dynamic size's number of times and stacked keeps that size symbolic.

``torch.stack([w] * b)`` with ``b`` a dynamic dimension read inside a loop body (pytorch_HMM's
``maxmul``: ``torch.stack([log_A] * p, dim=2)``, ``p`` the batch) made torch fix the batch to the
example's ("the model specialises dynamic dimension 'batch' to 2"): Python needs ``b`` as a
number to build the list. fxport reads the repeated list as the stack tiled ``b`` times
(operators/lists/repeated.py). Each case converts at one batch and is compared with eager at
batches 1 and several, with the loop run 0, 1, 2 and N times and left by each of its exits, and
the graph holds the Loop/If of the converted control flow; the error of a list that stays
Python's names the line that pins the batch.
"""

import inspect

import pytest
import torch

import fxport
from tests.controlflow import repeated_list_models as m
from tests.controlflow._util import assert_every_branch_taken, assert_matches_eager, export_to_ort, loop_exits, \
    trip_counts


def _rand(seed: int, *shape) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.slow  # 4.5 s or more on this machine
def test_a_parameter_stacked_per_row_in_a_for_body_keeps_the_batch_and_the_time():
    model = m.StackedWeightInFor().eval()
    inputs = [(_rand(b + t, b, t),) for b in (1, 2, 5) for t in (0, 1, 2, 6)]
    assert {0, 1, 2, 6} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, (_rand(0, 3, 4),), dynamic_shapes={"x": {0: "batch", 1: "time"}})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop"), exported.ops
    assert "Tile" in exported.ops, f"the stack is a tile by the batch: {exported.ops}"


@pytest.mark.slow  # 4.5 s or more on this machine
def test_max_product_of_stacked_operands_in_a_viterbi_forward_pass_keeps_the_batch():
    model = m.MaxProductWritesInFor().eval()
    inputs = [(_rand(b * 10 + t, b, t, 3),) for b in (1, 2, 4) for t in (1, 2, 3, 7)]
    assert {0, 1, 2, 6} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, (_rand(0, 2, 4, 3),), dynamic_shapes={"x": {0: "batch", 1: "time"}})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop"), exported.ops


def test_pairs_concatenated_per_row_in_a_while_with_a_break_keep_the_batch():
    model = m.CatPairsInWhile().eval()
    inputs = [(_rand(b, b, 2), torch.tensor(steps), torch.tensor(cap))
              for b in (1, 3, 6) for steps in (0, 1, 2, 5) for cap in (1e6, -1e6)]
    inputs += [(torch.zeros(2, 2), torch.tensor(5), torch.tensor(cap)) for cap in (0.1, 0.2)]  # break on trip 2, 3
    exits = set().union(*loop_exits(model, inputs).values())
    assert {"left by its test", "left by a break"} <= exits, exits
    assert {0, 1, 2, 3, 5} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, (_rand(0, 4, 2), torch.tensor(3), torch.tensor(1e6)),
                             dynamic_shapes={"x": {0: "batch"}, "steps": None, "cap": None})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop"), exported.ops


@pytest.mark.parametrize("strategy, op", [("auto", "Where"), ("cond", "If")])
def test_a_comprehension_of_one_parameter_over_the_batch_in_a_branch_keeps_the_batch(strategy, op):
    """Both branches pure: ``auto`` selects with where; ``cond`` traces each branch as a captured
    body (a torch.cond, an ONNX If)."""
    model = m.ComprehensionInBranch().eval()
    inputs = [(_rand(b, b, 4) + shift,) for b in (1, 2, 7) for shift in (5.0, -5.0)]
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, (_rand(0, 3, 4) + 5.0,), dynamic_shapes={"x": {0: "batch"}}, strategy=strategy)
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get(op), exported.ops


def test_a_repeated_list_kept_under_a_name_is_refused_at_the_line_that_pins_the_batch():
    """Not rewritten (the name may be read any other way): the one-line error names the line of
    the helper, called from the loop body, that builds the list, not the loop's first line."""
    with pytest.raises(fxport.ConversionError) as info:
        fxport.convert(m.NamedRepeatInFor().eval(), (_rand(0, 3, 4),),
                       dynamic_shapes={"x": {0: "batch", 1: "time"}}, verify=False)
    message = str(info.value)
    lines, first = inspect.getsourcelines(m.NamedRepeatInFor.stacked)
    pinning = first + next(i for i, line in enumerate(lines) if "[column] *" in line)
    assert "specialises dynamic dimension 'batch' to 3" in message and "\n" not in message, message
    assert f"repeated_list_models.py:{pinning}" in message, message
