"""Greedy search: ``generate()``'s ``_sample`` without sampling, one token per row per step,
the most likely one after the logits processors.

Example::

    >>> generator = build_generator(lm, max_new_tokens=8, eos_token_id=2)   # doctest: +SKIP
    >>> isinstance(generator, GreedySearch)                                  # doctest: +SKIP
    True
"""

from __future__ import annotations

import torch

from fxport.generation.generator import Generator


class GreedySearch(Generator):
    """The decoding loop of ``generate()``'s ``_sample``; :meth:`choose` takes the argmax."""

    def search(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
               random_draws: torch.Tensor | None = None) -> torch.Tensor:
        """One token per row per step (:meth:`choose`); a row finishes at an end token; the
        ``while`` loop stops when every row has, or after ``max_new_tokens``."""
        settings = self.settings
        padding = self.prompt_padding(attention_mask)
        sequences, cache, logits, first, second = self.start(input_ids, attention_mask, 1)
        unfinished = torch.ones(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        generated = torch.zeros((), dtype=torch.int64, device=input_ids.device)
        next_token = self.choose(logits, sequences, padding, unfinished, generated, random_draws)
        sequences = torch.cat([sequences, next_token[:, None]], 1)
        unfinished = unfinished & ~self.is_end(next_token)
        # a while test, not `if not unfinished.any(): break` at the top of a `for` body: that break
        # puts the rest of the body (the model) under an If inside the Loop, and ONNX Runtime runs
        # an If nested in a Loop without its prepacked weights (3x slower matrix products)
        while unfinished.any() & (generated < settings.max_new_tokens - 1):
            cache, logits, first, second = self.advance(next_token[:, None], first, second, cache)
            generated = generated + 1
            next_token = self.choose(logits, sequences, padding, unfinished, generated, random_draws)
            sequences = torch.cat([sequences, next_token[:, None]], 1)
            unfinished = unfinished & ~self.is_end(next_token)
        return sequences

    def choose(self, logits: torch.Tensor, sequences: torch.Tensor, padding: torch.Tensor, unfinished: torch.Tensor,
               generated: torch.Tensor, random_draws: torch.Tensor | None = None) -> torch.Tensor:
        """The next token of each row: the argmax after the logits processors; rows already
        finished get the pad token."""
        next_token = self.processed(logits.float(), sequences, padding, generated).argmax(-1)
        return self.padded_when_finished(next_token, unfinished)

    def padded_when_finished(self, next_token: torch.Tensor, unfinished: torch.Tensor) -> torch.Tensor:
        """``next_token`` with ``pad_token_id`` in the rows already finished."""
        if self.settings.eos_token_ids:
            next_token = torch.where(unfinished, next_token, torch.full_like(next_token, self.settings.pad_token_id))
        return next_token
