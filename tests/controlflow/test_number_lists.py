"""Python lists of ints indexed or written at run time inside converted loops and branches.

``dold = list(range(m + 1))``, ``dnew = [0 for _ in range(m + 1)]``, ``marks = [0] * len(x)``
sized by a dynamic dimension and used only by item reads/writes and ``len()`` are held as an
int64 tensor while the converted code runs (converters/number_lists.py,
operators/lists/number_lists.py); a list of ints of any length read at a computed index
(``table[x.argmax()]``) is read from a tensor of its items (operators/indexing.py; outside bodies dynamo traces). Differential:
eager vs ONNX Runtime on inputs that take both sides of every branch, trip counts 0, 1, 2, N,
sizes 1 and others along the dynamic dimensions. A float written into such a list is refused in
one line at the user's line; a list used any other way is left as written.
"""

import inspect

import pytest
import torch
from torch import nn

import fxport
from fxport.controlflow import converted_source
from fxport.controlflow.operators.lists import number_lists
from tests.controlflow._util import assert_every_branch_taken, assert_matches_eager, export_to_ort, trip_counts

N = torch.export.Dim("n", min=1, max=64)
M = torch.export.Dim("m", min=1, max=64)


def two_row_distance(seq1, seq2):
    """The Levenshtein distance with two rows of Python ints swapped each trip (torchaudio's)."""
    m = len(seq2)
    dold = list(range(m + 1))
    dnew = [0 for _ in range(m + 1)]
    for i in range(1, len(seq1) + 1):
        dnew[0] = i
        for j in range(1, m + 1):
            if seq1[i - 1] == seq2[j - 1]:
                dnew[j] = dold[j - 1]
            else:
                dnew[j] = min(dold[j - 1] + 1, dnew[j - 1] + 1, dold[j] + 1)
        dnew, dold = dold, dnew
    return int(dold[-1])


class TwoRowDistance(nn.Module):
    def forward(self, a, b):
        return torch.tensor(two_row_distance(a, b))


class RunLengths(nn.Module):
    """``marks = [0] * len(x)``: a run length per position, ``marks[i - 1]`` at i = 0 is the last item
    (Python's negative index), then ``marks[j] += ...`` and a weighted sum read back."""

    def forward(self, x):
        marks = [0] * len(x)
        for i in range(len(x)):
            if x[i] > 0:
                marks[i] = marks[i - 1] + 1
        for j in range(len(marks)):
            marks[j] += 2
        acc = x.new_zeros(())
        for k in range(len(x)):
            acc = acc + marks[k] * x[k]
        return acc


class ConstantTableAtArgmax(nn.Module):
    """A Python list of ints (and one of bools) read at an index computed from the input."""

    def forward(self, x):
        table = [3, -1, 4, 1, 5]
        flags = [True, False, True, True, False]
        k = x.argmax()
        return x * table[k] + flags[k - 5]


class FloatIntoIntList(nn.Module):
    def forward(self, x):
        marks = [0] * len(x)
        for i in range(len(x)):
            if x[i] > 0:
                marks[i] = 0.5
        return x + marks[0]


def _mark(xs, i):
    xs[i] = 1


class PassedOn(nn.Module):
    """dbscan's ``labels = [0] * len(D)`` written by the function it is passed to."""

    def forward(self, x):
        marks = [0] * len(x)
        _mark(marks, 0)
        return x + marks[0]


class AppendedList(nn.Module):
    def forward(self, x):
        marks = [0] * len(x)
        marks.append(1)
        return x + len(marks)


def _seq(*values):
    return torch.tensor(values, dtype=torch.long)


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02, round eight)
def test_two_rows_of_ints_swapped_each_trip_convert():
    model = TwoRowDistance()
    inputs = [(_seq(4), _seq(4)), (_seq(4), _seq(5)), (_seq(1, 2), _seq(2)), (_seq(2, 7, 1), _seq(5)),
              (_seq(1, 2, 3, 4, 5), _seq(1, 2, 3, 4, 5)), (_seq(6, 1, 6, 2), _seq(1, 6, 2, 2, 6, 1)),
              (_seq(3, 1, 4, 1), _seq(3, 1, 5, 9, 2))]
    assert_every_branch_taken(model, inputs)
    assert {1, 2, 4, 5} <= set().union(*trip_counts(model, inputs).values())
    assert "number_lists.range_list" in converted_source(two_row_distance)
    exported = export_to_ort(model, inputs[-1], dynamic_shapes=({0: N}, {0: M}))
    assert exported.ops.get("Loop", 0) >= 2 and exported.ops.get("Where", 0) >= 1
    assert_matches_eager(model, exported, inputs, atol=0, rtol=0)


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02, round eight)
def test_a_list_sized_by_a_dynamic_dimension_is_written_at_the_counter():
    model = RunLengths()
    inputs = [(torch.tensor([1.0]),), (torch.tensor([-1.0]),), (torch.tensor([1.0, 2.0]),),
              (torch.tensor([-1.0, 2.0, 3.0, -4.0, 5.0]),), (torch.tensor([2.0, 1.0, 0.5, 3.0, 1.5, 1.0, 7.0]),)]
    assert_every_branch_taken(model, inputs)
    assert {1, 2, 5} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, inputs[3], dynamic_shapes=({0: N},))
    assert exported.ops.get("Loop", 0) >= 3
    assert_matches_eager(model, exported, inputs)


def test_a_python_list_of_ints_is_read_at_a_computed_index():
    model = ConstantTableAtArgmax()
    inputs = [(torch.eye(5)[k] - 0.5,) for k in range(5)]
    exported = export_to_ort(model, inputs[1])
    assert exported.ops.get("Gather", 0) + exported.ops.get("GatherND", 0) >= 2
    assert_matches_eager(model, exported, inputs, atol=0, rtol=0)


def test_a_python_list_of_ints_in_a_loop_body_is_still_refused_at_its_line():
    """Inside a body dynamo traces, reading an item of a list of numbers read from data (t.tolist())
    cannot be lifted into it, and the items cannot be told apart from constants without reading them."""
    class TableInLoop(nn.Module):
        def forward(self, x, steps):
            table = [3, -1, 4, 1, 5]
            i = torch.zeros((), dtype=torch.long)
            while i < steps:
                x = x * table[i % 5]
                i = i + 1
            return x

    with pytest.raises(fxport.ControlFlowError) as info:
        export_to_ort(TableInLoop(), (torch.ones(2), torch.tensor(3)))
    assert "a Python list indexed by a value computed at run time" in str(info.value)
    assert f":{inspect.getsourcelines(TableInLoop.forward)[1] + 4}" in str(info.value)


def test_a_float_written_into_a_list_of_ints_is_refused_at_its_line():
    with pytest.raises(fxport.ControlFlowError) as info:
        export_to_ort(FloatIntoIntList(), (torch.tensor([1.0, -2.0]),), dynamic_shapes=({0: N},))
    message = str(info.value)
    line = inspect.getsourcelines(FloatIntoIntList.forward)[1] + 4
    assert "a float is written into a list of ints" in message and f":{line}" in message
    assert "\n" not in message


def observed_path(x, observations=None):
    """allennlp's viterbi_decode: a parameter rebound to ``[-1 for _ in range(n)]`` when not given."""
    n = x.shape[0]
    if observations:
        if len(observations) != n:
            raise ValueError("observations of another length")
    else:
        observations = [-1 for _ in range(n)]
    acc = x[0]
    for t in range(1, n):
        if observations[t] != -1:
            acc = acc * 0
        else:
            acc = torch.maximum(acc, acc + x[t])
    return acc


class ObservedPath(nn.Module):
    def forward(self, x):
        return observed_path(x)


def test_a_list_of_one_constant_reads_as_the_constant():
    model = ObservedPath()
    inputs = [(torch.randn(k, 3, generator=torch.Generator().manual_seed(k)),) for k in (1, 2, 3, 8)]
    assert {0, 1, 2, 7} <= set().union(*trip_counts(model, inputs).values())
    assert "number_lists.uniform_range(-1" in converted_source(observed_path)
    exported = export_to_ort(model, inputs[2], dynamic_shapes=({0: N},))
    assert exported.ops.get("Loop") == 1 and not exported.ops.get("If")
    assert_matches_eager(model, exported, inputs)


def test_a_list_of_one_constant_used_otherwise_is_refused_at_its_line():
    source = converted_source(AppendedList.forward)
    assert "number_lists.uniform(0" in source and "repeat" not in source
    with pytest.raises(fxport.ControlFlowError) as info:
        export_to_ort(AppendedList(), (torch.tensor([1.0, -2.0]),), dynamic_shapes=({0: N},))
    message = str(info.value)
    line = inspect.getsourcelines(AppendedList.forward)[1] + 2
    assert "is used with .append()" in message and f":{line}" in message and "\n" not in message
    assert number_lists.repeat(0, 2) == [0, 0]  # at a static length: the list as written
    with pytest.raises(fxport.ControlFlowError) as info:
        export_to_ort(PassedOn(), (torch.tensor([1.0, -2.0]),), dynamic_shapes=({0: N},))
    message = str(info.value)
    # in _mark (at its def line: the item store SliceConverter writes carries no line of its own)
    lines = range(inspect.getsourcelines(_mark)[1], inspect.getsourcelines(_mark)[1] + 2)
    assert "is written" in message and any(f"test_number_lists.py:{n};" in message for n in lines) and "\n" not in message


def test_static_lengths_stay_python_lists():
    assert number_lists.repeat(0, 3) == [0, 0, 0] and number_lists.range_list(1, 7, 2) == [1, 3, 5]
    assert number_lists.repeat_range(-1, 2) == [-1, -1] and number_lists.repeat(0.5, 2) == [0.5, 0.5]
    assert number_lists.uniform(None, 2) == [None, None] and number_lists.uniform_range(0, 2, 5) == [0, 0, 0]
