"""Attention: ONNX Runtime latency and accuracy of fxport's SDPA rule vs the stock translation.

The same models go through ``torch.onnx.export(dynamo=True)`` (stock: onnxscript's
``aten_scaled_dot_product_attention``) and through ``fxport.convert`` (the built-in rule in
rewrites/attention.py). Both files run in single-threaded CPU sessions on the same inputs, call by
call alternately (load drift on a shared machine hits both); the figure is the ratio of medians.
The inputs are left-padded, so some query rows see no key at all: the error columns show what
each file makes of them (eager gives 0 there). Target: ratio ≤ 1.05×.

Run alone: ``python3 -m benchmarks.attention_latency`` (or ``python3 -m benchmarks.run --only
attention_latency`` to update docs/benchmarks.md).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import fxport
from benchmarks.common import Section, adaptive_rounds, ms, ort_runner, ort_session, paired_medians, ratio
from fxport.capture.dynamic_dims import normalize_dynamic_shapes
from fxport.eager.inputs import InputSet
from fxport.common.quiet import quiet_torch

RULE = "aten::scaled_dot_product_attention"
BATCH, SEQ, WIDTH, HEADS = 2, 128, 256, 8


class AttentionBlock(nn.Module):
    """A GPT-2-shaped self-attention block: qkv projection, SDPA, output projection.

    ``padding`` is a 2-D 0/1 mask like transformers' ``attention_mask``; ``mask`` picks how it
    reaches SDPA: ``"bool"`` (causal and padding, 4-D, as transformers' ``sdpa_mask``),
    ``"float"`` (the same as an additive 0/-inf mask) or ``"causal"`` (``is_causal=True``,
    padding unused). ``kv_heads`` < ``heads`` gives grouped-query attention (``enable_gqa``).
    """

    def __init__(self, width: int = WIDTH, heads: int = HEADS, kv_heads: int | None = None,
                 mask: str = "bool"):
        super().__init__()
        self.heads, self.kv_heads, self.mask = heads, kv_heads or heads, mask
        self.head_dim = width // heads
        self.q = nn.Linear(width, width)
        self.kv = nn.Linear(width, 2 * self.kv_heads * self.head_dim)
        self.out = nn.Linear(width, width)

    def forward(self, x, padding):
        batch, seq, width = x.shape
        q = self.q(x).view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        k, v = self.kv(x).view(batch, seq, 2, self.kv_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        options = {"enable_gqa": self.kv_heads != self.heads}
        if self.mask == "causal":
            options["is_causal"] = True
        else:
            position = torch.arange(seq, device=x.device)
            visible = (position[None, :] <= position[:, None])[None, None] & padding.bool()[:, None, None, :]
            if self.mask == "float":
                visible = torch.zeros(visible.shape, dtype=x.dtype).masked_fill(~visible, float("-inf"))
            options["attn_mask"] = visible
        y = F.scaled_dot_product_attention(q, k, v, **options)
        return self.out(y.transpose(1, 2).reshape(batch, seq, width))


class AttentionOnly(nn.Module):
    """Nothing but SDPA on given q, k, v and mask: the worst case for the rule's extra work."""

    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class LastHidden(nn.Module):
    """A transformers model (its SDPA path) returning the last hidden state."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask,
                          use_cache=False).last_hidden_state


def left_padded(batch: int = BATCH, seq: int = SEQ) -> torch.Tensor:
    """0/1 int64 mask: row 0 unpadded, row b padded on the left by b·seq/(2·batch) positions."""
    mask = torch.ones(batch, seq, dtype=torch.int64)
    for row in range(1, batch):
        mask[row, : row * seq // (2 * batch)] = 0
    return mask


def cases():
    """(name, module, example args, simple-form dynamic shapes)."""
    torch.manual_seed(0)
    x = torch.randn(BATCH, SEQ, WIDTH)
    padding = left_padded()
    dynamic = {"x": {0: "batch", 1: "seq"}, "padding": {0: "batch", 1: "seq"}}
    found = [
        ("block, bool mask (causal+padding)", AttentionBlock(mask="bool"), (x, padding), dynamic),
        ("block, float mask (0/-inf)", AttentionBlock(mask="float"), (x, padding), dynamic),
        ("block, is_causal", AttentionBlock(mask="causal"), (x, padding), dynamic),
        ("block, GQA 8/2 heads, bool mask", AttentionBlock(kv_heads=2, mask="bool"), (x, padding), dynamic),
        ("block, bool mask, float16", AttentionBlock(mask="bool").half(), (x.half(), padding), dynamic),
    ]
    head_dim = WIDTH // HEADS
    q, k, v = (torch.randn(BATCH, HEADS, SEQ, head_dim) for _ in range(3))
    position = torch.arange(SEQ)
    visible = (position[None, :] <= position[:, None])[None, None] & padding.bool()[:, None, None, :]
    additive = torch.zeros(visible.shape).masked_fill(~visible, float("-inf"))
    sdpa_dynamic = {name: {0: "batch", 2: "seq"} for name in ("q", "k", "v")}
    sdpa_dynamic["mask"] = {0: "batch", 2: "seq", 3: "seq"}
    found += [
        ("SDPA alone, bool mask", AttentionOnly(), (q, k, v, visible), sdpa_dynamic),
        ("SDPA alone, float mask (0/-inf)", AttentionOnly(), (q, k, v, additive), sdpa_dynamic),
    ]
    try:
        import transformers
    except ImportError:
        return found
    config = transformers.GPT2Config(n_layer=2, n_embd=WIDTH, n_head=HEADS, vocab_size=1000,
                                     n_positions=2 * SEQ, attn_implementation="sdpa")
    ids = torch.randint(0, 1000, (BATCH, SEQ))
    found.append(("gpt2 2 layers (transformers)", LastHidden(transformers.GPT2Model(config)),
                  (ids, padding), {"input_ids": {0: "batch", 1: "seq"},
                                   "attention_mask": {0: "batch", 1: "seq"}}))
    return found


def stock_export(module, args, dynamic):
    shapes = normalize_dynamic_shapes(module, dynamic, InputSet(args))
    with quiet_torch():
        return torch.onnx.export(module, args, dynamo=True, dynamic_shapes=shapes, verbose=False).model_proto


def max_error(module, model, args) -> float:
    """Max |ONNX Runtime − eager| over the output (NaN counts as infinite)."""
    with torch.no_grad():
        expected = module(*args).double().numpy()
    got = np.asarray(ort_runner(ort_session(model), args)()[0], dtype=np.float64)
    error = np.abs(got - expected)
    return float("inf") if np.isnan(error).any() else float(error.max())


def run(repeats: int = 3) -> Section:
    rows, ratios = [], {}
    for name, module, args, dynamic in cases():
        module.eval()
        result = fxport.convert(module, args, dynamic_shapes=dynamic, verify=False)
        fired = sum(1 for record in result.rewrites if record.rule == RULE)
        stock = stock_export(module, args, dynamic)
        run_ours = ort_runner(ort_session(result.model), args)
        run_stock = ort_runner(ort_session(stock), args)
        rounds = adaptive_rounds(run_stock, minimum=10 * repeats)
        ours_s, stock_s = paired_medians(run_ours, run_stock, rounds)
        ratios[name] = ours_s / stock_s
        rows.append([name, ms(stock_s), ms(ours_s), ratio(ours_s, stock_s),
                     f"{max_error(module, stock, args):.2g}", f"{max_error(module, result.model, args):.2g}",
                     str(fired), str(rounds)])
    return Section(
        "Attention: fxport's SDPA rule vs the stock translation",
        f"Median latency per call (ms), onnxruntime CPU, 1 intra-op thread, batch {BATCH} × sequence "
        f"{SEQ}, width {WIDTH}, {HEADS} heads; row 1 of the batch is left-padded by a quarter of the "
        "sequence, so its first query rows see no key. The two files are called alternately in the same "
        "process. Error columns: max |ONNX Runtime − eager| on those inputs (inf = NaN in the output; "
        "float16: one float16 step is ~1e-3). \"SDPA nodes\": SDPA calls the rule translated. "
        "Target: ratio ≤ 1.05× for models; the \"SDPA alone\" rows (nothing but the op) show the "
        "rule's extra work undiluted.",
        ["model", "stock ms", "fxport ms", "ratio", "stock max err", "fxport max err", "SDPA nodes",
         "calls each"],
        rows,
        footer=[f"Worst ratio over models: {max(v for n, v in ratios.items() if 'alone' not in n):.2f}×; "
                f"over the op alone: {max(v for n, v in ratios.items() if 'alone' in n):.2f}×."],
    )


if __name__ == "__main__":
    import warnings

    from benchmarks.common import print_section

    warnings.filterwarnings("ignore")
    print_section(run())
