"""Structural diff of two ONNX graphs: op counts, nodes, attributes, initializers, inputs/outputs.

Nodes are matched by name first (the dynamo exporter names nodes after their FX node, so names
are stable run to run), then by topology (same op type fed by already-matched values), then by
op type in order. Matched nodes whose op type, inputs, attributes or subgraphs differ are
"changed"; If/Loop/Scan bodies are diffed recursively. The order is the "after" graph's, with
removed nodes placed where they were, so the output is reproducible run to run.

Size: over 400 lines because the four matching passes share one value map and must stay in one
order, and the readable node views they compare are theirs alone; splitting them would spread
one algorithm over two files.

Example::

    >>> import torch
    >>> from fxport.diff.onnx_diff import diff_onnx
    >>> from fxport.lower.lowering import lower
    >>> def exported(module):
    ...     return lower(torch.export.export(module, (torch.randn(2, 3),)))
    >>> diff = diff_onnx(exported(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh())),
    ...                  exported(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Sigmoid())))
    >>> diff.summary()
    {'added': 1, 'removed': 1, 'changed': 0, 'same': 1}
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from typing import Iterable

import onnx

from fxport.common.frames import user_location_in
from fxport.common.provenance import EXPORTER_FX_NODE_KEY, EXPORTER_STACK_KEY, ONNX_RULE_KEY, fx_node_name, metadata
from fxport.report.result import count_ops
from fxport.common.shapes import typed_shape


@dataclasses.dataclass
class NodeView:
    """One ONNX node in readable form."""

    name: str
    op_type: str
    inputs: list[str]
    outputs: list[str]
    attributes: dict[str, str]
    rule: str | None = None
    location: str | None = None
    subgraphs: dict[str, onnx.GraphProto] = dataclasses.field(default_factory=dict, repr=False)

    def signature(self) -> str:
        """``outputs = OpType(inputs) {attrs}``, the line a node diff shows."""
        attrs = ", ".join(f"{k}={v}" for k, v in self.attributes.items())
        text = f"{', '.join(self.outputs)} = {self.op_type}({', '.join(self.inputs)})"
        return text + (f" {{{attrs}}}" if attrs else "")

    def to_dict(self) -> dict:
        return {"name": self.name, "op_type": self.op_type, "inputs": self.inputs,
                "outputs": self.outputs, "attributes": self.attributes, "rule": self.rule,
                "location": self.location}


@dataclasses.dataclass
class NodeChange:
    """A node of either graph and what happened to it: added, removed, changed or same."""

    status: str
    before: NodeView | None
    after: NodeView | None
    changes: list[str] = dataclasses.field(default_factory=list)
    subgraphs: dict[str, "OnnxGraphDiff"] = dataclasses.field(default_factory=dict)

    @property
    def node(self) -> NodeView:
        return self.after or self.before

    def to_dict(self) -> dict:
        return {
            "status": self.status,
            "before": self.before.to_dict() if self.before else None,
            "after": self.after.to_dict() if self.after else None,
            "changes": self.changes,
            "subgraphs": {k: v.to_dict() for k, v in self.subgraphs.items()},
        }


@dataclasses.dataclass
class OpCountDelta:
    op: str
    before: int
    after: int

    @property
    def delta(self) -> int:
        return self.after - self.before

    def to_dict(self) -> dict:
        return {"op": self.op, "before": self.before, "after": self.after, "delta": self.delta}


@dataclasses.dataclass
class ValueChange:
    """A graph input, output or initializer: its description before and after (None = absent)."""

    kind: str
    name: str
    before: str | None
    after: str | None

    @property
    def status(self) -> str:
        if self.before is None:
            return "added"
        if self.after is None:
            return "removed"
        return "same" if self.before == self.after else "changed"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "name": self.name, "status": self.status,
                "before": self.before, "after": self.after}


@dataclasses.dataclass
class OnnxGraphDiff:
    """The diff of two ONNX graphs (a main graph or an If/Loop/Scan body)."""

    name: str
    op_counts: list[OpCountDelta]
    nodes: list[NodeChange]
    values: list[ValueChange]

    def summary(self) -> dict[str, int]:
        """Node counts per status over the whole graph, subgraphs included."""
        totals = {"added": 0, "removed": 0, "changed": 0, "same": 0}
        for change in self.nodes:
            totals[change.status] += 1
            for sub in change.subgraphs.values():
                for status, count in sub.summary().items():
                    totals[status] += count
        return totals

    def changed_values(self) -> list[ValueChange]:
        return [v for v in self.values if v.status != "same"]

    def op_deltas(self) -> list[OpCountDelta]:
        return [c for c in self.op_counts if c.delta]

    @property
    def identical(self) -> bool:
        summary = self.summary()
        return not (summary["added"] or summary["removed"] or summary["changed"]
                    or self.changed_values())

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "summary": self.summary(),
            "op_counts": [c.to_dict() for c in self.op_counts],
            "values": [v.to_dict() for v in self.values],
            "nodes": [n.to_dict() for n in self.nodes],
        }


EMPTY_GRAPH = onnx.GraphProto(name="(none)")


def diff_onnx(before: onnx.ModelProto | onnx.GraphProto | None,
              after: onnx.ModelProto | onnx.GraphProto | None) -> OnnxGraphDiff:
    """Diff two ONNX models or graphs; None stands for an empty graph.

    >>> from onnx import helper, TensorProto
    >>> def model(op):
    ...     x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    ...     y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    ...     return helper.make_graph([helper.make_node(op, ["x"], ["y"], name="n")], "g", [x], [y])
    >>> d = diff_onnx(model("Relu"), model("Tanh"))
    >>> [(c.op, c.delta) for c in d.op_deltas()], d.nodes[0].status, d.nodes[0].changes
    ([('Relu', -1), ('Tanh', 1)], 'changed', ['op Relu → Tanh'])
    """
    return diff_graphs(_graph_of(before), _graph_of(after))


def _graph_of(value) -> onnx.GraphProto:
    if value is None:
        return EMPTY_GRAPH
    return value.graph if isinstance(value, onnx.ModelProto) else value


def diff_graphs(before: onnx.GraphProto, after: onnx.GraphProto) -> OnnxGraphDiff:
    """Diff two graphs: see the module docstring for how nodes are matched."""
    before_nodes = [node_view(n) for n in before.node]
    after_nodes = [node_view(n) for n in after.node]
    value_map = _initial_value_map(before, after)
    pairs = match_nodes(before_nodes, after_nodes, value_map)
    return OnnxGraphDiff(
        name=after.name or before.name,
        op_counts=op_count_deltas(before, after),
        nodes=_ordered_changes(before_nodes, after_nodes, pairs, value_map),
        values=value_changes(before, after),
    )


# --- readable nodes -------------------------------------------------------------------------

def op_name(node: onnx.NodeProto) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"


def node_view(node: onnx.NodeProto) -> NodeView:
    props = metadata(node)
    attributes, subgraphs = {}, {}
    for attr in sorted(node.attribute, key=lambda a: a.name):
        if attr.type == onnx.AttributeProto.GRAPH:
            subgraphs[attr.name] = attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            for index, sub in enumerate(attr.graphs):
                subgraphs[f"{attr.name}[{index}]"] = sub
        else:
            attributes[attr.name] = attribute_text(attr)
    return NodeView(
        name=node.name, op_type=op_name(node), inputs=list(node.input), outputs=list(node.output),
        attributes=attributes, rule=props.get(ONNX_RULE_KEY), location=_user_line(props.get(EXPORTER_STACK_KEY)),
        subgraphs=subgraphs,
    )


def attribute_text(attr: onnx.AttributeProto) -> str:
    """A short, stable rendering of an attribute value (tensors as dtype[shape] plus small values)."""
    value = onnx.helper.get_attribute_value(attr)
    if isinstance(value, onnx.TensorProto):
        return tensor_text(value, with_values=True)
    if isinstance(value, bytes):
        return repr(value.decode("utf-8", "replace"))
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return "[" + ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value) + "]"
    return str(value)


def tensor_text(tensor: onnx.TensorProto, with_values: bool = False) -> str:
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).name if tensor.data_type else "?"
    text = typed_shape(dtype, tensor.dims)
    count = 1
    for dim in tensor.dims:
        count *= dim
    if with_values and count <= 8 and tensor.data_location != onnx.TensorProto.EXTERNAL:
        values = onnx.numpy_helper.to_array(tensor).ravel().tolist()
        text += " " + ("[" + ", ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in values) + "]")
    return text


def _user_line(stack_trace: str | None) -> str | None:
    """The innermost user ``file:line`` of an exporter stack-trace string."""
    where = user_location_in(stack_trace)
    return str(where) if where else None


# --- op counts, inputs/outputs, initializers -----------------------------------------------

def op_count_deltas(before: onnx.GraphProto, after: onnx.GraphProto) -> list[OpCountDelta]:
    """Per op type (subgraphs included): count before and after, sorted by op name."""
    counts_before, counts_after = count_ops(before), count_ops(after)
    ops = sorted(set(counts_before) | set(counts_after))
    return [OpCountDelta(op, counts_before.get(op, 0), counts_after.get(op, 0)) for op in ops]


def value_info_text(value: onnx.ValueInfoProto) -> str:
    """``float32[batch, 3]`` for a graph input/output."""
    tensor_type = value.type.tensor_type
    if not value.type.HasField("tensor_type"):
        return value.type.WhichOneof("value") or "?"
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor_type.elem_type).name if tensor_type.elem_type else "?"
    if not tensor_type.HasField("shape"):
        return f"{dtype}[?]"
    dims = [d.dim_param or (str(d.dim_value) if d.HasField("dim_value") else "?") for d in tensor_type.shape.dim]
    return typed_shape(dtype, dims)


def value_changes(before: onnx.GraphProto, after: onnx.GraphProto) -> list[ValueChange]:
    """Graph inputs, outputs (matched by position) and initializers (by name)."""
    changes = []
    for kind in ("input", "output"):
        old, new = list(getattr(before, kind)), list(getattr(after, kind))
        for index in range(max(len(old), len(new))):
            a = old[index] if index < len(old) else None
            b = new[index] if index < len(new) else None
            name = b.name if b is not None else a.name
            if a is not None and b is not None and a.name != b.name:
                name = f"{a.name} → {b.name}"
            changes.append(ValueChange(kind, name, value_info_text(a) if a else None,
                                       value_info_text(b) if b else None))
    old_init = {t.name: tensor_text(t) for t in before.initializer}
    new_init = {t.name: tensor_text(t) for t in after.initializer}
    for name in sorted(set(old_init) | set(new_init)):
        changes.append(ValueChange("initializer", name, old_init.get(name), new_init.get(name)))
    return changes


# --- matching ------------------------------------------------------------------------------

def _initial_value_map(before: onnx.GraphProto, after: onnx.GraphProto) -> dict[str, str]:
    """before value name → after value name for graph inputs (by position) and shared names."""
    mapping = {a.name: b.name for a, b in zip(before.input, after.input)}
    shared = {t.name for t in before.initializer} & {t.name for t in after.initializer}
    mapping.update({name: name for name in shared})
    mapping[""] = ""  # omitted optional input
    return mapping


def match_nodes(before: list[NodeView], after: list[NodeView], value_map: dict[str, str]) -> dict[int, int]:
    """after index → before index; also extends ``value_map`` with matched nodes' outputs."""
    pairs: dict[int, int] = {}
    _match_by_name(before, after, pairs)
    for a_index in sorted(pairs):
        _map_outputs(before[pairs[a_index]], after[a_index], value_map)
    for _ in range(4):  # each pass maps more values, which lets the next pass pair more nodes
        matched = len(pairs)
        _match_by_topology(before, after, pairs, value_map)
        _match_by_shared_inputs(before, after, pairs, value_map)
        if len(pairs) == matched:
            break
    _match_by_op_order(before, after, pairs, value_map)
    return pairs


def _match_by_name(before, after, pairs) -> None:
    index_by_name = {}
    for index, node in enumerate(before):
        if node.name:
            index_by_name[node.name] = None if node.name in index_by_name else index
    taken = set()
    for a_index, node in enumerate(after):
        b_index = index_by_name.get(node.name) if node.name else None
        if b_index is not None and b_index not in taken:
            pairs[a_index] = b_index
            taken.add(b_index)


def _match_by_topology(before, after, pairs, value_map) -> None:
    """Pair unmatched nodes with the same op type fed by the same (already matched) values.

    One pass in the after graph's order, which is topological, so producers pair before consumers.
    """
    taken = set(pairs.values())
    consumers: dict[str, list[int]] = {}
    for b_index, node in enumerate(before):
        for value in node.inputs[:1]:
            consumers.setdefault(value, []).append(b_index)
    after_to_before = {new: old for old, new in value_map.items()}
    for a_index, node in enumerate(after):
        if a_index in pairs:
            continue
        if node.inputs and node.inputs[0] in after_to_before:
            for b_index in consumers.get(after_to_before[node.inputs[0]], []):
                candidate = before[b_index]
                if (b_index not in taken and candidate.op_type == node.op_type
                        and [value_map.get(v) for v in candidate.inputs] == node.inputs):
                    pairs[a_index] = b_index
                    taken.add(b_index)
                    break
        if a_index in pairs:
            old = before[pairs[a_index]]
            _map_outputs(old, node, value_map)
            for old_value, new_value in zip(old.outputs, node.outputs):
                after_to_before.setdefault(new_value, old_value)


def _match_by_shared_inputs(before, after, pairs, value_map) -> None:
    """Pair unmatched nodes of one op type that read some of the same values (e.g. a weight)."""
    taken = set(pairs.values())
    readers: dict[tuple[str, str], list[int]] = {}
    for b_index, node in enumerate(before):
        if b_index not in taken:
            for value in node.inputs:
                if value and value in value_map:
                    readers.setdefault((node.op_type, value_map[value]), []).append(b_index)
    for a_index, node in enumerate(after):
        if a_index in pairs:
            continue
        scores: dict[int, int] = {}
        for value in node.inputs:
            for b_index in readers.get((node.op_type, value), []):
                if b_index not in taken:
                    scores[b_index] = scores.get(b_index, 0) + 1
        if scores:
            b_index = min(scores, key=lambda i: (-scores[i], i))
            pairs[a_index] = b_index
            taken.add(b_index)
            _map_outputs(before[b_index], node, value_map)


def _match_by_op_order(before, after, pairs, value_map) -> None:
    """Align the still-unmatched nodes by op-type sequence (like a text diff of op names)."""
    taken = set(pairs.values())
    rest_before = [i for i in range(len(before)) if i not in taken]
    rest_after = [i for i in range(len(after)) if i not in pairs]
    matcher = difflib.SequenceMatcher(a=[before[i].op_type for i in rest_before],
                                      b=[after[i].op_type for i in rest_after], autojunk=False)
    for block in matcher.get_matching_blocks():
        for offset in range(block.size):
            b_index, a_index = rest_before[block.a + offset], rest_after[block.b + offset]
            pairs[a_index] = b_index
            _map_outputs(before[b_index], after[a_index], value_map)


def _map_outputs(before: NodeView, after: NodeView, value_map: dict[str, str]) -> None:
    for old, new in zip(before.outputs, after.outputs):
        value_map.setdefault(old, new)


def _ordered_changes(before, after, pairs, value_map) -> list[NodeChange]:
    """Changes in the after graph's order; removed nodes follow the partner of their matched
    predecessor in the before graph, so a replacement reads as removals then additions."""
    partner_of_before = {b: a for a, b in pairs.items()}
    removed_after: dict[int, list[int]] = {}
    anchor = -1
    for b_index in range(len(before)):
        if b_index in partner_of_before:
            anchor = partner_of_before[b_index]
        else:
            removed_after.setdefault(anchor, []).append(b_index)
    changes = [_removed(before[i]) for i in removed_after.get(-1, [])]
    for a_index, node in enumerate(after):
        if a_index in pairs:
            changes.append(compare_nodes(before[pairs[a_index]], node, value_map))
        else:
            changes.append(_added(node))
        changes.extend(_removed(before[i]) for i in removed_after.get(a_index, []))
    return changes


def _added(node: NodeView) -> NodeChange:
    subgraphs = {name: diff_graphs(EMPTY_GRAPH, g) for name, g in node.subgraphs.items()}
    return NodeChange("added", None, node, subgraphs=subgraphs)


def _removed(node: NodeView) -> NodeChange:
    subgraphs = {name: diff_graphs(g, EMPTY_GRAPH) for name, g in node.subgraphs.items()}
    return NodeChange("removed", node, None, subgraphs=subgraphs)


def compare_nodes(before: NodeView, after: NodeView, value_map: dict[str, str]) -> NodeChange:
    """What differs between two matched nodes: op type, inputs, attributes, subgraph bodies."""
    changes = []
    if before.op_type != after.op_type:
        changes.append(f"op {before.op_type} → {after.op_type}")
    mapped_inputs = [value_map.get(v, v) for v in before.inputs]
    if mapped_inputs != after.inputs:
        changes.append(f"inputs ({', '.join(before.inputs)}) → ({', '.join(after.inputs)})")
    for key in sorted(set(before.attributes) | set(after.attributes)):
        old, new = before.attributes.get(key), after.attributes.get(key)
        if old != new:
            changes.append(f"{key}: {old if old is not None else '(unset)'} → {new if new is not None else '(unset)'}")
    subgraphs = {}
    for key in sorted(set(before.subgraphs) | set(after.subgraphs)):
        sub = diff_graphs(before.subgraphs.get(key, EMPTY_GRAPH), after.subgraphs.get(key, EMPTY_GRAPH))
        subgraphs[key] = sub
        if not sub.identical:
            changes.append(f"subgraph {key} changed")
    return NodeChange("changed" if changes else "same", before, after, changes, subgraphs)


def iter_changes(diff: OnnxGraphDiff, depth: int = 0) -> Iterable[tuple[int, NodeChange]]:
    """Every node change with its nesting depth, subgraph bodies right after their node."""
    for change in diff.nodes:
        yield depth, change
        for sub in change.subgraphs.values():
            yield from iter_changes(sub, depth + 1)


def nodes_by_rule(model: onnx.ModelProto | None) -> dict[str, list[str]]:
    """Rule name → names of the ONNX nodes it produced (from ``fxport.rule`` metadata)."""
    from fxport.report.result import iter_nodes

    found: dict[str, list[str]] = {}
    if model is None:
        return found
    for node in iter_nodes(model.graph):
        view = node_view(node)
        if view.rule:
            found.setdefault(view.rule, []).append(view.name)
    return found



# --- the stock graph an op rule stood in for ----------------------------------------------------

_FX_TARGET = re.compile(r"\[target=(?:torch\.ops\.)?([\w.]+?)(?:\.default)?\]")


def with_untranslated_ops(model: onnx.ModelProto, rules: set[str]) -> onnx.ModelProto | None:
    """``model`` with each group of nodes an op rule produced folded back into one ``aten::op`` node.

    The stock exporter stops at an op without a translation, so there is no stock ONNX model to
    compare with; this is the graph it would have made had it left those ops untranslated.
    Returns None when no node of the main graph carries one of ``rules``.
    """
    groups: dict[str, list[int]] = {}
    for index, node in enumerate(model.graph.node):
        props = metadata(node)
        if props.get(ONNX_RULE_KEY) in rules and props.get(EXPORTER_FX_NODE_KEY):
            groups.setdefault(fx_node_name(props).lstrip("%"), []).append(index)
    if not groups:
        return None
    folded = onnx.ModelProto()
    folded.CopyFrom(model)
    nodes = list(model.graph.node)
    consumed_outside = _values_used_outside(model.graph, groups)
    first_of = {members[0]: fx_name for fx_name, members in groups.items()}
    dropped = {i for members in groups.values() for i in members}
    private = _initializers_only_groups_read(model.graph, dropped)
    del folded.graph.node[:]
    kept_initializers = [t for t in model.graph.initializer if t.name not in private]
    del folded.graph.initializer[:]
    folded.graph.initializer.extend(kept_initializers)
    for index, node in enumerate(nodes):
        if index in first_of:
            folded.graph.node.append(_stand_in(first_of[index], [nodes[i] for i in groups[first_of[index]]],
                                               consumed_outside, private))
        elif index not in dropped:
            folded.graph.node.append(node)
    return folded


def _values_used_outside(graph: onnx.GraphProto, groups: dict[str, list[int]]) -> set[str]:
    member_of = {i: name for name, members in groups.items() for i in members}
    used = {o.name for o in graph.output}
    for index, node in enumerate(graph.node):
        for inner in ([node] if index not in member_of else []):
            used.update(inner.input)
        for attr in node.attribute:  # values captured by subgraph bodies
            for sub in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)):
                from fxport.report.result import iter_nodes

                for sub_node in iter_nodes(sub):
                    used.update(sub_node.input)
    return used


def _initializers_only_groups_read(graph: onnx.GraphProto, group_members: set[int]) -> set[str]:
    """Initializers (the translation's constants) that no node outside the folded groups reads."""
    from fxport.report.result import iter_nodes

    read_by_group: set[str] = set()
    read_elsewhere = {o.name for o in graph.output}
    for index, node in enumerate(graph.node):
        target = read_by_group if index in group_members else read_elsewhere
        target.update(node.input)
        for attr in node.attribute:
            for sub in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)):
                for sub_node in iter_nodes(sub):
                    target.update(sub_node.input)
    initializers = {t.name for t in graph.initializer}
    return (read_by_group & initializers) - read_elsewhere


def _stand_in(fx_name: str, members: list[onnx.NodeProto], used_outside: set[str],
              private: set[str] = frozenset()) -> onnx.NodeProto:
    produced = {o for node in members for o in node.output} | set(private)
    inputs = []
    for node in members:
        inputs += [v for v in node.input if v and v not in produced and v not in inputs]
    outputs = [o for node in members for o in node.output if o in used_outside]
    props = metadata(members[0])
    match = _FX_TARGET.search(props.get(EXPORTER_FX_NODE_KEY, ""))
    op = match.group(1).split(".")[-1] if match else fx_name
    stand_in = onnx.helper.make_node(op, inputs, outputs, name=f"untranslated_{fx_name}", domain="aten")
    for key in (EXPORTER_STACK_KEY, EXPORTER_FX_NODE_KEY):
        if key in props:
            stand_in.metadata_props.add(key=key, value=props[key])
    return stand_in
