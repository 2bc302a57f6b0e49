"""Lowering: nodes of a ``Loop`` body that read only values from outside the loop move out of it.

A loop body exported on its own (fxport/lower/grown_loops.py) reads the model's weights as values of
the enclosing graph, and the exporter writes ``Transpose(weight)`` in front of each matrix
product, in the body as in the prefill before the loop. Left in the body, ONNX Runtime folds
each transposed weight twice — once for the enclosing graph, once for the body — and keeps both
copies (peak memory twice the weights), and anything else that does not change between
iterations is recomputed every step. Moved in front of the ``Loop``, the transposes meet their
twins from the prefill and common-subexpression elimination keeps one.

Only ops that cannot fail move (a loop that runs zero times never ran its body, so a moved node
must not be able to raise where the body would not have run): transposes, casts, constants,
shapes and unsqueezes, and nodes fed only by those.

Example::

    >>> import onnx_ir as ir
    >>> hoist_loop_invariants(ir.Graph([], [], nodes=[]))
    0
"""

from __future__ import annotations

#: ops that give a result for every input of a valid type (no shape or index can make them fail)
SAFE_TO_HOIST = frozenset({"Transpose", "Cast", "Constant", "Identity", "Shape", "Size", "Unsqueeze", "CastLike"})


def hoist_loop_invariants(graph) -> int:
    """Move the loop-invariant nodes of every ``Loop`` body in ``graph`` (and in its subgraphs,
    innermost first) in front of their ``Loop``; the number of nodes moved."""
    import onnx_ir as ir

    moved = 0
    for node in list(graph):
        for attribute in node.attributes.values():
            if attribute.type == ir.AttributeType.GRAPH:
                moved += hoist_loop_invariants(attribute.value)
            elif attribute.type == ir.AttributeType.GRAPHS:
                moved += sum(hoist_loop_invariants(subgraph) for subgraph in attribute.value)
        if node.op_type == "Loop" and node.domain in ("", "ai.onnx") and "body" in node.attributes:
            moved += _hoist_out_of(node.attributes["body"].value, graph, node)
    return moved


def _hoist_out_of(body, graph, loop) -> int:
    """Move ``body``'s invariant nodes into ``graph`` just before ``loop``."""
    owned = set(body.inputs) | set(body.initializers.values())
    body_outputs = set(body.outputs)
    moved = 0
    for node in list(body):
        outputs_stay = any(output in body_outputs for output in node.outputs)
        reads_body = any(value is not None and (value in owned) for value in node.inputs)
        if node.op_type in SAFE_TO_HOIST and node.domain in ("", "ai.onnx") and not outputs_stay and not reads_body:
            body.remove(node)
            graph.insert_before(loop, node)
            moved += 1
        else:
            owned.update(node.outputs)
    return moved
