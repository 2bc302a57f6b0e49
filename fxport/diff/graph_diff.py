"""Readable node-level diff of captured graphs: exported aten programs (FX) or TorchScript traces.

Each graph becomes a list of :class:`GraphNode` lines (``mul = aten::mul.Tensor(relu, 2) :
f32[2, 3]``, with the user's ``file:line`` and the rule that made it); two lists are aligned
like a text diff on op names, so nodes are marked added, removed, changed (same op, other
arguments or shape) or same. ``torch.cond`` / ``while_loop`` / ``scan`` bodies are nested under
their node.

Example::

    >>> import torch
    >>> from fxport.diff.graph_diff import diff_captured, fx_nodes
    >>> class Net(torch.nn.Module):
    ...     def forward(self, x):
    ...         return torch.relu(x) * 2
    >>> program = torch.export.export(Net(), (torch.randn(2, 3),))
    >>> [n.line() for n in fx_nodes(program)]
    ['x = input : f32[2, 3]', 'relu = aten::relu(x) : f32[2, 3]', 'mul = aten::mul.Tensor(relu, 2) : f32[2, 3]', 'output(mul)']
    >>> diff_captured(program, program).summary()
    {'added': 0, 'removed': 0, 'changed': 0, 'same': 4}
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from typing import Any

import torch

from fxport.errors import SourceLocation
from fxport.common.frames import user_location_in, user_location_in_source_range
from fxport.common.provenance import FX_RULE_KEY
from fxport.common.shapes import typed_shape

_DTYPE_SHORT = {
    torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
    torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8",
    torch.uint8: "u8", torch.bool: "b8", torch.complex64: "c64",
}


@dataclasses.dataclass
class GraphNode:
    """One node of a captured graph, readable."""

    name: str
    op: str
    args: list[str]
    value: str = ""
    location: str | None = None
    rule: str | None = None
    subgraphs: dict[str, list["GraphNode"]] = dataclasses.field(default_factory=dict)

    def line(self) -> str:
        """``name = op(args) : value``, the line a graph diff shows."""
        if self.op == "output":
            return f"output({', '.join(self.args)})"
        if self.op == "input":
            return f"{self.name} = input" + (f" : {self.value}" if self.value else "")
        text = f"{self.name} = {self.op}({', '.join(self.args)})"
        return text + (f" : {self.value}" if self.value else "")

    def to_dict(self) -> dict:
        return {"name": self.name, "op": self.op, "args": self.args, "value": self.value,
                "location": self.location, "rule": self.rule, "line": self.line(),
                "subgraphs": {k: [n.to_dict() for n in v] for k, v in self.subgraphs.items()}}


@dataclasses.dataclass
class GraphNodeChange:
    status: str
    before: GraphNode | None
    after: GraphNode | None
    changes: list[str] = dataclasses.field(default_factory=list)
    subgraphs: dict[str, "CapturedGraphDiff"] = dataclasses.field(default_factory=dict)

    @property
    def node(self) -> GraphNode:
        return self.after or self.before

    def to_dict(self) -> dict:
        return {"status": self.status,
                "before": self.before.line() if self.before else None,
                "after": self.after.line() if self.after else None,
                "location": self.node.location, "rule": self.node.rule, "changes": self.changes,
                "subgraphs": {k: v.to_dict() for k, v in self.subgraphs.items()}}


@dataclasses.dataclass
class CapturedGraphDiff:
    """Node-level diff of two captured graphs."""

    nodes: list[GraphNodeChange]

    def summary(self) -> dict[str, int]:
        totals = {"added": 0, "removed": 0, "changed": 0, "same": 0}
        for change in self.nodes:
            totals[change.status] += 1
            for sub in change.subgraphs.values():
                for status, count in sub.summary().items():
                    totals[status] += count
        return totals

    @property
    def identical(self) -> bool:
        summary = self.summary()
        return not (summary["added"] or summary["removed"] or summary["changed"])

    def to_dict(self) -> dict:
        return {"summary": self.summary(), "nodes": [n.to_dict() for n in self.nodes]}


def diff_captured(before: Any, after: Any) -> CapturedGraphDiff:
    """Diff two captured graphs: ExportedProgram, GraphModule, TorchScript graph, or node lists."""
    return diff_node_lists(as_nodes(before), as_nodes(after))


def as_nodes(graph: Any) -> list[GraphNode]:
    if graph is None:
        return []
    if isinstance(graph, list):
        return graph
    if isinstance(graph, torch._C.Graph):
        return trace_nodes(graph)
    return fx_nodes(graph)


# --- FX ------------------------------------------------------------------------------------

def fx_nodes(program: Any) -> list[GraphNode]:
    """Readable nodes of an ExportedProgram or GraphModule; parameters and buffers are left out."""
    module = program.graph_module if hasattr(program, "graph_signature") else program
    hidden = _parameter_placeholders(program)
    state_names = _state_names(program)
    nodes = []
    for node in module.graph.nodes:
        if node.op == "placeholder" and node.name in hidden:
            continue
        if node.op == "get_attr" and isinstance(_attr_of(module, node.target), torch.fx.GraphModule):
            continue  # a cond/while_loop body: shown nested under the node that uses it
        nodes.append(_fx_node(module, node))
    return [_renamed(n, state_names) for n in nodes] if state_names else nodes


def _signature(program: Any) -> Any:
    signature = getattr(program, "graph_signature", None)
    return signature if signature is not None else getattr(program, "meta", {}).get("graph_signature")


def _state_names(program: Any) -> dict[str, str]:
    """Placeholder name → ``self.<state-dict key>`` for parameters, buffers and constants."""
    signature = _signature(program)
    if signature is None:
        return {}
    names = {}
    for table in ("inputs_to_parameters", "inputs_to_buffers", "inputs_to_lifted_tensor_constants"):
        names.update({k: f"self.{v}" for k, v in getattr(signature, table, {}).items()})
    return names


def _renamed(node: GraphNode, names: dict[str, str]) -> GraphNode:
    node.args = [_rename_refs(arg, names) for arg in node.args]
    return node


def _rename_refs(text: str, names: dict[str, str]) -> str:
    return re.sub(r"[A-Za-z_][A-Za-z0-9_]*", lambda m: names.get(m.group(0), m.group(0)), text)


def _parameter_placeholders(program: Any) -> set[str]:
    signature = _signature(program)
    if signature is not None:
        user = set(signature.user_inputs)
        return {spec.arg.name for spec in signature.input_specs
                if hasattr(spec.arg, "name") and spec.arg.name not in user}
    return {n.name for n in program.graph.nodes
            if n.op == "placeholder" and re.match(r"^(p|b|c)_", n.name)}


def _fx_node(module: torch.fx.GraphModule, node: torch.fx.Node) -> GraphNode:
    if node.op == "placeholder":
        return GraphNode(node.name, "input", [], _value_text(node.meta.get("val")))
    if node.op == "output":
        return GraphNode("output", "output", [_arg_text(a) for a in _flat(node.args[0])])
    subgraphs = {}
    for arg in _flat(node.args):
        if isinstance(arg, torch.fx.Node) and arg.op == "get_attr":
            body = _attr_of(module, arg.target)
            if isinstance(body, torch.fx.GraphModule):
                subgraphs[arg.name] = fx_nodes(body)
    args = [_arg_text(a) for a in node.args] + [f"{k}={_arg_text(v)}" for k, v in node.kwargs.items()]
    return GraphNode(
        name=node.name, op=fx_op_name(node), args=args, value=_value_text(node.meta.get("val")),
        location=_location_text(user_location_in(node.meta.get("stack_trace"))),
        rule=node.meta.get(FX_RULE_KEY), subgraphs=subgraphs,
    )


def fx_op_name(node: torch.fx.Node) -> str:
    """``aten::mul.Tensor`` for aten overloads (``.default`` dropped), ``cond`` for HOPs."""
    target = node.target
    if isinstance(target, torch._ops.OpOverload):
        name = target.name()
        return name[: -len(".default")] if name.endswith(".default") else name
    if isinstance(target, str):
        return f"{node.op}:{target}"
    return getattr(target, "__name__", None) or str(target)


def _attr_of(module: torch.nn.Module, target: str) -> Any:
    value: Any = module
    for part in str(target).split("."):
        value = getattr(value, part, None)
    return value


def _flat(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _flat(item)]
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _flat(item)]
    return [value]


def _arg_text(value: Any) -> str:
    if isinstance(value, torch.fx.Node):
        return value.name
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_arg_text(v) for v in value)
        return f"[{inner}]"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, torch.dtype):
        return _DTYPE_SHORT.get(value, str(value))
    return str(value)


def _value_text(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return typed_shape(_DTYPE_SHORT.get(value.dtype, str(value.dtype).replace("torch.", "")), value.shape)
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(_value_text(v) for v in value) + ")"
    if value is None:
        return ""
    return str(value)


# --- TorchScript trace -----------------------------------------------------------------------

_TRACE_HIDDEN = {"prim::Constant", "prim::GetAttr", "prim::ListConstruct", "prim::TupleConstruct",
                 "prim::NumToTensor", "aten::Int", "aten::ScalarImplicit"}


def trace_nodes(graph: torch._C.Graph) -> list[GraphNode]:
    """Readable nodes of a TorchScript graph (``torch.jit.trace(...).inlined_graph``).

    Constants and list constructions are folded into the arguments of the nodes that use them.
    """
    inline: dict[str, str] = {v.debugName(): "self" for v in graph.inputs() if v.type().kind() == "ClassType"}
    nodes = [GraphNode(v.debugName(), "input", [], _trace_type(v)) for v in list(graph.inputs())
             if not v.type().kind() == "ClassType"]
    for node in graph.nodes():
        kind = node.kind()
        if kind in _TRACE_HIDDEN:
            inline[node.output().debugName() if node.outputsSize() == 1 else ""] = _trace_inline(node, inline)
            continue
        outputs = [o.debugName() for o in node.outputs()]
        nodes.append(GraphNode(
            name=", ".join(outputs), op=kind, args=[inline.get(i.debugName(), i.debugName()) for i in node.inputs()],
            value=", ".join(_trace_type(o) for o in node.outputs()),
            location=_location_text(user_location_in_source_range(node.sourceRange())),
        ))
    nodes.append(GraphNode("output", "output", [inline.get(v.debugName(), v.debugName()) for v in graph.outputs()]))
    return nodes


def _trace_inline(node: torch._C.Node, inline: dict[str, str]) -> str:
    kind = node.kind()
    if kind == "prim::Constant":
        try:
            value = node.output().toIValue()
        except Exception:  # noqa: BLE001 - unusual constant kinds: show the type instead
            return str(node.output().type())
        return _arg_text(value) if not isinstance(value, torch.Tensor) else f"tensor{list(value.shape)}"
    if kind in ("prim::ListConstruct", "prim::TupleConstruct"):
        return "[" + ", ".join(inline.get(i.debugName(), i.debugName()) for i in node.inputs()) + "]"
    if kind == "prim::GetAttr":
        owner = node.input().debugName()
        return f"{inline.get(owner, owner)}.{node.s('name')}"
    return inline.get(node.input().debugName(), node.input().debugName()) if node.inputsSize() else kind


def _trace_type(value: torch._C.Value) -> str:
    value_type = value.type()
    sizes = getattr(value_type, "sizes", lambda: None)()
    dtype = getattr(value_type, "dtype", lambda: None)()
    if sizes is not None and dtype is not None:
        return typed_shape(_DTYPE_SHORT.get(dtype, str(dtype)), sizes)
    return str(value_type)


# --- locations -----------------------------------------------------------------------------

def _location_text(where: SourceLocation | None) -> str | None:
    return str(where) if where else None


# --- alignment ------------------------------------------------------------------------------

def diff_node_lists(before: list[GraphNode], after: list[GraphNode]) -> CapturedGraphDiff:
    """Align by op name like a text diff; equal ops with other args or values are "changed"."""
    matcher = difflib.SequenceMatcher(a=[_key(n) for n in before], b=[_key(n) for n in after],
                                      autojunk=False)
    renamed: dict[str, str] = {}
    changes: list[GraphNodeChange] = []
    for tag, b0, b1, a0, a1 in matcher.get_opcodes():
        if tag == "equal":
            for old, new in zip(before[b0:b1], after[a0:a1]):
                changes.append(_compare(old, new, renamed))
                renamed[old.name] = new.name
            continue
        changes.extend(_removed(n) for n in before[b0:b1])
        changes.extend(_added(n) for n in after[a0:a1])
    return CapturedGraphDiff(changes)


def _key(node: GraphNode) -> str:
    op = node.op.split("::")[-1].split(".")[0] if "::" in node.op else node.op
    return op.rstrip("_")


def _compare(before: GraphNode, after: GraphNode, renamed: dict[str, str]) -> GraphNodeChange:
    changes = []
    mapped = [renamed.get(a, a) for a in before.args]
    if before.op != after.op:
        changes.append(f"op {before.op} → {after.op}")
    if mapped != after.args:
        changes.append(f"args ({', '.join(before.args)}) → ({', '.join(after.args)})")
    if before.value and after.value and before.value != after.value:
        changes.append(f"value {before.value} → {after.value}")
    subgraphs = {}
    for (key_before, body_before), (key_after, body_after) in _paired(before.subgraphs, after.subgraphs):
        sub = diff_node_lists(body_before, body_after)
        subgraphs[key_after or key_before] = sub
        if not sub.identical:
            changes.append(f"body {key_after or key_before} changed")
    return GraphNodeChange("changed" if changes else "same", before, after, changes, subgraphs)


def _paired(before: dict, after: dict):
    old, new = list(before.items()), list(after.items())
    for index in range(max(len(old), len(new))):
        yield (old[index] if index < len(old) else (None, [])), (new[index] if index < len(new) else (None, []))


def _added(node: GraphNode) -> GraphNodeChange:
    return GraphNodeChange("added", None, node,
                           subgraphs={k: diff_node_lists([], v) for k, v in node.subgraphs.items()})


def _removed(node: GraphNode) -> GraphNodeChange:
    return GraphNodeChange("removed", node, None,
                           subgraphs={k: diff_node_lists(v, []) for k, v in node.subgraphs.items()})


def iter_graph_changes(diff: CapturedGraphDiff, depth: int = 0):
    """Every node change with its nesting depth, bodies right after their node."""
    for change in diff.nodes:
        yield depth, change
        for sub in change.subgraphs.values():
            yield from iter_graph_changes(sub, depth + 1)
