"""Python-float arithmetic on sizes runs in double in the file, as eager runs it.

torch.onnx (2.13) lowers a Python float of the graph (a SymFloat: torchvision's detection resize
``min(min_size / min(h, w), max_size / max(h, w))``, then ``floor(h * scale)``) with FLOAT
(float32) casts; eager computes it in double. ``floor(303 * (160 / 303))`` is 159 in double and
160 in float32, so the file resized a 303-px image to one more row and every detection after it
differed (found on user-built RetinaNet, FCOS, Mask and Keypoint R-CNN, issue 50 item 7).

:func:`size_arithmetic_in_double` finds the values computed from sizes only (``Shape`` outputs,
then every node whose inputs are such values or one-element constants), turns their ``Cast`` to
FLOAT into a cast to DOUBLE, widens the float constants their arithmetic reads, and casts back
to FLOAT where any other node (a ``Resize``'s scales) or a graph output reads them. Values of
the model's tensors are never touched: only numbers derived from shapes.

Example::

    >>> import onnx, onnx.helper as h
    >>> import onnx_ir as ir
    >>> graph = h.make_graph([h.make_node("Shape", ["x"], ["s"]), h.make_node("Cast", ["s"], ["f"], to=1),
    ...                       h.make_node("Div", ["k", "f"], ["r"])], "g",
    ...                      [h.make_tensor_value_info("x", 1, ["n"])], [h.make_tensor_value_info("r", 1, [1])],
    ...                      [h.make_tensor("k", 1, [], [160.0])])
    >>> model = ir.serde.deserialize_model(h.make_model(graph, opset_imports=[h.make_opsetid("", 18)]))
    >>> size_arithmetic_in_double(model)
    2
    >>> [(n.op_type, n.attributes["to"].value if "to" in n.attributes else None) for n in model.graph]
    [('Shape', None), ('Cast', 11), ('Div', None), ('Cast', 1)]
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

#: ops that carry a number computed from sizes on (their outputs are such numbers too)
_ARITHMETIC = frozenset({"Div", "Mul", "Min", "Max", "Add", "Sub", "Floor", "Ceil", "Neg", "Abs", "Reshape",
                         "Squeeze", "Unsqueeze", "Concat", "Identity", "Gather", "Slice", "Round", "Sqrt", "Pow"})


def size_arithmetic_in_double(model: ir.Model) -> int:
    """Widen the float arithmetic on sizes of ``model``'s main graph (see the module doc);
    the number of values made double."""
    graph = model.graph
    from_sizes = _computed_from_sizes(graph)
    widened: set[ir.Value] = set()
    for node in list(graph):
        if not node.outputs or node.outputs[0] not in from_sizes or node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "Cast" and node.attributes["to"].value == ir.DataType.FLOAT:
            node.attributes["to"] = ir.AttrInt64("to", ir.DataType.DOUBLE)
        elif node.op_type in _ARITHMETIC and any(v in widened for v in node.inputs if v is not None):
            _widen_float_constants(graph, node)
        else:
            continue
        for value in node.outputs:  # a FLOAT cast, or arithmetic on one: double now
            value.dtype = ir.DataType.DOUBLE
            widened.add(value)
    if widened:
        _cast_back_where_read(graph, widened, from_sizes)
    return len(widened)


def _computed_from_sizes(graph: ir.Graph) -> set[ir.Value]:
    """``Shape`` outputs, and the outputs of nodes reading only them and one-element constants."""
    found: set[ir.Value] = set()
    for node in graph:
        if node.op_type == "Shape":
            found.update(node.outputs)
            continue
        inputs = [v for v in node.inputs if v is not None]
        if node.op_type in _ARITHMETIC | {"Cast"} and inputs and any(v in found for v in inputs) and all(
                v in found or _small_constant(v) for v in inputs):
            found.update(node.outputs)
    return found


def _small_constant(value: ir.Value) -> bool:
    """A one-element constant (a Python number of the graph) or an int64 one (axes, a shape)."""
    tensor = _constant_of(value)
    return tensor is not None and (tensor.size <= 1 or tensor.dtype == ir.DataType.INT64)


def _constant_of(value: ir.Value):
    if value.const_value is not None:
        return value.const_value
    producer = value.producer()
    if producer is not None and producer.op_type == "Constant" and "value" in producer.attributes:
        return producer.attributes["value"].value
    return None


def _widen_float_constants(graph: ir.Graph, node: ir.Node) -> None:
    for index, value in enumerate(node.inputs):
        tensor = None if value is None else _constant_of(value)
        if tensor is None or tensor.dtype != ir.DataType.FLOAT:
            continue
        wide = ir.Value(name=f"{value.name}_f64", const_value=ir.tensor(tensor.numpy().astype(np.float64)))
        wide.dtype, wide.shape = ir.DataType.DOUBLE, value.shape
        if wide.name not in graph.initializers:
            graph.register_initializer(wide)
        node.replace_input_with(index, graph.initializers[wide.name])


def _cast_back_where_read(graph: ir.Graph, widened: set[ir.Value], from_sizes: set[ir.Value]) -> None:
    """A FLOAT copy of each widened value, for the nodes outside the size arithmetic that read it
    (a ``Resize``'s scales, a ``Range``) and for graph outputs."""
    for value in list(widened):
        readers = [(user, index) for user, index in value.uses()
                   if not (user.outputs and user.outputs[0] in from_sizes and user.graph is graph)]
        is_output = value in graph.outputs
        if not readers and not is_output:
            continue
        cast = ir.Node("", "Cast", [value], attributes=[ir.AttrInt64("to", ir.DataType.FLOAT)])
        narrow = cast.outputs[0]
        narrow.dtype, narrow.shape, narrow.name = ir.DataType.FLOAT, value.shape, f"{value.name}_f32"
        graph.insert_after(value.producer(), [cast])
        for user, index in readers:
            user.replace_input_with(index, narrow)
        for position, output in enumerate(graph.outputs):
            if output is value:
                graph.outputs[position] = narrow
