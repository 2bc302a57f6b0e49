"""Branches that update a transformers ``DynamicCache`` (an object holding a key and a value
tensor per layer), the state a decoding step passes on: fxport carries the cache as its
tensors through ``torch.cond`` (ONNX ``If``), rebuilt inside each branch."""

import torch
from transformers import DynamicCache


def grown(cache, k, v):
    cache.update(k, v, 0)
    return cache


def prefilled(k, v):
    cache = DynamicCache()
    cache.update(k, v, 0)
    return cache


class GrowWhenAsked(torch.nn.Module):
    """One more step in the cache where ``go`` is positive; the cache is assigned in the branch."""

    def forward(self, k, v, step_k, step_v, go):
        cache = prefilled(k, v)
        if go.sum() > 0:
            cache = grown(cache, step_k, step_v)
            scale = 2.0
        else:
            scale = 1.0
        return cache.layers[0].keys * scale, cache.layers[0].values.sum(-2)


class GrowInPlace(torch.nn.Module):
    """The same, but the branch only calls ``cache.update``: a change the if cannot carry."""

    def forward(self, k, v, step_k, step_v, go):
        cache = prefilled(k, v)
        if go.sum() > 0:
            cache.update(step_k, step_v, 0)
            scale = 2.0
        else:
            scale = 1.0
        return cache.layers[0].keys * scale

