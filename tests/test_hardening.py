"""Unusual model signatures and behaviours: converted faithfully, or refused with one line."""

import dataclasses
import functools
import inspect

import pytest
import torch

import fxport
from tests.conftest import run_cli, run_onnx


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


class LambdaAttribute(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.act = lambda t: t * 2 if t.sum() > 0 else -t  # lambda-line

    def forward(self, x):
        return self.act(x) + 1


class LocalLambda(torch.nn.Module):
    def forward(self, x):
        pick = lambda t: t + 1 if t.mean() > 0 else t - 1  # noqa: E731 - the case under test
        return pick(x) * 2


def scaled_or_shifted(t, scale):
    if t.sum() > 0:
        return t * scale
    return t - scale


class PartialOfUserFunction(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fn = functools.partial(scaled_or_shifted, scale=3.0)

    def forward(self, x):
        return self.fn(x)


class BuiltinForward(torch.nn.Module):
    forward = staticmethod(torch.relu)


def _line_of(cls, text: str) -> int:
    lines, first = inspect.getsourcelines(cls)
    return first + next(i for i, line in enumerate(lines) if text in line)


def _converted_with_where(model):
    x = torch.randn(3, 4)
    result = fxport.convert(model, (x,), verify_inputs=[(x.abs() + 1,), (-x.abs() - 1,)])
    assert result.verified and "Where" in result.op_counts()
    for inputs in (x.abs() + 1, -x.abs() - 1):  # both sides of the condition
        (out,) = run_onnx(result.model, inputs)
        torch.testing.assert_close(torch.from_numpy(out), model(inputs))


def test_local_lambda_in_converted_code_is_converted():
    _converted_with_where(LocalLambda())


def test_partial_of_a_user_function_is_converted():
    _converted_with_where(PartialOfUserFunction())


def test_lambda_attribute_with_tensor_condition_is_a_clear_error():
    with pytest.raises(fxport.ControlFlowError, match="inside a lambda cannot be converted") as info:
        fxport.convert(LambdaAttribute(), (torch.randn(3, 4),))
    assert info.value.where.lineno == _line_of(LambdaAttribute, "# lambda-line")
    assert "\n" not in str(info.value)


def test_builtin_forward_is_a_usage_error_at_the_class():
    with pytest.raises(fxport.UsageError, match="forward is the builtin 'relu', which has no Python signature") as info:
        fxport.convert(BuiltinForward(), (torch.randn(3),))
    assert info.value.where.lineno == _line_of(BuiltinForward, "class BuiltinForward")


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


@pytest.mark.parametrize("target, code, fragment, marker", [
    ("BuiltinForward", 2, "forward is the builtin 'relu', which has no Python signature", "class BuiltinForward"),
    ("LambdaAttribute", 1, "a tensor condition inside a lambda cannot be converted", "# lambda-line"),
])
@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_cli_refusals_are_one_line_at_the_users_line(target, code, fragment, marker):
    result = run_cli("convert", f"tests/test_hardening.py:{target}", "-i", "x=3x4")
    assert result.returncode == code, result.stdout + result.stderr
    line = result.stderr.strip().splitlines()[-1]  # progress lines come before the error
    assert line.startswith("error: ") and fragment in line
    assert f"test_hardening.py:{_line_of(globals()[target], marker)}" in line
