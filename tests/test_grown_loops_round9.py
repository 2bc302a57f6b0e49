"""Loops whose state grows, ninth round (issue #47): eager vs ONNX Runtime.

* An ``if`` whose branch holds a loop whose state grows (an early return on the box count before
  an NMS loop; a tensor condition around a growing loop) is one ONNX ``If`` whose branches were
  captured on their own (``fxport::grown_cond``): only the side taken runs, so 0 boxes is right.
* An LSTM first called inside a ``torch.cond`` branch of a grown loop's body.
* Growing axes whose lengths keep a fixed difference (a decoder's ``ys`` one frame longer than
  its cache, asserted by the model) are captured tied.
* Tied growing state grown after a tensor ``if ...: break`` (examples/greedy_gpt2.py's shape: the
  attention mask and the cache grow after the break) keeps its tie on each way through the body's
  closing ``torch.cond``.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.controlflow._util import assert_matches_eager, export_to_ort, loop_exits, trip_counts


class NmsWithEarlyReturn(nn.Module):
    def forward(self, boxes, scores):
        if boxes.numel() == 0:
            return torch.empty((0,), dtype=torch.long)
        order = torch.argsort(scores, descending=True)
        keep = []
        while order.numel() > 0:
            current = order[0]
            keep.append(current)
            if order.numel() == 1:
                break
            rest = order[1:]
            top_left = torch.maximum(boxes[current, :2], boxes[rest, :2])
            bottom_right = torch.minimum(boxes[current, 2:], boxes[rest, 2:])
            inter = (bottom_right - top_left).clamp(min=0).prod(1)
            area = (boxes[:, 2:] - boxes[:, :2]).prod(1)
            iou = inter / (area[current] + area[rest] - inter)
            order = rest[iou <= 0.5]
        return torch.stack(keep)


def _boxes(*rows):
    return torch.tensor(rows, dtype=torch.float32).reshape(-1, 4)


NMS_SETS = [
    (_boxes(), torch.zeros(0)),  # the early return: the loop never runs
    (_boxes([0, 0, 1, 1]), torch.tensor([0.5])),  # one box: the numel() == 1 break on trip 1
    (_boxes([0, 0, 1, 1], [0, 0, 1, 1]), torch.tensor([0.5, 0.4])),  # the rest suppressed: emptied on trip 1
    (_boxes([0, 0, 1, 1], [5, 5, 6, 6], [9, 9, 10, 10]), torch.tensor([0.1, 0.9, 0.5])),  # 3 trips, break
    (_boxes([0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [21, 19, 31, 29], [50, 50, 60, 60],
            [70, 70, 80, 80]), torch.tensor([0.7, 0.3, 0.4, 0.6, 0.1, 0.2])),  # N trips
]


@pytest.mark.slow
def test_an_early_return_before_a_shrinking_loop_is_an_if_around_the_loop_and_equals_eager_at_zero_boxes():
    model = NmsWithEarlyReturn()
    boxes = _boxes([0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [21, 19, 31, 29], [50, 50, 60, 60])
    exported = export_to_ort(model, (boxes, torch.tensor([0.7, 0.3, 0.4, 0.6, 0.1])),
                             dynamic_shapes={"boxes": {0: "n"}, "scores": {0: "n"}})
    assert exported.ops.get("If") and exported.ops.get("Loop"), exported.ops
    assert any("branch holds a loop whose state grows" in r.detail for r in exported.records)
    exits = set().union(*loop_exits(model, NMS_SETS[1:]).values())
    assert len(exits) >= 2, exits
    assert_matches_eager(model, exported, NMS_SETS)


@pytest.mark.slow  # 6 s or more: the fast set stays under 12 minutes
def test_an_early_return_before_a_shrinking_loop_verifies_without_narrowing_the_range():
    import fxport

    boxes = _boxes([0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30])
    result = fxport.convert(NmsWithEarlyReturn(), (boxes, torch.tensor([0.7, 0.3, 0.4])),
                            dynamic_shapes={"boxes": {0: "n"}, "scores": {0: "n"}}, verify_inputs=NMS_SETS[:2])
    assert result.verified
    assert not any("narrowed" in w for w in result.warnings), result.warnings


class GrowsUnderATensorCondition(nn.Module):
    """A loop growing ``acc`` by a row per trip, only when the input's sum is positive."""

    def forward(self, x, steps):
        if x.sum() > 0:
            acc = x[:1]
            i = 0
            while i < steps.shape[0]:
                acc = torch.cat([acc, acc[-1:] * 2 + 1], 0)
                if acc.sum() > 1000:
                    break
                i += 1
        else:
            acc = -x
        return acc * 1


@pytest.mark.slow
def test_a_growing_loop_in_one_branch_of_a_tensor_condition_equals_eager_at_0_1_2_n_trips_and_both_sides():
    model = GrowsUnderATensorCondition()
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    exported = export_to_ort(model, (x, torch.zeros(3)), dynamic_shapes={"x": {0: "rows"}, "steps": {0: "s"}})
    assert exported.ops.get("If") and exported.ops.get("Loop"), exported.ops
    sets = [(x, torch.zeros(0)), (x, torch.zeros(1)), (x, torch.zeros(2)), (x, torch.zeros(5)),
            (x * 100, torch.zeros(6)),  # the break on trip 1
            (-x, torch.zeros(3)), (-torch.ones(3, 2), torch.zeros(0))]  # the other side: the loop never runs
    assert {0, 1, 2, 5} <= set().union(*trip_counts(model, sets).values())
    assert_matches_eager(model, exported, sets)


class LstmInABranchOfAGrowingLoop(nn.Module):
    """A loop growing ``tokens``; the LSTM runs inside an ``if`` on a tensor in the body."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(5, 4)
        self.rnn = nn.LSTM(4, 4, batch_first=True)
        self.head = nn.Linear(4, 5)

    def forward(self, tokens, steps):
        h = torch.zeros(1, 1, 4)
        c = torch.zeros(1, 1, 4)
        for _ in range(steps.shape[0]):
            last = tokens[:, -1:]
            if last.sum() > 1:
                out, (h, c) = self.rnn(self.embed(last), (h, c))
            else:
                out = self.embed(last) * 0.5
            nxt = self.head(out[:, -1]).argmax(-1)
            tokens = torch.cat([tokens, nxt[:, None]], 1)
        return tokens


@pytest.mark.slow
def test_an_lstm_first_called_in_a_branch_of_a_growing_loop_body_equals_eager():
    model = LstmInABranchOfAGrowingLoop().eval()
    tokens = torch.tensor([[1, 2, 3]])
    exported = export_to_ort(model, (tokens, torch.zeros(3)), dynamic_shapes={"tokens": {1: "t"}, "steps": {0: "s"}})
    assert exported.ops.get("Loop") and exported.ops.get("LSTM"), exported.ops
    sets = [(tokens, torch.zeros(n)) for n in (0, 1, 2, 6)] + [(torch.tensor([[0]]), torch.zeros(4)),
                                                               (torch.tensor([[4, 4]]), torch.zeros(3))]
    assert_matches_eager(model, exported, sets)


class _CachedLayer(nn.Module):
    """espnet's DecoderLayer with a cache: asserts the cache is one frame shorter than its input."""

    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 3)

    def forward(self, ys, cache):
        assert cache.shape == (ys.shape[0], ys.shape[1] - 1, 3), f"{cache.shape} vs {ys.shape}"
        return torch.cat([cache, self.proj(ys[:, -1:])], 1)


class CacheOneShorterThanYs(nn.Module):
    """espnet's TTS decoder shape: ``ys`` gains a frame per trip and the cache, one frame shorter,
    too; the layer asserts that relation (the body capture must keep it)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.layer = _CachedLayer()

    def forward(self, x, steps):
        ys = x[:, :1]
        cache = x[:, :0]  # an empty cache: one frame shorter than ys
        i = 0
        while True:
            i += 1
            cache = self.layer(ys, cache)
            ys = torch.cat([ys, cache[:, -1:].tanh()], 1)
            if i >= steps.shape[0] or ys.abs().sum() > 50:
                break
        return ys, cache


def test_growing_axes_that_keep_a_fixed_difference_are_captured_tied_and_equal_eager():
    model = CacheOneShorterThanYs().eval()
    x = torch.randn(1, 4, 3, generator=torch.Generator().manual_seed(0))
    exported = export_to_ort(model, (x, torch.zeros(3)), dynamic_shapes={"x": {1: "t"}, "steps": {0: "s"}})
    assert exported.ops.get("Loop"), exported.ops
    sets = [(x, torch.zeros(n)) for n in (0, 1, 2, 7)] + [(x * 40, torch.zeros(9))]  # the abs() break
    assert_matches_eager(model, exported, sets)


class TiedStateAfterABreak(nn.Module):
    """examples/greedy_gpt2.py's loop in small: ``out`` grows before the break, ``keys`` and
    ``mask`` (tied: the scores add them) after it. Refused once as "one trip changes the
    differences" (the sizes after the body's closing ``torch.cond`` are new unknowns)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.proj = nn.Linear(4, 4)

    def forward(self, x, limit):
        keys = x[:, None]
        mask = torch.ones(x.shape[0], 1)
        out = x.new_zeros(x.shape[0], 0)
        for _ in range(6):
            query = self.proj(keys[:, -1])
            score = ((keys * query[:, None]).sum(-1) + mask.log()).softmax(-1)
            y = (score[:, :, None] * keys).sum(1)
            out = torch.cat([out, y[:, :1]], 1)
            if (y.sum(-1) > limit).all():
                break
            keys = torch.cat([keys, y[:, None] + 0.5], 1)
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
        return out


@pytest.mark.slow  # 6 s or more
def test_tied_state_grown_after_a_break_keeps_its_tie_and_equals_eager_on_every_way_out():
    model = TiedStateAfterABreak()
    x = torch.randn(2, 4, generator=torch.Generator().manual_seed(3))
    exported = export_to_ort(model, (x, torch.tensor(2.0)), dynamic_shapes={"x": {0: "B"}, "limit": None})
    assert exported.ops.get("Loop") and exported.ops.get("If"), exported.ops
    sets = [(rows, torch.tensor(limit)) for rows in (x, x[:1]) for limit in (0.0, 0.3, 0.8, 1.3, 1.8, 100.0)]
    assert {1, 2, 3, 5, 6} <= {model(*args).shape[1] for args in sets}
    assert {"left by a break", "left at its trip bound"} <= set().union(*loop_exits(model, sets).values())
    assert_matches_eager(model, exported, sets)
