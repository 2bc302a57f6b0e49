"""Decoder-only models (GPT-2, Llama, Mistral, Qwen, …): the prompt is the prefill, with a
``DynamicCache`` and ``position_ids`` from the mask as ``generate()`` makes them (``cumsum - 1``,
0 on padding); each step feeds the chosen token, the cache and the mask grown by one column.

Example::

    >>> import torch
    >>> from transformers import LlamaConfig, LlamaForCausalLM
    >>> from fxport.generation.architectures import build_generator
    >>> lm = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
    ...     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)).eval()
    >>> generator = build_generator(lm, max_new_tokens=8, eos_token_id=2)
    >>> isinstance(generator, DecoderOnlyGenerator)
    True
    >>> ids = generator(torch.tensor([[5, 6, 7]]), torch.ones(1, 3, dtype=torch.int64))
    >>> ids.shape[1] <= 3 + 8
    True
"""

from __future__ import annotations

from typing import Any

import torch

from fxport.generation.generator import Generator


class DecoderOnlyGenerator(Generator):
    """The hooks for a transformers causal LM: the output is the prompt followed by the new ids."""

    def start(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, beams: int) -> tuple:
        """The prefill (the prompt repeated per beam); :meth:`advance` carries the mask and the
        position."""
        flat_ids = input_ids.repeat_interleave(beams, 0)
        attention_mask = attention_mask.long().repeat_interleave(beams, 0)
        position_ids = (attention_mask.cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)
        cache, logits = self.step(flat_ids, attention_mask, position_ids, self.empty_cache())
        return flat_ids, cache, logits, attention_mask, position_ids[:, -1:]

    def advance(self, tokens: torch.Tensor, attention_mask: torch.Tensor, position: torch.Tensor,
                cache: Any) -> tuple:
        """One step after the prefill: the model on each row's (beam's) last token."""
        attention_mask = torch.cat([attention_mask, torch.ones_like(attention_mask[:, :1])], 1)
        position = position + 1
        cache, logits = self.step(tokens, attention_mask, position, cache)
        return cache, logits, attention_mask, position

    def prompt_padding(self, attention_mask: torch.Tensor) -> torch.Tensor:
        """How many ids at the start of each output row are left padding, which the repetition
        penalty does not count as seen (as ``generate()`` finds it: the first 1 of the mask)."""
        return (attention_mask != 0).int().argmax(1)

    def prefix_length(self, input_ids: torch.Tensor) -> int:
        """How many ids of the output come before the generated ones (the prompt)."""
        return input_ids.shape[1]

    def empty_cache(self) -> Any:
        """The cache ``generate()`` starts from, with every layer a full-attention ``DynamicLayer``.

        For a model with sliding-window layers (Mistral, Gemma 2/3) ``generate()`` keeps only the
        window in those layers; here they keep every position and the model's sliding-window mask
        (computed from the positions, for the layer's type in the config) hides the ones outside
        the window, so attention sees the same keys. fxport carries ``DynamicLayer`` through a
        loop; a sliding layer's ``cumulative_length`` is a Python number that changes each step.
        """
        from transformers import DynamicCache

        cache = DynamicCache(config=self.lm.config)
        if all(type(layer).__name__ == "DynamicLayer" for layer in cache.layers):
            return cache
        return DynamicCache()

    def step(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
             cache: Any) -> tuple[Any, torch.Tensor]:
        """One call of the model: the grown cache and the last position's logits. transformers 5
        names the cache argument ``cache`` (``past_key_values`` before, deprecated since).

        A model that takes ``logits_to_keep`` is asked for the last position's logits only, as
        ``generate()`` asks (the prefill then projects one position onto the vocabulary, not the
        whole prompt: a 512-token prompt, vocabulary 8192, width 768 saves 3.2 G multiply-adds).
        The position is a one-element tensor: the integer ``1`` slices ``[:, -1:]`` before the LM
        head, where torch.export guards ``batch != 1`` and the size-oblivious capture fails (the
        capture then runs twice)."""
        keep = ({"logits_to_keep": torch.tensor([-1], device=input_ids.device)}
                if "logits_to_keep" in self.lm_arguments else {})
        out = self.lm(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                      use_cache=True, **{self.cache_argument: cache}, **keep)
        return out[self.cache_argument], out.logits[:, -1]
