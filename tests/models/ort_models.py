"""Models for tests/test_optimize_ort.py: a tiny GPT-2 and an attention block inside a data-dependent if."""

import torch

VOCAB = 100


class TinyGPT2(torch.nn.Module):
    """transformers' GPT-2 (2 layers, hidden 32, 4 heads, random weights): ids and mask in, hidden states out."""

    def __init__(self):
        super().__init__()
        import transformers

        torch.manual_seed(0)
        config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=VOCAB, n_positions=64)
        self.model = transformers.GPT2Model(config).eval()

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state


def gpt2_inputs():
    """Example for ``--inputs-fn``: ids inside the vocabulary, an all-ones mask."""
    generator = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(3, VOCAB, (2, 8), generator=generator),
            "attention_mask": torch.ones(2, 8, dtype=torch.int64)}


class GatedAttention(torch.nn.Module):
    """Pre-norm attention block whose residual sign depends on the data (an ONNX ``If``).

    Each branch holds causal scaled dot-product attention, a residual Add and a LayerNorm: the
    shapes ORT's MultiHeadAttention and SkipLayerNormalization fusions look for.
    """

    def __init__(self, dim: int = 32, heads: int = 4):
        super().__init__()
        torch.manual_seed(0)
        self.heads = heads
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)
        self.norm = torch.nn.LayerNorm(dim)

    def attention(self, x):
        batch, seq, dim = x.shape
        q, k, v = self.qkv(x).split(dim, dim=-1)
        q, k, v = (t.reshape(batch, seq, self.heads, dim // self.heads).transpose(1, 2) for t in (q, k, v))
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(a.transpose(1, 2).reshape(batch, seq, dim))

    def forward(self, x):
        if x.mean() > 0:
            y = self.norm(x + self.attention(x))
        else:
            y = self.norm(x - self.attention(x) * 0.5)
        return y
