"""Built-in rules on dynamic dimensions: fxport's verification grows and shrinks them."""

from __future__ import annotations

import torch

import fxport


class RowStats(torch.nn.Module):
    def forward(self, x, y):
        return (torch.cummax(x, 1), torch.median(x, 1), torch.kthvalue(x, 2, 1)[0],
                torch.cdist(x, y), torch.erfinv(torch.tanh(x)), torch.mode(torch.round(x), 1)[0],
                torch.searchsorted(torch.sort(y[0])[0], x))


def test_rules_hold_on_other_sizes_along_dynamic_dims():
    x, y = torch.randn(4, 7), torch.randn(5, 7)
    result = fxport.convert(RowStats(), (x, y),
                            dynamic_shapes={"x": {0: "rows"}, "y": {0: "others"}})
    assert result.verified
    shapes = {tuple(map(tuple, row.input_shapes)) for row in result.verification}
    assert len(shapes) > 1, "verification did not vary the dynamic dimensions"
    fired = {r.rule for r in result.rewrites}
    assert {"aten::cummax", "aten::median.dim", "aten::kthvalue", "aten::cdist",
            "aten::erfinv", "aten::mode", "aten::searchsorted"} <= fired


class ScanAlongDynamicDim(torch.nn.Module):
    def forward(self, x):
        return (torch.cummin(x, 1), torch.cumprod(x, 1), torch.median(x, 1)[0],
                torch.nanmedian(x, 1)[0], torch.mode(torch.round(x), 1)[0])


def test_rules_hold_when_the_reduced_dimension_is_dynamic():
    result = fxport.convert(ScanAlongDynamicDim(), (torch.randn(3, 6),),
                            dynamic_shapes={"x": {1: "length"}})
    assert result.verified
    lengths = {row.input_shapes[0][1] for row in result.verification}
    assert len(lengths) > 1, lengths
