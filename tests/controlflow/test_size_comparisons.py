"""``if x.shape[0] > 0:`` / ``while i < x.shape[0]:``: torch's size-oblivious capture answers
these for sizes of at least 2; fxport decides them in the file where the range includes 0
(fxport/controlflow/operators/sizes.py). Differential at sizes 0, 1, 2 and N."""

import pytest
import torch

import fxport
from tests.controlflow import size_comparison_models as m
from tests.controlflow._util import assert_matches_eager, export_to_ort

ROWS = torch.export.Dim("rows", min=0, max=64)
SIZES = (0, 1, 2, 7)


@pytest.mark.parametrize("make, op", [(m.EmptyGuard, "Where"), (m.EmptyByLen, "Where"), (m.CountedRows, "Loop")])
def test_a_size_compared_with_zero_is_decided_at_every_size(make, op):
    model = make().eval()
    exported = export_to_ort(model, (torch.randn(4, 3),), dynamic_shapes=({0: ROWS},))
    assert exported.ops.get(op, 0) >= 1
    assert_matches_eager(model, exported, [(torch.randn(rows, 3),) for rows in SIZES])


def test_a_comparison_the_range_decides_stays_python():
    """With rows declared at least 1, ``x.shape[0] > 0`` is True everywhere: the if runs as Python."""
    model = m.EmptyGuard().eval()
    exported = export_to_ort(model, (torch.randn(4, 3),), dynamic_shapes=({0: torch.export.Dim("rows", min=1)},))
    assert not exported.records, [r.rule for r in exported.records]
    assert_matches_eager(model, exported, [(torch.randn(rows, 3),) for rows in (1, 2, 7)])


def test_end_to_end_the_row_counter_verifies_at_zero_rows():
    result = fxport.convert(m.CountedRows().eval(), (torch.randn(4, 3),),
                            dynamic_shapes=({0: torch.export.Dim("rows")},))
    assert any("rows=0" in row.name and row.passed for row in result.verification)
