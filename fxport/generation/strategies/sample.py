"""Sampling: ``generate()``'s ``_sample`` with ``do_sample=True``, its random numbers an input.

Each step applies the logits processors, then the sampling warpers
(:func:`fxport.generation.processors.warpers`), and picks the token this step's draw selects
from the softmax (:func:`~fxport.generation.sampling.drawn_tokens`): the file takes
``random_draws`` (batch, max_new_tokens), uniform in [0, 1) (:mod:`fxport.generation.sampling`).

Example::

    >>> generator = build_generator(lm, max_new_tokens=8, do_sample=True, top_k=20)   # doctest: +SKIP
    >>> generator(input_ids, attention_mask, torch.rand(len(input_ids), 8)).shape[1] <= input_ids.shape[1] + 8  # doctest: +SKIP
    True
"""

from __future__ import annotations

import torch

from fxport.errors import UsageError
from fxport.generation import processors
from fxport.generation.generator import Generator
from fxport.generation.sampling import drawn_tokens
from fxport.generation.strategies.greedy import GreedySearch


class Sampling(GreedySearch):
    """Greedy search's loop; :meth:`choose` draws from the warped distribution."""

    dynamic_shapes = {**Generator.dynamic_shapes, "random_draws": {0: "batch"}}  # one draw per row and step

    def search(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
               random_draws: torch.Tensor | None = None) -> torch.Tensor:
        """:meth:`GreedySearch.search` with the draws (a usage error without them)."""
        if random_draws is None:
            raise UsageError("sampling takes its random numbers as an input: random_draws is missing",
                             hint=f"pass random_draws, uniform in [0, 1), shape (batch, {self.settings.max_new_tokens})")
        return GreedySearch.search(self, input_ids, attention_mask, random_draws)

    def choose(self, logits: torch.Tensor, sequences: torch.Tensor, padding: torch.Tensor, unfinished: torch.Tensor,
               generated: torch.Tensor, random_draws: torch.Tensor | None = None) -> torch.Tensor:
        """The token this step's draw picks after the processors and warpers; rows already
        finished get the pad token."""
        scores = self.processed(logits.float(), sequences, padding, generated)
        for warper in processors.warpers(self.settings):
            scores = warper(sequences, scores)
        draws = random_draws.index_select(1, generated.reshape(1)).squeeze(1)
        return self.padded_when_finished(drawn_tokens(torch.softmax(scores, -1), draws), unfinished)

    def example_arguments(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                          draw: torch.Generator) -> tuple:
        """The prompts and a draw per row and step from ``draw``."""
        return input_ids, attention_mask, torch.rand(input_ids.shape[0], self.settings.max_new_tokens, generator=draw)
