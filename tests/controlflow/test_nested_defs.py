"""A nested ``def`` that assigns a name the enclosing function also assigns under a tensor
condition: the nested body is its own scope (found on locus-lab/deq's ``line_search``, whose
``phi`` assigns ``g0_new`` as the function around it does; the branch was handed ``g0_new`` as an
input before it was bound, an internal ``UnboundLocalError``)."""

import pytest
import torch

from tests.controlflow._util import (assert_every_branch_taken, assert_matches_eager, export_to_ort, loop_exits,
                                   trip_counts)


def line_search(x0, g):
    def phi(s):
        g0_new = g(x0 + s * g(x0))  # phi's own local
        return g0_new

    x_est = x0 + 0.5 * g(x0)
    if x0.sum() > 2:
        g0_new = phi(0.5)
    else:
        g0_new = g(x_est)
    return x_est, g0_new


class SolverStep(torch.nn.Module):
    def forward(self, x):
        g = lambda y: torch.tanh(y) - y  # noqa: E731
        return line_search(x, g)


class SolverLoop(torch.nn.Module):
    """A fixed-point loop around it, stopping on the residual or at its bound (deq's ``broyden``)."""

    def forward(self, x):
        g = lambda y: 0.5 * torch.tanh(y) - y  # noqa: E731
        n = 0
        while n < 6:
            x, gx = line_search(x, g)
            n += 1
            if torch.norm(gx) < 0.9:
                break
        return x, gx


def test_a_nested_defs_assignment_is_not_the_enclosing_branch_state():
    model = SolverStep()
    inputs = [(torch.tensor([3.0, 1.0, 0.5]),), (torch.tensor([-1.0, 0.2, 0.1]),), (torch.zeros(1),)]
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, inputs[0], dynamic_shapes={"x": {0: "n"}})
    assert exported.ops.get("Where") or exported.ops.get("If"), exported.ops
    assert_matches_eager(model, exported, inputs)


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_the_nested_def_inside_a_converted_loop_every_exit():
    model = SolverLoop()
    inputs = [(torch.full((3,), 0.1),), (torch.tensor([4.0, -3.0, 2.0]),), (torch.tensor([40.0, -30.0]),),
              (torch.tensor([900.0]),)]
    assert {1, 6} <= set().union(*trip_counts(model, inputs).values())
    exits = set().union(*loop_exits(model, inputs).values())
    assert "left by its test" in exits and len(exits) >= 2, exits  # the break and the bound both taken
    exported = export_to_ort(model, inputs[1], dynamic_shapes={"x": {0: "n"}})
    assert exported.ops.get("Loop"), exported.ops
    assert_matches_eager(model, exported, inputs)
