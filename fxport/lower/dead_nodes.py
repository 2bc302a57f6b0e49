"""Nodes whose values no node of the model reads, removed after the optimiser.

onnxscript's optimiser leaves some behind: when it folds an ``If`` away, the branch graphs it
dropped still count as readers of the enclosing graph's values, so the nodes that made them stay
(minbpe's grown loop: the body's probe, ArgMin/ArgMax over ``ids[:-1]``, 35 top-level nodes no
output needs). ONNX Runtime runs them all the same, and at sizes the model never computes them
for they fail ("ArgMax ... Status Message:" on an empty tensor at len 1). Readers here are the
nodes of the graphs really in the model: the main graph and the subgraphs of its nodes.

Example::

    >>> import onnx_ir as ir
    >>> x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([2]))
    >>> used, dead = ir.node("Relu", [x]), ir.node("Neg", [x])
    >>> graph = ir.Graph([x], used.outputs, nodes=[used, dead], opset_imports={"": 18})
    >>> removed_dead_nodes(ir.Model(graph, ir_version=10)), [n.op_type for n in graph]
    (1, ['Relu'])
"""

from __future__ import annotations

import onnx_ir as ir


def removed_dead_nodes(model: ir.Model) -> int:
    """Remove, in the graph and every subgraph, the nodes none of whose outputs is read by a
    node of the model or is a graph's output; how many were removed."""
    readers: dict[int, int] = {}
    where: dict[int, ir.Graph] = {}
    for graph in _graphs(model.graph):
        for value in graph.outputs:
            readers[id(value)] = readers.get(id(value), 0) + 1
        for node in graph:
            where[id(node)] = graph
            for value in node.inputs:
                if value is not None:
                    readers[id(value)] = readers.get(id(value), 0) + 1
    producers = {id(v): n for g in _graphs(model.graph) for n in g for v in n.outputs}
    work = [n for g in _graphs(model.graph) for n in g]
    removed = set()
    while work:
        node = work.pop()
        if id(node) in removed or any(readers.get(id(v), 0) for v in node.outputs):
            continue
        removed.add(id(node))
        inner = [n for attr in node.attributes.values() for g in _attr_graphs(attr) for sub in _graphs(g) for n in sub]
        for reader in [node, *inner]:
            removed.add(id(reader))
            for value in reader.inputs:
                if value is not None:
                    readers[id(value)] -= 1
                    producer = producers.get(id(value))
                    if producer is not None and readers[id(value)] == 0:
                        work.append(producer)
        where[id(node)].remove(node, safe=False)
    return sum(1 for _ in removed)


def _attr_graphs(attr) -> list:
    if attr.type == ir.AttributeType.GRAPH:
        return [attr.value]
    if attr.type == ir.AttributeType.GRAPHS:
        return list(attr.value)
    return []


def _graphs(graph: ir.Graph):
    yield graph
    for node in graph:
        for attr in node.attributes.values():
            for sub in _attr_graphs(attr):
                yield from _graphs(sub)
