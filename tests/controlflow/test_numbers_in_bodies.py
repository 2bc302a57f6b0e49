"""Numbers read from tensors inside converted bodies (issue 13, item 4).

``int(t)``, ``float(t)``, ``t.item()`` and ``t.tolist()`` of a 0-d tensor inside a converted
branch or data-dependent loop body stay symbolic (a 0-d tensor for ``int``, a SymInt/SymFloat
read with ``.item()`` otherwise), so the body traces inside ``cond``/``while_loop`` and the
number works as a loop bound, an index, a slice bound and in arithmetic. Differential: eager vs
ONNX Runtime on inputs that take every branch and trip counts 0, 1, 2, N, at several sizes.
"""

import os

import pytest
import torch

import fxport
from fxport.controlflow import converted_source
from tests.conftest import line_of
from tests.controlflow import number_models as m
from tests.controlflow._util import assert_every_branch_taken, assert_matches_eager, export_to_ort, loop_exits, trip_counts

MODELS = os.path.join(os.path.dirname(__file__), "number_models.py")
BATCH = torch.export.Dim("batch", min=1, max=64)


def _loop_trips(model, inputs) -> set:
    (trips,) = trip_counts(model, inputs).values()
    return trips


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_range_of_int_in_a_branch_is_a_loop_in_an_if():
    """``n = int(x.sum()); for i in range(n)`` inside a tensor branch: Loop nested in If."""
    model = m.RangeOfIntInBranch()
    inputs = [(torch.full((1, 3), 0.2),), (torch.full((2, 3), 0.2),), (torch.full((1, 3), 0.7),),
              (torch.rand(5, 3) + 0.5,), (-torch.rand(3, 3),)]
    assert_every_branch_taken(model, inputs)
    assert {0, 1, 2} <= _loop_trips(model, inputs) and max(_loop_trips(model, inputs)) > 2
    exported = export_to_ort(model, (torch.rand(4, 3),), dynamic_shapes=({0: BATCH},))
    assert exported.ops.get("If") == 1 and exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs)


def test_argmax_item_as_an_index_in_a_while_body():
    """``k = x.argmax().item(); acc = acc + x[k]`` in a while loop on a tensor condition."""
    model = m.ArgmaxItemIndexInWhile()
    inputs = [(torch.randn(b, 3), torch.tensor(k)) for b, k in ((5, 0), (1, 1), (4, 2), (6, 5))]
    assert _loop_trips(model, inputs) == {0, 1, 2, 5}
    exported = export_to_ort(model, (torch.randn(5, 3), torch.tensor(3)), dynamic_shapes=({0: BATCH}, None))
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs)


@pytest.mark.parametrize("make, lowering", [(m.FloatScaleInBranch, "Where"), (m.FloatScaleInExpensiveBranch, "If")])
def test_float_of_a_tensor_in_a_branch_scales(make, lowering):
    """``s = float(x.mean()); y = y * s``: a where branch (cheap) and a cond branch (a submodule)."""
    model = make()
    inputs = [(torch.rand(4, 3),), (-torch.rand(4, 3),), (torch.rand(1, 3) + 1,), (-torch.rand(1, 3),), (torch.randn(7, 3),)]
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, inputs[0], dynamic_shapes=({0: BATCH},))
    assert exported.ops.get(lowering, 0) >= 1
    assert_matches_eager(model, exported, inputs)


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_index_read_inside_a_for_range_int_body():
    model = m.IndexReadInForBody()
    order = torch.tensor([1, 3, 0, 4, 2])
    inputs = [(torch.randn(5, 3), order, torch.tensor(k)) for k in (0, 1, 2, 5)]
    assert _loop_trips(model, inputs) == {0, 1, 2, 5}
    exported = export_to_ort(model, (torch.randn(5, 3), order, torch.tensor(3)))
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs)


def test_int_truncates_toward_zero_and_float_of_an_int_tensor_is_a_float():
    """int(-2.7) is -2 (not -3), float(-3) / 4 is -0.75 (not an integer division)."""
    model = m.TruncatingIntInBranch()
    inputs = [(torch.tensor([[-0.9, 1.0, 2.0, 3.0], [0.5, 0.0, 0.0, 0.0]]), torch.tensor(-3)),
              (torch.tensor([[0.9, 1.0, 2.0, 3.0], [0.5, 0.0, 0.0, 0.0]]), torch.tensor(7)),
              (-torch.rand(2, 4), torch.tensor(5))]
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, inputs[0])
    assert exported.ops.get("If") == 1
    assert_matches_eager(model, exported, inputs)


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
@pytest.mark.parametrize("make", [m.ItemComparisonInLoop, m.TolistOfScalarInBody, m.SliceBoundInLoop,
                                  m.ItemAccumulatorInLoop])
def test_numbers_read_in_a_data_dependent_loop_body(make):
    """A comparison on the number (a where), ``.tolist()`` of a 0-d tensor, a slice bound, and a
    0-d float32 accumulator that stays float32 (as ``tensor + float`` does in Python)."""
    model = make()
    inputs = [(torch.rand(b, 3) * 3 - 1, torch.tensor(k)) for b, k in ((4, 0), (4, 1), (5, 2), (6, 4))]
    assert _loop_trips(model, inputs) == {0, 1, 2, 4}
    exported = export_to_ort(model, (torch.rand(4, 3), torch.tensor(3)), dynamic_shapes=({0: BATCH}, None))
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs)


def test_item_as_an_index_in_a_cond_branch():
    model = m.ItemIndexInBranch()
    inputs = [(torch.randn(4, 3) + 1,), (-torch.rand(4, 3),), (torch.rand(1, 3),), (torch.randn(6, 3) + 1,)]
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, inputs[0], dynamic_shapes=({0: BATCH},))
    assert exported.ops.get("If") == 1
    assert_matches_eager(model, exported, inputs)


@pytest.mark.slow  # 4.5 s or more (2026-12-03, third session): it runs with the slow set in CI
def test_top_level_numbers_stay_symbolic_and_equal_eager():
    """At the function's top level ``int(t)`` and ``float(t)`` read the number without a guard too:
    a slice bound, a scale, and a top-p cutoff (``probs[probs < cutoff] = 0``) export and equal eager."""
    assert "_fx.float_(x.mean())" in converted_source(m.NumbersAtTopLevel.forward)
    top_level = m.NumbersAtTopLevel()
    sizes = [(torch.rand(b, 3), torch.tensor(k)) for b, k in ((2, 2), (1, 0), (3, 1), (4, 3), (2, 5))]
    exported = export_to_ort(top_level, sizes[0], dynamic_shapes=({0: BATCH}, None))
    assert_matches_eager(top_level, exported, sizes)
    item = m.FloatOfItemAtTopLevel()
    exported = export_to_ort(item, (torch.rand(2, 3), torch.tensor(2.0)), dynamic_shapes=({0: BATCH}, None))
    assert_matches_eager(item, exported, [(torch.rand(b, 3), torch.tensor(s)) for b, s in ((1, -1.5), (3, 0.0), (5, 7.25))])
    cutoff = m.CutoffAtTopLevel()
    peaked = torch.tensor([4.0, 0.0, 0.0, 0.0, 0.0])  # one id holds more than 0.8: cutoff > 0.5
    flat = torch.zeros(5)  # every id ties: the cutoff is the first sorted one, nothing masked
    spread = [torch.randn(n, generator=torch.Generator().manual_seed(n)) for n in (1, 2, 7)]
    inputs = [(x,) for x in (peaked, flat, *spread)]
    exported = export_to_ort(cutoff, (torch.randn(6),), dynamic_shapes=({0: torch.export.Dim("vocab", min=1, max=64)},))
    assert_matches_eager(cutoff, exported, inputs)


def test_a_number_no_tensor_op_can_stand_for_is_refused_at_its_line():
    """``[0] * int(x.sum())`` in a loop body: a Python list of data-dependent length."""
    with pytest.raises(fxport.ControlFlowError) as info:
        fxport.convert(m.ListSizedByReadNumber(), (torch.rand(3), torch.tensor(2)))
    message = str(info.value)
    assert line_of(MODELS, "acc = acc + len([0] * k)") in message
    assert "inside a converted branch or loop body" in message
    assert "\n" not in message


def _directions(seed: int, b: int, t_x: int, t_y: int) -> torch.Tensor:
    return torch.randint(0, 2, (b, t_x, t_y), generator=torch.Generator().manual_seed(seed))


def test_index_write_by_a_counter_beside_index_tensors():
    """``path[rows, idx, j] = 1`` counting down: the counter a one-element index (ScatterND)."""
    model = m.IndexWriteBesideIndexTensors()
    inputs = [(_directions(s, b, 3, t), torch.tensor(k)) for s, b, t, k in ((0, 2, 4, 0), (1, 1, 4, 1), (2, 3, 5, 2), (3, 2, 6, 6))]
    assert _loop_trips(model, inputs) == {0, 1, 2, 6}
    steps = torch.export.Dim("steps", min=1, max=64)
    exported = export_to_ort(model, (_directions(9, 2, 3, 5), torch.tensor(4)), dynamic_shapes=({0: BATCH, 2: steps}, None))
    assert exported.ops.get("Loop") == 1 and exported.ops.get("ScatterND", 0) >= 1
    assert_matches_eager(model, exported, inputs)


def _table(*moves) -> torch.Tensor:
    table = torch.zeros(6, 6)
    for row, col in moves:
        table[row, col] = 5.0
    return table


def test_data_of_an_outer_tensor_in_a_grown_loop_body():
    """``type_as(src.data)`` in a body: ``detach()`` (``.data`` became a constant export refused)."""
    model = m.DataOfTensorInLoop()
    every_row_eos = _table(*[(r, 3) for r in range(6)])
    inputs = [(torch.zeros(1, dtype=torch.long), every_row_eos), (torch.zeros(2, dtype=torch.long), _table((2, 4), (4, 3))),
              (torch.zeros(3, dtype=torch.long), _table((2, 5), (5, 1), (1, 5))), (torch.zeros(5, dtype=torch.long), torch.randn(6, 6))]
    assert {1, 2, 5} <= _loop_trips(model, inputs)
    assert {"left by a break", "left at its trip bound"} <= set().union(*loop_exits(model, inputs).values())
    exported = export_to_ort(model, (torch.zeros(3, dtype=torch.long), torch.randn(6, 6)), dynamic_shapes=({0: BATCH}, None))
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs)


def test_int_of_numpy_in_a_loop_body_reads_the_tensor():
    model = m.IntOfNumpyInLoop()
    inputs = [(torch.randn(b, 3), torch.tensor(k)) for b, k in ((5, 0), (1, 1), (4, 2), (6, 5))]
    assert _loop_trips(model, inputs) == {0, 1, 2, 5}
    exported = export_to_ort(model, (torch.randn(5, 3), torch.tensor(3)), dynamic_shapes=({0: BATCH}, None))
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs)


def test_allclose_of_broadcast_shapes_ends_a_loop():
    """A 0-d value against a (1,) target: allclose broadcasts, the break converts."""
    model = m.AllcloseOfBroadcastShapesInLoop()
    one = torch.tensor([1.0])
    inputs = [(torch.tensor([8.0, -2.0]), one, torch.tensor(k)) for k in (0, 1, 2, 10)] + \
             [(torch.tensor([2.0, 1.0]), one, torch.tensor(10)), (torch.tensor([4.0, 1.0]), one, torch.tensor(10))]
    assert {0, 1, 2, 3} <= _loop_trips(model, inputs)
    assert {"left by a break", "left by its test"} <= set().union(*loop_exits(model, inputs).values())
    exported = export_to_ort(model, inputs[1])
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs)


@pytest.mark.parametrize("make, line, words", [
    (m.NumpyArrayInLoop, "x = torch.from_numpy(x.numpy() * 2)", ".numpy() of a tensor being exported"),
    (m.ListIndexedByCounter, "acc = acc + values[i]", "a Python list indexed by a value computed at run time"),
])
def test_numpy_arrays_and_lists_indexed_by_a_counter_are_refused_at_their_line(make, line, words):
    with pytest.raises(fxport.ControlFlowError) as info:
        fxport.convert(make(), (torch.rand(3), torch.tensor(2)))
    message = str(info.value)
    assert words in message and line_of(MODELS, line) in message
    assert "\n" not in message
