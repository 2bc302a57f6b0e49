"""``out[i], state = step(state)``: a call's tuple unpacked into an indexed write and a name inside a
converted loop (issue #47: torchdiffeq's ``integrate`` writes ``solution[i], rk_state =
self._advance(t[i], rk_state)`` in ``for i in range(1, len(t))``). The value is unpacked into
temporaries, then each target is stored left to right as Python stores them, so the write at the
traced counter is the functional ``setitem`` a single ``out[i] = v`` gets."""

from __future__ import annotations

import pytest
import torch

from fxport.controlflow.engine import convert_function
from tests.controlflow._util import assert_matches_eager, export_to_ort, trip_counts


class StepsIntoRows(torch.nn.Module):
    """Rows written from a step that returns ``(row, state)``; the state also decides an inner while."""

    def step(self, target, state):
        while target > state[1]:
            state = (state[0] * 0.5 + target, state[1] + 0.75)
        return state[0].sum(), state

    def forward(self, y0, t):
        out = torch.zeros(len(t))
        out[0] = y0.sum()
        state = (y0, t[0])
        for i in range(1, len(t)):
            out[i], state = self.step(t[i], state)
        return out, state[0]


def _source():
    def f(out, state, step, t):
        for i in range(1, len(t)):
            out[i], state = step(state)
        return out
    return convert_function(f).source.after


def test_the_call_is_unpacked_into_temporaries_then_each_target_stored_in_order():
    after = _source()
    assert "_fx_unpacked_1_0, _fx_unpacked_1_1 = _fx.call(step)(state)" in after, after
    assert after.index("out = _fx.setitem(out, i, _fx_unpacked_1_0)") < after.index("state = _fx_unpacked_1_1"), after


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_rows_written_from_a_called_step_convert_and_equal_eager_at_every_trip_count():
    model = StepsIntoRows()
    inputs = [(torch.randn(3), torch.tensor([0.0])), (torch.randn(3), torch.tensor([0.0, 1.0])),
              (torch.randn(2), torch.tensor([0.0, 0.1, 2.0])), (torch.randn(1), torch.linspace(0, 4, 7)),
              (torch.randn(3), torch.tensor([0.0, -1.0, -2.0]))]
    trips = set().union(*trip_counts(model, inputs).values())
    assert {0, 1, 2} <= trips, trips
    exported = export_to_ort(model, (torch.randn(3), torch.linspace(0, 2, 4)),
                             dynamic_shapes={"y0": {0: "d"}, "t": {0: "n"}})
    assert exported.ops.get("Loop", 0) >= 1, exported.ops
    assert_matches_eager(model, exported, inputs)
