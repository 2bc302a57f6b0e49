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


MAX_NEW = 6


def tiny_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    config = GPT2Config(vocab_size=32, n_positions=64, n_embd=32, n_layer=2, n_head=2, bos_token_id=0, eos_token_id=1)
    return GPT2LMHeadModel(config).eval()


class GreedyWithCache(torch.nn.Module):
    """Greedy decoding around tiny GPT-2 as users write it: a prefill fills a ``DynamicCache``,
    then each step feeds the last token, the cache and a left-padded mask grown by one column,
    and stops early once every row has produced ``eos`` (the rest of the step runs under the
    break: the model call, the cache update)."""

    def __init__(self, eos: int):
        super().__init__()
        self.lm, self.eos = tiny_gpt2(), eos

    def forward(self, input_ids, attention_mask):
        cache = DynamicCache(config=self.lm.config)
        position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        out = self.lm(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                      past_key_values=cache, use_cache=True)
        cache, logits = out.past_key_values, out.logits[:, -1]
        tokens = input_ids
        unfinished = torch.ones(input_ids.shape[0], dtype=torch.bool)
        for _ in range(MAX_NEW):
            nxt = logits.argmax(-1)
            nxt = torch.where(unfinished, nxt, torch.zeros_like(nxt))
            tokens = torch.cat([tokens, nxt[:, None]], 1)
            unfinished = unfinished & (nxt != self.eos)
            if not unfinished.any():
                break
            attention_mask = torch.cat([attention_mask, torch.ones_like(attention_mask[:, :1])], 1)
            position_ids = attention_mask.sum(-1, keepdim=True) - 1
            out = self.lm(input_ids=nxt[:, None], attention_mask=attention_mask, position_ids=position_ids,
                          past_key_values=cache, use_cache=True)
            cache, logits = out.past_key_values, out.logits[:, -1]
        return tokens
