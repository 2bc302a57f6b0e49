"""Control flow in methods of objects other than the module (issue #47: fast_pytorch_kmeans'
``KMeans``, mmdetection's ``self.assigner.assign``, deepspeech.pytorch's ``self.decoder.decode``):
the method is user code, so it is converted like ``self.method`` — a solver object made in
``forward``, one kept in an attribute, one bound to a local name. Each equals eager on inputs
that take every exit and branch, and the file holds the Loop / Where it was converted to."""

from __future__ import annotations

import ast

import torch

from fxport.controlflow.context import Context
from fxport.controlflow.converters.call_trees import CallConverter
from tests.controlflow._util import assert_every_branch_taken, assert_matches_eager, export_to_ort, loop_exits, trip_counts


class HalvingSolver:
    """A plain object (not a module) with a loop that ends by its break or its trip bound."""

    def __init__(self, tol: float = 1e-2, max_iter: int = 12):
        self.tol = tol
        self.max_iter = max_iter

    def run(self, x):
        for _ in range(self.max_iter):
            x = x * 0.5
            if x.abs().max() <= self.tol:
                break
        return x


class Thresholder:
    """A plain object whose method branches on a tensor value."""

    def __init__(self, threshold: float):
        self.threshold = threshold

    def assign(self, scores):
        if scores.max() >= self.threshold:
            labels = scores.argmax(-1)
        else:
            labels = torch.full_like(scores[..., 0], -1, dtype=torch.long)
        return labels


class SolverMadeInForward(torch.nn.Module):
    def forward(self, x):
        return HalvingSolver().run(x)


class SolverInAnAttribute(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.solver = HalvingSolver(tol=0.05, max_iter=6)
        self.assigner = Thresholder(0.5)

    def forward(self, x, scores):
        return self.solver.run(x), self.assigner.assign(scores)


class SolverBoundToALocal(torch.nn.Module):
    def forward(self, x):
        solver = HalvingSolver(tol=0.1)
        y = solver.run(x)
        return y.sum() + x.sum()  # tensor methods stay as written


def _halving_inputs():
    """Largest |x| 0.001 (break after 1 trip), 0.03 (2 trips at tol 0.01), 1 and 3 (more), 1e6 (bound)."""
    return [(torch.tensor([0.001, -0.0005]),), (torch.tensor([0.03]),), (torch.tensor([1.0, -0.5, 0.25]),),
            (torch.tensor([3.0, 2.0, 1.0, 0.5]),), (torch.full((2,), 1e6),)]


def test_a_loop_in_a_method_of_an_object_made_in_forward_equals_eager_at_every_exit():
    model = SolverMadeInForward()
    exported = export_to_ort(model, (torch.tensor([1.0, 2.0]),), dynamic_shapes={"x": {0: "n"}})
    inputs = _halving_inputs()
    assert {1, 2, 12} <= set().union(*trip_counts(model, inputs).values())
    exits = set().union(*loop_exits(model, inputs).values())
    assert len(exits) >= 2, exits  # its break and its trip bound
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


def test_methods_of_objects_in_attributes_convert_their_loops_and_branches():
    model = SolverInAnAttribute()
    example = (torch.tensor([1.0, 2.0]), torch.tensor([[0.9, 0.1], [0.2, 0.3]]))
    exported = export_to_ort(model, example, dynamic_shapes={"x": {0: "n"}, "scores": {0: "boxes"}})
    inputs = [(torch.tensor([0.01]), torch.tensor([[0.1, 0.2]])),            # break at once; no score ≥ 0.5
              (torch.tensor([0.08, 0.02]), torch.tensor([[0.6, 0.7], [0.1, 0.9]])),  # 1 trip; labels
              (torch.tensor([0.3]), torch.tensor([[0.4, 0.45], [0.3, 0.2], [0.1, 0.0]])),  # 3 trips
              (torch.full((3,), 50.0), torch.tensor([[0.5, 0.1]]))]           # the trip bound; a tie at 0.5
    assert_every_branch_taken(model, inputs)
    assert {1, 6} <= set().union(*trip_counts(model, inputs).values())
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop") and (exported.ops.get("Where") or exported.ops.get("If"))


def test_a_method_of_an_object_bound_to_a_local_name_converts():
    model = SolverBoundToALocal()
    exported = export_to_ort(model, (torch.tensor([1.0, 2.0]),), dynamic_shapes={"x": {0: "n"}})
    assert_matches_eager(model, exported, _halving_inputs())
    assert exported.ops.get("Loop")


def test_tensor_and_container_methods_stay_as_written_and_other_objects_methods_are_wrapped():
    def f(self, x, xs, solver):
        y = x.sum() + self.weight.t().sum()
        xs.append(y)
        d = {}.items()
        return solver.run(y), self.assigner.assign(x), make_solver().run(x), torch.zeros(2).abs(), d

    ctx = Context(f)
    CallConverter(ctx).apply()
    text = ast.unparse(ctx.fdef)
    assert "x.sum()" in text and "self.weight.t().sum()" in text and "xs.append(y)" in text
    assert "torch.zeros(2).abs()" in text and "{}.items()" in text
    assert "_fx.call(solver.run)(y)" in text
    assert "_fx.call(self.assigner.assign)(x)" in text
    assert "_fx.call(_fx.call(make_solver)().run)(x)" in text
