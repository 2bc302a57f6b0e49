"""Sizes the capture decides at 1 (issue 47, "loops in the wild": 0/1 specialisation).

- torch's 0/1 specialisation of a size *derived* from a dynamic one (``frames - 1 != 1``, a slice
  ``x[1:]`` written into a slice of the same length) excludes size 2 only: it does not pin the
  dimension to 1, so the size-oblivious capture goes on (before, fxport took it for a size-1 pin,
  fell back to the example grown to 2 and lost sizes 0 and 1: ONNX Runtime failed at frames 1);
- a range torch words from such a guard (``Dim('frames', min=3)``) is widened back where
  verification ran every size below it;
- ``squeeze()`` of a dynamic size that may be 1: the capture keeps the axis (no fixed-rank graph
  can drop it at 1 only), so the dimension is exported for 2.. with the squeeze's line, and the
  refusal at size 1 says where and what to do; where size 1 gives the same values the range is
  widened back.

Differential: eager vs ONNX Runtime at sizes 0/1/2/N and loop trip counts 0, 1, 2, N.
"""

import inspect
import json
import warnings

import pytest
import torch
from torch import nn
from torch.export import Dim

import fxport
import fxport.testing
from fxport.capture.size_one_stop import pins_to_size_one, specialises_size_one
from tests.controlflow._util import assert_matches_eager, export_to_ort


class PrefixSums(nn.Module):
    """forced alignment's trellis, small: a column written from ``x[1:]`` (guard ``F - 1 != 1``),
    a slice whose start is computed from a size, then ``for t in range(F - 1)`` rows from the
    row before (0 trips at F = 1)."""

    def forward(self, x, tokens):
        frames, k = x.size(0), len(tokens)
        table = torch.zeros((frames, k))
        table[1:, 0] = torch.cumsum(x[1:, 0], 0)
        table[0, 1:] = -float("inf")
        table[-k + 1:, 0] = float("inf")  # the whole column at k = 1
        for t in range(frames - 1):
            table[t + 1, 1:] = torch.maximum(table[t, 1:] + x[t, 0], table[t, :-1] + x[t, tokens[1:]])
        return table


def _prefix_inputs(seed, frames, k, classes=5):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(frames, classes, generator=g).log_softmax(-1),
            torch.randint(1, classes, (k,), generator=g))


_PREFIX_SPEC = {"x": {0: "frames"}, "tokens": {0: "num_tokens"}}


def _convert(model, example, spec, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fxport.convert(model.eval(), example, dynamic_shapes=spec, **kwargs)


def _ranges(result) -> dict:
    return json.loads(next(p.value for p in result.model.metadata_props if p.key == "fxport.dynamic_ranges"))


def test_a_guard_excluding_size_two_only_is_no_size_one_pin():
    pinned = "Not all values of b = L['x'].size()[0] in the specified range satisfy the generated guard "
    assert specialises_size_one(RuntimeError(pinned + "L['x'].size()[0] == 1."))
    assert specialises_size_one(RuntimeError(pinned + "L['x'].size()[0] <= 1."))
    assert not specialises_size_one(RuntimeError(pinned + "((-1) + L['x'].size()[0]) != 1."))
    assert not specialises_size_one(RuntimeError(pinned + "L['x'].size()[0] != 2."))
    assert pins_to_size_one((True, False, False, False)) and not pins_to_size_one((True, False, True, True))


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02, round eight)
def test_a_derived_size_specialised_at_one_keeps_frames_one_and_two():
    """Trip counts 0 (frames 1), 1, 2 and 7; num_tokens 1 (the whole column) and more."""
    model = PrefixSums()
    result = _convert(model, _prefix_inputs(0, 5, 3), _PREFIX_SPEC,
                      verify_inputs=[_prefix_inputs(1, 1, 1)])
    assert result.verified
    assert "Loop" in result.op_counts(), result.op_counts()
    sizes = [(1, 1), (2, 1), (3, 2), (8, 4), (2, 3), (6, 1)]
    for seed, (frames, k) in enumerate(sizes):
        fxport.testing.compare_with_eager(model, result.model, _prefix_inputs(seed, frames, k), 1e-5, 1e-4)
    frames = _ranges(result)["frames"]
    assert frames["valid"][0] <= 1, frames  # verification ran 0, 1 and 2: no start at 3 is left
    assert not any("frames" in w and "narrowed" in w for w in result.warnings), result.warnings


class SqueezeAll(nn.Module):
    """FastSpeech's duration predictor, small: ``out.squeeze()`` of ``(1, L, 1)`` is ``(L,)``, and
    ``()`` at L = 1."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = nn.Linear(4, 1)

    def forward(self, x):
        out = self.linear(x).relu()
        out = out.squeeze()
        return out.unsqueeze(0) * 2


_SQUEEZE_LINE = inspect.getsourcelines(SqueezeAll.forward)[1] + 2


def _seq(seed, n):
    return (torch.randn(1, n, 4, generator=torch.Generator().manual_seed(seed)),)


def test_squeeze_of_a_size_that_may_be_one_refuses_at_its_line():
    with pytest.raises(fxport.ConversionError) as info:
        _convert(SqueezeAll(), _seq(0, 5), {"x": {1: "L"}})
    message = str(info.value)
    assert "size[L=1] outside exported 2..inf" in message, message
    assert f"squeeze() at tests/controlflow/test_size_one_variants.py:{_SQUEEZE_LINE}" in message, message
    assert "squeeze(-1)" in message and "Dim('L'" in message, message


def test_squeeze_converts_where_the_range_is_declared_from_two():
    model = SqueezeAll()
    result = _convert(model, _seq(0, 5), {"x": {1: Dim("L", min=2)}})
    for seed, n in enumerate((2, 3, 9)):
        fxport.testing.compare_with_eager(model, result.model, _seq(seed, n), 1e-5, 1e-4)


class SqueezeNamedAxis(nn.Module):
    """``squeeze(-1)`` names a static axis: nothing narrows."""

    def forward(self, x):
        return x.sum(-1, keepdim=True).squeeze(-1) * 3


@pytest.mark.parametrize("model", [SqueezeNamedAxis])
def test_squeeze_of_a_static_axis_keeps_the_dynamic_range(model):
    module = model()
    exported = export_to_ort(module, _seq(0, 5), ({1: Dim.DYNAMIC},))
    assert_matches_eager(module, exported, [_seq(1, 1), _seq(2, 2), _seq(3, 6), _seq(4, 0)])
    result = _convert(module, _seq(0, 5), {"x": {1: "L"}})
    assert _ranges(result)["L"]["valid"][0] == 0, _ranges(result)
    assert not result.warnings, result.warnings


def test_a_squeeze_size_one_does_not_change_is_widened_back():
    """``(3, L, 4).squeeze()`` drops axis 1 at L = 1 only; summed to a scalar, the file equals
    eager there too, so verification widens the range back to 0.."""

    class SqueezeToScalar(nn.Module):
        def forward(self, x):
            return x.squeeze().sum() * 2

    model = SqueezeToScalar()
    result = _convert(model, (torch.randn(3, 5, 4),), {"x": {1: "L"}})
    ranges = _ranges(result)["L"]
    assert ranges["valid"][0] <= 1 and ranges["narrowed"] is None, ranges
    assert not any("squeeze" in w for w in result.warnings), result.warnings
    for n in (1, 2, 7):
        fxport.testing.compare_with_eager(model, result.model, (torch.randn(3, n, 4),), 1e-5, 1e-4)


class SqueezeShared(nn.Module):
    """Two inputs share ``L`` (torch replaces one's size by the other's): the squeeze is found for both."""

    def forward(self, x, y):
        z = x.squeeze(-1) + y
        return z.squeeze().unsqueeze(0) * 2


def test_squeeze_of_a_size_two_inputs_share_names_the_line():
    example = (torch.randn(1, 5, 1), torch.randn(1, 5))
    with pytest.raises(fxport.ConversionError) as info:
        _convert(SqueezeShared(), example, {"x": {1: "L"}, "y": {1: "L"}})
    line = inspect.getsourcelines(SqueezeShared.forward)[1] + 2
    assert f"test_size_one_variants.py:{line}" in str(info.value) and "outside exported 2..inf" in str(info.value)
    model = SqueezeShared()
    result = _convert(model, example, {"x": {1: Dim("L", min=2)}, "y": {1: Dim("L", min=2)}})
    for n in (2, 6):
        fxport.testing.compare_with_eager(model, result.model, (torch.randn(1, n, 1), torch.randn(1, n)), 1e-5, 1e-4)


class PairMerges(torch.nn.Module):
    """minbpe's encode shape (karpathy/minbpe ``BasicTokenizer.encode``): while two ids or more remain,
    merge the adjacent pair of lowest rank, rebuilding the ids with a Python list; length 1 runs no trip.
    The grown loop's body probe leaves nodes the optimiser keeps (their readers sit in a branch it folded
    away) and that ONNX Runtime would run — and fail on — at length 1 (``fxport/lower/dead_nodes.py``)."""

    def __init__(self):
        super().__init__()
        rank = torch.full((6, 6), float("inf"))
        new_id = torch.zeros((6, 6), dtype=torch.long)
        for r, (a, b, m) in enumerate([(1, 2, 5), (5, 3, 4), (2, 2, 3)]):
            rank[a, b], new_id[a, b] = r, m
        self.register_buffer("rank", rank)
        self.register_buffer("new_id", new_id)

    def forward(self, ids):
        while len(ids) >= 2:
            ranks = self.rank[ids[:-1], ids[1:]]
            best = torch.argmin(ranks)
            if torch.isinf(ranks[best]):
                break
            a, b = ids[best], ids[best + 1]
            merged = []
            i = 0
            while i < len(ids):
                if ids[i] == a and i < len(ids) - 1 and ids[i + 1] == b:
                    merged.append(self.new_id[a, b])
                    i += 2
                else:
                    merged.append(ids[i])
                    i += 1
            ids = torch.stack(merged)
        return ids


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02, round eight)
def test_a_merge_loop_at_length_one_runs_no_dead_node_of_its_probe():
    from tests.controlflow._util import assert_matches_eager, export_to_ort

    model = PairMerges()
    t = lambda *v: torch.tensor(v, dtype=torch.long)  # noqa: E731
    sets = [(t(1),), (t(0),), (t(1, 2),), (t(1, 2, 3),), (t(2, 2, 2, 1, 2, 3),), (t(0, 4, 0),)]
    exported = export_to_ort(model, (t(1, 2, 3, 0),), dynamic_shapes={"ids": {0: "n"}})
    assert exported.ops.get("Loop", 0) >= 1, exported.ops
    assert_matches_eager(model, exported, sets)
