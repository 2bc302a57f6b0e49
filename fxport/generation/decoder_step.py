"""One decoding step of a transformers causal LM, the cache as inputs and outputs: the model
``--task text-generation-step`` writes, for users who run their own decoding loop.

Inputs and outputs are named as optimum names them for ``text-generation-with-past``:
``input_ids`` (batch, sequence), ``attention_mask`` (batch, past_sequence + sequence),
``position_ids`` (batch, sequence), ``past_key_values.{i}.key`` / ``.value`` (batch, key-value
heads, past_sequence, head size) for each layer ``i``; outputs ``logits`` (batch, sequence,
vocabulary) and ``present.{i}.key`` / ``.value`` (the cache grown by ``sequence``). A prefill
passes an empty past (past_sequence 0).

Example::

    >>> step = DecoderStep(lm)                                              # doctest: +SKIP
    >>> step.onnx_input_names[:4]                                           # doctest: +SKIP
    ['input_ids', 'attention_mask', 'position_ids', 'past_key_values.0.key']
"""

from __future__ import annotations

import inspect

import torch


class DecoderStep(torch.nn.Module):
    """``(input_ids, attention_mask, position_ids, past_key_values) → (logits, *present)`` around
    ``lm``; ``past_key_values`` is a list: key then value of each layer."""

    def __init__(self, lm: torch.nn.Module):
        super().__init__()
        self.lm = lm
        self.layers = cache_shape(lm)[0]
        self.cache_argument = "cache" if "cache" in inspect.signature(lm.forward).parameters else "past_key_values"
        per_layer = [(i, kind) for i in range(self.layers) for kind in ("key", "value")]
        self.onnx_input_names = ["input_ids", "attention_mask", "position_ids"] + [
            f"past_key_values.{i}.{kind}" for i, kind in per_layer]
        self.onnx_output_names = ["logits"] + [f"present.{i}.{kind}" for i, kind in per_layer]

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                past_key_values: list[torch.Tensor]):
        from transformers import DynamicCache

        cache = DynamicCache(ddp_cache_data=list(zip(past_key_values[0::2], past_key_values[1::2])))
        out = self.lm(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                      use_cache=True, **{self.cache_argument: cache})
        present = out[self.cache_argument]
        grown = [tensor for layer in present.layers for tensor in (layer.keys, layer.values)]
        return (out.logits, *grown)


def cache_shape(lm: torch.nn.Module) -> tuple[int, int, int]:
    """(layers, key-value heads, head size) of ``lm``'s cache, read from its config."""
    config = lm.config.get_text_config()
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_size = getattr(config, "head_dim", None) or config.hidden_size // heads
    return config.num_hidden_layers, kv_heads, head_size


def step_inputs(lm: torch.nn.Module, batch: int, past: int, sequence: int, seed: int = 0,
                padded_rows: int = 0) -> tuple:
    """Inputs of one step: ids inside the vocabulary, a left-padded mask over past + sequence,
    positions from the mask (as ``generate()`` makes them), random past keys and values."""
    layers, kv_heads, head_size = cache_shape(lm)
    draw = torch.Generator().manual_seed(seed)
    vocab = lm.config.get_text_config().vocab_size
    input_ids = torch.randint(0, vocab, (batch, sequence), generator=draw)
    mask = torch.ones(batch, past + sequence, dtype=torch.int64)
    for row in range(batch - padded_rows, batch):
        mask[row, : int(torch.randint(0, past + sequence, (), generator=draw)) if past + sequence > 1 else 0] = 0
    positions = ((mask.cumsum(-1) - 1).masked_fill(mask == 0, 0))[:, past:]
    cache = [torch.randn(batch, kv_heads, past, head_size, generator=draw) for _ in range(2 * layers)]
    return (input_ids, mask, positions, cache)


def step_dynamic_shapes(lm: torch.nn.Module) -> dict:
    """Dynamic axes of :func:`step_inputs`: batch, sequence, the mask's total length and the
    past length (one entry per cache tensor in ``past_key_values``)."""
    layers = cache_shape(lm)[0]
    past = {0: "batch", 2: "past_sequence"}
    return {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "total_sequence"},
            "position_ids": {0: "batch", 1: "sequence"}, "past_key_values": [past] * (2 * layers)}
