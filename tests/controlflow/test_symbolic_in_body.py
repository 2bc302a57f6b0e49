"""Symbolic scalars (dynamic sizes, ``.item()``) inside converted bodies stay symbolic.

torch traces cond branches and while_loop bodies with dynamo, where ``x.shape[0] > 3`` passes
``isinstance(v, bool)``; branching on it in Python specialised the graph to the example's size.
Each case checks eager vs ONNX Runtime on sizes on both sides of the threshold and trip counts
0, 1 and more, and that every branch was taken.
"""

import dataclasses
from typing import Callable

import pytest
import torch

from tests.controlflow import symbolic_models as m
from tests.controlflow._util import assert_every_branch_taken, assert_matches_eager, export_to_ort, trip_counts

D = torch.export.Dim.DYNAMIC


def rows(batch: int, seed: int = 0, shift: float = 0.0) -> torch.Tensor:
    return torch.rand(batch, 4, generator=torch.Generator().manual_seed(seed)) + shift


def n(value: int) -> torch.Tensor:
    return torch.tensor(value)


@dataclasses.dataclass
class Case:
    make: Callable[[], torch.nn.Module]
    example: tuple
    inputs: list
    dynamic: tuple
    graph_ops: set  # ONNX ops that must appear


WITH_TRIPS = [(rows(b, seed=b, shift=s), n(k)) for b in (1, 2, 5, 8) for k in (0, 1, 3) for s in (0.0, -1.0)]
CASES = {
    "shape_if_in_while": Case(m.ShapeIfInWhile, (rows(3), n(2)), WITH_TRIPS, ({0: D}, None), {"Loop", "Where"}),
    "shape_and_tensor_ifexp_in_for": Case(m.ShapeAndTensorIfExpInFor, (rows(3), n(2)), WITH_TRIPS, ({0: D}, None), {"Loop", "Where"}),
    "shape_or_tensor_if_in_for": Case(m.ShapeOrTensorIfInFor, (rows(3), n(2)), WITH_TRIPS + [(rows(5, shift=30.0), n(2))],
                                      ({0: D}, None), {"Loop", "Where"}),
    "range_over_dim_in_for": Case(m.RangeOverDimInFor, (rows(3), n(2)), WITH_TRIPS + [(rows(0), n(2))], ({0: D}, None), {"Loop"}),
    "half_range_over_dim_in_for": Case(m.HalfRangeOverDimInFor, (rows(4), n(2)), WITH_TRIPS, ({0: D}, None), {"Loop"}),
    "shape_if_in_cond_branch": Case(m.ShapeIfInCondBranch, (rows(3),), [(rows(b, seed=b, shift=s),) for b in (1, 2, 5, 8) for s in (0.0, -1.0)],
                                    ({0: D},), {"If", "Where"}),
    "loop_in_cond_branch_mixing_operands": Case(m.LoopInCondBranchMixingOperands, (rows(3), n(2)),
                                                [(rows(b, seed=b, shift=s), n(k)) for b in (1, 2, 5) for k in (0, 1, 3) for s in (0.0, 2.5)],
                                                ({0: D}, None), {"If", "Loop"}),
    "fuzzed_while_with_shape_elif": Case(m.FuzzedWhileWithShapeElif, (rows(3), n(2)),
                                         [(rows(b, seed=b, shift=s), n(k)) for b in (2, 5) for k in (0, 1, 4) for s in (0.5, -0.9)],
                                         ({0: D}, None), {"Loop", "Where"}),
}


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
@pytest.mark.parametrize("name", list(CASES))
def test_symbolic_scalar_in_traced_body_matches_eager_at_every_size(name):
    case = CASES[name]
    model = case.make().eval()
    assert_every_branch_taken(model, case.inputs)
    covered = set().union(*trip_counts(model, case.inputs).values()) if trip_counts(model, case.inputs) else set()
    if "Loop" in case.graph_ops:
        assert {0, 1} <= covered, f"inputs cover trip counts {sorted(covered)}"
    exported = export_to_ort(model, case.example, case.dynamic)
    assert_matches_eager(model, exported, [case.example] + case.inputs)
    assert case.graph_ops <= set(exported.ops), f"expected {sorted(case.graph_ops)} in {exported.ops}"
