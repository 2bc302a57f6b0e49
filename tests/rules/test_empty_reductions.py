"""``any()`` of an empty tensor is False in the file, as in torch (rewrites/empty_reductions.py):
the stock translation's ReduceMax of an empty set casts to True."""

from __future__ import annotations

import onnxruntime as ort
import pytest
import torch

import fxport


class Reduce(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


CASES = {
    "any": (lambda x: x.any(), "aten::any"),
    "any_dim": (lambda x: x.any(-1), "aten::any"),
    "any_dim_keepdim": (lambda x: x.any(0, keepdim=True), "aten::any"),
    "any_dims": (lambda x: x.any(dim=(0, 1)), "aten::any"),
    "any_float": (lambda x: (x.float() - 0.5).any(-1), "aten::any"),
}


def run(model, x):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]


@pytest.mark.parametrize("name", list(CASES))
def test_any_is_false_on_empty_slices_and_exact_elsewhere(name):
    fn, rule = CASES[name]
    example = torch.tensor([[True, False, False], [False, False, False]])
    result = fxport.convert(Reduce(fn), (example,), dynamic_shapes={"x": {0: "rows", 1: "columns"}})
    assert result.verified and any(r.rule.startswith(rule) for r in result.rewrites)
    draw = torch.Generator().manual_seed(0)
    inputs = [torch.zeros(0, 3, dtype=torch.bool), torch.zeros(2, 0, dtype=torch.bool),
              torch.zeros(4, 5, dtype=torch.bool), torch.ones(1, 1, dtype=torch.bool),
              torch.rand(3, 7, generator=draw) < 0.1]
    for x in inputs:
        expected = fn(x)
        assert (run(result.model, x) == expected.numpy()).all() and run(result.model, x).shape == tuple(expected.shape), x.shape


def test_the_stock_translation_is_wrong_on_an_empty_tensor():
    """Why the rule exists: without it, any() of an empty tensor is True in the file."""
    example = torch.tensor([[True, False]])
    result = fxport.convert(Reduce(lambda x: x.any()), (example,), dynamic_shapes={"x": {0: "rows"}},
                            disable_rules=("aten::any",), verify=False)
    assert bool(run(result.model, torch.zeros(0, 2, dtype=torch.bool))) is True
