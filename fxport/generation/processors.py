"""The logits processors and sampling warpers fxport's generators apply, in the order
transformers' ``generate()`` applies them (``_get_logits_processor``): the processors before
choosing a token, then, with sampling, the warpers.

Each processor reads one row of the settings table (:mod:`fxport.generation.settings`; the row
says when ``generate()`` applies it) and is written in tensor ops that convert: the ids so far
are a tensor, so a processor reads them with masks, gathers and scatters, never a Python loop
over their values. The warpers are transformers' own classes, which already are.

Example::

    >>> import torch
    >>> from fxport.generation.settings import GenerationSettings
    >>> settings = GenerationSettings(max_new_tokens=4, no_repeat_ngram_size=2)
    >>> ids = torch.tensor([[3, 1, 3]])                  # "3 1" occurred: after a 3, 1 is banned
    >>> processed(torch.zeros(1, 4), settings, ids, torch.zeros(1, dtype=torch.int64), 0).tolist()
    [[0.0, -inf, 0.0, 0.0]]
"""

from __future__ import annotations

import math
from typing import Any

import torch

def repetition_penalty(scores: torch.Tensor, settings: Any, sequences: torch.Tensor, padding: torch.Tensor,
                       generated: Any, filled: Any) -> torch.Tensor:
    """``RepetitionPenaltyLogitsProcessor``: the score of each id seen so far divided by the
    penalty (multiplied where negative); left padding is not seen, as ``generate()`` finds it."""
    vocab = scores.shape[-1]  # ids not counted go to index vocab, dropped
    positions = torch.arange(sequences.shape[1], device=sequences.device)
    ignored = positions < padding[:, None]
    if filled is not None:
        ignored = ignored | (positions >= filled)
    counted = sequences.masked_fill(ignored, vocab)
    seen = torch.zeros(scores.shape[0], vocab + 1, dtype=torch.bool, device=scores.device)
    seen = seen.scatter(1, counted, torch.ones_like(counted, dtype=torch.bool))[:, :vocab]
    penalty = settings.repetition_penalty
    return torch.where(seen, torch.where(scores < 0, scores * penalty, scores / penalty), scores)


def no_repeat_ngram(scores: torch.Tensor, settings: Any, sequences: torch.Tensor, padding: torch.Tensor,
                    generated: Any, filled: Any) -> torch.Tensor:
    """``NoRepeatNGramLogitsProcessor``: a token that would complete an n-gram already in the
    row's ids gets -inf. The n-gram ending at position ``j`` repeats when its first ``n - 1``
    ids equal the row's last ``n - 1``; the ids are all of the row's, its left padding too, as
    ``generate()`` reads them. Positions before the first id are a -1 that matches no
    n-gram of ids."""
    n = settings.no_repeat_ngram_size
    rows, length = sequences.shape
    vocab = scores.shape[-1]
    ends = torch.arange(length, device=sequences.device)
    padded = torch.cat([sequences.new_full((rows, n - 1), -1), sequences], 1)
    stop = length if filled is None else filled  # ids at and after it are not written yet
    repeats = (ends >= n - 1) & (ends < stop)
    repeats = repeats[None, :].expand(rows, length)
    for back in range(1, n):
        earlier = padded[:, n - 1 - back: n - 1 - back + length]  # the id `back` before each n-gram's end
        if filled is None:
            last = padded[:, -back].unsqueeze(1)
        else:
            last = padded.index_select(1, (filled + n - 1 - back).reshape(1))
        repeats = repeats & (earlier == last)  # the id `back` before the next token
    banned = sequences.masked_fill(~repeats, vocab)
    seen = torch.zeros(rows, vocab + 1, dtype=torch.bool, device=scores.device)
    seen = seen.scatter(1, banned, torch.ones_like(banned, dtype=torch.bool))[:, :vocab]
    return scores.masked_fill(seen, -math.inf)


def min_new_tokens(scores: torch.Tensor, settings: Any, sequences: torch.Tensor, padding: torch.Tensor,
                   generated: Any, filled: Any) -> torch.Tensor:
    """``MinNewTokensLengthLogitsProcessor``: the end tokens at -inf before ``min_new_tokens``
    new tokens."""
    vocabulary = torch.arange(scores.shape[-1], device=scores.device)
    too_early = is_end(vocabulary, settings.eos_token_ids) & (generated < settings.min_new_tokens)
    return scores.masked_fill(too_early, -math.inf)


def forced_end(scores: torch.Tensor, settings: Any, sequences: torch.Tensor, padding: torch.Tensor,
               generated: Any, filled: Any) -> torch.Tensor:
    """``ForcedEOSTokenLogitsProcessor``: at the last step (``generated`` new tokens so far)
    only the forced end tokens keep a score (0), the rest -inf."""
    forced = vocabulary_mask(scores.shape[-1], settings.forced_eos_token_ids, scores.device)
    return torch.where(torch.as_tensor(generated) == settings.max_new_tokens - 1,
                       torch.where(forced, 0.0, -math.inf), scores)


#: the processors, in ``generate()``'s order: (setting, function(scores, settings, sequences,
#: padding, generated, filled) → scores)
PROCESSORS = (
    ("repetition_penalty", repetition_penalty),
    ("no_repeat_ngram_size", no_repeat_ngram),
    ("min_new_tokens", min_new_tokens),
    ("forced_eos_token_id", forced_end),
)


def processed(scores: torch.Tensor, settings: Any, sequences: torch.Tensor, padding: torch.Tensor, generated: Any,
              filled: Any = None) -> torch.Tensor:
    """``scores`` after the processors of :data:`PROCESSORS` that ``settings`` apply.
    ``sequences`` holds each row's ids so far: from ``padding`` (its left padding) to ``filled``
    (``None``: to the end; a beam buffer is filled to the current step); ``generated``: how many
    new tokens each row has (a step count)."""
    for name, processor in PROCESSORS:
        if settings.applies(name):
            scores = processor(scores, settings, sequences, padding, generated, filled)
    return scores


def warpers(settings: Any) -> list:
    """transformers' own warper objects for the warpers ``settings`` apply, in ``generate()``'s order."""
    from transformers.generation import logits_process as processors

    build = {"temperature": processors.TemperatureLogitsWarper,
             "top_k": lambda k: processors.TopKLogitsWarper(top_k=k, min_tokens_to_keep=1),
             "top_p": lambda p: processors.TopPLogitsWarper(top_p=p, min_tokens_to_keep=1),
             "min_p": lambda p: processors.MinPLogitsWarper(min_p=p, min_tokens_to_keep=1),
             "typical_p": lambda p: processors.TypicalLogitsWarper(mass=p, min_tokens_to_keep=1)}
    return [build[name](value) for name, value in settings.applied_warpers().items()]


def is_end(ids: torch.Tensor, end_tokens: tuple[int, ...]) -> torch.Tensor:
    """Where ``ids`` hold one of ``end_tokens`` (a constant of the graph, built where it is used:
    the generator may be built while fxport captures).

    >>> is_end(torch.tensor([1, 2, 7]), (2, 7)).tolist()
    [False, True, True]
    """
    ends = torch.tensor(end_tokens or [-1], dtype=ids.dtype, device=ids.device)
    return (ids[..., None] == ends).any(-1)


def vocabulary_mask(size: int, token_ids, device: torch.device) -> torch.Tensor:
    """(size,) bool: True at ``token_ids`` (a constant of the graph, built where it is used)."""
    vocabulary = torch.arange(size, device=device)
    return (vocabulary[:, None] == torch.tensor(list(token_ids), device=device)).any(-1)
