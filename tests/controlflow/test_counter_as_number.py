"""The counter of a converted ``for`` used as a number in its body (issue #47).

Inside the ``while_loop`` body the counter is the loop's int64 tensor, and each use of it as a
number converts on its own: an index by it or by arithmetic of it (``cost[i - 1, j - 1]``,
``X[:, k % m]``) selects with ``index_select``; a write by one or more of them, beside slices
with traced bounds (``cost[i, j] = v``, ``H[:, 1:n + 1, 1:n + 1] = v``), is one ``index_put``;
``min``/``max`` of it go through ``torch.sym_min``/``sym_max``; a dynamic size as the Scalar of
``%``/``**`` becomes a 0-d tensor (graph pass ``symbolic-scalar-arguments``). whisper's DTW
converts, and so does the Deep Implicit Layers tutorial's Anderson window (``torch.eye(min(k, m))``
beside ``F[:, :n]``, refused until round twelve). Differential: eager
vs ONNX Runtime on inputs that take every exit at several sizes of the dynamic axes; the graph
holds the ``Loop``.
"""

from __future__ import annotations

import pytest
import torch

import fxport
import fxport.testing
from tests.controlflow import counter_models as m
from tests.controlflow._util import assert_matches_eager, export_to_ort, line_in_source, loop_exits, trip_counts

Dim = torch.export.Dim


def _randn(seed: int, *shape, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale


def _trips(model, inputs) -> set:
    return set().union(*trip_counts(model, inputs).values())


def _exits(model, inputs) -> set:
    return set().union(*loop_exits(model, inputs).values())


@pytest.mark.slow  # a while_loop capture and its ONNX export: several seconds
def test_an_anderson_window_by_min_of_the_counter_converts_and_equals_eager_at_every_exit():
    """``torch.eye(n)`` with ``n = min(k, m)`` beside ``F[:, :n]`` and ``H[:, 1:n + 1, 1:n + 1] = ...``:
    refused until round twelve ("a number known only at run time used as a Python int"); the
    window's slice writes at traced bounds now set in place (operators/indexing.py), and the
    loop converts. Break after 1, 2, 3, 4 and 6 trips and the bound (7), batches 1 to 4."""
    model = m.AndersonWindow().eval()
    sets = [(_randn(seed, b, 4, scale=scale),) for seed, b, scale in
            ((0, 2, 3.0), (2, 2, 3.0), (0, 2, 2.0), (4, 2, 2.0), (2, 2, 2.0), (0, 2, 0.001), (1, 1, 2.0),
             (3, 3, 1.0), (5, 4, 5.0))]
    assert {1, 2, 3, 4, 6, 7} <= _trips(model, sets), _trips(model, sets)
    assert {"left by a break", "left at its trip bound"} <= _exits(model, sets), _exits(model, sets)
    exported = export_to_ort(model, (_randn(3, 2, 4),), dynamic_shapes=({0: Dim("b", min=1, max=64)},))
    assert exported.ops.get("Loop", 0) == 1, exported.ops
    assert_matches_eager(model, exported, sets)


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_whisper_dtw_cells_by_two_counters_convert():
    """Nested ``for`` over both dynamic sizes reading ``cost[i - 1, j - 1]`` and writing
    ``cost[i, j]``: one cell, one row, one column, ties everywhere (zeros), and a rectangle."""
    model = m.DtwCost()
    inputs = [(_randn(1, 1, 1),), (_randn(2, 1, 4),), (_randn(3, 4, 1),), (torch.zeros(3, 3),),
              (_randn(4, 5, 8),), (_randn(5, 2, 2),)]
    assert {1, 2, 4, 5, 8} <= _trips(model, inputs)
    exported = export_to_ort(model, (_randn(0, 3, 4),),
                             dynamic_shapes=({0: Dim("N", min=1, max=16), 1: Dim("M", min=1, max=16)},))
    assert exported.ops.get("Loop") == 2
    assert_matches_eager(model, exported, inputs)


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_counter_arithmetic_min_max_and_a_unit_slice_convert():
    """``max(t - 1, 0)``, ``min(t + 1, T - 1)``, ``t // 2``, ``t % 3``, ``x[:min(t + 1, 3)]``,
    ``torch.arange(n)`` and ``acc + x[t:t + 1]`` (a (1, d) carried tensor: the slice keeps length 1)."""
    model = m.CounterArithmetic()
    inputs = [(_randn(s, n, 3),) for s, n in ((0, 1), (1, 2), (2, 3), (3, 7))]
    assert _trips(model, inputs) == {1, 2, 3, 7}
    exported = export_to_ort(model, (_randn(9, 5, 3),), dynamic_shapes=({0: Dim("T", min=1, max=64)},))
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs)


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_counting_down_counter_carries_its_range():
    """``range(T - 1, -1, -1)``: ``x[t:]``, ``w[t] = tail + t`` and a break, or the bound."""
    model = m.CountdownWindow()
    rand = lambda n: torch.rand(n, generator=torch.Generator().manual_seed(n))
    inputs = [(rand(1), torch.tensor(5.0)), (rand(4), torch.tensor(0.0)), (rand(4), torch.tensor(0.5)),
              (rand(6), torch.tensor(100.0)), (rand(6), torch.tensor(1.5))]
    assert _trips(model, inputs) == {1, 3, 4, 6}
    assert _exits(model, inputs) == {"left by a break", "left at its trip bound"}
    exported = export_to_ort(model, (rand(5), torch.tensor(1.0)), dynamic_shapes=({0: Dim("T", min=1, max=64)}, None))
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs)


class CounterAsALength(torch.nn.Module):
    """``[0.0] * (t + 1)``: a Python list as long as the counter, which no file can hold."""

    def forward(self, x):
        acc = torch.zeros(())
        for t in range(x.shape[0]):
            acc = acc + x[t] * len([0.0] * (t + 1))
        return acc


def test_a_counter_used_where_no_tensor_can_stand_is_refused_at_its_line_without_blaming_item():
    model = CounterAsALength()
    with pytest.raises(fxport.ConversionError) as caught:
        fxport.convert(model, (torch.rand(4),), dynamic_shapes={"x": {0: "n"}}, verify=False)
    message = str(caught.value)
    assert "\n" not in message.strip() and ".item()" not in message, message
    assert "a loop counter" in message and "used as a Python int" in message, message
    assert f":{line_in_source(CounterAsALength.forward, 'len([0.0] * (t + 1))')};" in message, message


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_the_counter_as_the_scalar_of_remainder_and_power_converts():
    """Left by the break on trips 1, 2, 5 and at the bound (6 trips)."""
    model = m.RemainderAndPowerByCounter()
    x = lambda n: torch.rand(n, generator=torch.Generator().manual_seed(n)) * 3  # noqa: E731
    inputs = [(x(3), torch.tensor(-1.0)), (x(2), torch.tensor(8.0)), (x(4), torch.tensor(40.0)),
              (x(5), torch.tensor(1e6)), (x(1), torch.tensor(1e6))]
    assert _trips(model, inputs) == {1, 2, 5, 6}
    assert _exits(model, inputs) == {"left by a break", "left at its trip bound"}
    exported = export_to_ort(model, (x(4), torch.tensor(10.0)), dynamic_shapes=({0: Dim("n", min=1, max=64)}, None))
    assert exported.ops.get("Loop") == 1
    assert_matches_eager(model, exported, inputs)


class SizeAsAScalar(torch.nn.Module):
    """``x % n`` and ``x ** (n % 3)`` with ``n`` a dynamic size: torch.onnx 2.13 reads the Scalar
    argument as a Python number ("int() argument must be ... not 'SymbolicTensor'")."""

    def forward(self, x):
        return (x.long() % x.shape[0]) + x.long() ** (x.shape[0] % 3)


def test_a_size_as_the_scalar_of_remainder_and_power_converts():
    model = SizeAsAScalar()
    result = fxport.convert(model, (torch.arange(5.0),), dynamic_shapes={"x": {0: "n"}})
    assert result.verified and "symbolic-scalar-arguments" in {r.rule for r in result.rewrites}
    for n in (1, 2, 3, 7):
        fxport.testing.compare_with_eager(model, result.model, (torch.arange(float(n)) * 3,), atol=0, rtol=0)
