"""Text generation as a module fxport converts: greedy search, sampling and beam search around a transformers causal LM.

:class:`TextGenerator` is the decoding loop transformers' ``generate()`` runs for greedy search,
sampling and beam search, written so that fxport turns it into one ONNX ``Loop``: a prefill
fills a ``DynamicCache``, then each step feeds the chosen token, the cache and the left-padded
attention mask grown by one column back into the model; a row that produced an end token is
padded from then on, and the ``while`` loop stops once every row has (its test, not a
``break`` before the model: ONNX Runtime runs a model under an ``If`` inside a ``Loop`` without
prepacked weights). It takes the settings ``generate()`` takes (:func:`generation_settings`
reads them the way ``generate()`` does: the model's ``generation_config``, transformers'
defaults, then keyword arguments) and gives the same ids, token for token: prompt followed by
the generated ids, as long as the longest row ran.

Used three ways: the API (below), ``fxport convert CHECKPOINT_DIR --task text-generation``
(:func:`fxport.tasks.load_task`), and the built-in rule ``rewrites/generation.py`` that stands in for
``model.generate(...)`` called inside a model's ``forward``.

Example::

    >>> import torch, fxport
    >>> from transformers import LlamaConfig, LlamaForCausalLM
    >>> lm = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64,
    ...     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)).eval()
    >>> generator = TextGenerator(lm, generation_settings(lm, max_new_tokens=8, eos_token_id=2))
    >>> ids = generator(torch.tensor([[5, 6, 7]]), torch.ones(1, 3, dtype=torch.int64))
    >>> ids.shape[1] <= 3 + 8
    True
"""

from __future__ import annotations

import inspect
import math
from typing import Any, NamedTuple

import torch
import torch.utils._pytree as pytree

from fxport.controlflow.operators.containers import register_library_containers
from fxport.errors import UsageError
from fxport.generation.generation_settings import GenerationSettings, generation_settings
from fxport.generation.sampling import drawn_tokens

__all__ = ["GenerationSettings", "TextGenerator", "generation_settings"]


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


class TextGenerator(torch.nn.Module):
    """Greedy search, sampling or beam search around ``lm`` (a transformers causal LM):
    ``(input_ids, attention_mask[, random_draws]) → ids``.

    ``attention_mask`` is left-padded (0 before each prompt, as transformers' tokenizers pad for
    generation). With sampling, ``random_draws`` (batch, max_new_tokens), uniform in [0, 1),
    are the random numbers (:mod:`fxport.generation.sampling`). The output is the prompt followed by the generated ids; it is as long as the
    longest row ran (every row stopped, or ``max_new_tokens``); rows that stopped hold
    ``pad_token_id``.
    """

    dynamic_shapes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
    onnx_output_names = ["sequences"]  # as generate() names its output

    def __init__(self, lm: torch.nn.Module, settings: GenerationSettings):
        super().__init__()
        self.lm, self.settings = lm, settings
        self.cache_argument = "cache" if "cache" in inspect.signature(lm.forward).parameters else "past_key_values"
        if settings.do_sample:  # one uniform draw per row and step (fxport.generation.sampling)
            self.dynamic_shapes = {**type(self).dynamic_shapes, "random_draws": {0: "batch"}}

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                random_draws: torch.Tensor | None = None) -> torch.Tensor:
        if self.settings.num_beams > 1:
            return self.beam_search(input_ids, attention_mask)
        if self.settings.do_sample and random_draws is None:
            raise UsageError("sampling takes its random numbers as an input: random_draws is missing",
                             hint=f"pass random_draws, uniform in [0, 1), shape (batch, {self.settings.max_new_tokens})")
        return self.greedy_search(input_ids, attention_mask, random_draws)

    def example_arguments(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                          draw: torch.Generator) -> tuple:
        """``forward``'s arguments for these prompts: with sampling, draws from ``draw`` too."""
        if not self.settings.do_sample:
            return input_ids, attention_mask
        return input_ids, attention_mask, torch.rand(input_ids.shape[0], self.settings.max_new_tokens, generator=draw)

    def reference(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, *draws: torch.Tensor) -> torch.Tensor:
        """transformers' own ``generate()`` on these prompts with these settings (with sampling,
        inside :func:`~fxport.generation.sampling.sampling_draws` of the draws)."""
        return self.lm.generate(input_ids=input_ids, attention_mask=attention_mask, **self.settings.generate_kwargs())

    def greedy_search(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                      random_draws: torch.Tensor | None = None) -> torch.Tensor:
        """``generate()``'s ``_sample``: one token per row per step, the most likely one or,
        with sampling, the one ``random_draws`` picks."""
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

    def beam_search(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """``generate()``'s ``_beam_search`` (transformers 5's vectorised form): ``num_beams``
        running beams per prompt in buffers of the final length, the best finished ones kept
        with their length-penalised scores, the cache reordered by beam each step.

        The loop is rotated: the first step's scores come from the prefill, and each iteration
        runs the model and then scores, so its stop test is the ``while`` test rather than a
        ``break`` before the model (which would put the model under an If inside the Loop, where
        ONNX Runtime runs it without prepacked weights)."""
        settings, beams = self.settings, self.settings.num_beams
        batch = input_ids.shape[0]
        max_new = settings.max_new_tokens
        ends = settings.eos_token_ids
        pad = settings.pad_token_id
        fill = (pad if pad else ends[0]) if ends else -1  # generate(): `pad_token_id or eos_token_id[0]`
        prefix, cache, logits, first, second = self.start(input_ids, attention_mask, beams)
        prompt = prefix.shape[1]
        running = torch.cat([prefix.view(batch, beams, prompt),
                             torch.full((batch, beams, max_new), fill, dtype=torch.int64, device=input_ids.device)], 2)
        running_scores = torch.zeros(batch, beams, device=input_ids.device)
        running_scores = torch.cat([running_scores[:, :1], torch.full_like(running_scores[:, 1:], -1e9)], 1)
        running_indices = torch.full((batch, beams, max_new), -1, dtype=torch.int32, device=input_ids.device)
        state = BeamState(running, running_scores, running_indices, finished_sequences=running.clone(),
                          finished_scores=torch.full((batch, beams), -1e9, device=input_ids.device),
                          finished_indices=running_indices.clone(),
                          is_finished=torch.zeros(batch, beams, dtype=torch.bool, device=input_ids.device),
                          improvable=torch.ones(batch, 1, dtype=torch.bool, device=input_ids.device))
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

    def start(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, beams: int) -> tuple:
        """The prefill, for greedy (``beams`` 1) and beam search: (the ids the output starts with,
        one row per beam; the cache; the last logits; two tensors :meth:`advance` carries: here
        the mask and the position)."""
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

    def length_divisor(self, length: torch.Tensor) -> torch.Tensor:
        """``length ** length_penalty`` as ``generate()`` divides by it: a float64 power rounded
        to float32 (a Python float divisor of a float32 tensor is rounded so)."""
        return (length.to(torch.float64) ** self.settings.length_penalty).to(torch.float32)

    def prefix_length(self, input_ids: torch.Tensor) -> int:
        """How many ids of the output come before the generated ones (the prompt)."""
        return input_ids.shape[1]

    def step(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
             cache: Any) -> tuple[Any, torch.Tensor]:
        """One call of the model: the grown cache and the last position's logits. transformers 5
        names the cache argument ``cache`` (``past_key_values`` before, deprecated since)."""
        out = self.lm(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                      use_cache=True, **{self.cache_argument: cache})
        return out[self.cache_argument], out.logits[:, -1]

    def is_end(self, ids: torch.Tensor) -> torch.Tensor:
        """Where ``ids`` hold an end token (a constant of the graph, built in forward: the
        generator may be built while fxport captures)."""
        ends = torch.tensor(self.settings.eos_token_ids or [-1], dtype=ids.dtype, device=ids.device)
        return (ids[..., None] == ends).any(-1)

    def forced_end(self, scores: torch.Tensor, generated: Any) -> torch.Tensor:
        """``ForcedEOSTokenLogitsProcessor``: at the last step (``generated`` new tokens so far)
        only the forced end tokens keep a score (0), the rest -inf; unchanged without them."""
        settings = self.settings
        if not settings.forced_eos_token_ids:
            return scores
        forced = vocabulary_mask(scores.shape[-1], settings.forced_eos_token_ids, scores.device)
        return torch.where(torch.as_tensor(generated) == settings.max_new_tokens - 1,
                           torch.where(forced, 0.0, -math.inf), scores)

    def inferred_attention_mask(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The mask ``generate()`` makes when given none (``_prepare_attention_mask_for_generation``)."""
        pad, ends = self.settings.pad_token_id, self.settings.eos_token_ids
        if pad is None or pad in ends:
            return torch.ones_like(input_ids)
        is_pad = input_ids == pad
        return torch.where(is_pad.any(), ~is_pad, torch.ones_like(is_pad)).long()

    def processed(self, scores: torch.Tensor, sequences: torch.Tensor, padding: torch.Tensor, generated: Any,
                  filled: Any = None) -> torch.Tensor:
        """``scores`` after the logits processors ``generate()`` applies before choosing, in its
        order: repetition penalty, min new tokens, forced end token. ``sequences`` holds each
        row's ids so far: from ``padding`` (its left padding, seen by no one) to ``filled``
        (``None``: to the end; a beam buffer is filled to the current step)."""
        settings = self.settings
        if settings.repetition_penalty != 1.0:  # RepetitionPenaltyLogitsProcessor
            vocab = scores.shape[-1]  # ids not counted go to index vocab, dropped
            positions = torch.arange(sequences.shape[1], device=sequences.device)
            ignored = positions < padding[:, None]
            if filled is not None:
                ignored = ignored | (positions >= filled)
            counted = sequences.masked_fill(ignored, vocab)
            seen = torch.zeros(scores.shape[0], vocab + 1, dtype=torch.bool, device=scores.device)
            seen = seen.scatter(1, counted, torch.ones_like(counted, dtype=torch.bool))[:, :vocab]
            penalty = settings.repetition_penalty
            scores = torch.where(seen, torch.where(scores < 0, scores * penalty, scores / penalty), scores)
        if settings.min_new_tokens and settings.eos_token_ids:  # MinNewTokensLengthLogitsProcessor
            vocabulary = torch.arange(scores.shape[-1], device=scores.device)
            scores = scores.masked_fill(self.is_end(vocabulary) & (generated < settings.min_new_tokens), -math.inf)
        return self.forced_end(scores, generated)

    def choose(self, logits: torch.Tensor, sequences: torch.Tensor, padding: torch.Tensor, unfinished: torch.Tensor,
               generated: torch.Tensor, random_draws: torch.Tensor | None = None) -> torch.Tensor:
        """The next token of each row: the logits processors ``generate()`` applies, then the
        argmax or, with sampling, the warpers and the token this step's draw picks
        (:func:`~fxport.generation.sampling.drawn_tokens`); rows already finished get the pad token."""
        settings = self.settings
        scores = self.processed(logits.float(), sequences, padding, generated)
        if settings.do_sample:
            for warper in settings.warpers():
                scores = warper(sequences, scores)
            draws = random_draws.index_select(1, generated.reshape(1)).squeeze(1)
            next_token = drawn_tokens(torch.softmax(scores, -1), draws)
        else:
            next_token = scores.argmax(-1)
        if settings.eos_token_ids:
            next_token = torch.where(unfinished, next_token, torch.full_like(next_token, settings.pad_token_id))
        return next_token


def vocabulary_mask(size: int, token_ids, device: torch.device) -> torch.Tensor:
    """(size,) bool: True at ``token_ids`` (a constant of the graph, built where it is used)."""
    vocabulary = torch.arange(size, device=device)
    return (vocabulary[:, None] == torch.tensor(list(token_ids), device=device)).any(-1)


def gather_beams(tensor: torch.Tensor, beam_indices: torch.Tensor) -> torch.Tensor:
    """The beams ``beam_indices`` (batch, k) of ``tensor`` (batch, beams, ...): transformers'
    ``_gather_beams`` as a ``gather`` (``take_along_dim``'s broadcast fixes a symbolic batch)."""
    trailing = tuple(tensor.shape[2:])
    index = beam_indices.reshape(*beam_indices.shape, *(1 for _ in trailing))
    return tensor.gather(1, index.expand(*beam_indices.shape, *trailing))


def reordered(cache: Any, rows: torch.Tensor) -> Any:
    """``cache`` with its rows (batch × beam) taken in the order ``rows``: a new cache, as
    ``Cache.reorder_cache`` would leave it, built from its tensors (not in place)."""
    register_library_containers()
    leaves, spec = pytree.tree_flatten(cache)
    return pytree.tree_unflatten([leaf.index_select(0, rows) for leaf in leaves], spec)
