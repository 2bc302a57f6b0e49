"""Graph shapes that ONNX Runtime computes wrongly, written in a form it computes right.

The file must equal eager PyTorch where users run it, and that is ONNX Runtime with its default
graph optimisations. Each workaround here names the ONNX Runtime behaviour it avoids and keeps
the graph's meaning exactly (it only reshapes a value around an op).

- **A transposed matrix times a vector.** ONNX Runtime 1.32's extended optimisations fuse
  ``MatMul(Transpose(A), v)`` with a 1-D ``v`` into a ``FusedMatMul`` that computes another
  product (``A.t() @ v`` of a 4×3 ``A``: errors of 0.4 on values near 0.5; basic optimisations
  and a 2-D ``v`` are right). Sinkhorn, power and conjugate-gradient iterations write exactly
  ``M.t() @ u``. The vector becomes a one-column matrix (``Unsqueeze``), and the product a
  vector again (``Squeeze``).

Example::

    >>> import numpy as np, onnx_ir as ir
    >>> a = ir.Value(name="a", shape=ir.Shape([4, 3]), type=ir.TensorType(ir.DataType.FLOAT))
    >>> v = ir.Value(name="v", shape=ir.Shape([4]), type=ir.TensorType(ir.DataType.FLOAT))
    >>> t = ir.Node("", "Transpose", [a], attributes=[ir.AttrInt64s("perm", [1, 0])])
    >>> mm = ir.Node("", "MatMul", [t.outputs[0], v])
    >>> mm.outputs[0].name = "y"
    >>> graph = ir.Graph([a, v], [mm.outputs[0]], nodes=[t, mm], opset_imports={"": 18})
    >>> vectors_times_transposed_matrices_reshaped(ir.Model(graph, ir_version=10))
    1
    >>> [node.op_type for node in graph]
    ['Transpose', 'Constant', 'Unsqueeze', 'MatMul', 'Constant', 'Squeeze']
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir


def apply_ort_workarounds(model: ir.Model) -> dict[str, int]:
    """Every workaround of this module on ``model`` (its subgraphs too): ``{name: times applied}``."""
    return {"transposed-matrix-times-vector": vectors_times_transposed_matrices_reshaped(model)}


def vectors_times_transposed_matrices_reshaped(model: ir.Model) -> int:
    """``MatMul(Transpose(A), v)`` with a 1-D ``v`` → ``Squeeze(MatMul(Transpose(A), Unsqueeze(v, -1)), -1)``."""
    changed = 0
    for node in list(ir.traversal.RecursiveGraphIterator(model.graph)):
        if _is_transposed_matrix_times_vector(node):
            _reshape_around(node)
            changed += 1
    return changed


def _is_transposed_matrix_times_vector(node: ir.Node) -> bool:
    if node.op_type != "MatMul" or node.domain not in ("", "ai.onnx") or len(node.inputs) != 2:
        return False
    matrix, vector = node.inputs
    if matrix is None or vector is None or vector.shape is None or len(vector.shape) != 1:
        return False
    producer = matrix.producer()
    return producer is not None and producer.op_type == "Transpose" and producer.graph is node.graph


def _axes(name: str) -> ir.Node:
    constant = ir.Node("", "Constant", [], attributes=[ir.AttrTensor("value", ir.tensor(np.array([-1], np.int64)))])
    constant.outputs[0].name = name
    return constant


def _reshape_around(node: ir.Node) -> None:
    graph, (_, vector), product = node.graph, node.inputs, node.outputs[0]
    uses = list(product.uses())
    base = product.name or f"matvec_{id(node)}"
    column_axes, row_axes = _axes(f"{base}_column_axes"), _axes(f"{base}_squeeze_axes")
    column = ir.Node("", "Unsqueeze", [vector, column_axes.outputs[0]])
    column.outputs[0].name = f"{base}_column"
    graph.insert_before(node, [column_axes, column])
    node.replace_input_with(1, column.outputs[0])
    squeeze = ir.Node("", "Squeeze", [product, row_axes.outputs[0]])
    result = squeeze.outputs[0]
    result.dtype, result.shape = product.dtype, product.shape
    graph.insert_after(node, [row_axes, squeeze])
    for user, index in uses:
        user.replace_input_with(index, result)
    for position, output in enumerate(graph.outputs):
        if output is product:
            graph.outputs[position] = result
    name = product.name
    product.name, product.shape = f"{base}_as_column", None
    result.name = name
