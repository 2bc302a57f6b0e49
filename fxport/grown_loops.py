"""Lower ``fxport::grown_loop`` (a loop whose carried state grows) to one ONNX ``Loop``.

The control-flow operators (``fxport/controlflow/operators/growing.py``) leave one call of the
custom op per such loop in the captured program, keyed to a
:class:`~fxport.controlflow.operators.growing.GrownLoop`. Before the program is exported, each
loop's body — one iteration and the next test, as a function of the counter, the carried
state, the free tensors and the modules' weights — is captured on its own with
``torch.export`` (the dimensions that are dynamic outside and the growing axes dynamic) and
translated with the same exporter; :func:`loop_translations` then gives the op a translation
that writes an ONNX ``Loop`` whose body is that graph. The body reads the free tensors and the
weights as values of the enclosing graph (stored once); its own value names get the loop's key
as a prefix, so they cannot clash with the enclosing graph's.

Example::

    >>> import torch
    >>> program = torch.export.export(torch.nn.ReLU(), (torch.randn(2),))
    >>> loop_translations(program, 18, {})       # no loop whose state grows
    {}
"""

from __future__ import annotations

import torch

from fxport.controlflow.operators import growing
from fxport.controlflow.operators.state import growing_body, session
from fxport.errors import ControlFlowError, LoweringError
from fxport.exporter import export_program
from fxport.quiet import quiet_torch

OP = torch.ops.fxport.grown_loop.default


def _loop_nodes(program) -> list:
    return [node for module in program.graph_module.modules() if isinstance(module, torch.fx.GraphModule)
            for node in module.graph.nodes if node.op == "call_function" and node.target is OP]


def capture_loop_bodies(program: torch.export.ExportedProgram, rewrite=None) -> None:
    """Capture the body of every loop whose state grows in ``program`` (and in those bodies),
    passing each through ``rewrite`` (the rewrite stage's graph passes and rules), so that they
    see the body like every other graph; :func:`loop_translations` uses what is captured here.
    """
    for node in _loop_nodes(program):
        loop = growing.LOOPS[node.args[1]]
        if getattr(loop, "program", None) is None:
            body = _capture_body(loop, node)
            capture_loop_bodies(body, rewrite)
            loop.program = rewrite(body) if rewrite is not None else body


def loop_translations(program: torch.export.ExportedProgram, opset: int | None, table: dict | None) -> dict:
    """``{fxport::grown_loop: translation}`` when ``program`` holds loops whose state grows, else ``{}``.

    Exports and translates every such loop's body first (raising a one-line error at the
    loop's line when that fails); the translation only assembles the ``Loop`` nodes.
    """
    nodes = _loop_nodes(program)
    if not nodes:
        return {}
    bodies = {node.args[1]: _body_model(growing.LOOPS[node.args[1]], node, opset, table) for node in nodes}

    def grown_loop(inputs, key):
        return _loop_node(bodies[key], growing.LOOPS[key], inputs)

    return {OP: grown_loop}


def _body_model(loop, node, opset, table):
    """The body of ``loop`` as an onnx_ir model: inputs (counter, state, free tensors), the
    modules' weights as initializers named ``modules_.<i>.<name>``, outputs (keep going, counter,
    state)."""
    program = getattr(loop, "program", None) or _capture_body(loop, node)
    nested = {**(table or {}), **loop_translations(program, opset, table)}
    try:
        with quiet_torch(), torch.no_grad():
            onnx_program = export_program(program, opset=opset, translation_table=nested)
    except Exception as exc:
        raise LoweringError(f"the ONNX exporter failed on the body of the loop at {loop.info.location}: "
                            f"{_summary(exc)}", hint="run with --debug for the full trace") from exc
    import onnx_ir.passes.common as passes

    model = onnx_program.model
    passes.InlinePass()(model)
    return model


def _capture_body(loop, node) -> torch.export.ExportedProgram:
    """``torch.export`` of one iteration of ``loop`` (the :class:`_Body`), sizes as described above."""
    from torch.fx.experimental import _config as shape_config

    vals = [arg.meta["val"] for arg in node.args[0]]
    _, counter, state, free, _ = loop.split(vals)
    carried = ([counter] if counter is not None else []) + list(state)
    offset = 1 if counter is not None else 0
    examples = [_example(v, loop.growing.get(index - offset, ()) if offset <= index < offset + len(state) else ())
                for index, v in enumerate(carried + list(free))]
    dynamic = []
    for index, value in enumerate(carried + list(free)):
        axes = {a for a, size in enumerate(value.shape) if isinstance(size, torch.SymInt)}
        if offset <= index < offset + len(state):
            axes |= set(loop.growing.get(index - offset, ()))
        dynamic.append({a: torch.export.Dim.AUTO for a in sorted(axes)} or None)
    body = _Body(loop, len(carried), len(free))
    try:
        growing_names = {loop.leaf_name(index).split("[")[0] for index in loop.growing}
        with quiet_torch(), session(loop.strategy, [], loop.disabled), growing_body(growing_names), \
                shape_config.patch(backed_size_oblivious=True), torch.no_grad():
            program = torch.export.export(body, tuple(examples), dynamic_shapes=(tuple(dynamic),), strict=False)
    except ControlFlowError:
        raise
    except Exception as exc:
        raise _refusal(loop, f"its body could not be captured on its own ({_summary(exc)})") from exc
    _check_still_dynamic(loop, program, offset)
    return program


class _Body(torch.nn.Module):
    """One iteration of a grown loop as a module of flat tensors (what the body export traces).

    The modules the body calls are its submodules, so their weights are the body program's
    parameters, as in the enclosing capture (a module called inside a ``torch.cond`` branch of
    the body reads them as parameters; weights swapped in as inputs would reach dynamo as
    constants it cannot lift). :func:`_loop_node` points them at the enclosing graph's weights.
    """

    def __init__(self, loop, carried: int, free: int):
        super().__init__()
        self.loop, self.carried, self.free = loop, carried, free
        self.modules_ = torch.nn.ModuleList([module for module, _ in loop.modules])

    def forward(self, *flat):
        loop = self.loop
        carried, free_tensors = flat[: self.carried], flat[self.carried: self.carried + self.free]
        counter, state = (carried[0], carried[1:]) if loop.counted else (None, carried)
        free = loop.free_values(free_tensors, list(state) + list(free_tensors))
        keep, counter, new = loop.step_once(counter, tuple(state), free)
        return (keep,) + ((counter,) if loop.counted else ()) + tuple(new)


def _example(value: torch.Tensor, growing=()) -> torch.Tensor:
    """Zeros shaped like the fake ``value`` at its example sizes (2 where a size has no hint).

    A ``growing`` axis is at least 2 long: a state that starts empty (``acc = h[:, :0]``) would
    otherwise reach the body's ``torch.cond`` as a 0-long tensor, whose guards dynamo checks
    against ranges that exclude 0 ("0 not in VR[1, 2]").
    """
    from torch.fx.experimental.symbolic_shapes import optimization_hint

    shape = [optimization_hint(s, fallback=2) if isinstance(s, torch.SymInt) else s for s in value.shape]
    shape = [max(size, 2) if axis in growing else size for axis, size in enumerate(shape)]
    return torch.zeros(shape, dtype=value.dtype)


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


def _check_still_dynamic(loop, program, offset: int) -> None:
    """A growing axis the body capture specialised would make the Loop wrong after one step."""
    placeholders = [n for n in program.graph.nodes if n.op == "placeholder"]
    user_inputs = [n for n, spec in zip(placeholders, program.graph_signature.input_specs)
                   if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT]
    for index, axes in loop.growing.items():
        value = user_inputs[offset + index].meta["val"]
        for axis in axes:
            if not isinstance(value.shape[axis], torch.SymInt):
                name = loop.leaf_name(index)
                raise _refusal(loop, f"its body works only for one size {value.shape[axis]} of axis {axis} of "
                                     f"{name!r}, which grows", hint=f"avoid code that fixes the length of {name!r}")


def _refusal(loop, what: str, hint: str = "run with --debug for the full trace") -> ControlFlowError:
    return ControlFlowError(f"{loop.info.kind}: loop whose state grows: {what}", where=loop.info.location, hint=hint)


def _summary(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:240]


def _loop_node(model, loop, inputs):
    """Append the ``Loop`` node to the exporter's current graph; return the final state values."""
    import onnx_ir as ir
    from torch.onnx._internal.exporter import _core

    tracer = _core.current_tracer
    keep, counter, state, free, weights = loop.split(inputs)
    carried = ([counter] if counter is not None else []) + list(state)
    graph = ir.serde.deserialize_graph(ir.serde.serialize_graph(model.graph))
    outer_weights = _weights_by_name(loop, weights)
    for name, value in list(graph.initializers.items()):  # the weights: the enclosing graph's values (by
        if name in outer_weights:                         # the body's own names, before they are prefixed)
            graph.initializers.pop(name)
            value.replace_all_uses_with(outer_weights[name])
    _prefix_names(graph, loop.key)
    _forget_inner_shapes(graph)
    inner = list(graph.inputs)
    for value, outer in zip(inner[len(carried):], list(free)):
        value.replace_all_uses_with(outer)
    graph.inputs.clear()
    graph.inputs.extend([ir.Value(name=f"{loop.key}_iteration", shape=ir.Shape([]), type=ir.TensorType(ir.DataType.INT64)),
                         ir.Value(name=f"{loop.key}_condition", shape=ir.Shape([]), type=ir.TensorType(ir.DataType.BOOL))]
                        + inner[: len(carried)])
    for position, value in enumerate(list(graph.outputs)):
        if value.producer() is None:  # a carried value passed through, or a value of the enclosing graph
            identity = ir.Node("", "Identity", [value], num_outputs=1)
            identity.outputs[0].name = f"{loop.key}_out_{position}"
            graph.append(identity)
            graph.outputs[position] = identity.outputs[0]
    for name, value in list(graph.initializers.items()):  # Constants: dead ones are removed by the optimizer
        graph.initializers.pop(name)
        if value.uses():
            constant = ir.Node("", "Constant", [], attributes=[ir.AttrTensor("value", value.const_value)], num_outputs=1)
            constant.outputs[0].name = f"{name}_constant"
            graph.insert_before(graph[0], constant) if len(graph) else graph.append(constant)
            value.replace_all_uses_with(constant.outputs[0])
    graph.name = loop.key
    node = ir.Node("", "Loop", inputs=[None, keep, *carried], attributes=[ir.AttrGraph("body", graph)],
                   num_outputs=len(carried), version=tracer.opset.version)
    tracer.nodes.append(node)
    return list(node.outputs[len(carried) - len(state):])


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
