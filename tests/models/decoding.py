"""Decoding loops for the command-line test (issue 26): weights under which a row whose last
prompt token is k stops after k steps (tests/controlflow/decoding_models.py)."""

import torch

from tests.controlflow.decoding_models import MAX_NEW, GreedyKVCache, GreedyNoCache


class Greedy(GreedyNoCache):
    def __init__(self):
        super().__init__(countdown=True)


class KVCache(GreedyKVCache):
    def __init__(self):
        super().__init__(countdown=True)


def stopping_prompts():
    """Greedy inputs whose rows stop at steps 1, 2, 3, MAX_NEW or never, prompt lengths 1, 2, 7."""
    sets = []
    for length, last in [(1, [1]), (2, [2, 1]), (7, [3, 9, 1]), (2, [MAX_NEW, 10]), (1, [9])]:
        tokens = torch.randint(1, 11, (len(last), length), generator=torch.Generator().manual_seed(length))
        tokens[:, -1] = torch.tensor(last)
        sets.append((tokens,))
    return sets


def stopping_prompts_and_limits():
    """KV-cache inputs: the same prompts with max_new 0, 1, 2, MAX_NEW."""
    return [(tokens, torch.tensor(k)) for (tokens,), k in zip(stopping_prompts(), (0, 1, 2, MAX_NEW, 3))]
