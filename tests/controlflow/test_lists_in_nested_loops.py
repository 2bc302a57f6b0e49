"""Lists grown in data-dependent loops, appended to by a data-dependent loop inside them (or after
them), tensors indexed by a grown list, and Python lists written by index under a tensor
condition (the corpus' ultralytics YOLOv3 NMS per class, pytorch-ssd's ``box_scores[picked, :]``,
YOLOv5's ``output[xi] = x[i]`` after ``if not x.shape[0]: continue``).

The inner loop grows a list of its own, which then extends the outer one in the outer one's mode
(fxport/controlflow/operators/lists/carried.py): its count and size sums in pass 1, its rows at the
running offset in pass 2, its stack in a loop whose state grows. Every case is differential
(eager vs ONNX Runtime) on trip counts 0, 1, 2 and N of each loop, on each exit, and, where a
dimension is dynamic, on sizes 1 and others; the graph must hold the Loops. The uses that cannot
be exact are refused in one line at the user's line.
"""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

from fxport.controlflow import convert_control_flow
from fxport.controlflow.operators.lists import appender
from fxport.errors import ControlFlowError
from tests.controlflow import nested_list_models as m
from tests.controlflow._util import assert_every_branch_taken, assert_matches_eager, export_to_ort, line_in_source, trip_counts

B = torch.export.Dim("b", min=1, max=64)


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def n(k):
    return torch.tensor(k)


def boxes(count: int, seed: int, classes: int = 3) -> tuple:
    """``count`` boxes (x1, y1, x2, y2) scattered over a 5x5 square, their scores and classes."""
    g = torch.Generator().manual_seed(seed)
    corner = torch.rand(count, 2, generator=g) * 4
    rows = torch.cat([corner, corner + 1 + torch.rand(count, 2, generator=g)], 1)
    return rows, torch.rand(count, generator=g), torch.randint(0, classes, (count,), generator=g)


@dataclasses.dataclass
class Case:
    model: torch.nn.Module
    example: tuple
    inputs: list
    loops: int  # ONNX Loop nodes
    dynamic: tuple | None = None
    trips: frozenset = frozenset({0, 1, 2})  # trip counts some loop must take (and one of 3 or more)
    python_loops: int = 0  # loops of a fixed trip count (every other one takes two counts at least)


X = rand(3, 4)
SIZES = [(1, k) for k in (0, 1, 2, 4)] + [(5, k) for k in (0, 1, 2, 4, 5)]
NMS_SETS = [boxes(c, s)[:2] for c, s in ((1, 0), (2, 1), (6, 2), (9, 3))] + [(boxes(3, 4)[0], torch.zeros(3))]

CASES = {
    # the inner loop alone appends: 0, 1, 2, ... elements per outer trip; pass 1 and 2 of both loops
    "inner_loop_appends_stack": Case(m.NestedWhileStack(), (rand(3), n(3)), [(rand(3, seed=k), n(k)) for k in (0, 1, 2, 3, 5)],
                                     loops=5),
    # ultralytics' YOLOv3 NMS per class, fixed shapes: a header row per class, the boxes it keeps
    "nms_per_class": Case(m.NmsPerClass(), (*boxes(9, 3), n(3)),
                          [(*boxes(c, s), n(k)) for c, s in ((1, 0), (2, 1), (6, 2), (9, 3)) for k in (0, 1, 3)],
                          loops=5, dynamic=({0: B}, {0: B}, {0: B}, None)),
    # rows chosen by data in the inner loop, one row in the outer loop, concatenated along 0 and 1
    "inner_rows_change_size_cat_dim0": Case(m.NestedCatVaryingRows(0), (X, n(3)),
                                            [(rand(b, 4, seed=b), n(k)) for b, k in SIZES], loops=5, dynamic=({0: B}, None)),
    "inner_rows_change_size_cat_dim1": Case(m.NestedCatVaryingRows(1), (X, n(3)),
                                            [(rand(b, 4, seed=b), n(k)) for b, k in SIZES], loops=5, dynamic=({0: B}, None)),
    # a for over a traced range inside the while: one pass for the inner list, a count for the outer
    "inner_for_over_a_traced_range": Case(m.NestedForRows(), (X, n(3)),
                                          [(rand(b, 4, seed=b), n(k)) for b, k in SIZES if k], loops=3,
                                          dynamic=({0: B}, None), trips=frozenset({1, 2})),
    # the inner loop in a where-selected if of the outer body; the other side appends once
    "inner_loop_in_a_branch": Case(m.NestedInABranch(), (rand(3).abs(), n(3)),
                                   [(s * rand(3, seed=k).abs(), n(k)) for s in (1, -1) for k in (0, 1, 2, 4)], loops=5),
    # the outer loop's state grows: it carries the list as the stack of its elements so far
    "outer_loop_state_grows": Case(m.NestedInAGrowingLoop(), (X, n(3)), [(rand(b, 4, seed=b), n(k)) for b, k in SIZES],
                                   loops=3, dynamic=({0: B}, None)),
    # three loops in a row (a Python loop around the last two) grow one list
    "loops_one_after_the_other": Case(m.LoopsOneAfterTheOther(), (rand(3), n(3)), [(rand(3, seed=k), n(k)) for k in (0, 1, 2, 4)],
                                      loops=6, python_loops=1),
    # a list local to the outer body with rows chosen by data (was the probe's row count for every element)
    "local_list_of_changing_rows": Case(m.LocalListOfChangingRows(), (X, n(3)), [(rand(b, 4, seed=b), n(k)) for b, k in SIZES],
                                        loops=3, dynamic=({0: B}, None)),
    # box_scores[picked, :] of .item() numbers; scores[None][:, picked]; out[picked, :] = 0
    "tensor_indexed_by_a_grown_list": Case(m.IndexedByPickedNumbers(), NMS_SETS[2], NMS_SETS, loops=4,
                                           dynamic=({0: B}, {0: B})),
    # boxes[picked, :] inside the loop that picks them: the loop carries the stack so far
    "indexed_inside_its_loop": Case(m.IndexedInsideItsLoop(), NMS_SETS[2], NMS_SETS, loops=1, dynamic=({0: B}, {0: B})),
}

#: the costlier cases (20-40 s each; those of 4.5 s or more in the CI run of 2026-12-03) run with
#: the tests marked slow (CI)
SLOW_CASES = {"nms_per_class", "inner_rows_change_size_cat_dim1", "loops_one_after_the_other", "outer_loop_state_grows",
              "inner_rows_change_size_cat_dim0", "local_list_of_changing_rows", "inner_for_over_a_traced_range",
              "tensor_indexed_by_a_grown_list", "inner_loop_appends_stack", "inner_loop_in_a_branch",
              "indexed_inside_its_loop"}


@pytest.mark.parametrize("name", [pytest.param(c, marks=pytest.mark.slow) if c in SLOW_CASES else c for c in CASES])
def test_nested_appends_and_grown_list_indices_match_eager(name):
    case = CASES[name]
    counts = trip_counts(case.model, case.inputs)
    seen = set().union(*counts.values())
    assert case.trips <= seen and max(seen) >= 3, f"trip counts {counts}"
    assert sum(len(c) < 2 for c in counts.values()) <= case.python_loops, f"a loop always takes one trip count: {counts}"
    assert_every_branch_taken(case.model, case.inputs)
    exported = export_to_ort(case.model, case.example, dynamic_shapes=case.dynamic)
    assert exported.ops.get("Loop") == case.loops, exported.ops
    assert_matches_eager(case.model, exported, case.inputs)


def test_a_list_appended_under_tensor_conditions_indexes_a_tensor():
    """``boxes[keep, :]`` of a list appended to under tensor conditions in an unrolled loop."""
    model = m.IndexedBySelected()
    inputs = [(rand(4, 4), rand(4, seed=s)) for s in range(4)] + [(rand(4, 4), torch.ones(4)), (rand(4, 4), torch.zeros(4))]
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, inputs[0])
    assert exported.ops.get("Where", 0) >= 1, exported.ops
    assert_matches_eager(model, exported, inputs)


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_the_rows_of_a_list_in_a_traced_body_come_from_the_data(monkeypatch):
    """The differential test is sharp: taking the probe's row count for every element (what a
    size read from a tensor inside a body dynamo traces looked like) fails it."""
    monkeypatch.setattr(appender, "data_sized", appender.varies)
    model = m.LocalListOfChangingRows()
    exported = export_to_ort(model, (X, n(3)), dynamic_shapes=({0: B}, None))
    with pytest.raises(AssertionError):
        assert_matches_eager(model, exported, [(rand(5, 4, seed=5), n(4))])


def images(seed: int, rows: int, scale: float) -> tuple:
    """Two images of ``rows`` candidate rows (4 columns); a larger ``scale`` keeps more rows."""
    return (torch.rand(2, rows, 4, generator=torch.Generator().manual_seed(seed)) * scale,)


def test_a_list_written_by_the_loop_index_under_a_data_dependent_continue():
    """YOLOv5's ``output[xi] = x[i]`` after ``if not x.shape[0]: continue``: each branch writes its
    copy, the entries (0 rows or some) are selected, and the list a second name holds sees them."""
    model = m.WrittenUnderAContinue()
    inputs = [images(s, r, sc) for s, r in ((0, 1), (1, 3), (2, 6)) for sc in (0.3, 1.0, 2.0)]
    kept = {tuple(o.shape[0] for o in model(*i)) for i in inputs}
    assert {0, 1} <= {k for pair in kept for k in pair} and max(max(p) for p in kept) >= 2, kept  # continue taken and not
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, images(1, 3, 1.0), dynamic_shapes=({1: B},))
    assert exported.ops.get("Where", 0) >= 1, exported.ops
    assert_matches_eager(model, exported, inputs)


def test_each_side_of_an_if_writes_its_own_entry_of_a_list():
    model = m.WrittenInBothBranches()
    inputs = [(rand(2, 3, seed=s),) for s in range(6)] + [(torch.ones(2, 3),), (-torch.ones(2, 3),)]
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, inputs[0])
    assert exported.ops.get("Where", 0) >= 1, exported.ops
    assert_matches_eager(model, exported, inputs)


REFUSALS = {
    "replaced_in_the_inner_loop": (m.ReplacedInTheInnerLoop, (rand(3), n(3)),
                                   r"loop variable 'parts' is a list that changes in a data-dependent loop"),
    "indexed_by_the_bare_list": (m.IndexedByTheBareList, (rand(3, 4), rand(3)),
                                 r"t\[picked\] with list 'picked' grown in a data-dependent loop as the whole index"),
    "none_entry_written_under_a_continue": (m.NoneEntryWrittenUnderAContinue, images(1, 3, 1.0),
                                            r"if: 'output' is None in the false branch but a value in the other"),
}


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
@pytest.mark.parametrize("name", list(REFUSALS))
def test_what_cannot_be_exact_is_refused_in_one_line_at_the_users_line(name):
    cls, args, pattern = REFUSALS[name]
    model = cls()
    model(*args)  # eager runs
    with pytest.raises(ControlFlowError) as info:
        with convert_control_flow(model):
            torch.export.export(model, args, strict=False)
    message = str(info.value)
    assert "\n" not in message and re.search(pattern, message), message
    assert f"nested_list_models.py:{line_in_source(cls.forward, '# error-line')}" in message, message
