"""``any()`` of an empty tensor is False and ``mean()`` NaN in the file, as in torch
(rewrites/empty_reductions.py): the stock translation's ReduceMax of an empty set casts to True,
and ONNX Runtime's ReduceMean of one is 0."""

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


MEANS = {
    "mean": lambda x: x.mean(),
    "mean_dim": lambda x: x.mean(-1),
    "mean_dim0_keepdim": lambda x: x.mean(0, keepdim=True),
    "mean_dims": lambda x: x.mean(dim=(0, 1)),
    "mean_dtype": lambda x: x.mean(dtype=torch.float64),
    "mean_of_abs": lambda x: x.abs().mean(0),
}


@pytest.mark.parametrize("name", list(MEANS))
def test_mean_is_nan_on_empty_slices_and_exact_elsewhere(name):
    fn = MEANS[name]
    result = fxport.convert(Reduce(fn), (torch.randn(2, 3),), dynamic_shapes={"x": {0: "rows", 1: "columns"}})
    assert result.verified and any(r.rule.startswith("aten::mean") for r in result.rewrites)
    draw = torch.Generator().manual_seed(0)
    for x in [torch.zeros(0, 3), torch.zeros(2, 0), torch.zeros(0, 0), torch.randn(4, 5, generator=draw),
              torch.randn(1, 1, generator=draw)]:
        expected = fn(x).numpy()
        got = run(result.model, x)
        assert got.shape == expected.shape and got.dtype == expected.dtype, x.shape
        torch.testing.assert_close(torch.from_numpy(got), torch.from_numpy(expected), equal_nan=True)


def test_mean_over_static_axes_stays_one_reduce_mean():
    """No select where no reduced slice can be empty (ONNX Runtime's norm fusions match ReduceMean)."""
    result = fxport.convert(Reduce(lambda x: x.pow(2).mean(-1, keepdim=True)), (torch.randn(2, 8),),
                            dynamic_shapes={"x": {0: "rows"}})
    ops = [node.op_type for node in result.model.graph.node]
    assert "ReduceMean" in ops and "Where" not in ops, ops


def test_the_stock_mean_is_zero_on_an_empty_tensor():
    """Why the rule exists: without it, the mean of an empty tensor is 0 in the file, not NaN."""
    result = fxport.convert(Reduce(lambda x: x.mean()), (torch.randn(2, 3),), dynamic_shapes={"x": {0: "rows"}},
                            disable_rules=("aten::mean",), verify=False)
    assert float(run(result.model, torch.zeros(0, 3))) == 0.0


class Einsum(torch.nn.Module):
    def __init__(self, equation):
        super().__init__()
        self.equation = equation

    def forward(self, a, b):
        return torch.einsum(self.equation, a, b)


EINSUMS = {  # equation, shapes, the dynamic axis of each operand (one name)
    "batch_axis_out": ("bghid,bghjd->bghij", ((2, 3, 4, 5, 8), (2, 3, 4, 5, 8)), (0, 0)),
    "contracted_axis": ("ij,jk->ik", ((3, 4), (4, 5)), (1, 0)),
    "implicit_output": ("ij,jk", ((3, 4), (4, 5)), (1, 0)),
}


@pytest.mark.parametrize("name", list(EINSUMS))
def test_einsum_with_an_empty_operand_answers_as_torch_instead_of_crashing_onnx_runtime(name):
    """ONNX Runtime 1.32 dies of SIGFPE on an Einsum with a zero-size axis (maxvit_t at batch 0);
    a regression here kills the test process, which fails the test too."""
    equation, shapes, axes = EINSUMS[name]
    model = Einsum(equation)
    size = torch.export.Dim("n")
    job = fxport.convert(model, tuple(torch.randn(*s) for s in shapes), verify=False,
                         dynamic_shapes=tuple({axis: size} for axis in axes))
    assert any(r.rule == "aten::einsum" for r in job.rewrites)
    session = ort.InferenceSession(job.model.SerializeToString(), providers=["CPUExecutionProvider"])
    for n in (0, 1, 3):
        inputs = []
        for shape, axis in zip(shapes, axes):
            shape = list(shape)
            shape[axis] = n
            inputs.append(torch.randn(*shape))
        got = session.run(None, {i.name: t.numpy() for i, t in zip(session.get_inputs(), inputs)})[0]
        want = model(*inputs)
        assert got.shape == tuple(want.shape)
        torch.testing.assert_close(torch.from_numpy(got), want, rtol=1e-5, atol=1e-5)


ROLLS = {
    "one_dim": lambda x: x.roll(3, 1),
    "negative_shift": lambda x: x.roll(-2, 0),
    "two_dims": lambda x: x.roll((1, -5), (0, 1)),
    "flattened": lambda x: x.roll(4),
}


@pytest.mark.parametrize("name", list(ROLLS))
def test_roll_of_a_dimension_that_is_empty_at_run_time_is_empty_and_exact_elsewhere(name):
    """The stock translation takes the shift modulo the runtime length: ONNX Runtime fails on
    ``Mod`` by 0 when a dynamic dimension is empty (a shifted-window model at 0 rows)."""
    fn = ROLLS[name]
    result = fxport.convert(Reduce(fn), (torch.randn(3, 7),), dynamic_shapes={"x": {0: "rows", 1: "columns"}})
    assert result.verified and any(r.rule == "aten::roll" for r in result.rewrites)
    assert {"size[rows=0]", "size[columns=0]"} <= {row.name for row in result.verification}
    for shape in [(0, 7), (3, 0), (0, 0), (1, 1), (2, 3), (5, 11)]:
        x = torch.randn(*shape)
        got = run(result.model, x)
        assert got.shape == tuple(fn(x).shape) and (got == fn(x).numpy()).all(), shape


def test_the_stock_roll_fails_at_an_empty_dimension():
    """Why the rule exists: without it, ONNX Runtime cannot run the file at 0 rows."""
    result = fxport.convert(Reduce(ROLLS["one_dim"]), (torch.randn(3, 7),), dynamic_shapes={"x": {1: "columns"}},
                            disable_rules=("aten::roll",), verify=False)
    with pytest.raises(Exception):
        run(result.model, torch.randn(3, 0))
