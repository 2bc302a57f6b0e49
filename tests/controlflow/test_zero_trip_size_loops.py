"""A data-dependent loop whose test reads a dynamic size (``j = x.size(0) - 1; while j > 0``)
runs no trip where that size is 1; the file must keep that exit (issue #47, found in pytorch/audio's
forced-alignment ``backtrack``: ``while j > 0`` with ``j = num_tokens - 1`` at one token).

Such a loop carries a tensor with an axis of static size 1 (a ``(1,)`` accumulator, the rows of a
list grown in the loop, a list's count). torch traces the ``while_loop`` body with dynamo, which
gives that axis a fresh size symbol, and the control-flow runtime restates it there
(``torch._check(s == 1)``, ``restore_size_relations``). The size-oblivious capture's stop at
size-1 pins (fxport/capture/size_one_stop.py) took that guard for a pin of an input size and threw
the capture away; the capture from the example grown to size 2 then decided the loop's first test
as true, and the file ran a trip at one row where eager runs none: wrong values or shapes at size 1
(refused by verification, "limited by torch.export's 0/1 specialisation (... it needs
L['args'][2][0].size()[0] == 1)"), or, in the backtrack, a slice sized for two tokens and more that
ONNX Runtime's Gather failed on. The stop now fires only on a size of a declared dimension.

Differential: eager vs ONNX Runtime at 0, 1, 2 and N trips (rows 1, 2, 3, 7; data-dependent steps;
one row or one column of a table), the Loop asserted in the graph; the full pipeline verifies size 1
and reports the loop run 0 times; the capture keeps sizes 0 and 1 for a while_loop and a cond whose
operand has a size-1 axis.
"""

from __future__ import annotations

import warnings
from collections import namedtuple

import pytest
import torch
from torch.export import Dim

import fxport
import fxport.testing
from fxport.engine.pipeline import run
from tests.controlflow._util import assert_matches_eager, export_to_ort, trip_counts


class SumUpTheRows(torch.nn.Module):
    """From the last row up to row 1, a one-element accumulator: rows - 1 trips."""

    def forward(self, x):
        j = x.size(0) - 1
        acc = torch.zeros(1)
        while j > 0:
            acc = acc * 0.5 + x[j, :1]
            j -= 1
        return acc


class RowsListedUpwards(torch.nn.Module):
    """A list of one-element rows grown while walking up the rows, joined after the loop."""

    def forward(self, x):
        j = x.size(0) - 1
        rows = [x[j, :1]]
        while j > 0:
            j -= 1
            rows.append(x[j, :1] * 2)
        return torch.cat(rows)


class SkipUpwards(torch.nn.Module):
    """Walking up one row, or two where the row's second value is positive (a step the data
    decides: the counter becomes a tensor in the first trip)."""

    def forward(self, x):
        j = x.size(0) - 1
        rows = [x[j, :1]]
        while j > 0:
            if x[j, 1] > 0:
                j -= 1
            j -= 1
            rows.append(x[j, :1])
        return torch.cat(rows)


Cell = namedtuple("Cell", ["column", "row", "value"])


class ColumnsWalkedBack(torch.nn.Module):
    """From the bottom-right cell back to column 0: up one row per trip, left one column where the
    left neighbour is larger; cells recorded as namedtuples, returned first cell first, read by field."""

    def forward(self, table):
        t, j = table.size(0) - 1, table.size(1) - 1
        path = [Cell(j, t, table[t, j].item())]
        while j > 0 and t > 0:
            t -= 1
            if table[t, j - 1] > table[t, j]:
                j -= 1
            path.append(Cell(j, t, table[t, j].item()))
        path = path[::-1]
        return (torch.tensor([[c.column, c.row] for c in path], dtype=torch.long),
                torch.tensor([c.value + 1 for c in path]))


class ScaledWhenPositive(torch.nn.Module):
    """A converted ``if`` (a cond) whose operand has a static axis of size 1 (``x[-1:, 0]``)."""

    def forward(self, x):
        last = x[-1:, 0]
        if x.mean() > 0:
            last = last * 2 + x[:1, 1]
        return last, x * 3


def _rows(seed: int, *counts: int) -> list[tuple]:
    gen = torch.Generator().manual_seed(seed)
    return [(torch.randn(n, 2, generator=gen),) for n in counts]


_ROWS = {"n": Dim("n", min=0)}


def _skipping_rows() -> list[tuple]:
    """Rows 1 (no trip), 2 (one trip), 3 with a skip (one trip) and without (two), 7 mixed."""
    minus, plus = -1.0, 1.0
    return [(torch.tensor([[0.5, minus]]),), (torch.tensor([[0.5, minus], [1.5, minus]]),),
            (torch.tensor([[0.5, minus], [1.5, minus], [2.5, plus]]),),
            (torch.tensor([[0.5, minus], [1.5, minus], [2.5, minus]]),),
            (torch.tensor([[float(k), plus if k % 3 == 0 else minus] for k in range(7)]),)]


@pytest.mark.slow  # 4.5 s or more: it runs with the slow set in CI
@pytest.mark.parametrize("model, inputs, trips", [
    (SumUpTheRows(), _rows(0, 1, 2, 3, 7), {0, 1, 2, 6}),
    (RowsListedUpwards(), _rows(1, 1, 2, 3, 7), {0, 1, 2, 6}),
    (SkipUpwards(), _skipping_rows(), {0, 1, 2, 4}),
], ids=["accumulator", "grown-list", "data-dependent-step"])
def test_a_while_on_a_size_carrying_an_axis_of_one_equals_eager_with_no_trip_at_size_one(model, inputs, trips):
    assert set().union(*trip_counts(model, inputs).values()) == trips
    exported = export_to_ort(model, _rows(9, 5)[0], dynamic_shapes=({0: _ROWS["n"]},))
    assert exported.ops.get("Loop"), exported.ops
    assert_matches_eager(model, exported, inputs)


@pytest.mark.slow  # 4.5 s or more: it runs with the slow set in CI
def test_records_walked_back_from_one_row_or_one_column_equal_eager():
    """No step where the table has one row or one column (either side of the ``and`` false at the
    first test), one step, and walks ended by each side."""
    model = ColumnsWalkedBack()
    gen = torch.Generator().manual_seed(3)
    tables = [(torch.rand(1, 1, generator=gen),), (torch.rand(1, 4, generator=gen),), (torch.rand(4, 1, generator=gen),),
              (torch.rand(2, 2, generator=gen),), (torch.rand(6, 3, generator=gen),), (torch.rand(3, 6, generator=gen),)]
    trips = set().union(*trip_counts(model, tables).values())
    assert {0, 1, 2} <= trips and max(trips) > 2, trips
    exported = export_to_ort(model, (torch.rand(6, 3, generator=gen),),
                             dynamic_shapes=({0: Dim("rows", min=0), 1: Dim("columns", min=0)},))
    assert exported.ops.get("Loop"), exported.ops
    assert_matches_eager(model, exported, tables)


@pytest.mark.slow  # 4.5 s or more: it runs with the slow set in CI
def test_the_file_keeps_the_no_trip_exit_and_verification_runs_it():
    """The whole pipeline: the range of ``n`` is the declared one, size 1 is among the verified
    sets, and coverage reports the loop run 0 times."""
    model = RowsListedUpwards().eval()
    result = fxport.convert(model, _rows(4, 5)[0], dynamic_shapes=({0: "n"},), verify_inputs=_rows(5, 1))
    assert result.verified
    assert not any("narrowed" in w or "limited" in w for w in result.warnings), result.warnings
    assert 1 in {row.input_shapes[0][0] for row in result.verification}
    (loop,) = [c for c in result.coverage if c["kind"] == "while"]
    assert 0 in loop["outcomes"], loop
    assert "Loop" in result.op_counts()
    for args in _rows(6, 1, 2, 7):
        fxport.testing.compare_with_eager(model, result.model, args, 1e-5, 1e-4)


@pytest.mark.parametrize("model", [SumUpTheRows(), ScaledWhenPositive()], ids=["while_loop", "cond"])
def test_a_guard_on_a_size_one_axis_of_a_body_operand_does_not_stop_the_size_oblivious_capture(model, monkeypatch):
    """The size-oblivious capture of a model whose loop body or branch gets an operand with a
    static axis of size 1 is the one that succeeds, and keeps ``n`` down to 0 (it used to stop with
    SizeOneGuard on the operand's own symbol and fall back to a capture from size 2)."""
    import fxport.capture.program as capture_module

    attempts, original = [], capture_module._export

    def export(module, inputs, spec, oblivious=False):
        try:
            program = original(module, inputs, spec, oblivious)
        except Exception as exc:
            attempts.append((oblivious, type(exc).__name__))
            raise
        attempts.append((oblivious, "captured"))
        return program

    monkeypatch.setattr(capture_module, "_export", export)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        job = run(model.eval(), _rows(7, 5)[0], dynamic_shapes=({0: "n"},), until="capture")
    assert attempts == [(True, "captured")], attempts
    (size,) = [n.meta["val"].shape[0] for n in job.program.graph.nodes if n.op == "placeholder" and n.name == "x"]
    assert job.program.range_constraints[size.node.expr].lower == 0, job.program.range_constraints
