"""A size test that picks a window of a tensor or all of it (issue #47, met in karpathy/minGPT's
``generate``: ``idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]``
in a loop that grows ``idx``, then ``assert t <= self.block_size`` in the model).

The branches give sizes ``L`` and ``min(L, 8)``: torch's ``cond`` could not merge the strides of
such sizes, and the capture fell back to one that bounded the prompt to the sizes that never
crop (2..5). Now the ``where`` of the two, padded and cut back to the taken side's size
(operators/sized_select.py), carries the window; the assert on its size is a ``torch._check``
left out of the file with a warning. Differential: eager vs ONNX Runtime on lengths below, at
and above the window, and growing past it inside the loop.
"""

from __future__ import annotations

import pytest
import torch

from tests.controlflow._util import assert_matches_eager, export_to_ort


class Window(torch.nn.Module):
    """The last 4 positions of ``x`` (all of them when there are fewer), summed per row."""

    def forward(self, x):
        kept = x if x.size(1) <= 4 else x[:, -4:]
        return kept.cumsum(1)


class Crop(torch.nn.Module):
    """minGPT's loop in small: 3 greedy steps over a window of 4 ids, the model asserting it."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb, self.pos, self.out = torch.nn.Embedding(7, 5), torch.nn.Embedding(4, 5), torch.nn.Linear(5, 7)

    def step(self, idx):
        t = idx.size(1)
        assert t <= 4, "window too long"
        h = self.emb(idx) + self.pos(torch.arange(0, t))
        return self.out(h.cumsum(1))[:, -1, :]

    def forward(self, idx):
        for _ in range(3):
            window = idx if idx.size(1) <= 4 else idx[:, -4:]
            nxt = self.step(window).argmax(-1, keepdim=True)
            idx = torch.cat((idx, nxt), dim=1)
        return idx


def test_a_window_picked_by_a_size_test_equals_eager_below_at_and_above_it():
    model = Window().eval()
    sets = [(torch.randn(2, n, generator=torch.Generator().manual_seed(n)),) for n in (6, 1, 3, 4, 5, 9)]
    exported = export_to_ort(model, sets[0], dynamic_shapes={"x": {1: "n"}})
    assert exported.ops.get("Where", 0) >= 1 or exported.ops.get("If", 0) >= 1, exported.ops
    assert_matches_eager(model, exported, sets)


@pytest.mark.slow  # three captured steps and their export: several seconds
def test_a_growing_sequence_cropped_to_its_window_converts_and_equals_eager():
    model = Crop().eval()
    sets = [(torch.randint(0, 7, (b, n), generator=torch.Generator().manual_seed(10 * b + n)),)
            for b, n in ((2, 3), (1, 1), (2, 2), (1, 4), (3, 5), (1, 9))]
    exported = export_to_ort(model, sets[0], dynamic_shapes={"idx": {0: "b", 1: "n"}})
    assert_matches_eager(model, exported, sets)
