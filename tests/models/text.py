"""A small text model the CLI tests point at: token ids and a padding mask."""

import torch
from torch import nn


class MaskedPooler(nn.Module):
    """Embeds token ids, attends over the valid positions of a padding mask, mean-pools them.

    Its domain: ids below 50 (the embedding table), a 0/1 mask with at least one valid position
    per row. Outside it (a row of padding only) the attention and the mean are undefined.
    """

    example_dynamic_shapes = {"ids": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}}

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(50, 8)
        self.proj = nn.Linear(8, 4)

    def forward(self, ids, mask):
        h = self.embed(ids)
        keep = mask.bool()[:, None, None, :]
        h = nn.functional.scaled_dot_product_attention(h[:, None], h[:, None], h[:, None], attn_mask=keep)[:, 0]
        weights = mask.to(h.dtype)[..., None]
        return self.proj((h * weights).sum(1) / weights.sum(1))

    def example_inputs(self):
        return (torch.tensor([[3, 1, 4, 1, 5, 9], [2, 6, 5, 3, 5, 8]]), torch.ones(2, 6, dtype=torch.int64))
