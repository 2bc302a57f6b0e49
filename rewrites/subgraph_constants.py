"""Tensor constants inside branches and loop bodies become ops that build them (a graph pass).

``torch.tensor(1.0)``, ``torch.tensor([0, 3])`` or a masked assignment of a number
(``h[h < 0] = 1.0``, an ``index_put`` of a 0-d constant) inside a ``torch.cond`` branch, a
``while_loop`` body or a scan body reaches the captured program as a tensor attribute of that
subgraph (``get_attr _tensor_constant0``, usually followed by ``lift_fresh_copy``). The dynamo
exporter of torch 2.13 cannot decompose such a subgraph ("Attempting to use FunctionalTensor on
its own"), so a converted loop or branch that creates a constant would be refused. This pass
rewrites each such constant, in every subgraph, into ``full`` (every element equal) or a
``stack`` of ``full`` scalars reshaped to the constant's shape (up to :data:`MAX_ELEMENTS`
elements); ONNX's constant folding turns either back into one initializer. Values are exact,
signed zeros included: the exporter writes Python float arguments as float32, so a float64
value is built from float32-exact parts (mantissa pieces times powers of two). A larger
constant is refused in one line at the loop or branch (the line of the constant itself is not
kept in the body's graph). ``--disable subgraph-constants`` turns the pass off. The top-level graph is left alone (its
constants are lifted to program inputs, which the exporter handles).

Example::

    >>> import torch, fxport
    >>> class Net(torch.nn.Module):
    ...     def forward(self, x):
    ...         return torch.cond(x.sum() > 0, lambda x: x + torch.tensor([1.0, 2.0]), lambda x: x - 1, (x,))
    >>> program = torch.export.export(Net(), (torch.randn(2),))
    >>> records = []
    >>> program = fxport.rules.resolve().apply_graph_rules(program, records)
    >>> [r.rule for r in records if r.rule == "subgraph-constants"]
    ['subgraph-constants']
    >>> program.module()(torch.ones(2)).tolist()
    [2.0, 3.0]
"""

from __future__ import annotations

import math
from typing import Any

import numpy
import torch
import torch.fx

import fxport
from fxport.rewrites._graph import Caller

aten = torch.ops.aten

#: The largest constant (in elements) built from scalars; a larger one is refused.
MAX_ELEMENTS = 256


@fxport.rules.graph_pass(name="subgraph-constants", priority=fxport.rules.BUILTIN_PRIORITY)
def subgraph_constants(graph_module: torch.fx.GraphModule, context) -> list:
    """A tensor constant in a branch or loop body is built by ops there (the exporter cannot lift it)."""
    if not context.is_subgraph:
        return []
    graph = graph_module.graph
    records, replaced = [], set()
    for node in list(graph.nodes):
        value = _constant_of(graph_module, node)
        if value is None:
            continue
        if value.numel() > MAX_ELEMENTS and not _uniform(value):
            raise fxport.ControlFlowError(
                f"a tensor constant of {value.numel()} elements is created inside the converted loop or branch",
                where=context.location(node),
                hint="create it once outside the branch or loop (or register it as a buffer in __init__)")
        with graph.inserting_before(node):
            built = _Builder(graph, value.device).tensor(value)
        replaced.add(str(node.target))
        _replace_constant(node, built, graph)
        records.append(context.record(
            node, f"a {tuple(value.shape)} {str(value.dtype).removeprefix('torch.')} constant in "
                  f"{context.path} is built there by ops", new_nodes=[built]))
    if records:
        graph.eliminate_dead_code()
        still_read = {str(n.target) for n in graph.nodes if n.op == "get_attr"}
        for name in replaced - still_read:
            delattr(graph_module, name)
    return records


def _constant_of(graph_module: torch.fx.GraphModule, node: torch.fx.Node) -> torch.Tensor | None:
    if node.op != "get_attr":
        return None
    value = getattr(graph_module, str(node.target), None)
    if not isinstance(value, torch.Tensor) or isinstance(value, torch.nn.Parameter):
        return None
    if value.is_complex() or value.layout != torch.strided or value.is_quantized:
        return None
    return value.detach()


def _uniform(value: torch.Tensor) -> bool:
    """Every element the same value, the sign of zero included (NaN never counts as equal)."""
    flat = value.reshape(-1)
    if flat.numel() == 0 or not bool((flat == flat[0]).all()):
        return False
    return not value.is_floating_point() or bool((torch.signbit(flat) == torch.signbit(flat[0])).all())


def _replace_constant(node: torch.fx.Node, built: torch.fx.Node, graph: torch.fx.Graph) -> None:
    """Readers of the constant read ``built``; each fresh copy of it (``lift_fresh_copy``) becomes
    a copy of ``built`` of its own, so an in-place write into one copy reaches no other reader."""
    for user in list(node.users):
        if user.op == "call_function" and user.target is aten.lift_fresh_copy.default:
            with graph.inserting_before(user):
                copy = graph.call_function(aten.clone.default, (built,))
            copy.meta.update({k: v for k, v in built.meta.items() if k == "val"})
            _drop_detach(user, copy, graph)
    node.replace_all_uses_with(built)
    graph.erase_node(node)


def _drop_detach(node: torch.fx.Node, value: torch.fx.Node, graph: torch.fx.Graph) -> None:
    """Readers of ``node`` and of its ``detach``/``detach_`` (no-ops here) read ``value``."""
    for user in list(node.users):
        if user.op == "call_function" and user.target in (aten.detach_.default, aten.detach.default):
            _drop_detach(user, value, graph)
    node.replace_all_uses_with(value)
    graph.erase_node(node)


class _Builder:
    """Adds the nodes that build a constant, with fake values in ``meta["val"]``."""

    def __init__(self, graph: torch.fx.Graph, device: torch.device):
        self.call = Caller(graph)
        self.device = device

    def tensor(self, value: torch.Tensor) -> torch.fx.Node:
        shape = list(value.shape)
        if value.numel() > 0 and _uniform(value):
            return self.scalar(value.reshape(-1)[0].item(), value.dtype, shape)
        if value.numel() == 0:
            return self.call(aten.empty.memory_format, (shape,), {"dtype": value.dtype, "device": self.device})
        scalars = [self.scalar(v, value.dtype, []) for v in value.reshape(-1).tolist()]
        return self.call(aten.reshape.default, (self.call(aten.stack.default, (scalars,)), shape))

    def scalar(self, number: Any, dtype: torch.dtype, shape: list[int]) -> torch.fx.Node:
        """``full(shape, number)``; a float64 number exactly: its mantissa as float32-exact pieces
        summed, times its power of two in float32-exact steps (the exporter writes Python float
        arguments as float32, which would round 0.1 and overflow 1e300)."""
        if isinstance(number, float) and number == 0.0 and math.copysign(1.0, number) < 0:
            return self.call(aten.neg.default, (self._full(shape, 0.0, dtype),))  # -0.0 as written is lost
        if dtype != torch.float64 or not math.isfinite(number) or number == 0.0:
            return self._full(shape, number, dtype)
        mantissa, exponent = math.frexp(float(number))  # number == mantissa * 2**exponent exactly
        pieces, rest = [], mantissa
        while rest != 0.0:  # at most 3 pieces of 24 bits cover a double's 53
            pieces.append(float(numpy.float32(rest)))
            rest -= pieces[-1]
        total = self._full(shape, pieces[0], dtype)
        for piece in pieces[1:]:
            total = self.call(aten.add.Tensor, (total, self._full(shape, piece, dtype)))
        while exponent != 0:  # powers of two up to 2**100 are exact in float32; the products exact in float64
            step = max(-100, min(100, exponent))
            total = self.call(aten.mul.Tensor, (total, self._full(shape, 2.0 ** step, dtype)))
            exponent -= step
        return total

    def _full(self, shape: list[int], number: Any, dtype: torch.dtype) -> torch.fx.Node:
        return self.call(aten.full.default, (shape, number), {"dtype": dtype, "device": self.device})
