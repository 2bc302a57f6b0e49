"""``nn.Transformer``'s causal-mask hint (rewrites/transformer.py): ``_detect_is_causal_mask``
reads a mask's values as a Python bool, so a mask built from a dynamic size stopped capture in
torch's own file. The rule answers "not causal" (the mask itself is applied: the same attention)
when the caller gave no ``is_causal``; it also applies in the body of a loop whose state grows
(captured on its own)."""

import pytest
import numpy as np
import torch

import fxport
from fxport.testing import run_onnx


class MaskedEncoder(torch.nn.Module):
    """An encoder over a sequence of any length with ``generate_square_subsequent_mask(len)``."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        layer = torch.nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0)
        self.encoder = torch.nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)

    def forward(self, x):
        mask = torch.nn.Transformer.generate_square_subsequent_mask(x.size(0))
        return self.encoder(x, mask)


class GreedyDecoder(torch.nn.Module):
    """A greedy loop growing ``ys`` by cat, its decoder called with a causal mask of the grown
    length (gec-with-copying's ``greedy_decode``)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        layer = torch.nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0)
        self.decoder = torch.nn.TransformerDecoder(layer, 1)
        self.emb = torch.nn.Embedding(6, 8)
        self.out = torch.nn.Linear(8, 6)

    def forward(self, memory):
        ys = torch.full((1, memory.shape[1]), 2, dtype=torch.long)
        for i in range(5):
            mask = torch.nn.Transformer.generate_square_subsequent_mask(ys.size(0))
            logits = self.out(self.decoder(self.emb(ys), memory, tgt_mask=mask)[-1:])
            ys = torch.cat([ys, logits.argmax(-1)], dim=0)
            if (ys[-1] == 3).all():
                break
        return ys


def _randn(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_encoder_with_a_mask_of_a_dynamic_length_converts():
    model = MaskedEncoder().eval()
    result = fxport.convert(model, (_randn(5, 2, 8, seed=0),), dynamic_shapes={"x": {0: "time"}})
    assert "transformer-mask-hint-unread" in {r.rule for r in result.rewrites}
    for seed, time in enumerate((1, 2, 9)):
        x = _randn(time, 2, 8, seed=10 + seed)
        with torch.no_grad():
            expected = model(x).numpy()
        np.testing.assert_allclose(run_onnx(result.model, (x,))[0], expected, rtol=1e-4, atol=1e-5)


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_decoder_in_the_body_of_a_growing_loop_converts():
    model = GreedyDecoder().eval()
    result = fxport.convert(model, (_randn(4, 1, 8, seed=1),), dynamic_shapes={"memory": {0: "src"}})
    assert result.op_counts().get("Loop", 0) >= 1
    for seed, src in enumerate((1, 3, 6)):
        memory = _randn(src, 1, 8, seed=20 + seed)
        with torch.no_grad():
            expected = model(memory).numpy()
        np.testing.assert_array_equal(run_onnx(result.model, (memory,))[0], expected)
