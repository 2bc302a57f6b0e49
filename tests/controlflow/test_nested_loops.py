"""Nested ``for`` over both dimensions of a dynamic 2-D tensor (issue 25 item 2).

The outer loop appends what an inner loop computed: torch 2.13's dynamo dropped the append
(an attribute write after a nested while_loop), so the file gave zeros. Eager vs ONNX Runtime
on shapes the export never saw, rows and columns 0, 1, 2 and N.
"""

import pytest
import torch
from torch import nn

from tests.controlflow._util import assert_matches_eager, export_to_ort

D = torch.export.Dim.DYNAMIC


class RowDigits(nn.Module):
    def forward(self, m):
        out = []
        for row in m:
            s = torch.zeros(())
            for v in row:
                s = s * 10 + v
            out.append(s)
        return torch.stack(out)


class AllDigits(nn.Module):
    def forward(self, m):
        s = torch.zeros(())
        for row in m:
            for v in row:
                s = s * 10 + v
        return s


def _digits(rows, cols, seed):
    return (torch.randint(0, 10, (rows, cols), generator=torch.Generator().manual_seed(seed)).float(),)


@pytest.mark.slow
def test_nested_for_over_a_dynamic_matrix_appends_the_inner_result():
    model = RowDigits()
    exported = export_to_ort(model, _digits(3, 4, 0), ({0: D, 1: D},))
    assert exported.ops.get("Loop", 0) >= 2, exported.ops
    assert_matches_eager(model, exported, [_digits(r, c, r * 7 + c) for r, c in ((1, 1), (2, 5), (5, 2), (4, 0), (6, 3))])


@pytest.mark.slow
def test_nested_for_carrying_one_value_over_both_dimensions():
    model = AllDigits()
    exported = export_to_ort(model, _digits(2, 3, 1), ({0: D, 1: D},))
    assert exported.ops.get("Loop", 0) >= 2, exported.ops
    assert_matches_eager(model, exported, [_digits(r, c, r + c) for r, c in ((1, 1), (3, 2), (2, 4), (0, 3))])
