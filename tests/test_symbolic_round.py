"""``round()`` of a symbolic size (issue 25 item 4, ExportDB ``dynamic_shape_round``).

Eager vs ONNX Runtime at sizes the export never saw, odd ones included: Python rounds half to
even (round(2.5) == 2, round(3.5) == 4), and so must the file.
"""

import torch
from torch import nn

from tests.controlflow._util import assert_matches_eager, export_to_ort

BATCH = ({0: torch.export.Dim.DYNAMIC},)


class DynamicShapeRound(nn.Module):  # ExportDB's example
    def forward(self, x):
        return x[: round(x.shape[0] / 2)]


def test_round_of_a_symbolic_size_matches_python_at_every_size():
    model = DynamicShapeRound()
    exported = export_to_ort(model, (torch.randn(6, 3),), BATCH)
    assert "Round" in exported.ops, exported.ops
    assert_matches_eager(model, exported, [(torch.randn(n, 3),) for n in (0, 1, 3, 5, 7, 9, 10)])
