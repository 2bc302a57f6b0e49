"""Lowering, ``--optimize ort``: attention inside a ``Loop`` body over a cache the loop grows by
``Concat`` becomes ONNX Runtime's ``com.microsoft.GroupQueryAttention`` with past and present.

A generation loop (docs/generation.md) carries each layer's keys and values and grows them by one
position a step. As exported, each step copies the whole cache: the ``Concat`` that grows it,
then transformers' ``repeat_kv`` (``Unsqueeze → Expand → Reshape``: the key-value heads repeated
to the query's, a copy of the cache times the group size, keys and values) and the keys'
``Transpose`` in front of the scores' ``MatMul``. ``GroupQueryAttention`` reads the grouped heads
as they are and returns the grown cache as its ``present``, which the loop carries instead. What
is matched, per attention (torch.onnx's translation of ``scaled_dot_product_attention``)::

    keys = Concat(past_keys, new_keys, axis=-2)           values = Concat(past_values, ...)  # carried
    scores = MatMul(Mul(query, scale), Transpose(repeat(keys), perm=[0, 1, 3, 2]))
    output = MatMul(Softmax(Add(scores, mask)), repeat(values))  [· row factor]

and written::

    out, keys, values = GroupQueryAttention(query, new_keys, new_values, past_keys, past_values,
                                            seqlens_k=past + new - 1, total=past + new,
                                            attention_bias=mask, scale=scale)
    output = Transpose(Reshape(out, [0, 0, heads, size]), [0, 2, 1, 3])  [· row factor]

The model's mask is the bias (left padding, sliding windows stay the model's); the row factor
(0 for a query row whose keys are all masked) is kept. ``GroupQueryAttention`` also masks
causally among the new positions, which a causal decoder's mask does already; the written file
is verified against eager like any other. An attention that does not match exactly (another
scale, a soft cap, keys not carried) keeps its ``Concat``. Measured: benchmarks/cache_carrying.py.

Example::

    >>> import onnx_ir as ir
    >>> loop_attention_for_onnxruntime(ir.Model(ir.Graph([], [], nodes=[]), ir_version=10))
    0
"""

from __future__ import annotations

import numpy as np


def loop_attention_for_onnxruntime(model) -> int:
    """Rewrite the attention of the ``Loop`` bodies of ``model`` (onnx_ir) that read a
    ``Concat``-grown carried cache, and import ``com.microsoft`` where one was; how many."""
    rewritten = grouped_query_attention_in_loops(model.graph)
    if rewritten:
        model.opset_imports.setdefault("com.microsoft", 1)
    return rewritten


def grouped_query_attention_in_loops(graph) -> int:
    """Rewrite the attention of every ``Loop`` body of ``graph`` (outermost graph's loops) that
    reads a ``Concat``-grown carried cache; the number of attentions rewritten."""
    import onnx_ir as ir

    rewritten = 0
    for node in list(graph):
        if node.op_type == "Loop" and node.domain in ("", "ai.onnx") and "body" in node.attributes:
            body = node.attributes["body"].value
            sites = attention_sites(body)
            for site in sites:
                _rewrite(body, site, ir)
            if sites:
                _drop_unused(body)
                rewritten += len(sites)
    return rewritten


def cache_concats(body) -> dict:
    """``{grown value: (carried position, Concat)}`` for each ``Concat(carried, new, axis=-2)``
    of a 4-d carried value whose result is carried to the next step."""
    carried = {value: position for position, value in enumerate(body.inputs[2:])}
    found = {}
    for node in body:
        if node.op_type != "Concat" or node.domain not in ("", "ai.onnx") or len(node.inputs) != 2:
            continue
        position = carried.get(node.inputs[0])
        axis = node.attributes["axis"].as_int() if "axis" in node.attributes else None
        shape = node.inputs[0].shape
        if position is None or shape is None or len(shape) != 4 or axis not in (-2, 2):
            continue
        if 1 + position < len(body.outputs) and body.outputs[1 + position] is node.outputs[0]:
            found[node.outputs[0]] = (position, node)
    return found


def attention_sites(body) -> list[dict]:
    """The attentions of ``body`` over its carried caches, each as the values to rewrite it with."""
    grown = cache_concats(body)
    sites = []
    for softmax in [node for node in body if node.op_type == "Softmax"]:
        site = _site(softmax, grown)
        if site is not None and all(site["keys"] is not other["keys"] for other in sites):
            sites.append(site)
    return sites


def _site(softmax, grown) -> dict | None:
    """The attention around ``softmax`` when it has exactly the exported form, else None."""
    axis = softmax.attributes.get("axis")
    add = softmax.inputs[0].producer()
    if (axis is not None and axis.as_int() not in (-1, 3)) or not _is(add, "Add"):
        return None
    scores = add.inputs[0].producer()
    if not _is(scores, "MatMul") or not _is(scores.inputs[1].producer(), "Transpose"):
        return None
    transpose = scores.inputs[1].producer()
    if list(transpose.attributes["perm"].as_ints()) != [0, 1, 3, 2]:
        return None
    keys, key_heads = _unrepeated(transpose.inputs[0])
    scaled = scores.inputs[0].producer()
    weighted = [use for use, _ in softmax.outputs[0].uses()]
    if keys not in grown or not _is(scaled, "Mul") or len(weighted) != 1 or not _is(weighted[0], "MatMul"):
        return None
    values, value_heads = _unrepeated(weighted[0].inputs[1])
    scale = _scalar(scaled.inputs[1])
    if values not in grown or scale is None or key_heads != value_heads:
        return None
    key_concat, value_concat = grown[keys][1], grown[values][1]
    shape = key_concat.inputs[0].shape
    kv_heads, size = shape[1], shape[3]
    heads = key_heads or kv_heads
    if not all(isinstance(n, int) for n in (kv_heads, size, heads)) or heads % kv_heads:
        return None
    output = weighted[0].outputs[0]
    factors = [use for use, _ in output.uses() if _is(use, "Mul")]
    return dict(keys=key_concat, values=value_concat, positions=(grown[keys][0], grown[values][0]),
                query=scaled.inputs[0], scale=scale, mask=add.inputs[1], output=output,
                factor=factors[0] if len(factors) == 1 and len(list(output.uses())) == 1 else None,
                heads=heads, kv_heads=kv_heads, size=size)


def _unrepeated(value):
    """(the value before transformers' ``repeat_kv`` — ``Unsqueeze → Expand → Reshape`` — and the
    query heads its ``Reshape`` names), or (``value``, None) where there is no repeat."""
    reshape = value.producer()
    if not _is(reshape, "Reshape"):
        return value, None
    expand = reshape.inputs[0].producer()
    unsqueeze = expand.inputs[0].producer() if _is(expand, "Expand") else None
    if not _is(unsqueeze, "Unsqueeze"):
        return value, None
    heads = _shape_entry(reshape.inputs[1], 1)
    return (unsqueeze.inputs[0], heads) if heads is not None else (value, None)


def _shape_entry(shape, index: int) -> int | None:
    """Entry ``index`` of a shape that is a constant or a ``Concat`` of 1-element pieces, if constant."""
    whole = _constant(shape)
    if whole is not None and whole.size > index:
        return int(whole.reshape(-1)[index])
    node = shape.producer()
    if _is(node, "Concat") and len(node.inputs) > index:
        piece = _constant(node.inputs[index])
        if piece is not None and piece.size == 1:
            return int(piece.reshape(-1)[0])
    return None


def _constant(value):
    if value is None:
        return None
    if value.const_value is not None:
        return np.asarray(value.const_value.numpy())
    node = value.producer()
    if _is(node, "Constant") and "value" in node.attributes:
        return np.asarray(node.attributes["value"].as_tensor().numpy())
    return None


def _scalar(value) -> float | None:
    constant = _constant(value)
    return float(constant.reshape(-1)[0]) if constant is not None and constant.size == 1 else None


def _is(node, op: str) -> bool:
    return node is not None and node.op_type == op and node.domain in ("", "ai.onnx")


def _rewrite(body, site: dict, ir) -> None:
    """``site``'s attention as ``GroupQueryAttention``, placed before the output's first use."""
    anchor = site["factor"] or next(use for use, _ in site["output"].uses())
    made = []

    def add(op, *inputs, domain="", outputs=1, **attributes):
        node = ir.node(op, list(inputs), attributes=attributes, domain=domain, num_outputs=outputs)
        made.append(node)
        return node.outputs[0] if outputs == 1 else node.outputs

    def const(values):
        return add("Constant", value=ir.tensor(np.asarray(values, dtype=np.int64)))

    keys, values = site["keys"], site["values"]
    past_length = add("Shape", keys.inputs[0], start=2, end=3)
    total_1d = add("Add", past_length, add("Shape", keys.inputs[1], start=2, end=3))
    batch = add("Shape", keys.inputs[1], start=0, end=1)
    seen = add("Cast", add("Expand", add("Sub", total_1d, const([1])), batch), to=ir.DataType.INT32)
    total = add("Cast", add("Squeeze", total_1d), to=ir.DataType.INT32)
    query, new_keys, new_values = (add("Reshape", add("Transpose", x, perm=[0, 2, 1, 3]), const([0, 0, -1]))
                                   for x in (site["query"], keys.inputs[1], values.inputs[1]))
    out, present_keys, present_values = add(
        "GroupQueryAttention", query, new_keys, new_values, keys.inputs[0], values.inputs[0], seen, total, None, None,
        None, site["mask"], domain="com.microsoft", outputs=3, num_heads=site["heads"], kv_num_heads=site["kv_heads"],
        scale=site["scale"])
    by_head = add("Transpose", add("Reshape", out, const([0, 0, site["heads"], site["size"]])), perm=[0, 2, 1, 3])
    for node in made:
        body.insert_before(anchor, node)
    site["output"].replace_all_uses_with(by_head)
    for position, present in zip(site["positions"], (present_keys, present_values)):
        body.outputs[1 + position] = present
    present_keys.name, present_values.name = f"{keys.outputs[0].name}_present", f"{values.outputs[0].name}_present"
    for number, node in enumerate(made):  # names: an unnamed value would read as one value in the file
        for index, value in enumerate(node.outputs):
            value.name = value.name or f"{keys.outputs[0].name}_gqa_{number}_{index}"


def _drop_unused(body) -> None:
    """Remove the body's nodes nothing reads any more (the Concats, repeats and decomposed attention)."""
    outputs = set(body.outputs)
    for node in reversed(list(body)):
        if not any(value in outputs or value.uses() for value in node.outputs):
            body.remove(node, safe=True)
