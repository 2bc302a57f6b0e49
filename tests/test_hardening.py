"""Unusual model signatures and behaviours: converted faithfully, or refused with one line."""

import dataclasses

import torch

import fxport
from tests.conftest import run_onnx


def converted(model, args, **kwargs):
    result = fxport.convert(model, args, **kwargs)
    assert result.verified
    return result


class VarArgs(torch.nn.Module):
    def forward(self, *xs):
        return xs[0] * xs[1] + xs[2]


class NestedInputs(torch.nn.Module):
    def forward(self, inputs):
        return inputs["a"] * inputs["pair"][0] + inputs["pair"][1]


class StructuredOutputs(torch.nn.Module):
    def forward(self, x):
        return {"double": x * 2, "rest": [x + 1, (x - 1,)]}


@dataclasses.dataclass
class Prediction:
    logits: torch.Tensor
    score: torch.Tensor


class DataclassOutput(torch.nn.Module):
    def forward(self, x):
        return Prediction(x * 3, x.sum(-1))


class CountingBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("calls", torch.zeros(()))

    def forward(self, x):
        self.calls += 1
        return x * self.calls


def test_varargs_forward():
    args = (torch.randn(3), torch.randn(3), torch.randn(3))
    result = converted(VarArgs(), args)
    assert len(result.model.graph.input) == 3


def test_dict_and_nested_tuple_inputs_are_flattened_in_order():
    a, b, c = torch.randn(4), torch.randn(4), torch.randn(4)
    result = converted(NestedInputs(), ({"a": a, "pair": (b, c)},))
    (out,) = run_onnx(result.model, a, b, c)
    torch.testing.assert_close(torch.from_numpy(out), a * b + c)


def test_dict_and_list_outputs():
    result = converted(StructuredOutputs(), (torch.randn(3),))
    assert len(result.model.graph.output) == 3


def test_dataclass_outputs_are_registered_and_flattened():
    x = torch.randn(2, 5)
    result = converted(DataclassOutput(), (x,))
    logits, score = run_onnx(result.model, x)
    torch.testing.assert_close(torch.from_numpy(score), x.sum(-1))


def test_buffer_mutated_in_forward_is_restored_and_verified():
    model = CountingBuffer()
    converted(model, (torch.randn(3),))
    assert model.calls.item() == 0, "eager runs during conversion must not change the user's module"


def test_train_mode_is_converted_in_eval_and_restored():
    model = torch.nn.Sequential(torch.nn.BatchNorm1d(3), torch.nn.Dropout(0.5))
    model.train()
    result = converted(model, (torch.randn(4, 3),))
    assert model.training and all(m.training for m in model.modules())
    assert torch.equal(model[0].running_mean, torch.zeros(3)), "no statistics updated"
    assert "Dropout" not in result.op_counts()
