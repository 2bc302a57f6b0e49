"""``aten::scaled_dot_product_attention`` that equals eager PyTorch on every query row.

What eager computes (torch 2.13, CPU; measured): ``softmax(q·kᵀ·scale + mask)·v``, where a bool
mask's False entries are left out (``-inf``) and a float mask is added. A query row whose keys are
*all* left out — a bool mask all False on that row, or a float mask all ``-inf`` on it — comes
out as **0**. Such rows are ordinary: in a left-padded batch every padding position's query sees
only padding keys under the causal mask (transformers' ``sdpa_mask`` gives exactly that 4-D bool
mask), and so does a sequence that is all padding.

What the stock translation computes (torch 2.13's dynamo exporter at its default opset 20 uses
onnxscript's torchlib ``aten_scaled_dot_product_attention``): a bool mask becomes an additive mask
of the dtype's *minimum* rather than ``-inf``, so a fully masked row's scores are all equal and
the row is the **mean of v**; a float mask with a row of ``-inf`` gives **NaN** (ONNX ``Softmax``
of ``-inf`` everywhere is 0/0). Neither is eager's 0.

This rule computes the same attention and sets rows with no visible key to 0: the output is
multiplied by a 0/1 factor per query row, computed by a reduction over the *mask* (``ReduceMax``
over its key axis: ``[B, 1, L, S] → [B, 1, L, 1]``), never over the ``[B, H, L, S]`` scores.
Masks are added as biases clamped at the dtype's lowest finite value, not as ``-inf``: exp of
them is exactly 0 all the same, Softmax sees no NaN, and a broadcast ``Add`` is far cheaper in
ONNX Runtime than a broadcast ``Where`` over the scores (measured: 1.4× the whole attention's
time). Dropping the stock bool path's ``IsNaN`` + ``Where`` over the full scores makes the rule
*faster* than the stock translation (benchmarks/attention_latency.py, docs/benchmarks.md).
Other eager behaviours kept:

- a float mask of the dtype's minimum is *not* a fully masked row: eager adds it, so a float32
  row of ``finfo.min`` is the mean of v (in eager too), and a float16 row is nearly unmasked
  attention, because eager's CPU kernel computes the scores in float32 — as does this rule for
  float16/bfloat16 inputs (q, k, v upcast, output cast back), so that does not depend on ONNX
  Runtime's CPU provider inserting the casts itself (other providers: untested here);
- ``is_causal``: top-left aligned ``tril`` (row i sees keys 0..i), as eager; no row is empty;
- ``enable_gqa`` with fewer key/value heads than query heads: each key/value head serves
  ``Hq / Hkv`` consecutive query heads (``repeat_interleave``);
- ``scale`` given or ``1/√E``; ranks 3 and 4 (the stock translation refuses rank 3).

``dropout_p`` is ignored, as by the stock translation (ONNX inference; transformers passes 0.0
in eval mode). NaN inside a float mask is not specified.
"""

from __future__ import annotations

import math

from onnxscript import ir
from onnxscript import opset18 as op

import fxport
from fxport.rewrites._helpers import ints, rank

#: Inputs computed in float32 inside the rule (eager's CPU kernels accumulate these in float32).
REDUCED_TYPES = (ir.DataType.FLOAT16, ir.DataType.BFLOAT16)


@fxport.onnx_op("aten::scaled_dot_product_attention", opset=18,
                priority=fxport.BUILTIN_PRIORITY)
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale=None, enable_gqa: bool = False):
    """softmax(q·kᵀ·scale + mask)·v; query rows with every key masked are 0, as in eager."""
    r = rank(query)
    out_dtype = query.dtype
    gqa = enable_gqa and not _same_size(query, key, r - 3)
    upcast = out_dtype in REDUCED_TYPES
    compute = ir.DataType.FLOAT if upcast else out_dtype
    factor = _scale(query, scale, compute)
    if upcast:  # (values made here carry no static shape: shapes were read above)
        query, key, value = (op.Cast(t, to=ir.DataType.FLOAT) for t in (query, key, value))
    if gqa:
        key, value = _repeat_heads(key, query, r), _repeat_heads(value, query, r)

    # Scores: q·scale against kᵀ (ORT fuses the scalar Mul and the Transpose into the MatMul).
    key_t = op.Transpose(key, perm=list(range(r - 2)) + [r - 1, r - 2])
    scores = op.MatMul(op.Mul(query, factor), key_t)

    # Masks become additive biases of mask size, clamped at the dtype's lowest finite value: a
    # broadcast Add is much cheaper in ORT than a broadcast Where over the scores, and finite
    # biases keep Softmax free of NaN (exp(lowest - rowmax) is exactly 0, as exp(-inf) is).
    lowest = _constant(compute.min, compute)
    valid_rows = None
    zero = _constant(0.0, compute)
    if is_causal:  # row i sees keys 0..i: never an empty row
        scores = op.Add(scores, op.Where(_causal_mask(query, key, r), zero, lowest))
    elif attn_mask is not None and attn_mask.dtype == ir.DataType.BOOL:
        scores = op.Add(scores, op.Where(attn_mask, zero, lowest))
        seen = op.ReduceMax(op.Cast(attn_mask, to=ir.DataType.UINT8), ints(-1), keepdims=1)
        valid_rows = op.Cast(seen, to=compute)
    elif attn_mask is not None:
        mask = op.Cast(attn_mask, to=compute)
        scores = op.Add(scores, op.Max(mask, lowest))
        largest = op.ReduceMax(mask, ints(-1), keepdims=1)  # -inf: every key masked
        valid_rows = op.Cast(op.Greater(largest, _constant(-math.inf, compute)), to=compute)

    out = op.MatMul(op.Softmax(scores, axis=-1), value)
    if valid_rows is not None:  # rows with no visible key: 0, as eager (a 0/1 factor per row)
        # Widened to [..., L, E] first: ORT multiplies a factor broadcast over the last axis
        # element by element (measured 2x slower than broadcasting [..., L, E] over the heads).
        ones = op.ConstantOfShape(op.Shape(value, start=-1), value=ir.tensor([1.0], dtype=compute))
        out = op.Mul(out, op.Mul(valid_rows, ones))
    return op.Cast(out, to=out_dtype) if upcast else out


def _constant(number: float, dtype: ir.DataType):
    """A scalar constant of ``dtype``."""
    return op.Constant(value=ir.tensor(number, dtype=dtype))


def _same_size(a, b, axis: int) -> bool:
    """Whether ``a`` and ``b`` certainly have one length along ``axis`` (static shapes)."""
    size_a, size_b = a.shape[axis], b.shape[axis]
    return isinstance(size_a, int) and isinstance(size_b, int) and size_a == size_b


def _repeat_heads(kv, query, r: int):
    """Repeat each key/value head ``Hq / Hkv`` times along axis ``r - 3`` (repeat_interleave)."""
    axis = r - 3
    q_heads = op.Shape(query, start=axis, end=axis + 1)
    groups = op.Div(q_heads, op.Shape(kv, start=axis, end=axis + 1))
    # [..., Hkv, S, E] -> [..., Hkv, G, S, E] (Expand broadcasts the 1s) -> [..., Hq, S, E]
    widened = op.Expand(op.Unsqueeze(kv, ints(axis + 1)),
                        op.Concat(ints(*[1] * (axis + 1)), groups, ints(1, 1), axis=0))
    shape = op.Concat(op.Shape(kv, start=0, end=axis), q_heads, op.Shape(kv, start=axis + 1),
                      axis=0)
    return op.Reshape(widened, shape)


def _scale(query, scale, dtype: ir.DataType):
    """``scale`` or 1/√E as a ``dtype`` scalar (E read from the static shape when it is known)."""
    if scale is None and not isinstance(query.shape[-1], int):
        embedding = op.Cast(op.Squeeze(op.Shape(query, start=-1)), to=ir.DataType.DOUBLE)
        return op.Cast(op.Reciprocal(op.Sqrt(embedding)), to=dtype)
    return _constant(scale if scale is not None else 1.0 / math.sqrt(query.shape[-1]), dtype)


def _causal_mask(query, key, r: int):
    """Bool ``[L, S]``: key j visible from query i iff j <= i (torch's top-left ``tril``)."""
    rows = op.Range(op.Constant(value_int=0), op.Squeeze(op.Shape(query, start=r - 2, end=r - 1)),
                    op.Constant(value_int=1))
    cols = op.Range(op.Constant(value_int=0), op.Squeeze(op.Shape(key, start=r - 2, end=r - 1)),
                    op.Constant(value_int=1))
    return op.GreaterOrEqual(op.Unsqueeze(rows, ints(1)), op.Unsqueeze(cols, ints(0)))
