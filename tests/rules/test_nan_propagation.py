"""NaN-propagating max/min reductions (rewrites/nan_propagation.py): ONNX Runtime's
ReduceMax/ReduceMin/ArgMax/ArgMin skip NaN on their vectorised paths, torch propagates it."""

from __future__ import annotations

import pytest
import torch

import fxport
import fxport.testing
from tests.rules.cases import Apply

#: NaN propagation through every rule (48 conversions): run with the tests marked slow (CI), not in the README command
pytestmark = pytest.mark.slow

NAN = float("nan")


def _with_nans(shape, seed=0):
    """Inputs along the last dim: NaN first, middle, last, all-NaN, none, scattered."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for mode in ("first", "middle", "last", "all", "none", "scattered"):
        x = torch.randn(shape, generator=g)
        n = shape[-1]
        if mode == "first":
            x[..., 0] = NAN
        elif mode == "middle":
            x[..., n // 2] = NAN
        elif mode == "last":
            x[..., -1] = NAN
        elif mode == "all":
            if x.dim() > 1:
                x[0] = NAN          # all-NaN slices (along the last dim) next to clean ones
            else:
                x[:] = NAN
        elif mode == "scattered":
            x[torch.rand(shape, generator=g) < 0.2] = NAN
        out.append((x,))
    return out


CASES = {
    "max": (lambda x: x.max(), "aten::max"),
    "min": (lambda x: x.min(), "aten::min"),
    "amax": (lambda x: x.amax(-1), "aten::amax"),
    "amax_keepdim_dims": (lambda x: x.amax((0, -1), keepdim=True), "aten::amax"),
    "amin": (lambda x: x.amin(0, keepdim=True), "aten::amin"),
    "max_dim": (lambda x: tuple(x.max(-1)), "aten::max.dim"),
    "min_dim": (lambda x: tuple(x.min(0, keepdim=True)), "aten::min.dim"),
    "argmax": (lambda x: x.argmax(-1), "aten::argmax"),
    "argmin": (lambda x: x.argmin(0), "aten::argmin"),
    "argmax_flat": (lambda x: x.argmax(), "aten::argmax"),
}
SHAPES = [(6, 4), (3, 17), (64,), (2, 3, 33)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", list(CASES))
def test_reduction_matches_eager_with_nan(name, shape):
    function, rule = CASES[name]
    if len(shape) == 1 and name in ("amax_keepdim_dims",):
        pytest.skip("needs two dims")
    inputs = _with_nans(shape)
    check = fxport.testing.assert_rule_converts(
        Apply(function), inputs[0], expect_fired=[rule], inputs=inputs, atol=0, rtol=0)
    assert check.fired[rule] >= 1


@pytest.mark.parametrize("name", ["max", "amax", "max_dim", "argmin"])
def test_dynamic_dim_sizes(name):
    function, rule = CASES[name]
    batch = torch.export.Dim("batch", min=2, max=256)
    inputs = [x for n in (2, 5, 8, 31, 64) for x in _with_nans((3, n), seed=n)]
    check = fxport.testing.assert_rule_converts(
        Apply(function), (torch.randn(3, 7),), expect_fired=[rule], inputs=inputs,
        dynamic_shapes=(({1: batch},),), atol=0, rtol=0)
    assert check.fired[rule] >= 1


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_non_float_dtypes_take_the_plain_path(dtype):
    x = torch.randint(0, 5, (4, 9)).to(dtype)

    def f(x):
        values = (x.max(), x.amin(-1), x.max(0)[0], x.max(0)[1])
        return values if x.dtype == torch.bool else values + (x.argmin(-1),)  # no bool argmin

    fxport.testing.assert_rule_converts(Apply(f), (x,), inputs=[(torch.randint(0, 5, (4, 9))
                                                                 .to(dtype),)], atol=0, rtol=0)


class LogRange(torch.nn.Module):
    """The fuzzer's repro: a data-dependent branch on max > min of a log (NaN for x < 0)."""

    def forward(self, x):
        h = torch.log(x)
        if h.max() > h.min():
            return h * 2
        return h - 1


def test_fuzzer_repro_branch_on_nan_max_min():
    g = torch.Generator().manual_seed(3)
    positive = torch.rand(6, 4, generator=g) + 0.1
    some_negative = positive.clone()
    some_negative[1, 2] = -1.0
    some_negative[4, 0] = -0.5
    last_negative = positive.clone()
    last_negative[-1, -1] = -2.0
    batches = [(positive,), (some_negative,), (last_negative,), (-positive,)]
    result = fxport.convert(LogRange(), (positive,), verify_inputs=batches)
    assert any(r.rule == "aten::max" for r in result.rewrites), result.rewrites
    assert any(r.tier == "control-flow" for r in result.rewrites), result.rewrites
    import onnxruntime as ort
    session = ort.InferenceSession(result.model.SerializeToString())
    name = session.get_inputs()[0].name
    for (x,) in batches:
        expected = LogRange()(x)
        (got,) = session.run(None, {name: x.numpy()})
        torch.testing.assert_close(torch.from_numpy(got), expected, equal_nan=True,
                                   atol=1e-6, rtol=1e-6)   # log: 1 ulp; the branch is what counts
