"""Lower ``fxport::grown_loop`` (a loop whose carried state grows) to one ONNX ``Loop``.

Each such loop's body was captured on its own by the capture stage
(``fxport/capture/loop_bodies.py``; the loops are the conversion's ``grown_loops``). Before the
program is exported, each body is translated with the same exporter; :func:`loop_translations`
then gives the op a translation
that writes an ONNX ``Loop`` whose body is that graph. The body reads the free tensors and the
weights as values of the enclosing graph (stored once); its own value names get the loop's key
as a prefix, so they cannot clash with the enclosing graph's.

Example::

    >>> import torch
    >>> program = torch.export.export(torch.nn.ReLU(), (torch.randn(2),))
    >>> loop_translations(program, {}, 18, {})       # no loop whose state grows
    {}
"""

from __future__ import annotations

from typing import Mapping

import torch

from fxport.capture.loop_bodies import COND_OP, OP, capture_body, capture_branch, loop_nodes
from fxport.errors import LoweringError
from fxport.lower.exporter import export_program, exporter_summary
from fxport.common.quiet import quiet_torch


def loop_translations(program: torch.export.ExportedProgram, loops: Mapping[str, object], opset: int | None,
                      table: dict | None) -> dict:
    """``{fxport::grown_loop: translation}`` when ``program`` holds loops whose state grows, else ``{}``.

    Exports and translates every such loop's body first (raising a one-line error at the
    loop's line when that fails); the translation only assembles the ``Loop`` nodes.
    """
    nodes = loop_nodes(program)
    if not nodes:
        return {}
    bodies = {node.args[1]: _body_model(loops[node.args[1]], node, loops, opset, table) for node in nodes
              if node.target is OP}
    branches = {node.args[1]: {side: _branch_model(loops[node.args[1]], node, side, loops, opset, table)
                               for side in ("true", "false")} for node in nodes if node.target is COND_OP}

    def grown_loop(inputs, key):
        return _loop_node(bodies[key], loops[key], inputs)

    def grown_cond(inputs, key):
        return _if_node(branches[key], loops[key], inputs)

    return {**({OP: grown_loop} if bodies else {}), **({COND_OP: grown_cond} if branches else {})}


def _body_model(loop, node, loops, opset, table):
    """The body of ``loop`` as an onnx_ir model: inputs (counter, state, free tensors), the
    modules' weights as initializers named ``modules_.<i>.<name>``, outputs (keep going, counter,
    state)."""
    return _translated(getattr(loop, "program", None) or capture_body(loop, node), loop, loops, opset, table,
                       "the body of the loop")


def _branch_model(cond, node, side, loops, opset, table):
    """One side of an ``if`` whose branch holds a loop whose state grows, as an onnx_ir model:
    inputs (the free tensors), weights as for a body, outputs (the ``if``'s tensors)."""
    return _translated(cond.programs.get(side) or capture_branch(cond, node, side), cond, loops, opset, table,
                       f"the {side} branch of the if")


def _translated(program, owner, loops, opset, table, what: str):
    nested = {**(table or {}), **loop_translations(program, loops, opset, table)}
    try:
        with quiet_torch(), torch.no_grad():
            onnx_program = export_program(program, opset=opset, translation_table=nested)
    except Exception as exc:
        raise LoweringError(f"the ONNX exporter failed on {what} at {owner.info.location}: "
                            f"{exporter_summary(exc)}", hint="run with --debug for the full trace") from exc
    import onnx_ir.passes.common as passes

    model = onnx_program.model
    passes.InlinePass()(model)
    return model


def _weights_by_name(loop, weights) -> dict:
    """The enclosing graph's value of each weight the op passes (in the order of ``loop.modules``),
    under every name the body program may give it: a tied weight (GPT-2's ``lm_head`` and
    ``wte``) is passed once but has a name in each module that holds it."""
    import itertools

    tensors_of = [itertools.chain(module.named_parameters(remove_duplicate=False),
                                  module.named_buffers(remove_duplicate=False)) for module, _ in loop.modules]
    named = [dict(pairs) for pairs in tensors_of]
    passed = iter(weights)
    value_of = {id(named[index][name]): next(passed) for index, (_, names) in enumerate(loop.modules) for name in names}
    return {f"modules_.{index}.{name}": value_of[id(tensor)] for index, tensors in enumerate(named)
            for name, tensor in tensors.items() if id(tensor) in value_of}



def _loop_node(model, loop, inputs):
    """Append the ``Loop`` node to the exporter's current graph; return the final state values."""
    import onnx_ir as ir
    from torch.onnx._internal.exporter import _core

    tracer = _core.current_tracer
    keep, counter, state, free, weights = loop.split(inputs)
    carried = ([counter] if counter is not None else []) + list(state)
    graph, inner = _subgraph(model, loop, loop.key, len(carried), free, weights)
    graph.inputs.extend([ir.Value(name=f"{loop.key}_iteration", shape=ir.Shape([]), type=ir.TensorType(ir.DataType.INT64)),
                         ir.Value(name=f"{loop.key}_condition", shape=ir.Shape([]), type=ir.TensorType(ir.DataType.BOOL))]
                        + inner)
    node = ir.Node("", "Loop", inputs=[None, keep, *carried], attributes=[ir.AttrGraph("body", graph)],
                   num_outputs=len(carried), version=tracer.opset.version)
    tracer.nodes.append(node)
    return list(node.outputs[len(carried) - len(state):])


def _if_node(models, cond, inputs):
    """Append the ``If`` node of an ``if`` whose branches were captured on their own; return its
    outputs (the branches' tensors)."""
    import onnx_ir as ir
    from torch.onnx._internal.exporter import _core

    tracer = _core.current_tracer
    pred, free, weights = cond.split(inputs)
    graphs = {side: _subgraph(models[side], cond, f"{cond.key}_{side}", 0, free, weights)[0] for side in models}
    node = ir.Node("", "If", inputs=[pred], attributes=[ir.AttrGraph("then_branch", graphs["true"]),
                                                        ir.AttrGraph("else_branch", graphs["false"])],
                   num_outputs=len(cond.tensor_outputs), version=tracer.opset.version)
    tracer.nodes.append(node)
    return list(node.outputs)


def _subgraph(model, owner, prefix: str, own: int, free, weights):
    """A copy of ``model``'s graph to nest in the enclosing one: the weights and the free inputs
    (after the first ``own``) read from the enclosing graph, names prefixed, every output made by a
    node of its own, constants as nodes; ``(graph, its own first inputs)``, its inputs cleared."""
    import onnx_ir as ir

    graph = ir.serde.deserialize_graph(ir.serde.serialize_graph(model.graph))
    outer_weights = _weights_by_name(owner, weights)
    for name, value in list(graph.initializers.items()):  # the weights: the enclosing graph's values (by
        if name in outer_weights:                         # the body's own names, before they are prefixed)
            graph.initializers.pop(name)
            value.replace_all_uses_with(outer_weights[name])
    _prefix_names(graph, prefix)
    _forget_inner_shapes(graph)
    inner = list(graph.inputs)
    for value, outer in zip(inner[own:], list(free)):
        value.replace_all_uses_with(outer)
    graph.inputs.clear()
    for position, value in enumerate(list(graph.outputs)):
        if value.producer() is None:  # a carried value passed through, or a value of the enclosing graph
            identity = ir.Node("", "Identity", [value], num_outputs=1)
            identity.outputs[0].name = f"{prefix}_out_{position}"
            graph.append(identity)
            graph.outputs[position] = identity.outputs[0]
    for name, value in list(graph.initializers.items()):  # Constants: dead ones are removed by the optimizer
        graph.initializers.pop(name)
        if value.uses():
            constant = ir.Node("", "Constant", [], attributes=[ir.AttrTensor("value", value.const_value)], num_outputs=1)
            constant.outputs[0].name = f"{name}_constant"
            graph.insert_before(graph[0], constant) if len(graph) else graph.append(constant)
            value.replace_all_uses_with(constant.outputs[0])
    graph.name = prefix
    return graph, inner[:own]


def _forget_inner_shapes(graph) -> None:
    """Drop the shapes the body capture recorded on the body's computed values (types stay).

    The body was captured with each growing axis at least 2 long and sizes treated
    size-obliviously, so a value such as ``acc[:, -1:]`` is recorded 1 long where it is 0 long
    on the first step of a state that starts empty; ONNX Runtime plans buffers from recorded
    shapes and fails on such a value ("Shape mismatch attempting to re-use buffer"), and the
    optimizer could fold a recorded size. Its own inference from the ops' semantics is right.
    """
    import onnx_ir as ir

    for node in ir.traversal.RecursiveGraphIterator(graph):
        for value in node.outputs:
            value.shape = None


def _prefix_names(graph, prefix: str) -> None:
    """Value and node names of ``graph`` (and its subgraphs) prefixed: unique in the outer graph,
    and so are the names of its symbolic dimensions."""
    import onnx_ir as ir

    for each in [graph, *(g for n in ir.traversal.RecursiveGraphIterator(graph) for a in n.attributes.values()
                          if a.type == ir.AttributeType.GRAPH for g in [a.value])]:
        for value in list(each.inputs) + list(each.initializers.values()):
            _prefix_value(value, prefix)
        for node in each:
            if node.name:
                node.name = f"{prefix}_{node.name}"
            for value in node.outputs:
                _prefix_value(value, prefix)


def _prefix_value(value, prefix: str) -> None:
    """The value's name and its symbolic dimensions (the body's own ``s0`` is not the enclosing
    graph's ``s0``) prefixed."""
    import onnx_ir as ir

    if value.name:
        value.name = f"{prefix}_{value.name}"
    if value.shape is not None and any(isinstance(d, ir.SymbolicDim) and d.value for d in value.shape):
        value.shape = ir.Shape([ir.SymbolicDim(f"{prefix}_{d.value}") if isinstance(d, ir.SymbolicDim) and d.value
                                else d for d in value.shape])
