"""The built-in SDPA rule (rewrites/attention.py), differentially: ONNX Runtime vs eager PyTorch.

Every mask case has query rows where every key is masked (eager: 0), rows partly masked and rows
fully visible. The stock translation gets the first kind wrong (mean of v for bool masks, NaN for
-inf float masks); the tests show that too, so they can fail.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import fxport
import fxport.testing
from fxport.report.result import iter_nodes
from fxport.rules import rule_of_node

from benchmarks.attention_latency import LastHidden

RULE = "aten::scaled_dot_product_attention"
KINDS = ("bool", "float -inf", "float min", "no mask", "causal")
TOLERANCE = {torch.float32: (1e-5, 1e-4), torch.float16: (4e-3, 4e-3)}  # fp16: ~4 float16 steps


class SDPA(torch.nn.Module):
    def __init__(self, **options):
        super().__init__()
        self.options = options

    def forward(self, query, key, value, attn_mask=None):
        return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask,
                                              **self.options)


def make_mask(kind: str, shape, dtype, seed: int = 0):
    """A mask of ``kind`` with fully masked rows (query 1 everywhere; query 0 in batch 1),
    partly masked rows, and one fully visible row (query 2); None for "no mask"/"causal"."""
    if kind in ("no mask", "causal"):
        return None
    generator = torch.Generator().manual_seed(seed)
    visible = torch.rand(shape, generator=generator) > 0.4
    visible[..., 1, :] = False
    visible[..., 2, :] = True
    if shape[0] > 1:
        visible[1, ..., 0, :] = False
    if kind == "bool":
        return visible
    blocked = float("-inf") if kind == "float -inf" else torch.finfo(dtype).min
    bias = torch.randn(shape, generator=generator).to(dtype)
    return bias.masked_fill(~visible, blocked)


def make_case(kind: str, dtype, gqa: bool, rank: int = 4, seed: int = 0):
    """(module, args): batch 2, 4 query heads (2 key/value heads with GQA), L=5, S=6, E=8."""
    generator = torch.Generator().manual_seed(seed)
    batch, q_heads, kv_heads, L, S, E = 2, 4, 2 if gqa else 4, 5, 6, 8

    def rand(*shape):
        return torch.randn(shape, generator=generator).to(dtype)

    q, k, v = rand(batch, q_heads, L, E), rand(batch, kv_heads, S, E), rand(batch, kv_heads, S, E)
    mask = make_mask(kind, (batch, 1, L, S), dtype, seed)
    if rank == 3:
        q, k, v = q[0], k[0], v[0]
        mask = None if mask is None else mask[0]
    options = {"enable_gqa": gqa, "scale": 0.3 if gqa else None, "is_causal": kind == "causal"}
    args = (q, k, v) if mask is None else (q, k, v, mask)
    return SDPA(**options), args


MATRIX = list(itertools.product((torch.float32, torch.float16), KINDS, (False, True)))


@pytest.mark.parametrize("dtype,kind,gqa", MATRIX,
                         ids=[f"{str(d)[6:]}-{k.replace(' ', '')}-{'gqa' if g else 'mha'}"
                              for d, k, g in MATRIX])
def test_rule_matches_eager_on_every_row(dtype, kind, gqa):
    """bool / float (-inf, finfo.min) / no mask / causal, MHA and GQA (scale given with GQA,
    default without), float32 and float16: equal to eager, fully masked rows included."""
    module, args = make_case(kind, dtype, gqa)
    atol, rtol = TOLERANCE[dtype]
    check = fxport.testing.assert_rule_converts(module, args, expect_fired=[RULE], atol=atol,
                                                rtol=rtol)
    assert check.fired[RULE] == 1
    got = fxport.testing.run_onnx(check.result.model, args)[0]
    assert got.dtype == args[0].numpy().dtype
    if kind in ("bool", "float -inf"):  # the fully masked rows are exactly eager's zeros
        with torch.no_grad():
            assert not module(*args)[:, :, 1].any()
        assert not got[:, :, 1].any() and not got[1, :, 0].any()
    nodes = [node for node in iter_nodes(check.result.model.graph) if rule_of_node(node) == RULE]
    assert nodes, "the ONNX nodes carry the rule's provenance"


@pytest.mark.parametrize("kind", ["bool", "float -inf"])
def test_stock_translation_differs_from_eager_on_fully_masked_rows(kind):
    """The same check, with the rule disabled, fails: the stock exporter's fully masked rows are
    the mean of v (bool) or NaN (-inf), not eager's 0 — what the rule is for."""
    module, args = make_case(kind, torch.float32, gqa=False)
    with pytest.raises(AssertionError):
        fxport.testing.assert_rule_converts(module, args, disable_rules=[RULE])
    model = fxport.convert(module, args, verify=False, disable_rules=[RULE]).model
    row = fxport.testing.run_onnx(model, args)[0][:, :, 1]
    if kind == "bool":
        np.testing.assert_allclose(row, args[2].numpy().mean(axis=-2), atol=1e-5)
    else:
        assert np.isnan(row).all()


@pytest.mark.slow
def test_rank_3():
    """Unbatched (heads, L, E) inputs; the stock translation refuses rank 3."""
    module, args = make_case("bool", torch.float32, gqa=True, rank=3)
    fxport.testing.assert_rule_converts(module, args, expect_fired=[RULE])
    with pytest.raises(fxport.ConversionError):
        fxport.convert(module, args, verify=False, disable_rules=[RULE])


def test_enable_gqa_with_equal_heads_and_a_mask_per_head():
    """enable_gqa with as many key/value heads as query heads is plain attention; a mask with a
    head axis ([B, H, L, S]) and one broadcast along L ([B, 1, 1, S]) are reduced per row too."""
    module, (q, k, v, mask) = make_case("bool", torch.float32, gqa=False)
    module = SDPA(enable_gqa=True)
    per_head = mask.expand(-1, q.shape[1], -1, -1).clone()
    per_head[0, 3, 4] = False  # one more empty row, in one head only
    fxport.testing.assert_rule_converts(module, (q, k, v, per_head), expect_fired=[RULE])
    keys_only = torch.ones(2, 1, 1, k.shape[2], dtype=torch.bool)
    keys_only[1] = False  # batch 1 sees nothing at all
    fxport.testing.assert_rule_converts(module, (q, k, v, keys_only), expect_fired=[RULE])


def test_dynamic_batch_and_lengths():
    """Batch, query and key lengths dynamic: other sizes (query longer than keys, one key) agree."""
    module, args = make_case("float -inf", torch.float32, gqa=True)
    module = SDPA(enable_gqa=True)
    dynamic = {"query": {0: "batch", 2: "L"}, "key": {0: "batch", 2: "S"},
               "value": {0: "batch", 2: "S"}, "attn_mask": {0: "batch", 2: "L", 3: "S"}}

    def case(batch, L, S, seed):
        g = torch.Generator().manual_seed(seed)
        q = torch.randn(batch, 4, L, 8, generator=g)
        k, v = torch.randn(batch, 2, S, 8, generator=g), torch.randn(batch, 2, S, 8, generator=g)
        return q, k, v, make_mask("float -inf", (batch, 1, L, S), torch.float32, seed)

    fxport.testing.assert_rule_converts(module, args, expect_fired=[RULE], dynamic_shapes=dynamic,
                                        inputs=[case(3, 9, 4, 1), case(2, 3, 7, 2)])
    causal = SDPA(is_causal=True, enable_gqa=True)
    causal_dynamic = {name: dims for name, dims in dynamic.items() if name != "attn_mask"}
    fxport.testing.assert_rule_converts(causal, args[:3], expect_fired=[RULE],
                                        dynamic_shapes=causal_dynamic,
                                        inputs=[case(3, 9, 4, 1)[:3], case(2, 3, 7, 2)[:3]])


# --- a real model: left padding --------------------------------------------------------------

def tiny_llama():
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
        attn_implementation="sdpa")
    torch.manual_seed(0)
    return LastHidden(transformers.LlamaModel(config)).eval()


def max_error(module, model, args) -> float:
    with torch.no_grad():
        expected = module(*args).numpy().astype(np.float64)
    got = fxport.testing.run_onnx(model, args)[0].astype(np.float64)
    error = np.abs(got - expected)
    return float("inf") if np.isnan(error).any() else float(error.max())


@pytest.mark.slow
def test_left_padded_llama_stock_file_differs_from_eager_fxport_file_does_not():
    """A tiny transformers Llama (random weights, GQA heads) on a left-padded batch: the padding
    positions' queries see no key, so the stock exporter's file differs from eager there;
    fxport's equals eager everywhere (and on a batch with a row that is all padding)."""
    module = tiny_llama()
    ids = torch.randint(0, 128, (3, 10), generator=torch.Generator().manual_seed(0))
    mask = torch.ones(3, 10, dtype=torch.int64)
    mask[1, :4] = 0  # left padding
    mask[2, :7] = 0
    dynamic = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    result = fxport.convert(module, (ids, mask), dynamic_shapes=dynamic, verify=False)
    assert sum(1 for record in result.rewrites if record.rule == RULE) == 2  # one per layer

    from fxport.capture.dynamic_dims import normalize_dynamic_shapes
    from fxport.eager.inputs import InputSet
    from fxport.common.quiet import quiet_torch

    with quiet_torch():
        stock = torch.onnx.export(module, (ids, mask), dynamo=True, verbose=False,
                                  dynamic_shapes=normalize_dynamic_shapes(
                                      module, dynamic, InputSet((ids, mask)))).model_proto

    assert max_error(module, result.model, (ids, mask)) < 1e-4
    assert max_error(module, stock, (ids, mask)) > 1e-2  # the padded rows: mean of v, not 0
    unpadded = (ids[:1], mask[:1])
    assert max_error(module, stock, unpadded) < 1e-4  # ... while without padding it is right
    all_padding = mask.clone()
    all_padding[0] = 0  # a row that is all padding
    other = (torch.randint(0, 128, (2, 6), generator=torch.Generator().manual_seed(1)),
             all_padding[:2, :6].contiguous())
    assert max_error(module, result.model, other) < 1e-4


@pytest.mark.slow
def test_tiny_llama_with_padding_converts_and_verifies():
    """End to end: fxport's own verification (its generated masks included) passes on a
    left-padded Llama batch — it refused these models while SDPA used the stock translation."""
    module = tiny_llama()
    ids = torch.randint(0, 128, (2, 8), generator=torch.Generator().manual_seed(2))
    mask = torch.ones(2, 8, dtype=torch.int64)
    mask[1, :3] = 0
    dynamic = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    result = fxport.convert(module, (ids, mask), dynamic_shapes=dynamic)
    assert result.verified
    assert any(record.rule == RULE for record in result.rewrites)


def accuracy_table() -> list[str]:
    """Markdown rows: max |ONNX Runtime − eager| per case, with the rule and with the stock
    translation (the rule disabled), on the cases above (docs/rule-catalogue.md)."""
    rows = []
    for dtype, kind, gqa in MATRIX:
        module, args = make_case(kind, dtype, gqa)
        errors = []
        for disable in ((), (RULE,)):
            model = fxport.convert(module, args, verify=False, disable_rules=disable).model
            errors.append(max_error(module, model, args))
        rows.append(f"| {str(dtype)[6:]} | {kind} | {'GQA 4/2' if gqa else 'MHA'} | "
                    f"{errors[0]:.2g} | {errors[1]:.2g} |")
    return rows


if __name__ == "__main__":  # python -m tests.rules.test_attention
    import warnings

    warnings.filterwarnings("ignore")
    print("| dtype | mask | heads | fxport max abs error | stock max abs error |")
    print("| --- | --- | --- | --- | --- |")
    print("\n".join(accuracy_table()))
