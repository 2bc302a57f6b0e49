"""In-place writes inside converted branches and loop bodies are carried state (issue 13).

Before: ``y.mul_(3)`` in a branch was dropped from the ONNX graph (a single Identity) while
verification passed on inputs that never took the branch. Every case here is differential:
eager vs ONNX Runtime on inputs that take every branch and trip counts 0, 1, 2, N.
"""

import pytest
import torch

import fxport
from tests.controlflow import mutation_models as m
from tests.controlflow._util import assert_every_branch_taken, assert_matches_eager, export_to_ort, trip_counts

BOTH_SIGNS = [(torch.rand(4, 3) + 0.6,), (-torch.rand(4, 3) - 0.6,), (torch.randn(1, 3) + 3,), (torch.randn(5, 3) - 3,)]


@pytest.mark.parametrize("make", [m.ScaleInPlace, m.AccumulateInto, m.SubscriptWrites, m.FunctionFormInPlace,
                                  m.IndexedUpdates])
def test_in_place_write_in_a_branch_is_carried(make):
    model = make()
    inputs = BOTH_SIGNS
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, inputs[0], dynamic_shapes=({0: torch.export.Dim("b", min=1, max=64)},))
    assert exported.ops.get("Where", 0) + exported.ops.get("If", 0) >= 1
    assert set(exported.ops) != {"Identity"}, "the write must not be dropped"
    assert_matches_eager(model, exported, inputs)


def test_write_at_loop_index_in_a_data_dependent_loop():
    model = m.WriteAtLoopIndex()
    x = torch.randn(5, 3)
    inputs = [(x, torch.tensor(n)) for n in (0, 1, 2, 5)]
    assert trip_counts(model, inputs) and {0, 1, 2, 5} <= next(iter(trip_counts(model, inputs).values()))
    exported = export_to_ort(model, (x, torch.tensor(3)))
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs)


def test_accumulating_in_place_in_a_while_loop():
    model = m.AccumulateInLoop()
    inputs = [(-torch.rand(6, 4),), (torch.tensor([[10.0] * 4] + [[-1.0] * 4] * 5),),
              (torch.tensor([[10.0] * 4] * 2 + [[-1.0] * 4] * 4),), (torch.rand(6, 4),)]
    assert {0, 1, 2, 5} <= next(iter(trip_counts(model, inputs).values()))
    exported = export_to_ort(model, (torch.rand(6, 4),))
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs)


def test_end_to_end_the_write_in_the_untaken_branch_is_verified_and_right():
    """fxport.convert from an example that never takes the branch: converted, searched, right."""
    example = (torch.rand(4, 3) - 5,)
    result = fxport.convert(m.ScaleInPlace(), example)
    assert any(row.name.startswith("search: ") and row.passed for row in result.verification)
    from tests.conftest import run_onnx

    x = torch.rand(4, 3) + 1
    torch.testing.assert_close(torch.from_numpy(run_onnx(result.model, x)[0]), x * 3)
