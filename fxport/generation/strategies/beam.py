"""Beam search: ``generate()``'s ``_beam_search`` (transformers 5's vectorised form):
``num_beams`` running beams per prompt in buffers of the final length, the best finished ones
kept with their length-penalised scores, the cache reordered by beam each step; the output is
the ``num_return_sequences`` best hypotheses per prompt, cut to the longest.

Example::

    >>> generator = build_generator(lm, max_new_tokens=8, num_beams=3, num_return_sequences=2)  # doctest: +SKIP
    >>> generator(input_ids, attention_mask).shape[0] == 2 * input_ids.shape[0]                 # doctest: +SKIP
    True
"""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
import torch.utils._pytree as pytree

from fxport.generation.caches import register_transformers_caches
from fxport.generation.generator import Generator


class BeamState(NamedTuple):
    """What beam search carries from step to step, per prompt: the running beams (ids in a
    buffer of the final length, scores, the cache row each step came from) and the best
    finished hypotheses (ids, length-penalised scores, indices, which slots hold one), and
    whether the prompt can still improve."""

    running: torch.Tensor
    running_scores: torch.Tensor
    running_indices: torch.Tensor
    finished_sequences: torch.Tensor
    finished_scores: torch.Tensor
    finished_indices: torch.Tensor
    is_finished: torch.Tensor
    improvable: torch.Tensor


class BeamSearch(Generator):
    """The search of ``generate()``'s ``_beam_search``; :meth:`beam_step` is one step of it."""

    def search(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
               random_draws: torch.Tensor | None = None) -> torch.Tensor:
        """Beam search over the family's hooks.

        The loop is rotated: the first step's scores come from the prefill, and each iteration
        runs the model and then scores, so its stop test is the ``while`` test rather than a
        ``break`` before the model (which would put the model under an If inside the Loop, where
        ONNX Runtime runs it without prepacked weights)."""
        settings, beams = self.settings, self.settings.num_beams
        max_new = settings.max_new_tokens
        prefix, cache, logits, first, second = self.start(input_ids, attention_mask, beams)
        state = self.initial_state(prefix, input_ids.shape[0])
        step = torch.zeros((), dtype=torch.int64, device=input_ids.device)
        padding = self.prompt_padding(attention_mask).repeat_interleave(beams, 0)
        state, next_tokens, source_rows, going = self.beam_step(logits, state, step, padding)
        while going:
            cache = reordered(cache, source_rows.flatten())
            cache, logits, first, second = self.advance(next_tokens.reshape(-1, 1), first, second, cache)
            step = step + 1
            state, next_tokens, source_rows, going = self.beam_step(logits, state, step, padding)
        finished_sequences, finished_indices = state.finished_sequences, state.finished_indices
        returned = settings.num_return_sequences
        sequences = finished_sequences[:, :returned].flatten(0, 1)
        lengths = (finished_indices[:, :returned] + 1).bool().sum(-1).flatten()
        return sequences[:, : finished_sequences.shape[2] - max_new + lengths.max()]

    def initial_state(self, prefix: torch.Tensor, batch: int) -> BeamState:
        """The state before the first step: each prompt's ``prefix`` (one row per beam) in
        buffers of the final length, the first beam's score 0 and the others' -1e9, nothing
        finished."""
        settings, beams = self.settings, self.settings.num_beams
        max_new, ends, pad = settings.max_new_tokens, settings.eos_token_ids, settings.pad_token_id
        fill = (pad if pad else ends[0]) if ends else -1  # generate(): `pad_token_id or eos_token_id[0]`
        device, prompt = prefix.device, prefix.shape[1]
        running = torch.cat([prefix.view(batch, beams, prompt),
                             torch.full((batch, beams, max_new), fill, dtype=torch.int64, device=device)], 2)
        running_scores = torch.zeros(batch, beams, device=device)
        running_scores = torch.cat([running_scores[:, :1], torch.full_like(running_scores[:, 1:], -1e9)], 1)
        running_indices = torch.full((batch, beams, max_new), -1, dtype=torch.int32, device=device)
        return BeamState(running, running_scores, running_indices, finished_sequences=running.clone(),
                         finished_scores=torch.full((batch, beams), -1e9, device=device),
                         finished_indices=running_indices.clone(),
                         is_finished=torch.zeros(batch, beams, dtype=torch.bool, device=device),
                         improvable=torch.ones(batch, 1, dtype=torch.bool, device=device))

    def beam_step(self, logits: torch.Tensor, state: BeamState, step: torch.Tensor, padding: torch.Tensor) -> tuple:
        """One step of beam search on the model's ``logits`` for step ``step`` (``padding``:
        each beam row's left padding, for the repetition penalty): the new :class:`BeamState`,
        each running beam's next token, the cache row it continues, and whether the search goes on."""
        settings, beams = self.settings, self.settings.num_beams
        max_new = settings.max_new_tokens
        (running, running_scores, running_indices, finished_sequences, finished_scores, finished_indices,
         is_finished, improvable) = state
        device = running.device
        keep = max(2, 1 + len(settings.eos_token_ids)) * beams
        top_beam = torch.arange(keep, device=device) < beams
        horizon = max_new if settings.early_stopping == "never" and settings.length_penalty > 0.0 else 0
        # sizes read from the state: a loop body is captured on its own, and a size of the
        # enclosing graph (the prompt's) would be a constant there
        batch, length = running.shape[0], running.shape[2]
        prompt = length - max_new
        log_probs = self.processed(torch.log_softmax(logits.float(), -1), running.flatten(0, 1), padding, step,
                                   prompt + step)
        vocab = log_probs.shape[-1]
        log_probs = (log_probs.view(batch, beams, vocab) + running_scores[:, :, None]).view(batch, beams * vocab)
        top_scores, top_flat = torch.topk(log_probs, keep)
        top_beams = top_flat // vocab
        top_ids = top_flat % vocab
        top_sequences = torch.where(torch.arange(length, device=device) == prompt + step,
                                    top_ids[:, :, None], gather_beams(running, top_beams))
        row_offset = torch.arange(batch, device=device)[:, None] * beams
        top_indices = torch.where(torch.arange(max_new, device=device) == step,
                                  (top_beams + row_offset).to(torch.int32)[:, :, None],
                                  gather_beams(running_indices, top_beams))
        hits_stop = self.is_end(top_ids) | (step + 1 >= max_new)
        # the beams that go on: the best `beams` of the continuations that did not stop
        going_on = top_scores + hits_stop.float() * -1.0e9
        next_beams = torch.topk(going_on, beams)[1]
        running = gather_beams(top_sequences, next_beams)
        running_scores = gather_beams(going_on, next_beams)
        running_indices = gather_beams(top_indices, next_beams)
        next_tokens = gather_beams(top_ids, next_beams)  # running[:, :, prompt + step]
        source_rows = gather_beams(top_beams + row_offset, next_beams)  # running_indices[:, :, step]
        # the finished hypotheses: merged with those that just stopped, best `beams` kept
        just_finished = hits_stop & top_beam[None, :]
        candidate_scores = top_scores / self.length_divisor(step + 1)
        full = is_finished.all(-1, keepdim=True) & (settings.early_stopping is True)
        candidate_scores = candidate_scores + full.float() * -1.0e9
        candidate_scores = candidate_scores + (~improvable).float() * -1.0e9
        candidate_scores = candidate_scores + (~just_finished) * -1.0e9
        merged_scores = torch.cat([finished_scores, candidate_scores], 1)
        best = torch.topk(merged_scores, beams)[1]
        finished_sequences = gather_beams(torch.cat([finished_sequences, top_sequences], 1), best)
        finished_scores = gather_beams(merged_scores, best)
        finished_indices = gather_beams(torch.cat([finished_indices, top_indices], 1), best)
        is_finished = gather_beams(torch.cat([is_finished, just_finished], 1), best)
        # can the running beams still beat the worst finished one? (the best length a running
        # beam may reach: max_new for early_stopping="never" with a positive penalty, else its own)
        best_length = torch.clamp(step + 1, min=horizon)
        best_running = running_scores[:, :1] / self.length_divisor(best_length)
        worst_finished = torch.where(is_finished, finished_scores.min(1, keepdim=True)[0], -1.0e9)
        improvable = improvable & (best_running > worst_finished).any(-1, keepdim=True)
        open_beams = ~(is_finished.all() & (settings.early_stopping is True))
        going = improvable.any() & open_beams & ~hits_stop.all()
        state = BeamState(running, running_scores, running_indices, finished_sequences, finished_scores,
                          finished_indices, is_finished, improvable)
        return state, next_tokens, source_rows, going

    def length_divisor(self, length: torch.Tensor) -> torch.Tensor:
        """``length ** length_penalty`` as ``generate()`` divides by it: a float64 power rounded
        to float32 (a Python float divisor of a float32 tensor is rounded so)."""
        return (length.to(torch.float64) ** self.settings.length_penalty).to(torch.float32)


def gather_beams(tensor: torch.Tensor, beam_indices: torch.Tensor) -> torch.Tensor:
    """The beams ``beam_indices`` (batch, k) of ``tensor`` (batch, beams, ...): transformers'
    ``_gather_beams`` as a ``gather`` (``take_along_dim``'s broadcast fixes a symbolic batch)."""
    trailing = tuple(tensor.shape[2:])
    index = beam_indices.reshape(*beam_indices.shape, *(1 for _ in trailing))
    return tensor.gather(1, index.expand(*beam_indices.shape, *trailing))


def reordered(cache: Any, rows: torch.Tensor) -> Any:
    """``cache`` with its rows (batch × beam) taken in the order ``rows``: a new cache, as
    ``Cache.reorder_cache`` would leave it, built from its tensors (not in place)."""
    register_transformers_caches()
    leaves, spec = pytree.tree_flatten(cache)
    return pytree.tree_unflatten([leaf.index_select(0, rows) for leaf in leaves], spec)
