"""``x.narrow(dim, start, length)`` at a traced loop counter (NVIDIA NeMo's RNN-T greedy decoder:
``for time_idx in range(out_len): f = x.narrow(dim=0, start=time_idx, length=1)`` around a
data-dependent inner loop). The start was read as a number, an unbacked size the loop body could
not return: "torch.export failed: PendingUnbackedSymbolNotFound", an internal error. Now the rows
are selected with index_select, as ``x[t:t + 1]`` is."""

import pytest
import torch

from tests.controlflow._util import assert_matches_eager, export_to_ort, loop_exits, trip_counts


class FramesThenSymbols(torch.nn.Module):
    """Per frame (a narrow at the frame counter, keywords as NeMo writes them), emit up to three
    symbols, stopping at a "blank" (a positive frame sum)."""

    def forward(self, x):
        out = torch.zeros(x.shape[1])
        for t in range(x.shape[0]):
            f = x.narrow(dim=0, start=t, length=1)
            s = 0
            while s < 3:
                out = out + f[0] * (s + 1)
                if f.sum() > 0:
                    break
                s += 1
        return out


class TorchNarrowWindow(torch.nn.Module):
    """``torch.narrow`` of a two-row window at a counter that a tensor test advances."""

    def forward(self, x):
        t = 0
        acc = torch.zeros(x.shape[1])
        while t + 2 <= x.shape[0] and acc.sum() < 10:
            window = torch.narrow(x, 0, t, 2)
            acc = acc + window.abs().sum(0)
            t += 1
        return acc, torch.tensor(t)


class NarrowFromTheEnd(torch.nn.Module):
    """A negative traced start counts from the end, as ``torch.narrow`` does: the last two rows
    before the counter's position from the end."""

    def forward(self, x):
        t = 2
        acc = torch.zeros(x.shape[1])
        while t <= x.shape[0] and acc.sum() < 10:
            acc = acc + x.narrow(0, -t, 2).sum(0)
            t += 1
        return acc, torch.tensor(t)


def _frames(signs, width=4):
    rows = [torch.full((width,), 0.5 if sign > 0 else -0.5) for sign in signs]
    return (torch.stack(rows) if rows else torch.zeros(0, width),)


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_narrow_at_the_frame_counter_every_trip_count_and_exit():
    model = FramesThenSymbols()
    inputs = [_frames([1, -1, 1, -1, 1]), _frames([]), _frames([1]), _frames([-1, -1]), _frames([-1, 1, 1])]
    assert {0, 1, 2, 5} <= set().union(*trip_counts(model, inputs).values())
    exits = set().union(*loop_exits(model, inputs).values())
    assert "left by a break" in exits, exits
    exported = export_to_ort(model, inputs[0], dynamic_shapes={"x": {0: "T"}})
    assert exported.ops.get("Loop", 0) >= 2 and "Gather" in exported.ops, exported.ops
    assert_matches_eager(model, exported, inputs)


def test_torch_narrow_at_a_counter_of_a_while_loop():
    model = TorchNarrowWindow()
    inputs = [(torch.full((6, 3), 0.5),), (torch.full((1, 3), 0.5),), (torch.full((2, 3), 0.5),),
              (torch.full((9, 3), 3.0),), (torch.full((4, 3), 0.1),), (torch.full((3, 3), 0.5),)]
    assert {0, 1, 2} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, inputs[0], dynamic_shapes={"x": {0: "T"}})
    assert exported.ops.get("Loop"), exported.ops
    assert_matches_eager(model, exported, inputs)


def test_narrow_at_a_negative_traced_start_counts_from_the_end():
    model = NarrowFromTheEnd()
    rows = torch.arange(1.0, 8.0).reshape(7, 1) * torch.tensor([[0.3, -0.1]])
    inputs = [(rows,), (rows[:2],), (rows[:3],), (rows[:1],), (rows * 10,)]
    assert {0, 1, 2} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, inputs[0], dynamic_shapes={"x": {0: "T"}})
    assert exported.ops.get("Loop"), exported.ops
    assert_matches_eager(model, exported, inputs)
