"""Numbers read from tensors used as Python numbers inside converted bodies.

A number read with ``.item()``, ``int()`` or ``float()`` inside a ``while_loop`` body or a
``cond`` branch is a 0-d tensor (an unbacked SymFloat for a float) there; each use here becomes a
tensor op instead of a guard on its value: tensors built from it (``x.new_tensor([[k]])``,
``torch.as_tensor``, ``x.new_full``), ``min``/``max``/``divmod``/``bool``/``round``, ``math``'s
functions, and ``roll`` by it. Differential: eager vs ONNX Runtime on inputs that take every
branch and every loop exit (the test false after 0, 1, 2, N trips, a break), at sizes 1 and
others along the dynamic axis. Uses no tensor op can stand for are refused in one line at the
user's line, naming the use.
"""

import os

import pytest
import torch

import fxport
from fxport.controlflow import convert_control_flow, converted_source
from tests.conftest import line_of
from tests.controlflow import number_index_models as m
from tests.controlflow._util import assert_every_branch_taken, assert_matches_eager, export_to_ort, loop_exits, trip_counts

MODELS = os.path.join(os.path.dirname(__file__), "number_index_models.py")
BATCH = torch.export.Dim("batch", min=1, max=64)


def _loop_trips(model, inputs) -> set:
    (trips,) = trip_counts(model, inputs).values()
    return trips


def _chain(*edges, size: int = 5) -> torch.Tensor:
    """A (size, size) table whose row ``a`` is largest at column ``b`` for each edge ``a -> b``."""
    table = torch.rand(size, size, generator=torch.Generator().manual_seed(size)) * 0.1
    for a, b in edges:
        table[a, b] = 1.0 + a
    return table


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_number_read_in_a_loop_becomes_the_next_input_tensor():
    """``tok = x.new_tensor([[int(row.argmax().item())]])`` (kospeech's RNN-T decode), with
    ``as_tensor``/``new_full``/a float ``new_tensor``: the break at token 0, the bound, the test."""
    model = m.NextTokenAsNewTensor()
    inputs = [(_chain((1, 2), (2, 3), (3, 4), (4, 1)), torch.tensor(0)),  # steps 0: no trip
              (_chain((1, 0)), torch.tensor(6)),  # 1 -> 0: the break on trip 1
              (_chain((1, 3), (3, 0)), torch.tensor(6)),  # the break on trip 2
              (_chain((1, 2), (2, 3), (3, 4), (4, 1)), torch.tensor(6)),  # a cycle: the bound, 6 trips
              (_chain((1, 1), size=2), torch.tensor(3)),  # size 2, the bound
              (torch.ones(2, 2), torch.tensor(2))]  # size 2: row 1's first largest is column 0, the break
    assert {0, 1, 2, 6} <= _loop_trips(model, inputs)
    assert {"left by a break", "left by its test"} <= set().union(*loop_exits(model, inputs).values())
    table = torch.export.Dim("table", min=2, max=64)
    exported = export_to_ort(model, (_chain((1, 2), (2, 3)), torch.tensor(3)), dynamic_shapes=({0: table, 1: table}, None))
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs)


def test_numbers_read_in_a_cond_branch_build_tensors():
    model = m.NumbersReadInBranch()
    inputs = [(torch.rand(4, 3) + 0.1,), (-torch.rand(4, 3),), (torch.rand(1, 3) + 0.1,), (torch.randn(7, 3) + 2,)]
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, inputs[0], dynamic_shapes=({0: BATCH},))
    assert exported.ops.get("If") == 1
    assert_matches_eager(model, exported, inputs)


def _rows(seed: int, b: int) -> torch.Tensor:
    return torch.randn(b, 3, generator=torch.Generator().manual_seed(seed))


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
@pytest.mark.parametrize("make", [m.MinMaxOfReadNumbers, m.DivmodBoolRound])
def test_min_max_divmod_bool_and_round_of_read_numbers(make):
    """Python's builtins of a position read in the body (clamped neighbours, ``divmod``, ``if
    bool(r)``, ``round``): tensor ops, exact as Python's (the first smallest, floor division)."""
    model = make()
    inputs = [(_rows(s, b), torch.tensor(k)) for s, b, k in ((0, 5, 0), (1, 5, 1), (2, 4, 2), (3, 6, 7), (4, 1, 3), (5, 2, 4))]
    assert _loop_trips(model, inputs) == {0, 1, 2, 3, 4, 7}
    if make is m.DivmodBoolRound:
        assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, (_rows(9, 5), torch.tensor(3)), dynamic_shapes=({0: BATCH}, None))
    assert exported.ops.get("Loop") == 1
    assert exported.ops.get("Where", 0) + exported.ops.get("If", 0) >= 1
    assert_matches_eager(model, exported, inputs)


def test_min_and_max_of_sizes_in_a_loop_body_are_not_swapped():
    model = m.MinMaxOfSizesInLoop()
    inputs = [(_rows(s, b), torch.tensor(k)) for s, b, k in ((0, 5, 0), (1, 5, 1), (2, 2, 2), (3, 8, 5), (4, 3, 3))]
    assert _loop_trips(model, inputs) == {0, 1, 2, 3, 5}
    exported = export_to_ort(model, (_rows(9, 5), torch.tensor(3)), dynamic_shapes=({0: torch.export.Dim("b", min=2, max=64)}, None))
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs)


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_math_functions_of_read_numbers():
    model = m.MathOfReadNumbers()
    inputs = [(_rows(s, b) * 3, torch.tensor(k)) for s, b, k in ((0, 5, 0), (1, 5, 1), (2, 4, 2), (3, 6, 5), (4, 1, 3))]
    assert _loop_trips(model, inputs) == {0, 1, 2, 3, 5}
    exported = export_to_ort(model, (_rows(9, 5), torch.tensor(3)), dynamic_shapes=({0: BATCH}, None))
    assert exported.ops.get("Loop") == 1 and exported.ops.get("Sqrt", 0) >= 1
    assert_matches_eager(model, exported, inputs)


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_roll_by_a_read_number_gathers_the_rows():
    model = m.RollByReadNumber()
    inputs = [(_rows(s, b), torch.tensor(k)) for s, b, k in ((0, 5, 0), (1, 5, 1), (2, 4, 2), (3, 6, 5), (4, 1, 3))]
    assert _loop_trips(model, inputs) == {0, 1, 2, 3, 5}
    exported = export_to_ort(model, (_rows(9, 5), torch.tensor(3)), dynamic_shapes=({0: BATCH}, None))
    assert exported.ops.get("Loop") == 1 and exported.ops.get("Gather", 0) >= 2
    assert_matches_eager(model, exported, inputs)


def test_the_converted_source_names_each_operator():
    source = converted_source(m.MinMaxOfReadNumbers.forward)
    assert "_fx.max_(max, k - 1, 0)" in source and "_fx.min_(min, [k, 2])" in source
    assert "_fx.math_(math.sqrt, f)" in converted_source(m.MathOfReadNumbers.forward)
    assert "_fx.new_tensor_(table, [[k]], dtype=torch.long)" in converted_source(m.NextTokenAsNewTensor.forward)
    assert "_fx.indexing.roll(x, k, 0)" in converted_source(m.RollByReadNumber.forward)


def test_a_name_that_is_not_the_builtin_is_called_as_written():
    """``min = torch.minimum; min(x, y)`` in converted code is torch's, not Python's ``min``."""
    model = m.ShadowedBuiltins()
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    assert "_fx.min_(min, x, y)" in converted_source(m.ShadowedBuiltins.forward)
    with convert_control_flow(model), torch.no_grad():
        low, rounded = model(x, y)
    assert torch.equal(low, torch.minimum(x, y)) and torch.equal(rounded, torch.round(x * 2))


@pytest.mark.parametrize("make, args, line, words", [
    (m.TolistOfDataLengthGrouped, (torch.randn(2, 5, 3), torch.tensor([1.0, 0.4])),
     "outs.append(len([g for g, _ in itertools.groupby(labels)]))", "is iterated outside a for statement"),
    (m.RangeOfReadNumberAsValue, (torch.rand(4), torch.tensor(2)),
     "acc = acc + sum(range(k))", "is used as a Python int"),
    (m.FormattedReadFloat, (torch.rand(4), torch.tensor(2)),
     'acc = acc + len("%.3f" % f)', "is used as a Python float"),
])
def test_uses_no_tensor_op_can_stand_for_are_refused_naming_the_use(make, args, line, words):
    with pytest.raises(fxport.ControlFlowError) as info:
        fxport.convert(make(), args, verify=False)
    message = str(info.value)
    assert words in message and line_of(MODELS, line) in message
    assert "\n" not in message and "fxport/" not in message.split(" at ")[-1]
