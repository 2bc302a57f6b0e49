"""Real architectures from transformers, built from tiny configs with random weights.

Nothing is downloaded: configs are constructed in code. Each model is converted with dynamic
batch and sequence axes and verified by fxport on unseen sizes, then checked again here.
"""

import pytest
import torch

import fxport
from tests.conftest import assert_matches_eager

transformers = pytest.importorskip("transformers")


class LastHidden(torch.nn.Module):
    """Wrap a transformers model to take token ids and return the last hidden state."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False).last_hidden_state


def tiny(name):
    torch.manual_seed(0)
    if name == "gpt2":
        config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=64)
        return transformers.GPT2Model(config)
    if name == "bert":
        config = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                         intermediate_size=64, vocab_size=100, max_position_embeddings=64)
        return transformers.BertModel(config)
    config = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                      num_key_value_heads=2, intermediate_size=64, vocab_size=100,
                                      max_position_embeddings=64)
    return transformers.LlamaModel(config)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "bert", "llama"])
def test_tiny_transformer_converts_and_verifies(name):
    model = LastHidden(tiny(name)).eval()
    result = fxport.convert(model, (torch.randint(0, 100, (2, 8)),),
                            dynamic_shapes={"input_ids": {0: "batch", 1: "seq"}})
    assert result.verified
    assert any(row.name.startswith("larger[") for row in result.verification)
    assert_matches_eager(model, result.model, torch.randint(0, 100, (1, 17)), atol=1e-4)
    if name == "bert":  # position table bounds seq: fxport adopts torch.export's bound and says so
        assert any("'seq' is bounded by the model" in w for w in result.warnings)
