"""``f(..., out=t)`` and dead ``t.resize_as_(u)`` on scratch tensors inside a data-dependent loop
(issue #47, met in amdegroot/ssd.pytorch's ``nms``: ``torch.index_select(x1, 0, idx, out=xx1)``,
``w.resize_as_(xx2)`` then ``w = xx2 - xx1``, in ``while idx.numel() > 0``).

The ``out=`` write resizes a carried tensor in place, which no ``while_loop`` traces; for a local
nothing else holds it is a new value (``converters/out_arguments.py``). Differential: eager vs
ONNX Runtime on 0, 1, 2 and more boxes, overlapping and apart, so the loop ends by emptying its
state, by the ``if idx.size(0) == 1: break`` and after several trips.
"""

from __future__ import annotations

import pytest
import torch

from fxport.controlflow import converted_source
from tests.controlflow._util import assert_matches_eager, export_to_ort, loop_exits, trip_counts


class ScratchNms(torch.nn.Module):
    """Greedy NMS over boxes (x1, y1, x2, y2) sorted by score, with scratch tensors filled by
    ``out=`` and resized before being rebound, keeping ``keep[count] = i``."""

    def forward(self, boxes, scores):
        keep = torch.zeros(scores.size(0), dtype=torch.long)
        x1, y1, x2, y2 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
        area = (x2 - x1) * (y2 - y1)
        _, idx = scores.sort(0)
        xx1 = boxes.new()
        xx2 = boxes.new()
        w = boxes.new()
        count = 0
        while idx.numel() > 0:
            i = idx[-1]
            keep[count] = i
            count += 1
            if idx.size(0) == 1:
                break
            idx = idx[:-1]
            torch.index_select(x1, 0, idx, out=xx1)
            torch.index_select(x2, 0, idx, out=xx2)
            xx1 = torch.clamp(xx1, min=x1[i])
            xx2 = torch.clamp(xx2, max=x2[i])
            w.resize_as_(xx2)
            w = torch.clamp(xx2 - xx1, min=0.0)
            h = torch.clamp(torch.min(y2[idx], y2[i]) - torch.max(y1[idx], y1[i]), min=0.0)
            inter = w * h
            iou = inter / (area[idx] - inter + area[i])
            idx = idx[iou.le(0.5)]
        return keep, torch.tensor(count)


class Aliased(torch.nn.Module):
    """``view = buf`` before the ``out=`` write: the view sees it, so the call stays as written."""

    def forward(self, x, idx):
        buf = x.new_zeros(idx.shape[0])
        view = buf
        torch.index_select(x, 0, idx, out=buf)
        return view * 2


def _boxes(seed: int, n: int, spread: float):
    g = torch.Generator().manual_seed(seed)
    corner = torch.rand(n, 2, generator=g) * spread
    size = 1.0 + torch.rand(n, 2, generator=g)
    return torch.cat([corner, corner + size], 1), torch.rand(n, generator=g)


@pytest.mark.slow  # a while_loop capture and its ONNX export: several seconds
def test_out_writes_and_dead_resizes_in_a_loop_convert_and_equal_eager_at_every_exit():
    model = ScratchNms().eval()
    sets = [_boxes(0, 6, 3.0), _boxes(1, 0, 1.0), _boxes(2, 1, 1.0), _boxes(3, 2, 0.2), _boxes(4, 2, 9.0),
            _boxes(5, 9, 0.5), _boxes(6, 12, 20.0)]
    trips = set().union(*trip_counts(model, sets).values())
    assert {0, 1, 2} <= trips and max(trips) >= 4, trips
    exits = set().union(*loop_exits(model, sets).values())
    assert "left by a break" in exits and len(exits) >= 2, exits
    source = converted_source(ScratchNms.forward)
    assert "xx1 = torch.index_select(x1, 0, idx)\n" in source and "resize_as_" not in source, source
    exported = export_to_ort(model, sets[0], dynamic_shapes={"boxes": {0: "n"}, "scores": {0: "n"}})
    assert exported.ops.get("Loop", 0) == 1, exported.ops
    assert_matches_eager(model, exported, sets)


def test_an_out_write_into_a_tensor_another_name_holds_stays_as_written_and_equals_eager():
    source = converted_source(Aliased.forward)
    assert "out=buf" in source, source
    model = Aliased().eval()
    sets = [(torch.randn(5), torch.tensor([4, 0, 2])), (torch.randn(3), torch.tensor([1]))]
    exported = export_to_ort(model, sets[0], dynamic_shapes={"x": {0: "n"}, "idx": {0: "k"}})
    assert_matches_eager(model, exported, sets)


_SAME_DTYPE_CALLS = {
    "index_select": lambda out: torch.index_select(torch.randn(3), 0, torch.tensor([0, 2]), out=out),
    "gather": lambda out: torch.gather(torch.randn(3), 0, torch.tensor([0, 2]), out=out),
    "take": lambda out: torch.take(torch.randn(3), torch.tensor([0, 2]), out=out),
    "masked_select": lambda out: torch.masked_select(torch.randn(3), torch.tensor([True, False, True]), out=out),
    "clamp": lambda out: torch.clamp(torch.randn(3), min=0.0, out=out),
    "clip": lambda out: torch.clip(torch.randn(3), min=0.0, out=out),
}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.int64])
def test_every_function_rewritten_needs_out_of_the_results_dtype_in_eager(dtype):
    """The rewrite drops out='s dtype: only sound where eager refuses another dtype there."""
    from fxport.controlflow.converters.out_arguments import SAME_DTYPE_OUT

    assert set(_SAME_DTYPE_CALLS) == SAME_DTYPE_OUT
    for name, made in _SAME_DTYPE_CALLS.items():
        with pytest.raises(RuntimeError):
            made(torch.empty(0, dtype=dtype))


class CastingOut(torch.nn.Module):
    """``torch.add(..., out=t)`` casts into ``t``'s dtype: left as written."""

    def forward(self, x):
        buf = x.new_zeros(x.shape, dtype=torch.float64)
        torch.add(x, 1.0, out=buf)
        return buf


def test_arithmetic_out_which_casts_stays_as_written():
    assert "out=buf" in converted_source(CastingOut.forward)
