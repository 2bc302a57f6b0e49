"""Grouped matrix multiplication for mixture-of-experts layers (transformers 5.x).

transformers 5.x runs the experts of Mixtral, Qwen2-MoE, Qwen3-MoE (every class decorated with
``@use_experts_implementation``) through ``grouped_mm_experts_forward``, its default
``experts_implementation``. Under ``torch.export`` that reaches one of two ops:

- ``transformers::grouped_mm_fallback(input, weight, offs)`` — a ``torch.library.custom_op``
  defined in ``transformers/integrations/moe.py``; export picks it for every weight dtype but
  bfloat16 (``_can_use_grouped_mm`` refuses ``grouped_mm`` while compiling otherwise). The stock
  exporter has no translation.
- ``aten::_grouped_mm(self, mat2, offs=...)`` — for bfloat16 weights. The stock translation
  raises ``Grouped matmul with offsets (ragged/MoE) is not supported``.

What they compute (2-D ``input`` (S, K), 3-D ``weight`` (G, K, N), ``offs`` (G,) int32/int64,
the running row count of each group): the rows are sorted by group, group ``g`` owns rows
``offs[g-1] .. offs[g]-1`` (``offs[-1] = 0``) and

    out[r] = input[r] @ weight[g(r)]          rows past offs[G-1] are 0

A group may own no rows (an expert no token picked); the last offset may be below S (rows that
no expert owns, e.g. expert-parallel sentinels): the translation sets them to 0, as
transformers' fallback does (torch's ``_grouped_mm`` kernel leaves them uninitialised).

How the translation computes it: the number of groups G (experts) is the weight's static first
dimension, so the translation unrolls over the groups: for each g one ``MatMul`` of the group's
rows (``Slice`` from ``offs[g-1]`` to ``offs[g]``) by ``weight[g]`` (one ``Split`` of the
weight), a ``Concat`` of the G results and of the zero rows past ``offs[G-1]``. Offsets are
clamped to ``[0, S]`` as Python slicing clamps them in the eager op. G = 0 (no experts) gives
zeros; G = 1 needs no ``Split``.

Why this formulation: it does exactly the multiplications eager does (each group's rows times
its own expert's weight, once), so its only difference from eager is the GEMM kernel's
accumulation order (measured: ≤ 3e-6 absolute in float32 on unit-scale inputs, see
docs/rule-catalogue.md). The alternatives are worse: gathering the expert weight per row and
running a batched MatMul materialises an (S, K, N) tensor (gigabytes for a real model); running
every expert on every row and selecting costs G / top-k times the FLOPs; an ONNX ``Loop`` over
the groups keeps the graph small but copies the expert's weight (``Gather``) and the
accumulator every iteration — measured about 2x slower than the unrolled form at G = 4 and
G = 64 on ORT CPU, and a memory-bound decode step pays the weight copy twice. Rows are selected with ``Slice``
(two nodes per expert with the weight's ``Squeeze``, which ONNX Runtime folds): measured at 128
experts, half the conversion time and a fifth of the run time of ``Gather(Range(...))``.

Limits: ``offs`` must be non-decreasing (a cumulative sum, as transformers builds it); G must
be static. ``aten::_grouped_mm`` with offsets is translated for the 2-D × 3-D (MoE) layout
only; without offsets it is a batched ``MatMul`` (+ bias, + cast), as the stock translation.

The ``transformers::grouped_mm_fallback`` rule exists once transformers is imported in the
process (the op is defined by importing ``transformers.integrations.moe``; importing it
unconditionally would add ~1.5 s to every fxport run). fxport collects its built-in rules
again when transformers appears after they were first loaded
(``fxport.rules.registry.OPTIONAL_OP_LIBRARIES``), so the order of imports does not matter.
"""

from __future__ import annotations

import sys

import torch
from onnxscript import ir
from onnxscript import opset18 as op

import fxport
from fxport.rewrites._helpers import const_like, dim_size, ints


def _zero_rows(rows, like_input, weight):
    """A (rows, N) block of zeros in the input's dtype (``rows``: 1-element int64)."""
    return op.Expand(const_like(0.0, like_input), op.Concat(rows, dim_size(weight, 2), axis=0))


def grouped_rows_matmul(input, weight, offs, bias=None):
    """``out[r] = input[r] @ weight[g(r)] (+ bias[g(r)])`` for rows sorted by group ``g``."""
    groups = weight.shape[0]
    if not isinstance(groups, int):
        raise ValueError("grouped matmul: the number of experts (weight.shape[0]) must be static")
    zero = ints(0)
    total = dim_size(input, 0)
    if groups == 0:
        return _zero_rows(total, input, weight)
    ends = op.Min(op.Max(op.Cast(offs, to=ir.DataType.INT64), zero), total)

    def per_group(value):
        return op.Split(value, axis=0, num_outputs=groups) if groups > 1 else [value]

    group_ends, group_weights = per_group(ends), per_group(weight)
    group_biases = per_group(bias) if bias is not None else None
    outputs = []
    start = zero
    for g in range(groups):
        rows = op.Slice(input, start, group_ends[g], zero)
        product = op.MatMul(rows, op.Squeeze(group_weights[g], zero))
        if group_biases is not None:
            product = op.Add(product, op.Squeeze(group_biases[g], zero))
        outputs.append(product)
        start = group_ends[g]
    outputs.append(_zero_rows(op.Sub(total, start), input, weight))  # rows no group owns
    return op.Concat(*outputs, axis=0)


@fxport.onnx_op("aten::_grouped_mm", opset=18, priority=fxport.BUILTIN_PRIORITY)
def grouped_mm(self, mat2, offs=None, bias=None, out_dtype: int | None = None):
    """Grouped matmul: with offs (2-D x 3-D, MoE experts) each row group times its own matrix."""
    if offs is None:
        result = op.MatMul(self, mat2)
        if bias is not None:
            result = op.Add(result, bias)
    elif len(self.shape) == 2 and len(mat2.shape) == 3:
        result = grouped_rows_matmul(self, mat2, offs, bias)
    else:
        raise NotImplementedError(
            f"aten::_grouped_mm with offsets is translated for a 2-D input and 3-D weights "
            f"(mixture of experts) only, not {len(self.shape)}-D x {len(mat2.shape)}-D")
    if out_dtype is not None and out_dtype != -1:
        result = op.Cast(result, to=out_dtype)
    return result


def _transformers_op_registered() -> bool:
    """Whether ``transformers::grouped_mm_fallback`` exists (importing the module that defines
    it when transformers is already in use in this process)."""
    if not hasattr(torch.ops.transformers, "grouped_mm_fallback") and "transformers" in sys.modules:
        try:
            import transformers.integrations.moe  # noqa: F401  (defines the custom op)
        except Exception:  # noqa: BLE001 - an old or broken transformers: no rule
            return False
    return hasattr(torch.ops.transformers, "grouped_mm_fallback")


if _transformers_op_registered():

    @fxport.onnx_op("transformers::grouped_mm_fallback", opset=18,
                    priority=fxport.BUILTIN_PRIORITY)
    def grouped_mm_fallback(input, weight, offs):
        """MoE experts (transformers 5.x): rows sorted by expert, each group times its expert."""
        return grouped_rows_matmul(input, weight, offs)
