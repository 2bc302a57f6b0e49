"""Greedy text generation around a tiny GPT-2 (random weights, nothing downloaded), written the
way users write it: a prefill fills a transformers ``DynamicCache``, then each step feeds the
last token, the cache and a left-padded attention mask grown by one column, and the loop stops
early once every row has produced the end token.

    fxport convert examples/greedy_gpt2.py:GreedyGPT2 -o greedy_gpt2.onnx

writes one ONNX file (a ``Loop`` whose carried cache, mask and tokens grow each step, an ``If``
for the early stop) with inputs ``input_ids``, ``attention_mask`` and output the prompt followed
by the generated ids, verified token for token against eager PyTorch.
"""

import torch
from transformers import DynamicCache, GPT2Config, GPT2LMHeadModel

MAX_NEW_TOKENS = 8
END_TOKEN = 51


class GreedyGPT2(torch.nn.Module):
    def __init__(self, end_token: int = END_TOKEN, max_new_tokens: int = MAX_NEW_TOKENS):
        super().__init__()
        self.end_token, self.max_new_tokens = end_token, max_new_tokens
        torch.manual_seed(0)
        config = GPT2Config(vocab_size=64, n_positions=128, n_embd=32, n_layer=2, n_head=2,
                            bos_token_id=0, eos_token_id=end_token % 64)
        self.lm = GPT2LMHeadModel(config).eval()

    def forward(self, input_ids, attention_mask):
        cache = DynamicCache(config=self.lm.config)
        position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
        out = self.lm(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                      past_key_values=cache, use_cache=True)
        cache, logits = out.past_key_values, out.logits[:, -1]
        tokens = input_ids
        unfinished = torch.ones(input_ids.shape[0], dtype=torch.bool)
        for _ in range(self.max_new_tokens):
            next_token = logits.argmax(-1)
            next_token = torch.where(unfinished, next_token, torch.zeros_like(next_token))  # pad finished rows
            tokens = torch.cat([tokens, next_token[:, None]], 1)
            unfinished = unfinished & (next_token != self.end_token)
            if not unfinished.any():
                break
            attention_mask = torch.cat([attention_mask, torch.ones_like(attention_mask[:, :1])], 1)
            position_ids = attention_mask.sum(-1, keepdim=True) - 1
            out = self.lm(input_ids=next_token[:, None], attention_mask=attention_mask, position_ids=position_ids,
                          past_key_values=cache, use_cache=True)
            cache, logits = out.past_key_values, out.logits[:, -1]
        return tokens

    def example_inputs(self):
        input_ids = torch.randint(1, 64, (2, 6), generator=torch.Generator().manual_seed(0))
        attention_mask = torch.ones(2, 6, dtype=torch.int64)
        attention_mask[1, :2] = 0  # the second prompt is left-padded
        return input_ids, attention_mask

    example_dynamic_shapes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
