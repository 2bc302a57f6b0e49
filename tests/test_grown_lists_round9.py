"""Lists grown in loops, round nine (issue #47, loops in the wild).

* ``xs.insert(0, v)`` in a data-dependent loop (pytorch_HMM's Viterbi backtrace,
  ``z_star_i.insert(0, z_t)`` with ``z_star_i[0]`` read on every trip): a list grown at the front,
  carried as a list grown with ``append`` whose rows are read last first
  (``fxport/controlflow/operators/lists/front.py``). Wherever ``append`` converts: a ``for`` over a
  range (one pass), a ``while`` (two passes), a read inside the loop (the stack it carries), under
  a tensor condition, with elements before the loop and appends after it. Another index, or both
  ends in one loop, are refused in one line at the user's line.
* ``torch.tensor(result)`` of a list of tuples of numbers grown in a ``while`` whose first trip
  runs as Python (Whisper's DTW backtrace ``result.append((i - 1, j - 1))``): the tuple appended
  before the loop became a tensor loop is one row like the others (``lists/elements.py``).

Each model is compared with eager (ONNX Runtime) on trip counts 0, 1, 2 and N and every exit, and
the graph holds a Loop.
"""

from __future__ import annotations

import pytest
import torch

import fxport
from tests.controlflow._util import (assert_every_branch_taken, assert_matches_eager, export_to_ort, line_in_source,
                                    loop_exits, trip_counts)

_T = {"x": {0: "T"}}
_G = torch.Generator().manual_seed(0)


def _inputs():
    """0, 1, 2, 5 and 7 rows; rows that pass a test (sum > 0) and rows that do not."""
    pos, neg = torch.ones(3), -torch.ones(3)
    return [(torch.zeros(0, 3),), (pos[None] * 0.5,), (neg[None],), (torch.stack([pos, neg * 0.3]),),
            (torch.stack([neg, pos, neg, pos * 2, pos * 0.1]),), (torch.randn(7, 3, generator=_G),),
            (torch.stack([neg] * 4),)]


def _check(model, inputs=None, example=None, dynamic_shapes=_T, want=(0, 1, 2)):
    inputs = inputs or _inputs()
    trips = set().union(*trip_counts(model, inputs).values())
    assert set(want) <= trips, trips
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, example or (torch.randn(5, 3, generator=_G),), dynamic_shapes=dynamic_shapes)
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop"), exported.ops
    return exported


# --- insert(0, v): a list grown at the front -------------------------------------------------------


class Backtrace(torch.nn.Module):
    """pytorch_HMM's shape: ``path = [last]``; ``for t in range(T - 1, 0, -1): path.insert(0,
    psi[t, path[0]].item())``; ``torch.tensor(path)``. The read of ``path[0]`` makes the loop carry
    the stack (the element inserted last)."""

    def forward(self, psi, scores):
        path = [scores[-1].argmax().item()]
        for t in range(psi.shape[0] - 1, 0, -1):
            z = psi[t, path[0]].item()
            path.insert(0, z)
        return torch.tensor(path, dtype=torch.long)


def _backtrace_inputs():
    def make(steps):
        return (torch.randint(0, 4, (steps, 4), generator=_G), torch.randn(steps, 4, generator=_G))

    return [make(1), make(2), make(3), make(8)]


def test_a_backtrace_grown_at_the_front_reads_its_first_element():
    model = Backtrace()
    inputs = _backtrace_inputs()
    assert {0, 1, 2, 7} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, _backtrace_inputs()[2], dynamic_shapes={"psi": {0: "T"}, "scores": {0: "T"}})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop"), exported.ops


class BacktraceInAWhile(torch.nn.Module):
    """The backtrace as a ``while`` on a tensor counter with a ``break`` on the element just
    inserted: the read of ``path[0]`` on its first trip makes the loop carry the stack."""

    def forward(self, psi, scores):
        path = [scores[-1].argmax()]
        t = torch.tensor(psi.shape[0] - 1)
        while t > 0:
            path.insert(0, psi[t, path[0]])
            if path[0] == 3:
                break
            t -= 1
        return torch.stack(path)


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_backtrace_in_a_while_with_a_break():
    model = BacktraceInAWhile()
    inputs = _backtrace_inputs() + [(torch.full((4, 4), 3), torch.randn(4, 4, generator=_G))]
    exits = set().union(*loop_exits(model, inputs).values())
    assert len(exits) >= 2, exits  # the break and the test
    exported = export_to_ort(model, _backtrace_inputs()[2], dynamic_shapes={"psi": {0: "T"}, "scores": {0: "T"}})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop"), exported.ops


class FrontInAWhile(torch.nn.Module):
    """A ``while`` (two passes) grows the list at the front, one element before it and one appended
    after it; stacked and concatenated (a break exit and the test's exit)."""

    def forward(self, x):
        out = [x.new_full((3,), -1.0)]
        t = torch.zeros((), dtype=torch.long)
        while t < x.shape[0]:
            if x[t].sum() < -2:
                break
            out.insert(0, x[t] * 2)
            t += 1
        out.append(x.new_zeros(3))
        return torch.stack(out), torch.cat(out)


@pytest.mark.slow  # 6 s or more: the fast set stays under 12 minutes
def test_a_while_loop_grows_a_list_at_the_front():
    model = FrontInAWhile()
    exported = _check(model)
    assert exported.ops["Loop"] >= 2, exported.ops  # the count, then the rows
    exits = set().union(*loop_exits(model, _inputs()).values())
    assert len(exits) >= 2, exits


class FrontReadInsideTheLoop(torch.nn.Module):
    """A ``for`` over a range reading ``out[0]`` (the last inserted) and ``out[-1]`` (the first
    element, from before the loop) on every trip, with a break."""

    def forward(self, x):
        out = [x.new_ones(3), x.new_full((3,), 5.0)]
        acc = x.new_zeros(3)
        for t in range(x.shape[0]):
            acc = acc + out[0] - out[-1] * 0.1
            out.insert(0, torch.tanh(x[t] + out[0]))
            if acc.sum() > 4:
                break
        return torch.stack(out, 1), acc


def test_reads_inside_the_loop_of_a_list_grown_at_the_front():
    inputs = _inputs() + [(torch.full((6, 3), 3.0),)]
    _check(FrontReadInsideTheLoop(), inputs)


class FrontUnderACondition(torch.nn.Module):
    """``if x[t].sum() > 0: kept.insert(0, x[t])`` in a ``for`` over a range (rows kept, read back
    last first), ``len(kept)`` after it."""

    def forward(self, x):
        kept = []
        for t in range(x.shape[0]):
            if x[t].sum() > 0:
                kept.insert(0, x[t] + t)
        return torch.stack(kept + [x.new_zeros(3)]), torch.tensor(len(kept))


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_inserts_at_the_front_under_a_tensor_condition():
    _check(FrontUnderACondition())


class FrontIndexedAfterTheLoop(torch.nn.Module):
    """After the loop: ``xs[0]``, ``xs[-1]`` (the element from before it), ``[h] + xs``, and a second
    ``insert(0, ...)`` on the finished list."""

    def forward(self, x):
        xs = [x.new_full((3,), 7.0)]
        for t in range(x.shape[0]):
            xs.insert(0, x[t] * (t + 1))
        first, last = xs[0], xs[-1]
        xs.insert(0, x.new_ones(3))
        return torch.stack([x.new_zeros(3)] + xs), first + last


def test_a_list_grown_at_the_front_read_and_grown_after_its_loop():
    _check(FrontIndexedAfterTheLoop())


class NumbersAtTheFront(torch.nn.Module):
    """Numbers read from tensors (``.item()``) inserted at the front in a ``while`` on a tensor
    test, then the name rebound to ``torch.tensor`` of the list (int64) after the loop."""

    def forward(self, x):
        ids = [-1]
        t = torch.zeros((), dtype=torch.long)
        while t < x.shape[0]:
            ids.insert(0, x[t].argmax().item())
            t = t + 1
        ids = torch.tensor(ids)
        return ids


def test_numbers_inserted_at_the_front_read_by_torch_tensor():
    _check(NumbersAtTheFront())


class PathsPerRow(torch.nn.Module):
    """HMM's per-example backtrace: a fresh list per row of a ``for`` over a dynamic batch, grown at
    the front by a loop over ``range(lens[i] - 1, 0, -1)`` that reads its first element; one number
    of it per row collected (the outer loop's list)."""

    def forward(self, psi, lens):
        paths = []
        for i in range(psi.shape[0]):
            z = [psi[i, lens[i] - 1].argmax().item()]
            for t in range(lens[i] - 1, 0, -1):
                z.insert(0, psi[i, t, z[0]].item())
            path = torch.tensor(z, dtype=torch.long)
            paths.append(path.sum() * 10 + path[0])
        return torch.stack(paths)


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_list_grown_at_the_front_in_a_loop_nested_in_another():
    def make(batch, steps):
        return (torch.randint(0, 4, (batch, steps, 4), generator=_G),
                torch.randint(1, steps + 1, (batch,), generator=_G))

    model = PathsPerRow()
    inputs = [make(1, 1), make(3, 2), make(2, 6), (make(2, 4)[0], torch.tensor([4, 1]))]
    assert {0, 1, 3} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, make(2, 5), dynamic_shapes={"psi": {0: "B", 1: "L"}, "lens": {0: "B"}})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop", 0) >= 2, exported.ops


class FrontBesideAGrowingTensor(torch.nn.Module):
    """A loop whose state grows (``toks`` by ``torch.cat``) carries its list as a stack that grows:
    grown at the front, the stack is the list reversed."""

    def forward(self, x):
        toks = x[:1]
        hist = [x.new_zeros(3), x.new_ones(3)]
        for t in range(x.shape[0]):
            toks = torch.cat([toks, x[t:t + 1] * 2])
            hist.insert(0, toks.sum(0))
        return toks, torch.stack(hist)


def test_a_list_grown_at_the_front_in_a_loop_whose_state_grows():
    model = FrontBesideAGrowingTensor()
    inputs = [(torch.randn(n, 3, generator=_G),) for n in (1, 2, 3, 7)]
    exported = export_to_ort(model, (torch.randn(4, 3, generator=_G),), dynamic_shapes=_T)
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop"), exported.ops


class PythonInserts(torch.nn.Module):
    """A Python loop (a static range) inserting at any index stays Python."""

    def forward(self, x):
        xs = [x[0]]
        for k in range(3):
            xs.insert(1, x[0] * k)
            xs.insert(0, x[0] + k)
        return torch.stack(xs)


def test_inserts_in_a_python_loop_stay_python():
    model = PythonInserts()
    exported = export_to_ort(model, (torch.randn(4, 3, generator=_G),), dynamic_shapes=_T)
    assert_matches_eager(model, exported, [(torch.randn(n, 3, generator=_G),) for n in (1, 2, 6)])


# --- refused in one line at the user's line ---------------------------------------------------------


def _refusal(model, text: str) -> str:
    with pytest.raises(fxport.ConversionError) as raised:
        fxport.convert(model, (torch.randn(3, 3),), dynamic_shapes=_T, verify=False)
    message = str(raised.value)
    line = line_in_source(type(model).forward, text)
    assert "\n" not in message and f"test_grown_lists_round9.py:{line}" in message, message
    return message


class InsertElsewhere(torch.nn.Module):
    def forward(self, x):
        xs = [x[0]]
        for t in range(x.shape[0]):
            xs.insert(1, x[t])
        return torch.stack(xs)


def test_an_insert_at_another_index_is_refused_at_its_line():
    message = _refusal(InsertElsewhere(), "xs.insert(1, x[t])")
    assert "insert(0, ...)" in message, message


class BothEnds(torch.nn.Module):
    def forward(self, x):
        xs = []
        for t in range(x.shape[0]):
            xs.append(x[t])
            xs.insert(0, -x[t])
        return torch.stack(xs)


def test_a_list_grown_at_both_ends_is_refused_at_the_line():
    message = _refusal(BothEnds(), "xs.insert(0, -x[t])")
    assert "both ends" in message, message


# --- torch.tensor of tuples of numbers grown in a while ---------------------------------------------


class DtwBacktrace(torch.nn.Module):
    """Whisper's ``backtrace`` with the moves' counters as tensors from the start (its first trip as
    Python is the case below): ``result = [(n, m)]`` holds a tuple of sizes before the loop,
    ``result.append((i - 1, j - 1))`` in a ``while i > 0 or j > 0`` choosing moves by ``trace[i, j]``
    (its ``else: raise`` a check), then ``torch.tensor(result)`` and ``torch.flip(..., [0]).T``."""

    def forward(self, trace):
        i = torch.tensor(trace.shape[0] - 1)
        j = torch.tensor(trace.shape[1] - 1)
        trace = trace.clone()
        trace[0, :] = 2
        trace[:, 0] = 1
        result = [(trace.shape[0], trace.shape[1])]
        while i > 0 or j > 0:
            result.append((i - 1, j - 1))
            if trace[i, j] == 0:
                i -= 1
                j -= 1
            elif trace[i, j] == 1:
                i -= 1
            elif trace[i, j] == 2:
                j -= 1
            else:
                raise ValueError("Unexpected trace[i, j]")
        result = torch.tensor(result)
        return torch.flip(result, [0]).T


def _traces():
    def make(n, m):
        return (torch.randint(0, 3, (n, m), generator=_G).float(),)

    return [make(1, 1), make(2, 1), make(1, 4), make(2, 2), make(5, 3), make(3, 7), (torch.zeros(3, 3),)]


@pytest.mark.slow  # 6 s or more: the fast set stays under 12 minutes
def test_torch_tensor_of_tuples_grown_in_a_while_with_a_tuple_before_it():
    model = DtwBacktrace()
    inputs = _traces()
    assert {0, 1, 2} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, _traces()[4], dynamic_shapes={"trace": {0: "n", 1: "m"}})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop"), exported.ops
