"""``--optimize ort``: onnxscript's ONNX Runtime fusions on the lowered model, counted.

``optimize="ort"`` runs the generic optimizer (``ONNXProgram.optimize()``) and then
:func:`onnxscript.rewriter.ort_fusions.optimize_for_ort`, which rewrites transformer subgraphs
into ONNX Runtime's contrib ops (domain ``com.microsoft``): ``MultiHeadAttention`` /
``Attention`` for scaled dot-product attention, ``SkipLayerNormalization`` /
``SkipSimplifiedLayerNormalization`` for residual + (RMS) norm, ``RotaryEmbedding``,
``BiasGelu`` / ``FastGelu``, ``FusedMatMul`` and others. The library's own counts come back as
``ConversionResult.fusions`` (only the fusions that fired). The model is then verified against
eager like any other output: the fused model is what is verified and written.

fxport adds one rule before the library's (:data:`PRE_FUSION_RULES`): fxport's translation of
``aten::scaled_dot_product_attention`` (rewrites/attention.py) multiplies the attention output
by a 0/1 factor per query row, so that query rows with every key masked are 0 as in eager.
That ``Mul`` sits between the attention ``MatMul`` and the ``Transpose`` + ``Reshape`` that
merge the heads, where onnxscript's ``MultiHeadAttention`` pattern expects nothing; without the
rule the attention still fuses, but only through the generic ``sdpa_via_mha`` fallback (two
extra Transposes per input) and BERT's packed-QKV ``Attention`` never fires.
:class:`RowFactorAfterHeadMerge` moves the factor after the head merge —
``Reshape(Transpose(Mul(x, f)))`` → ``Reshape(Mul(Reshape(Transpose(x), [0, 0, H·D]), Squeeze(f, 1)))``
for a factor ``f`` of shape ``[B|1, 1, S|1, 1]`` — which is exact (the factor is constant along the merged
head and head-size axes), so the library's patterns see the stock exporter's shape and the
empty-row factor survives the fusion.

Subgraphs: the library's pattern rewriter visits If/Loop/Scan bodies, so fusions fire there
too where the body's values have shapes (onnx shape inference runs first).

Example::

    >>> model, fusions = fuse_for_onnxruntime(onnx_program.model)    # doctest: +SKIP
    >>> fusions                                                       # doctest: +SKIP
    {'skip_layer_normalization': 4, 'sdpa': 2, 'mha2': 2, 'mha_bias': 2, 'attention': 2}
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from onnxscript.rewriter import pattern

from fxport.engine import choices
from fxport.common.provenance import EXPORTER_FX_NODE_KEY, EXPORTER_STACK_KEY

#: What ``optimize=`` / ``--optimize`` accepts (defined in fxport.engine.choices).
OPTIMIZE_LEVELS = choices.OPTIMIZE_LEVELS


#: The exporter's per-node provenance (keys owned by fxport.common.provenance).
FX_NODE_KEY, STACK_TRACE_KEY = EXPORTER_FX_NODE_KEY, EXPORTER_STACK_KEY


def fuse_for_onnxruntime(model, keep_origins: "tuple[str, ...] | list[str]" = ()):
    """Apply fxport's pre-fusion rule and onnxscript's ORT fusions to an onnx_ir model in place.

    Returns ``(model, fusions)``: the model (the same object, possibly rewritten further by the
    library) and ``{fusion name: count}`` for the fusions that fired. ``row_factor_moved``
    counts fxport's own rule (see the module docstring).

    ``keep_origins``: substrings of the exporter's ``pkg.torch.onnx.fx_node`` metadata (e.g.
    ``"[target=torch.ops.aten.scaled_dot_product_attention.default]"``) that a fused node keeps
    when it replaces nodes of several origins — the library keeps the first matched node's,
    which would lose the provenance of an op rule whose nodes were fused (its AppliedRewrite).
    """
    from onnxscript.rewriter.ort_fusions import optimize_for_ort

    traces = _stack_traces(model)
    with _origins_kept(keep_origins):
        moved = pre_fusion_rules().apply_to_model(model)
        model, counts = optimize_for_ort(model)
    _restore_stack_traces(model, traces)
    resolve_reshape_wildcards(model)
    _unique_value_names(model)
    fusions = {"row_factor_moved": moved} if moved else {}
    fusions.update({name: count for name, count in counts.items() if count})
    return model, fusions


@contextlib.contextmanager
def _origins_kept(keep_origins) -> Iterator[None]:
    """Make the rewriter's metadata merge prefer an FX origin that contains one of ``keep_origins``."""
    from onnxscript.rewriter import _rewrite_rule
    from onnxscript.utils import metadata_merger

    if not keep_origins:
        yield
        return

    def prefer_kept(first: str, second: str) -> str:
        kept = any(origin in first for origin in keep_origins)
        return second if not kept and any(origin in second for origin in keep_origins) else first

    original = _rewrite_rule._default_metadata_merger
    _rewrite_rule._default_metadata_merger = metadata_merger.MetadataMerger(
        {**original.mergers, FX_NODE_KEY: prefer_kept}, original.default)
    try:
        yield
    finally:
        _rewrite_rule._default_metadata_merger = original


def _unique_value_names(model) -> None:
    """Rename values the fusions created with a name already used elsewhere in the model.

    The library names a fused node's outputs per graph, so a fusion inside a Loop or If body
    can reuse a name of the main graph (or of another body), which breaks ONNX's single
    assignment (a generator's decoding loop: ``'val_499' has been used as output names multiple
    times``). onnx_ir's ``NameFixPass`` keeps graph inputs, outputs and every first use of a name
    and renames the rest (subgraphs included); it runs last, after the reshape resolution, whose
    constants are named too.
    """
    from onnx_ir.passes.common import NameFixPass

    NameFixPass()(model)


def _stack_traces(model) -> dict[str, str]:
    """``{fx_node: stack_trace}`` of every node (subgraphs included)."""
    import onnx_ir as ir

    traces = {}
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        origin = node.metadata_props.get(FX_NODE_KEY)
        if origin and STACK_TRACE_KEY in node.metadata_props:
            traces.setdefault(origin, node.metadata_props[STACK_TRACE_KEY])
    return traces


def _restore_stack_traces(model, traces: dict[str, str]) -> None:
    """Give each node the stack trace of the FX node it names (merging kept them apart)."""
    import onnx_ir as ir

    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        origin = node.metadata_props.get(FX_NODE_KEY)
        if origin in traces:
            node.metadata_props[STACK_TRACE_KEY] = traces[origin]


def pre_fusion_rules():
    """The rule set fxport applies before the library's fusions (built on first use)."""
    return pattern.RewriteRuleSet([RowFactorAfterHeadMerge.rule()], commute=True)


class RowFactorAfterHeadMerge(pattern.RewriteRuleClassBase):
    """``Reshape(Transpose(Mul(x, f), [0, 2, 1, 3]), shape)`` → ``Reshape(Mul(Reshape(Transpose(x), [0, 0, H·D]), Squeeze(f, [1])), shape)``.

    ``x`` is a ``[B, H, S, D]`` attention output (H and D static), ``f`` a per-row factor
    ``[B|1, 1, S|1, 1]`` (or such a factor times a constant of ones, see
    :func:`per_row_factor`). ``f`` is constant along the heads and head size, so multiplying
    by it commutes with the transpose and with merging those two axes into one; any final
    ``shape`` (``[B, S, H·D]``, or ``[B·S, H·D]`` as GPT-2's ``Conv1D`` views it) then applies
    to the same elements in the same order. The attention now ends in the ``Transpose`` +
    ``Reshape`` to ``[B, S, H·D]`` that ORT's ``MultiHeadAttention`` pattern expects.
    """

    def pattern(self, op, x, factor, shape):  # (the factor is checked in check)
        scaled = op.Mul(x, factor)
        merged = op.Transpose(scaled, perm=[0, 2, 1, 3])
        return op.Reshape(merged, shape)

    def check(self, context, x, factor, shape, **_):
        result = pattern.MatchResult()
        row_factor = per_row_factor(factor)
        if row_factor is None:
            return result.fail("the factor is not constant along heads and head size")
        x_shape, f_shape = x.shape, row_factor.shape
        if x_shape is None or x_shape.rank() != 4:
            return result.fail("not an attention output [B, H, S, D]")
        if not (isinstance(x_shape[1], int) and isinstance(x_shape[3], int)):
            return result.fail("heads and head size are not static")
        if f_shape[0] not in (1, x_shape[0]) or f_shape[2] not in (1, x_shape[2]):
            return result.fail("the factor does not broadcast per (batch, sequence) row")
        if x.dtype is None or x.dtype != row_factor.dtype:
            return result.fail("the factor's dtype differs")
        self._row_factor, self._width = row_factor, x_shape[1] * x_shape[3]
        return result

    def rewrite(self, op, x, shape, **_):
        merged = op.Reshape(op.Transpose(x, perm=[0, 2, 1, 3]), op.Constant(value_ints=[0, 0, self._width]))
        scaled = op.Mul(merged, op.Squeeze(self._row_factor, op.Constant(value_ints=[1])))
        return op.Reshape(scaled, shape)


def per_row_factor(factor):
    """``factor`` as a ``[B|1, 1, S|1, 1]`` value, or None when it is not constant per row.

    Accepts the factor itself, or the factor widened along the last axis by a constant of
    ones (``Mul(f, ones[E])``: rewrites/attention.py widens it so that ORT's broadcast is fast).
    """
    if _is_row_shaped(factor):
        return factor
    producer = factor.producer()
    if producer is None or producer.op_type != "Mul" or producer.domain not in ("", "ai.onnx"):
        return None
    if len(producer.inputs) != 2:
        return None
    first, second = producer.inputs
    for candidate, other in ((first, second), (second, first)):
        if _is_row_shaped(candidate) and _all_ones(other) and factor.shape is not None \
                and factor.shape.rank() == 4 and factor.shape[1] == 1:
            return candidate
    return None


def _is_row_shaped(value) -> bool:
    shape = value.shape if value is not None else None
    return shape is not None and shape.rank() == 4 and shape[1] == 1 and shape[3] == 1


def _all_ones(value) -> bool:
    """Whether ``value`` is a known rank-≤1 constant of ones (folded, or ``ConstantOfShape`` of 1)."""
    from onnxscript.rewriter import _ir_utils

    if value is None or value.shape is None or value.shape.rank() > 1:
        return False
    array = _ir_utils.get_numpy_value(value)
    if array is not None:
        return array.size > 0 and bool((array == 1).all())
    producer = value.producer()
    if producer is None or producer.op_type != "ConstantOfShape" or producer.domain not in ("", "ai.onnx"):
        return False
    fill = producer.attributes.get("value")
    return fill is not None and bool((fill.as_tensor().numpy() == 1).all())


def resolve_reshape_wildcards(model) -> int:
    """Replace a ``Reshape`` shape's ``-1`` by its static value where the input's shape gives it.

    The library's attention rewrites reshape with ``[0, 0, -1]``; ONNX Runtime refuses a ``-1``
    on an empty tensor (batch or sequence 0: "cannot be reshaped to the requested shape"), which
    verification probes. When the input dims that the shape's ``0`` entries do not copy are all
    static, the ``-1`` is their product over the shape's explicit entries, whatever the copied
    (dynamic) dims are. Returns how many shapes were resolved; subgraphs included.
    """
    import numpy as np
    import onnx_ir as ir
    from onnxscript.rewriter import _ir_utils

    resolved = 0
    for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
        if node.op_type == "MultiHeadAttention" and node.domain == "com.microsoft":
            _infer_mha_shape(node)
        if node.op_type != "Reshape" or node.domain not in ("", "ai.onnx") or len(node.inputs) != 2:
            continue
        if node.attributes.get_int("allowzero", 0) != 0:
            continue
        data, shape = node.inputs
        target = _ir_utils.get_numpy_value(shape)
        if data is None or data.shape is None or target is None or target.ndim != 1:
            continue
        target = [int(v) for v in target]
        if target.count(-1) != 1 or any(v < -1 for v in target):
            continue
        copied = {i for i, v in enumerate(target) if v == 0}
        if any(i >= data.shape.rank() for i in copied):
            continue
        rest = [data.shape[i] for i in range(data.shape.rank()) if i not in copied]
        explicit = [v for v in target if v > 0]
        if not all(isinstance(d, int) for d in rest):
            continue
        numerator, denominator = int(np.prod(rest, dtype=np.int64)), int(np.prod(explicit, dtype=np.int64))
        if denominator == 0 or numerator % denominator:
            continue
        target[target.index(-1)] = numerator // denominator
        constant = ir.node("Constant", [], attributes={"value": ir.tensor(np.array(target, dtype=np.int64))})
        node.graph.insert_before(node, constant)
        node.replace_input_with(1, constant.outputs[0])
        if node.outputs[0].shape is None:  # the library adds nodes without shapes; later Reshapes need them
            node.outputs[0].shape = ir.Shape([data.shape[i] if v == 0 else v for i, v in enumerate(target)])
            node.outputs[0].dtype = node.outputs[0].dtype or data.dtype
        resolved += 1
    return resolved


def _infer_mha_shape(node) -> None:
    """``MultiHeadAttention``'s output shape ``[B, S, Dv]`` from 3-D query and value, when unset."""
    import onnx_ir as ir

    query, value = node.inputs[0], node.inputs[2] if len(node.inputs) > 2 else None
    out = node.outputs[0]
    if out.shape is not None or query is None or value is None or query.shape is None or value.shape is None:
        return
    if query.shape.rank() == 3 and value.shape.rank() == 3:
        out.shape = ir.Shape([query.shape[0], query.shape[1], value.shape[2]])
        out.dtype = out.dtype or query.dtype
