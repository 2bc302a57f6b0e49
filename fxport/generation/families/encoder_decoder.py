"""Encoder–decoder models (T5, BART): the encoder runs once before the loop, then each step
feeds the last token and an ``EncoderDecoderCache`` (the decoder's self-attention cache grows;
the cross-attention cache is filled at the first step and read after) back into the model —
``generate()``'s ``_sample`` and ``_beam_search`` for ``is_encoder_decoder`` models.

The output is what ``generate()`` returns for them: the decoder's ids, starting with
``decoder_start_token_id``, as long as the longest row ran.

Example::

    >>> generator = build_generator(t5, max_new_tokens=8)                    # doctest: +SKIP
    >>> generator(input_ids, attention_mask).shape[1] <= 1 + 8               # doctest: +SKIP
    True
"""

from __future__ import annotations

from typing import Any

import torch

from fxport.errors import UsageError
from fxport.generation.generator import Generator


class EncoderDecoderGenerator(Generator):
    """The hooks for an encoder–decoder ``lm``: the encoder once, then the decoder step by step."""

    def __init__(self, lm: torch.nn.Module, settings: Any):
        super().__init__(lm, settings)
        start = lm.generation_config.decoder_start_token_id
        if start is None:
            start = lm.config.decoder_start_token_id
        if not isinstance(start, int):
            raise UsageError(f"decoder_start_token_id={start!r}: the encoder-decoder generator needs one start token",
                             hint="set decoder_start_token_id in the model's generation_config")
        self.start_token = start

    def start(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, beams: int) -> tuple:
        """The encoder once, its output and mask repeated per beam, and the decoder's first call
        on the start token; :meth:`advance` carries the encoder's output and mask."""
        from transformers import DynamicCache, EncoderDecoderCache

        encoded = self.lm.get_encoder()(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        hidden = encoded.last_hidden_state.repeat_interleave(beams, 0)
        attention_mask = attention_mask.repeat_interleave(beams, 0)
        start = torch.full((hidden.shape[0], 1), self.start_token, dtype=torch.int64, device=input_ids.device)
        cache = EncoderDecoderCache(DynamicCache(config=self.lm.config), DynamicCache(config=self.lm.config))
        cache, logits = self.decoder_step(start, hidden, attention_mask, cache)
        return start, cache, logits, hidden, attention_mask

    def advance(self, tokens: torch.Tensor, hidden: torch.Tensor, attention_mask: torch.Tensor,
                cache: Any) -> tuple:
        """One decoder call on each row's last token (the encoder's output stays as it is)."""
        cache, logits = self.decoder_step(tokens, hidden, attention_mask, cache)
        return cache, logits, hidden, attention_mask

    def prompt_padding(self, attention_mask: torch.Tensor) -> torch.Tensor:
        """The output is the decoder's ids: no padding at its start (the prompt's is the encoder's)."""
        return torch.zeros(attention_mask.shape[0], dtype=torch.int64, device=attention_mask.device)

    def prefix_length(self, input_ids: torch.Tensor) -> int:
        """The output starts with the decoder's start token, not the prompt."""
        return 1

    def decoder_step(self, decoder_ids: torch.Tensor, hidden: torch.Tensor, attention_mask: torch.Tensor,
                     cache: Any) -> tuple[Any, torch.Tensor]:
        """One decoder call on the encoder's output ``hidden``: the grown cache, the last logits."""
        from transformers.modeling_outputs import BaseModelOutput

        out = self.lm(encoder_outputs=BaseModelOutput(last_hidden_state=hidden), attention_mask=attention_mask,
                      decoder_input_ids=decoder_ids, use_cache=True, **{self.cache_argument: cache})
        return out[self.cache_argument], out.logits[:, -1]
