"""A slice by a converted loop's counter keeps its length (issue #47: "slices by a loop counter"):
``for t in range(T)`` over a dynamic size, ``enc[t:t + 1]`` holds one row on every trip, as eager
knows from ``0 <= t < T``. Without that fact torch reads the length from data, and a carried state
it meets by broadcasting (``x + frames[i:i + 1]``) took the unknown length as its own: the loop's
state "grew" and the append after it was refused. The counter now carries its range into the body
(``fxport/controlflow/operators/counters.py``); where the range does not keep the slice whole
(a shorter tensor, a wider slice) the length is read from data as before, and the file still
equals eager."""

from __future__ import annotations

import pytest
import torch

from tests.controlflow._util import assert_matches_eager, export_to_ort, trip_counts


class BroadcastFrame(torch.nn.Module):
    """WaveRNN / RNN-T shape: one frame a trip, ``frames[i:i + 1]`` added to a carried state."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(3, 3)

    def forward(self, frames):
        x = torch.zeros(1, 3)
        output = []
        for i in range(frames.shape[0]):
            x = torch.tanh(self.fc(x) + frames[i:i + 1])
            output.append(x.sum(1))
        return torch.cat(output), x


class OffsetRange(torch.nn.Module):
    """``range(1, T)`` and ``enc[t - 1]`` beside ``enc[t:t + 1]``: the range starts at 1."""

    def forward(self, enc):
        h = enc[:1] * 0
        for t in range(1, enc.shape[0]):
            h = h * 0.5 + enc[t:t + 1] - enc[t - 1]
        return h


class ShorterTensor(torch.nn.Module):
    """The counter runs over ``frames`` but slices ``taps``, which may be shorter: there the
    slice is empty near the end, as in eager (the length is read from data, not assumed)."""

    def forward(self, frames, taps):
        total = torch.zeros(())
        for i in range(frames.shape[0]):
            total = total + frames[i:i + 1].sum() * 2 + taps[i:i + 1].sum()
        return total


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_slice_by_the_counter_broadcast_into_carried_state_keeps_one_row():
    model = BroadcastFrame()
    inputs = [(torch.randn(n, 3),) for n in (1, 2, 3, 8)]
    assert {1, 2, 3, 8} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, (torch.randn(4, 3),), dynamic_shapes={"frames": {0: "frames"}})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


def test_a_range_that_starts_at_one_keeps_the_slice_whole():
    model = OffsetRange()
    inputs = [(torch.randn(n, 2),) for n in (1, 2, 3, 6)]
    assert {0, 1, 2, 5} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, (torch.randn(4, 2),), dynamic_shapes={"enc": {0: "time"}})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_slice_of_a_tensor_the_range_does_not_measure_is_read_from_data():
    model = ShorterTensor()
    inputs = [(torch.randn(n), torch.randn(k)) for n, k in ((1, 1), (3, 1), (4, 2), (5, 7), (2, 2))]
    exported = export_to_ort(model, (torch.randn(4), torch.randn(3)),
                             dynamic_shapes={"frames": {0: "n"}, "taps": {0: "k"}})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")
