"""Slice writes at a traced position into a module's static buffer inside a converted loop with an
early exit (issue #47: meta-llama's ``Llama.generate``, whose ``Attention.forward`` writes its
static KV cache ``self.cache_k[:bsz, start_pos:start_pos + seqlen] = xk`` two calls below the
decoding loop, at the position the loop carries).

The attribute is written by code the loop body calls, so the loop finds it at run time and
carries it (``fxport/controlflow/operators/loops/module_state.py``); the write itself is an
``index_put`` at the positions the value's rows take (``fxport/controlflow/operators/indexing.py``).
Each model equals eager at trip counts 0, 1, 2 and N, left by its break and by its bound, at batch
sizes 1..3 and lengths the export never saw; the file holds the Loop and the ScatterND of the write,
and the module's own tensors are as they were after the conversion."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import fxport
from fxport.controlflow import converted_source
from tests.controlflow._util import assert_matches_eager, export_to_ort, line_in_source, loop_exits, trip_counts

MAX_BATCH, MAX_LEN, DIM = 3, 8, 4


class CachedAttention(nn.Module):
    """llama-shaped attention over a static cache: the rows ``start:start + t`` of ``cache_k`` and
    ``cache_v`` written with this call's keys and values, the rows up to ``start + t`` read."""

    def __init__(self, buffers: bool = False):
        super().__init__()
        self.wk = nn.Linear(DIM, DIM, bias=False)
        self.wv = nn.Linear(DIM, DIM, bias=False)
        for name in ("cache_k", "cache_v"):
            if buffers:
                self.register_buffer(name, torch.zeros(MAX_BATCH, MAX_LEN, DIM))
            else:  # llama/model.py: plain tensor attributes
                setattr(self, name, torch.zeros(MAX_BATCH, MAX_LEN, DIM))

    def forward(self, x, start):
        bsz, t, _ = x.shape
        self.cache_k[:bsz, start:start + t] = self.wk(x)
        self.cache_v[:bsz, start:start + t] = self.wv(x)
        keys = self.cache_k[:bsz, :start + t]
        values = self.cache_v[:bsz, :start + t]
        scores = torch.softmax(x @ keys.transpose(1, 2), dim=-1)
        return scores @ values


class StaticCacheLoop(nn.Module):
    """One frame per trip through a method and the cached attention, at the position the loop
    carries; the loop stops when the output's total passes ``limit`` (a break) or at the frames'
    end (its bound)."""

    def __init__(self, buffers: bool = False):
        super().__init__()
        torch.manual_seed(0)
        self.attn = CachedAttention(buffers)
        self.proj = nn.Linear(DIM, DIM)

    def step(self, frame, pos):
        return torch.tanh(self.proj(self.attn(frame, pos)))

    def forward(self, frames, limit):
        bsz, length, _ = frames.shape
        assert bsz <= MAX_BATCH  # the cache's rows (llama's assert bsz <= params.max_batch_size)
        assert length <= MAX_LEN
        out = torch.zeros(bsz, 1, DIM)
        pos = 0
        for t in range(length):
            out = self.step(frames[:, t:t + 1] + out, pos)
            pos = t + 1
            if out.abs().sum() > limit:
                break
        return out, torch.tensor(pos)


class LayeredCacheLoop(StaticCacheLoop):
    """llama's ``for layer in self.layers: h = layer(h, start_pos, ...)``: two cached attentions in
    an ``nn.ModuleList``, iterated by the step (the list is overlaid too)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([CachedAttention(), CachedAttention()])

    def step(self, frame, pos):
        for layer in self.layers:
            frame = frame + layer(frame, pos)
        return torch.tanh(self.proj(frame))


class LocalCacheLoop(nn.Module):
    """The write in the loop body itself: ``self.cache[:bsz, t:t + 1] = ...`` beside a slice that
    is not whole (carried as a local by the converter, written by position)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.fc = nn.Linear(DIM, DIM)
        self.cache = torch.zeros(MAX_BATCH, MAX_LEN, DIM)

    def forward(self, frames, limit):
        bsz, length, _ = frames.shape
        assert bsz <= MAX_BATCH  # the cache's rows (llama's assert bsz <= params.max_batch_size)
        assert length <= MAX_LEN
        total = torch.zeros(bsz, DIM)
        for t in range(length):
            self.cache[:bsz, t:t + 1] = self.fc(frames[:, t:t + 1])
            total = total + self.cache[:bsz, :t + 1].mean(1)
            if total.abs().sum() > limit:
                break
        return total


def _frames(seed: int, bsz: int, length: int) -> torch.Tensor:
    return torch.randn(bsz, length, DIM, generator=torch.Generator().manual_seed(seed))


#: frames and limits reaching the bound: no frame (0 trips), one frame (1 trip), 3 and 8 frames;
#: batches 1..3
_TO_THE_BOUND = [(_frames(1, 2, 0), torch.tensor(100.0)), (_frames(2, 1, 1), torch.tensor(100.0)),
                 (_frames(5, 2, 3), torch.tensor(100.0)), (_frames(6, 3, 8), torch.tensor(1000.0))]
#: limits each model's output passes after 1, 2 and more trips (a break), measured in eager
_TO_A_BREAK = {
    "StaticCacheLoop": [(_frames(3, 3, 5), torch.tensor(0.0)), (_frames(3, 3, 5), torch.tensor(3.0)),
                        (_frames(7, 2, 6), torch.tensor(3.0))],
    "LayeredCacheLoop": [(_frames(3, 3, 5), torch.tensor(0.0)), (_frames(3, 3, 5), torch.tensor(5.5)),
                         (_frames(3, 3, 5), torch.tensor(6.0))],
    "LocalCacheLoop": [(_frames(3, 3, 5), torch.tensor(0.0)), (_frames(4, 1, 6), torch.tensor(2.0)),
                       (_frames(4, 1, 6), torch.tensor(3.5))],
}
_EXAMPLE = (_frames(0, 2, 4), torch.tensor(2.0))
_DYNAMIC = {"frames": {0: "batch", 1: "length"}, "limit": None}


def _inputs_taking_every_exit(model) -> list[tuple]:
    """The sets for ``model``, checked to run its loop 0, 1, 2 and 8 times and leave it both ways."""
    inputs = _TO_THE_BOUND + _TO_A_BREAK[type(model).__name__]
    line = line_in_source(type(model).forward, "for t in range(length):")
    trips = trip_counts(model, inputs)[line]
    assert {0, 1, 2, 8} <= trips, trips
    exits = loop_exits(model, inputs)[line]
    assert {"left by a break", "left at its trip bound"} <= exits, exits
    return inputs


def _tensors(model: nn.Module) -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    """Each module's buffers and plain tensor attributes: (name, the object, a copy of its value)."""
    found = []
    for prefix, module in model.named_modules():
        for key, value in list(module._buffers.items()) + list(vars(module).items()):
            if isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter):
                found.append((f"{prefix}.{key}", value, value.clone()))
    return found


def _assert_left_as_they_were(model: nn.Module, before) -> None:
    now = {name: value for name, value, _ in _tensors(model)}
    for name, value, copy in before:
        assert now[name] is value, f"{name} was rebound by the conversion"
        assert torch.equal(value, copy), f"{name} was written by the conversion"


def _exported_equal_to_eager(model):
    """The file of ``model`` (a ``Loop`` writing with ``ScatterND``), equal to eager on inputs
    taking every exit; the module's tensors left as they were by the conversion."""
    inputs = _inputs_taking_every_exit(model)
    before = _tensors(model)
    exported = export_to_ort(model, _EXAMPLE, dynamic_shapes=_DYNAMIC)
    _assert_left_as_they_were(model, before)
    assert exported.ops.get("Loop") and exported.ops.get("ScatterND"), exported.ops
    assert_matches_eager(model, exported, inputs)
    return exported


@pytest.mark.slow  # 25-40 s on 2 shared cores (2026-12-04)
@pytest.mark.parametrize("buffers", [False, True], ids=["plain-attributes", "buffers"])
def test_a_static_cache_written_by_a_called_module_at_the_loop_position_equals_eager(buffers):
    model = StaticCacheLoop(buffers)
    exported = _exported_equal_to_eager(model)
    carried = [r for r in exported.records if r.rule == "for-to-while_loop"]
    assert carried and {"self.attn.cache_k", "self.attn.cache_v"} <= set(carried[0].data["carried"]), carried


@pytest.mark.slow  # 25-40 s on 2 shared cores (2026-12-04)
def test_static_caches_of_layers_in_a_module_list_are_carried_through_the_list():
    model = LayeredCacheLoop()
    exported = _exported_equal_to_eager(model)
    carried = set().union(*(r.data.get("carried", ()) for r in exported.records))
    assert {"self.layers.0.cache_k", "self.layers.1.cache_v"} <= carried, carried


@pytest.mark.slow  # 7-15 s on 2 shared cores (2026-12-04)
def test_a_slice_write_at_the_counter_beside_a_partial_slice_equals_eager():
    model = LocalCacheLoop()
    exported = _exported_equal_to_eager(model)


def test_an_attribute_write_in_a_functions_own_body_goes_through_item_written():
    text = converted_source(CachedAttention.forward)
    assert ("_fx.targets.item_written(self, 'cache_k', (_fx.slice_(None, bsz, None), "
            "_fx.slice_(start, start + t, None)), _fx.call(self.wk)(x))") in text, text


def test_item_written_writes_in_place_where_the_index_is_python():
    attention = CachedAttention()
    cache = attention.cache_k
    attention(torch.ones(1, 2, DIM), 3)
    assert attention.cache_k is cache and cache[0, 3:5].abs().sum() > 0 and cache[0, :3].abs().sum() == 0


class HookedCacheLoop(StaticCacheLoop):
    def __init__(self):
        super().__init__()
        self.attn.register_forward_hook(lambda module, args, out: out * 2)


@pytest.mark.slow  # 5-6 s cold on 2 shared cores (2026-12-04)
def test_a_carried_attribute_of_a_module_with_forward_hooks_is_refused_in_one_line_at_the_loop():
    model = HookedCacheLoop()
    line = line_in_source(StaticCacheLoop.forward, "for t in range(length):")
    with pytest.raises(fxport.ConversionError) as caught:
        fxport.convert(model, _EXAMPLE, dynamic_shapes=_DYNAMIC, verify=False)
    message = str(caught.value).splitlines()[0]
    assert "self.attn, a module with forward hooks" in message and f"test_static_cache_writes.py:{line}" in message
