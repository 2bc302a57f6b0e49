"""The module fxport's generators are: :class:`Generator`, which a strategy (how tokens are
chosen: ``strategies/``) and an architecture family (how the model is called: ``families/``)
each extend; :func:`fxport.generation.modes.generator_class` puts the two together.

A generator's ``forward`` is written so that fxport turns its search into one ONNX ``Loop``: the
control-flow converter converts it as it converts the user's code, the methods it calls on
``self`` included. The strategy provides :meth:`Generator.search` (and ``choose``); the family the
hooks the search calls: :meth:`Generator.start` (the prefill), :meth:`Generator.advance` (one
step), :meth:`Generator.prompt_padding` and :meth:`Generator.prefix_length`.

Example::

    >>> generator = build_generator(lm, max_new_tokens=8, eos_token_id=2)       # doctest: +SKIP
    >>> type(generator).__name__                                                 # doctest: +SKIP
    'GreedySearchDecoderOnlyGenerator'
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from fxport.generation import processors


class Generator(torch.nn.Module):
    """``(input_ids, attention_mask[, random_draws]) → ids`` around ``lm`` with ``settings``
    (:class:`~fxport.generation.settings.GenerationSettings`).

    ``attention_mask`` is left-padded (0 before each prompt, as transformers' tokenizers pad for
    generation). The output is what ``generate()`` returns: the prompt (or the decoder's start)
    followed by the generated ids, as long as the longest row ran; rows that stopped hold
    ``pad_token_id``.
    """

    dynamic_shapes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
    onnx_output_names = ["sequences"]  # as generate() names its output

    def __init__(self, lm: torch.nn.Module, settings: Any):
        super().__init__()
        self.lm, self.settings = lm, settings
        self.lm_arguments = frozenset(inspect.signature(lm.forward).parameters)  # what the model's forward takes
        self.cache_argument = "cache" if "cache" in self.lm_arguments else "past_key_values"

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                random_draws: torch.Tensor | None = None) -> torch.Tensor:
        return self.search(input_ids, attention_mask, random_draws)

    # --- the strategy's (strategies/) ------------------------------------------------------

    def search(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
               random_draws: torch.Tensor | None = None) -> torch.Tensor:
        """The decoding loop: the output ids."""
        raise NotImplementedError(f"{type(self).__name__} has no strategy (fxport.generation.modes)")

    # --- the family's (families/) ----------------------------------------------------------

    def start(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, beams: int) -> tuple:
        """The prefill, for ``beams`` rows per prompt (1: no beam search): (the ids the output
        starts with, one row per beam; the cache; the last logits; two tensors :meth:`advance`
        carries)."""
        raise NotImplementedError(f"{type(self).__name__} has no family (fxport.generation.families)")

    def advance(self, tokens: torch.Tensor, first: torch.Tensor, second: torch.Tensor, cache: Any) -> tuple:
        """One step after the prefill, the model on each row's last token: (the cache, the
        logits, the two carried tensors)."""
        raise NotImplementedError(f"{type(self).__name__} has no family (fxport.generation.families)")

    def prompt_padding(self, attention_mask: torch.Tensor) -> torch.Tensor:
        """How many ids at the start of each output row are left padding (not seen by the
        repetition penalty)."""
        raise NotImplementedError(f"{type(self).__name__} has no family (fxport.generation.families)")

    def prefix_length(self, input_ids: torch.Tensor) -> int:
        """How many ids of the output come before the generated ones."""
        raise NotImplementedError(f"{type(self).__name__} has no family (fxport.generation.families)")

    # --- shared ----------------------------------------------------------------------------

    def example_arguments(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                          draw: torch.Generator) -> tuple:
        """``forward``'s arguments for these prompts (sampling adds draws from ``draw``)."""
        return input_ids, attention_mask

    def reference(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *draws: torch.Tensor) -> torch.Tensor:
        """transformers' own ``generate()`` on these prompts with these settings (with sampling,
        inside :func:`~fxport.generation.sampling.sampling_draws` of the draws)."""
        return self.lm.generate(input_ids=input_ids, attention_mask=attention_mask, **self.settings.generate_kwargs())

    def processed(self, scores: torch.Tensor, sequences: torch.Tensor, padding: torch.Tensor, generated: Any,
                  filled: Any = None) -> torch.Tensor:
        """``scores`` after the logits processors ``generate()`` applies before choosing, in its
        order (:mod:`fxport.generation.processors`)."""
        return processors.processed(scores, self.settings, sequences, padding, generated, filled)

    def is_end(self, ids: torch.Tensor) -> torch.Tensor:
        """Where ``ids`` hold an end token."""
        return processors.is_end(ids, self.settings.eos_token_ids)

    def inferred_attention_mask(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The mask ``generate()`` makes when given none (``_prepare_attention_mask_for_generation``)."""
        pad, ends = self.settings.pad_token_id, self.settings.eos_token_ids
        if pad is None or pad in ends:
            return torch.ones_like(input_ids)
        is_pad = input_ids == pad
        return torch.where(is_pad.any(), ~is_pad, torch.ones_like(is_pad)).long()
