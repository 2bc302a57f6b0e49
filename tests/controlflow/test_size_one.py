"""A branch on a dynamic size equal to one (issue 25 item 1): the branch taken at size 1 sees a
static 1, so ``squeeze`` and friends work, and the file is right at 1 and at N.

Eager vs ONNX Runtime on sizes the export never saw (the example has seq 5).
"""

import pytest
import torch
from torch import nn

from tests.controlflow._util import assert_matches_eager, export_to_ort

SEQ = ({1: torch.export.Dim.DYNAMIC},)


class SqueezeWhenOne(nn.Module):
    def forward(self, x):
        if x.shape[1] == 1:
            return x.squeeze(1) * 2
        return x.sum(1)


class NotOneFirst(nn.Module):
    def forward(self, x):
        if x.size(1) != 1:
            y = x.sum(1) * 0.5
        else:
            y = x.squeeze(1) - 1
        return y


class KeepsTheAxis(nn.Module):
    """The size-one branch keeps the axis (its result is expanded back to the size)."""

    def forward(self, x):
        if x.shape[1] == 1:
            y = x * 2
        else:
            y = x.cumsum(1)
        return y + 1


def _inputs(*seqs):
    return [(torch.randn(2, s, 3),) for s in seqs]


@pytest.mark.parametrize("model,strategy", [(SqueezeWhenOne, "auto"), (SqueezeWhenOne, "cond"),
                                            (NotOneFirst, "auto"),
                                            (KeepsTheAxis, "auto"), (KeepsTheAxis, "cond")])
def test_branch_on_size_one_is_right_at_one_and_n(model, strategy):
    module = model()
    exported = export_to_ort(module, (torch.randn(2, 5, 3),), SEQ, strategy)
    assert_matches_eager(module, exported, _inputs(1, 2, 7, 0))
    expected = "If" if strategy == "cond" else "Where"
    assert expected in exported.ops, exported.ops
