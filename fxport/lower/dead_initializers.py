"""Initializers no node reads, removed before the lowered graph is serialised.

A loop's weights hoisted out of its body can leave one behind (a grown loop's constant, seen on
T5). ONNX Runtime drops them too, with a warning at every load of the file ("Removing
initializer 'grown_loop_0_val_10'. It is not used by any node and should be removed from the
model"), so the model it runs is the same; the file verified is the file written.
"""

from __future__ import annotations

from typing import Iterator

import onnx


def unused_initializers_removed(model: onnx.ModelProto) -> list[str]:
    """Remove the initializers that no node reads, in the graph and in every subgraph (a loop's
    weights hoisted out of its body can leave one behind); their names.

    ONNX Runtime drops them too, with a warning at every load of the file ("Removing initializer
    'grown_loop_0_val_10'. It is not used by any node and should be removed from the model"), so
    the model it runs is the same. A name a graph input or output carries counts as read.

    >>> from onnx import TensorProto, helper, numpy_helper
    >>> import numpy as np
    >>> graph = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    ...     initializer=[numpy_helper.from_array(np.ones(1, np.float32), name) for name in ("w", "dead")])
    >>> model = helper.make_model(graph)
    >>> unused_initializers_removed(model), [t.name for t in model.graph.initializer]
    (['dead'], ['w'])
    """
    graphs = list(_graphs(model.graph))
    read = {name for graph in graphs for name in _names_read(graph)}
    removed = []
    for graph in graphs:
        for index in reversed(range(len(graph.initializer))):
            if graph.initializer[index].name not in read:
                removed.append(graph.initializer[index].name)
                del graph.initializer[index]
    return sorted(removed)


def _graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and every subgraph of its nodes (If branches, Loop and Scan bodies), recursively."""
    yield graph
    for node in graph.node:
        for attribute in node.attribute:
            for subgraph in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
                yield from _graphs(subgraph)


def _names_read(graph: onnx.GraphProto) -> Iterator[str]:
    for node in graph.node:
        yield from node.input
    yield from (value.name for value in graph.input)
    yield from (value.name for value in graph.output)
