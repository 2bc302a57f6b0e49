"""``del`` of a name bound inside a converted loop body or branch (issue #47, fresh4: YOLOX's
``del topk_ious, dynamic_ks, pos_idx`` after its SimOTA loop). The outlined block binds the name,
the converted function does not; the ``del`` leaves it out (converters/delete_statements.py)."""

from __future__ import annotations

import pytest
import torch

from tests.controlflow._util import assert_matches_eager, export_to_ort


class DelAfterFor(torch.nn.Module):
    """A name bound in a loop over a dynamic size, deleted after the loop with a name bound before."""

    def forward(self, cost):
        m = torch.zeros_like(cost)
        before = cost.sum()
        for g in range(cost.shape[0]):
            _, pos = torch.topk(cost[g], k=1)
            m[g][pos] = 1
        del before, pos
        return m


class DelAfterIf(torch.nn.Module):
    """A name bound in one branch of a tensor if, deleted after it (the other branch binds it too)."""

    def forward(self, x):
        if x.sum() > 0:
            t = x * 2
            y = t + 1
        else:
            t = -x
            y = t - 1
        del t
        return y


class DelInsideBody(torch.nn.Module):
    """``del`` of a body-local name inside the loop body, bound by an if nested in the body."""

    def forward(self, x):
        y = torch.zeros_like(x[0])
        for i in range(x.shape[0]):
            if x[i].sum() > 0:
                t = x[i] * 2
            else:
                t = x[i] - 1
            y = y + t
            del t
        return y


@pytest.mark.parametrize("model, example, dynamic, sets", [
    (DelAfterFor(), torch.randn(3, 5), {"cost": {0: "n"}}, [(torch.randn(1, 5),), (torch.randn(2, 5),), (torch.randn(6, 5),)]),
    (DelInsideBody(), torch.randn(3, 4), {"x": {0: "n"}},
     [(torch.ones(1, 4),), (-torch.ones(2, 4),), (torch.randn(5, 4),)]),
])
def test_del_after_or_inside_a_converted_loop_equals_eager(model, example, dynamic, sets):
    exported = export_to_ort(model, (example,), dynamic_shapes=dynamic)
    assert exported.ops.get("Loop", 0) == 1, exported.ops
    assert_matches_eager(model, exported, sets)


def test_del_after_a_converted_if_equals_eager_on_both_branches():
    model = DelAfterIf()
    exported = export_to_ort(model, (torch.randn(3),))
    assert exported.ops.get("If", 0) + exported.ops.get("Where", 0) >= 1, exported.ops
    assert_matches_eager(model, exported, [(torch.ones(3),), (-torch.ones(3),)])


def test_del_of_a_name_never_bound_still_raises():
    """A del of a name nothing binds is left as written: Python raises, so does the converted code."""
    from fxport.controlflow.engine import convert_function

    def f(x):
        y = x + 1
        del z  # noqa: F821
        return y

    assert "del z" in convert_function(f).source.after
