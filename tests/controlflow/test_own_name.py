"""A method that calls the module's function of its own name (issue #47: pytorch_HMM's
``TransitionModel.maxmul`` calls the module-level ``maxmul``). Python finds the global there; in
the converted code the method was a local of fxport's factory under that name, so the call
reached the method itself ("'FakeTensor' object has no attribute …", as torch.export failed).
It now calls the global, converted, and equals eager; a function that calls itself by name still
recurses into itself."""

from __future__ import annotations

import torch

from tests.controlflow._util import assert_matches_eager, export_to_ort, trip_counts


def maxmul(a, b):
    """The module's function: a max-product step, with a loop on a tensor condition."""
    out = (a[:, :, None] + b[None]).amax(1)
    while out.max() > 4:
        out = out - 1
    return out


def countdown(x, k: int):
    """Calls itself by name (a global that is itself)."""
    if k == 0:
        return x
    return countdown(x * 0.5, k - 1)


class Transition(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(2)
        self.w = torch.nn.Parameter(torch.randn(3, 3))

    def maxmul(self, state):
        return maxmul(torch.log_softmax(self.w, 0), state)


class Viterbi(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.transition = Transition()

    def forward(self, x):
        state = x[0]
        for t in range(1, x.shape[0]):
            state = self.transition.maxmul(state) + x[t]
        return countdown(state, 2)


def test_a_method_calling_the_global_of_its_name_converts_and_equals_eager():
    model = Viterbi()
    inputs = [(torch.randn(n, 3, 2) * s,) for n, s in ((1, 1.0), (2, 1.0), (3, 4.0), (6, 3.0))]
    assert {0, 1, 2, 5} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, (torch.randn(4, 3, 2),), dynamic_shapes={"x": {0: "time"}})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")
