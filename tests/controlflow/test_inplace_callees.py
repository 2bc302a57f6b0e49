"""Tensors written in place where the converter's reading of the source cannot see it are loop
state too: a function the loop body calls writes its argument (``state[5*i+1] = x`` in a method
called with ``state``), a function defined inside the converted one writes the enclosing
function's tensor (``def find(i): ... parent[i] = parent[parent[i]]``), a write goes through
chained indexing (``base_mat[i][count+k][j] = 1``).

Each case is differential: eager (the user's module) against ONNX Runtime on inputs whose trip
counts are 0, 1, 2 and N (checked by the eager coverage notes), with the ``Loop`` in the file;
the tensor written must hold eager's value after the loop, also through an alias of it.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fxport.errors import ConversionError
from tests.controlflow._util import assert_matches_eager, export_to_ort, line_in_source, trip_counts

DYNAMIC = torch.export.Dim.DYNAMIC


def _ones(count: int) -> torch.Tensor:
    return torch.ones(count, dtype=torch.int64)


def _assert_trips(model, inputs, wanted=(0, 1, 2)) -> None:
    seen = set().union(*trip_counts(model, inputs).values())
    assert set(wanted) <= seen, f"inputs run the loops {sorted(seen)} times, not {sorted(wanted)}"


# --- a function the body calls writes its argument --------------------------------------------


def add_into(buf, x):
    buf[0] = buf[0] + x.sum()  # the caller's tensor, written in place
    return x * 0.5


class FreeTensorWrittenByCallee(nn.Module):
    """``buf`` is only read by the loop body as the converter sees it; ``add_into`` writes it."""

    def forward(self, x, n):
        buf = torch.zeros(3)
        alias = buf
        i = torch.zeros((), dtype=torch.int64)
        while i < n.sum():
            x = add_into(buf, x)
            i = i + 1
        return x, alias * 1


def accumulate(h, x):
    h.add_(x)
    return h


class StateGivenBack(nn.Module):
    """``h = accumulate(h, x)``: written in place by the callee and returned as the same object."""

    def forward(self, x, n):
        h = torch.zeros_like(x)
        alias = h
        for t in range(n.shape[0]):
            h = accumulate(h, x * (t + 1))
        return h, alias * 1


def double_then_shift(h, x):
    h.mul_(2)  # written in place, then a new tensor returned: the loop rebinds h
    return h + x


class StateRebound(nn.Module):
    """The tensor ``h`` starts from holds what the first trip wrote into it, not the final value."""

    def forward(self, x, n):
        h = x.clone()
        alias = h
        for t in range(n.shape[0]):
            h = double_then_shift(h, x)
        return h, alias * 1


class RowsWrittenByMethods(nn.Module):
    """ChatRWKV's shape: ``state`` is None before the loop (the first trip makes it, peeled), the
    methods the step calls write its rows in place (``state[2*i] = x``) and return it."""

    def __init__(self):
        super().__init__()
        self.layers = 2

    def mix(self, x, state, i: int):
        previous = state[2 * i].clone()
        state[2 * i] = x
        state[2 * i + 1] = state[2 * i + 1] * 0.5 + x
        return torch.tanh(x + previous)

    def step(self, x, state):
        if state is None:
            state = torch.zeros(self.layers * 2, x.shape[0])
        for i in range(self.layers):
            x = x + self.mix(x, state, i)
        return x, state

    def forward(self, tokens):
        state = None
        out = torch.zeros(tokens.shape[1])
        for token in tokens:
            out, state = self.step(token, state)
        return out


def add_sum(buf, x):
    buf += x
    return buf.sum()


class InnerLoopWritesItsOwnFree(nn.Module):
    """A data-dependent loop inside another: the inner one's ``buf`` is written by the callee; in
    the outer body dynamo traces, the inner loop carries it as its probe (run outside) found."""

    def forward(self, x, n, m):
        out = torch.zeros(3)
        for a in range(n.shape[0]):
            buf = torch.zeros(3)
            for b in range(m.shape[0]):
                x = x * 0.5 + add_sum(buf, x) * 0.1
            out = out + buf
        return out, x


class BreakAfterPythonIterations(nn.Module):
    """A static ``range`` whose break turns traced after a trip run as Python: the trip's writes by
    the callee are not made a second time when the loop continues as a while_loop."""

    def forward(self, x):
        buf = torch.zeros(3)
        for t in range(5):
            total = add_into(buf, x)
            if total.sum() > 3:
                break
        return buf


def test_a_tensor_only_read_by_the_body_and_written_by_a_called_function_is_carried():
    model = FreeTensorWrittenByCallee()
    x = torch.randn(4)
    inputs = [(x, torch.tensor([k])) for k in (0, 1, 2, 5)]
    _assert_trips(model, inputs, (0, 1, 2, 5))
    exported = export_to_ort(model, (x, torch.tensor([3])))
    assert exported.ops.get("Loop")
    assert_matches_eager(model, exported, inputs)


@pytest.mark.parametrize("make", [StateGivenBack, StateRebound])
def test_loop_state_written_by_a_called_function_is_cloned_per_trip_and_written_back(make):
    model = make()
    inputs = [(torch.randn(3), _ones(k)) for k in (0, 1, 2, 4)]
    _assert_trips(model, inputs, (0, 1, 2, 4))
    exported = export_to_ort(model, (torch.randn(3), _ones(3)), dynamic_shapes={"x": None, "n": {0: DYNAMIC}})
    assert exported.ops.get("Loop")
    assert_matches_eager(model, exported, inputs)


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_state_none_before_the_loop_whose_rows_methods_write_in_place():
    model = RowsWrittenByMethods()
    inputs = [(torch.randn(k, 3),) for k in (0, 1, 2, 5)]
    _assert_trips(model, inputs, (0, 1, 2, 5))
    exported = export_to_ort(model, (torch.randn(4, 3),), dynamic_shapes={"tokens": {0: DYNAMIC}})
    assert exported.ops.get("Loop")
    assert_matches_eager(model, exported, inputs, atol=1e-5, rtol=1e-4)


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_loop_inside_a_traced_loop_body_carries_what_a_called_function_writes():
    model = InnerLoopWritesItsOwnFree()
    inputs = [(torch.randn(3), _ones(k), _ones(j)) for k, j in ((0, 1), (1, 0), (1, 1), (2, 2), (3, 4))]
    _assert_trips(model, inputs, (0, 1, 2, 3, 4))
    exported = export_to_ort(model, (torch.randn(3), _ones(2), _ones(3)),
                             dynamic_shapes={"x": None, "n": {0: DYNAMIC}, "m": {0: DYNAMIC}})
    assert exported.ops.get("Loop")
    assert_matches_eager(model, exported, inputs)


def test_a_trip_run_as_python_before_the_break_turns_traced_is_not_run_again():
    model = BreakAfterPythonIterations()
    inputs = [(torch.full((3,), v),) for v in (0.1, 0.5, 2.0, 5.0)]  # break after 5, 5, 1 and 1 trips
    exported = export_to_ort(model, (torch.full((3,), 0.5),))
    assert exported.ops.get("Loop")
    assert_matches_eager(model, exported, inputs)


# --- a function defined inside the converted one writes the enclosing function's tensor -------


class UnionFind(nn.Module):
    """Path-halving union-find: ``find`` (a nested function) writes ``parent`` in its own
    data-dependent ``while``; two loops call it, the second only reading ``parent`` itself."""

    def forward(self, edges, nodes):
        parent = torch.arange(nodes.shape[0])

        def find(i):
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for e in range(edges.shape[0]):
            ra = find(edges[e, 0])
            rb = find(edges[e, 1])
            if ra != rb:
                parent[ra] = rb
        labels = torch.zeros(nodes.shape[0], dtype=torch.long)
        for i in range(nodes.shape[0]):
            labels[i] = find(i)
        return labels, parent


class NestedReadsLoopState(nn.Module):
    """``scaled`` reads ``acc``, which the loop rebinds: each call sees the body's current value."""

    def forward(self, x, n):
        acc = x.clone()

        def scaled():
            return acc * 2

        y = x
        for t in range(n.shape[0]):
            acc = acc + 1
            y = scaled() + y
        return y


def _edges(*pairs):
    return torch.tensor(pairs, dtype=torch.int64).reshape(-1, 2)


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_a_nested_function_writing_the_enclosing_tensor_in_two_loops():
    model = UnionFind()
    inputs = [(_edges(), torch.zeros(3)), (_edges((0, 1)), torch.zeros(2)),
              (_edges((0, 1), (1, 2)), torch.zeros(3)), (_edges((0, 1), (2, 3), (1, 3), (4, 4), (3, 0)), torch.zeros(6)),
              (_edges((3, 2), (2, 1), (1, 0)), torch.zeros(1 + 3))]
    _assert_trips(model, inputs, (0, 1, 2, 5))
    exported = export_to_ort(model, inputs[3], dynamic_shapes={"edges": {0: DYNAMIC}, "nodes": {0: DYNAMIC}})
    assert exported.ops.get("Loop", 0) >= 2
    assert_matches_eager(model, exported, inputs)


def test_a_nested_function_reads_the_value_the_loop_body_gave_a_variable():
    model = NestedReadsLoopState()
    inputs = [(torch.randn(3), _ones(k)) for k in (0, 1, 2, 4)]
    _assert_trips(model, inputs, (0, 1, 2, 4))
    exported = export_to_ort(model, (torch.randn(3), _ones(3)), dynamic_shapes={"x": None, "n": {0: DYNAMIC}})
    assert exported.ops.get("Loop")
    assert_matches_eager(model, exported, inputs)


# --- chained indexing ----------------------------------------------------------------------------


class ChainedIndexWrites(nn.Module):
    """FastSpeech's ``create_alignment``: ``base_mat[i][count + k][j] = 1`` inside a loop over a
    duration read from the tensor; ``[i]`` picks one position, so the write reaches ``base_mat``."""

    def forward(self, durations, base):
        base_mat = base.clone()
        n, length = durations.shape
        for i in range(n):
            count = 0
            for j in range(length):
                for k in range(durations[i][j]):
                    base_mat[i][count + k][j] = 1
                count = count + durations[i][j]
        return base_mat


class ChainedNonPositions(nn.Module):
    """A slice first (a view: written) and an index tensor first (a copy: eager writes nothing)."""

    def forward(self, x, n):
        out = x.clone()
        rows = torch.tensor([0, 1])
        for t in range(n.shape[0]):
            out[1:][t] += 1.0
            out[rows][t % 2] = 5.0
        return out


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_a_write_through_chained_indexing_in_a_data_dependent_loop():
    model = ChainedIndexWrites()
    cases = [[[0, 0]], [[1, 0]], [[2, 0, 1]], [[3, 1, 2, 4, 1]], [[1, 2, 2]]]
    inputs = []
    for rows in cases:
        durations = torch.tensor(rows)
        inputs.append((durations, torch.zeros(durations.shape[0], max(1, int(durations.sum(1).max())), durations.shape[1])))
    _assert_trips(model, inputs, (0, 1, 2, 4))
    exported = export_to_ort(model, inputs[3], dynamic_shapes={"durations": {1: DYNAMIC}, "base": {1: DYNAMIC, 2: DYNAMIC}})
    assert exported.ops.get("Loop")
    assert_matches_eager(model, exported, inputs)


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_chained_indexing_through_a_slice_writes_and_through_an_index_tensor_does_not():
    model = ChainedNonPositions()
    inputs = [(torch.randn(4, 3), _ones(k)) for k in (0, 1, 2, 3)]
    _assert_trips(model, inputs, (0, 1, 2, 3))
    exported = export_to_ort(model, (torch.randn(4, 3), _ones(3)), dynamic_shapes={"x": None, "n": {0: DYNAMIC}})
    assert exported.ops.get("Loop")
    assert_matches_eager(model, exported, inputs)


# --- refused in one line at the loop -----------------------------------------------------------


class BufferWrittenByMethod(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(3))

    def count(self, x):
        self.total.add_(x)
        return x

    def forward(self, x, n):
        for t in range(n.shape[0]):
            x = self.count(x) * 0.5
        return x + self.total


def touch(row, x):
    row.add_(x)
    return x


class ViewWrittenBesideItsBase(nn.Module):
    def forward(self, x, n):
        y = torch.zeros(2, 3)
        row = y[0]
        for t in range(n.shape[0]):
            x = touch(row, x) + y.sum()
        return x, y


def add_in_place(buf, x):
    buf.add_(x)
    return x + 1


class BranchWritesThroughCallee(nn.Module):
    """Both sides of an if selected with where run: ``add_in_place`` would write ``buf`` whatever
    the condition."""

    def forward(self, x, n):
        buf = torch.zeros(3)
        for t in range(n.shape[0]):
            if x.sum() > t:
                x = add_in_place(buf, x)
        return x, buf


def test_a_buffer_a_method_writes_in_place_is_carried():
    """``self.total.add_(x)`` in a method the loop calls: the method runs on an overlay of the
    carried buffer (method_state.py), which is written back after the loop. Eager runs on a
    fresh copy per input set (the buffer accumulates across calls)."""
    import copy

    model = BufferWrittenByMethod()
    exported = export_to_ort(copy.deepcopy(model), (torch.randn(3) + 1, _ones(3)),
                             dynamic_shapes={"x": None, "n": {0: DYNAMIC}})
    for n in (0, 1, 2, 5):
        args = (torch.tensor([1.0, -2.0, 0.5]), _ones(n))
        assert_matches_eager(copy.deepcopy(model), exported, [args])
    assert exported.ops.get("Loop")


@pytest.mark.parametrize("make, refusal, line", [
    (ViewWrittenBesideItsBase, "'row' and 'y' share memory", "for t in range"),
    (BranchWritesThroughCallee, "a function its true branch calls writes 'buf' in place", "if x.sum() > t"),
])
def test_writes_that_cannot_be_carried_are_refused_at_the_statement(make, refusal, line):
    model = make()
    with pytest.raises(ConversionError) as raised:
        export_to_ort(model, (torch.randn(3) + 1, _ones(3)), dynamic_shapes={"x": None, "n": {0: DYNAMIC}})
    message = str(raised.value).splitlines()[0]
    assert refusal in message
    assert raised.value.where.lineno == line_in_source(make.forward, line)


def test_nested_functions_beside_generated_code_convert():
    """A function whose try/except an earlier converter inlined (its names carry no source
    location) and that defines nested functions converts (transformers' cache registration,
    converted for --task models: it raised AttributeError 'lineno' and refused every beam search)."""
    from fxport.controlflow.install import converted_source
    from fxport.generation import caches

    assert "def flatten" in converted_source(caches._register_encoder_decoder_cache)
