"""The ONNX side of weight-only quantisation (:mod:`fxport.lower.weight_quantization`): every
``MatMul`` (or ``Gemm``) of the lowered file whose constant weight holds a recorded Linear weight
— found by content, in either orientation, through a ``Transpose``, in the main graph and in
``Loop``/``If`` bodies — replaced by ``com.microsoft.MatMulNBits`` or by the standard
``DequantizeLinear(block_size=…) → MatMul`` (opset 21), with the record's integers and scales.

Example::

    >>> import numpy as np
    >>> from fxport.lower.weight_quantization import BlockwiseScheme
    >>> pack_matmulnbits(np.array([[-8, 7]], dtype=np.int8), BlockwiseScheme(bits=4, block_size=32)).shape
    (1, 1, 16)
"""

from __future__ import annotations

import hashlib

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

from fxport.lower.weight_quantization import QDQ_OPSET, BlockwiseScheme, QuantizedWeight, WeightQuantization
from fxport.report.result import iter_graphs



def _content_key(array: np.ndarray) -> str:
    return hashlib.sha1(np.ascontiguousarray(array, dtype=np.float32).tobytes() + str(array.shape).encode()).hexdigest()


def _recorded_by_content(record: WeightQuantization, module_weights: dict[str, torch.Tensor]) -> dict[str, QuantizedWeight]:
    """The float32 weights as the file holds them before the rewrite (``[in, out]``, the MatMul's B),
    keyed by content, each to its record."""
    found = {}
    for name, weight in record.weights.items():
        original = module_weights[name].detach().to(torch.float32)
        in_out = original if weight.in_out else original.t()
        found[_content_key(in_out.contiguous().numpy())] = weight
    return found


def rewrite_quantized_matmuls(model: onnx.ModelProto, record: WeightQuantization,
                              module_weights: dict[str, torch.Tensor]) -> onnx.ModelProto:
    """``model`` (a float32 export of the module ``record`` was made from; ``module_weights`` its
    float32 weights by the record's names) with every MatMul/Gemm whose constant weight is a
    recorded weight replaced by the scheme's quantised form, in every graph and subgraph.

    The integers and scales are the record's, not re-derived from the file; the rewrite checks
    that they dequantise to the record's weight and counts the uses on it (``record.replaced``,
    ``QuantizedWeight.uses``). Initializers left without users are removed. Returns a new model.

    Example::

        >>> quantized = rewrite_quantized_matmuls(exported, record, dict(model.state_dict()))  # doctest: +SKIP
    """
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    by_content = _recorded_by_content(record, module_weights)
    writer = _QuantizedWriter(rewritten, record.scheme)
    _rewrite_graph(rewritten.graph, {}, {}, by_content, writer, record, "main")
    writer.finish()
    _drop_dead_nodes_and_initializers(rewritten.graph)
    return rewritten


class _QuantizedWriter:
    """Adds the quantised initializers (once per weight) to the main graph and the opsets the
    scheme's ops need."""

    def __init__(self, model: onnx.ModelProto, scheme: BlockwiseScheme):
        self.model, self.scheme = model, scheme
        self.written: dict[tuple[int, str], tuple[str, ...]] = {}

    def initializers_of(self, weight: QuantizedWeight, graph: onnx.GraphProto) -> tuple[str, ...]:
        """The names of ``weight``'s integers and scales, written once into the graph that holds them:
        the main graph (Loop/If bodies read it from the outer scope), or for the standard form the
        body itself (ONNX Runtime 1.32 fuses DequantizeLinear → MatMul into MatMulNBits, and the
        fusion fails — "Missing required weight" — on an initializer of an outer graph)."""
        home = self.model.graph if self.scheme.form == "matmulnbits" else graph
        key = (id(home), weight.name)
        if key not in self.written:
            suffix = "" if home is self.model.graph else f"_{home.name}"
            self.written[key] = self._write(weight, home, suffix)
        return self.written[key]

    def _write(self, weight: QuantizedWeight, graph: onnx.GraphProto, suffix: str) -> tuple[str, ...]:
        base = weight.name.replace(".", "_")
        scheme = self.scheme
        integers, scales = weight.integers, weight.scales
        _check_exact(weight, scheme)
        names = f"{base}_Q{scheme.bits}{suffix}", f"{base}_scales{suffix}"
        if scheme.form == "matmulnbits":
            graph.initializer.append(onnx.numpy_helper.from_array(pack_matmulnbits(integers, scheme), names[0]))
            graph.initializer.append(onnx.numpy_helper.from_array(scales.reshape(-1), names[1]))
            return names
        kind = TensorProto.INT4 if scheme.bits == 4 else TensorProto.INT8
        graph.initializer.append(helper.make_tensor(names[0], kind, list(integers.T.shape),
                                                    np.ascontiguousarray(integers.T).reshape(-1).tolist()))
        graph.initializer.append(onnx.numpy_helper.from_array(np.ascontiguousarray(scales.T), names[1]))
        return names

    def finish(self) -> None:
        opsets = {entry.domain: entry for entry in self.model.opset_import}
        if self.scheme.form == "matmulnbits" and self.written and "com.microsoft" not in opsets:
            self.model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
        if self.scheme.form == "qdq" and self.written:
            default = opsets.get("") or opsets.get("ai.onnx")
            if default.version == QDQ_OPSET - 1:  # 20 → 21 only adds types (int4) to existing ops
                default.version = QDQ_OPSET
            elif default.version < QDQ_OPSET:
                _raise_opset(default.version)


def _raise_opset(version: int) -> None:
    from fxport.errors import UsageError

    raise UsageError(f"--quant-format qdq writes blockwise DequantizeLinear, which needs opset {QDQ_OPSET}; "
                     f"this export is opset {version}", hint=f"add --opset {QDQ_OPSET}, or use --quant-format matmulnbits")


def _check_exact(weight: QuantizedWeight, scheme: BlockwiseScheme) -> None:
    """The integers and scales written give back the recorded dequantised weight, bit for bit."""
    rows, columns = weight.integers.shape
    scales = np.repeat(weight.scales, scheme.block_size, axis=1)[:, :columns]
    again = weight.integers.astype(np.float32) * scales
    expected = weight.dequantized.t().numpy() if weight.in_out else weight.dequantized.numpy()
    if not np.array_equal(again, expected):
        raise AssertionError(f"{weight.name}: the quantised weight does not dequantise to the recorded one")


def pack_matmulnbits(integers: np.ndarray, scheme: BlockwiseScheme) -> np.ndarray:
    """MatMulNBits' B: ``[out, blocks, block_size * bits / 8]`` uint8, each value stored with the
    zero point ``2**(bits-1)`` added (the default zero point when none is given), two 4-bit values
    per byte, the first in the low nibble.

    >>> pack_matmulnbits(np.array([[-8, 7, 0, 1] + [0] * 12], np.int8), BlockwiseScheme(bits=4, block_size=16))[0, 0, :2].tolist()
    [240, 152]
    """
    rows, columns = integers.shape
    size = scheme.block_size
    blocks = -(-columns // size)
    stored = np.full((rows, blocks * size), 1 << (scheme.bits - 1), dtype=np.uint8)   # padding dequantises to 0
    stored[:, :columns] = (integers.astype(np.int16) - scheme.lowest).astype(np.uint8)
    stored = stored.reshape(rows, blocks, size)
    if scheme.bits == 8:
        return stored
    return (stored[..., 0::2] | (stored[..., 1::2] << 4)).astype(np.uint8)


def _rewrite_graph(graph: onnx.GraphProto, outer: dict[str, onnx.TensorProto], outer_producers: dict[str, onnx.NodeProto],
                   by_content: dict[str, QuantizedWeight], writer: _QuantizedWriter, record: WeightQuantization,
                   label: str) -> None:
    """Replace the MatMuls of ``graph`` and of its bodies; a body sees the initializers and the
    nodes of every graph around it (the loop-invariant Transpose of a weight sits in the main graph)."""
    visible = {**outer, **{init.name: init for init in graph.initializer}}
    producers = {**outer_producers, **{output: node for node in graph.node for output in node.output}}
    new_nodes: list[onnx.NodeProto] = []
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                _rewrite_graph(attribute.g, visible, producers, by_content, writer, record, "body")
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                for sub in attribute.graphs:
                    _rewrite_graph(sub, visible, producers, by_content, writer, record, "body")
        replacement = _replacement(node, graph, visible, producers, by_content, writer)
        if replacement is None:
            new_nodes.append(node)
            continue
        new_nodes.extend(replacement)
        record.replaced[label] = record.replaced.get(label, 0) + 1
    del graph.node[:]
    graph.node.extend(new_nodes)


def _constant_weight(name: str, visible: dict, producers: dict) -> np.ndarray | None:
    """The float32 ``[in, out]`` value of a MatMul's B when it is a constant: an initializer, or a
    Transpose of one."""
    if name in visible:
        init = visible[name]
        return onnx.numpy_helper.to_array(init) if init.data_type == TensorProto.FLOAT and len(init.dims) == 2 else None
    node = producers.get(name)
    if node is not None and node.op_type == "Transpose" and node.input[0] in visible:
        perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), [1, 0])
        source = _constant_weight(node.input[0], visible, {})
        return source.T if source is not None and perm == [1, 0] else None
    return None


def _attribute(node: onnx.NodeProto, name: str, default):
    attribute = next((a for a in node.attribute if a.name == name), None)
    return default if attribute is None else helper.get_attribute_value(attribute)


def _replacement(node: onnx.NodeProto, graph: onnx.GraphProto, visible: dict, producers: dict, by_content: dict,
                 writer: _QuantizedWriter) -> list[onnx.NodeProto] | None:
    """The nodes that replace ``node`` when it multiplies by a recorded weight, else None."""
    if node.domain not in ("", "ai.onnx") or node.op_type not in ("MatMul", "Gemm") or len(node.input) < 2:
        return None
    bias = None
    if node.op_type == "Gemm":
        if _attribute(node, "transA", 0) or _attribute(node, "alpha", 1.0) != 1.0 or \
                (len(node.input) > 2 and node.input[2] and _attribute(node, "beta", 1.0) != 1.0):
            return None
        bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
    weight = _constant_weight(node.input[1], visible, producers)
    if weight is None:
        return None
    if node.op_type == "Gemm" and _attribute(node, "transB", 0):
        weight = weight.T
    recorded = by_content.get(_content_key(weight))
    if recorded is None:
        return None
    recorded.uses += 1
    return _quantized_nodes(node, recorded, writer.initializers_of(recorded, graph), writer.scheme, bias)


def _quantized_nodes(node: onnx.NodeProto, weight: QuantizedWeight, initializers: tuple[str, ...],
                     scheme: BlockwiseScheme, bias: str | None) -> list[onnx.NodeProto]:
    packed, scales = initializers
    out_features, in_features = weight.integers.shape
    product = node.output[0] if bias is None else f"{node.output[0]}_before_bias"
    name = node.name or node.output[0]
    if scheme.form == "matmulnbits":
        nodes = [helper.make_node("MatMulNBits", [node.input[0], packed, scales], [product], name=f"{name}_nbits",
                                  domain="com.microsoft", K=in_features, N=out_features, bits=scheme.bits,
                                  block_size=scheme.block_size, accuracy_level=scheme.accuracy_level)]
    else:
        dequantized = f"{name}_dequantized_weight"
        nodes = [helper.make_node("DequantizeLinear", [packed, scales], [dequantized], name=f"{name}_dequantize",
                                  axis=0, block_size=scheme.block_size),
                 helper.make_node("MatMul", [node.input[0], dequantized], [product], name=f"{name}_matmul")]
    if bias is not None:
        nodes.append(helper.make_node("Add", [product, bias], [node.output[0]], name=f"{name}_bias"))
    return nodes


def _drop_dead_nodes_and_initializers(graph: onnx.GraphProto) -> None:
    """Remove the Transposes of weights the rewrite left without readers (in every graph), then the
    initializers nothing reads."""
    while True:
        used = {name for g in iter_graphs(graph) for node in g.node for name in node.input}
        used |= {output.name for g in iter_graphs(graph) for output in g.output}
        removed = False
        for g in iter_graphs(graph):
            dead = [node for node in g.node if node.op_type == "Transpose" and not any(o in used for o in node.output)]
            for node in dead:
                g.node.remove(node)
                removed = True
        if not removed:
            break
    kept = [init for init in graph.initializer if init.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept)
