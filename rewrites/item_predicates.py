"""Predicates read from tensors with ``.item()`` become tensor comparisons again (a graph pass).

A converted ``if t.item() > 0.5:`` reaches the captured graph as a Python-number detour::

    item = aten.item(t)                      # an unbacked symbol (zuf0)
    gt = item > 0.5                          # a SymBool
    mask = aten.full([], gt, dtype=bool)     # (or gt is a cond's predicate)

torch.onnx (2.13) lowers that comparison in float32 with the constant rounded to float32, so
``t.item() > 0.99999999`` is False for t = 1 in ONNX and True in Python. This pass rewrites, in
every graph and subgraph, such a ``full`` or cond predicate into a float64 tensor comparison,
as Python compares; the ``item`` (and its symbol, which the exporter's passes handle poorly
inside subgraphs) goes when nothing else reads it. Only comparisons of ``item`` values with
each other or with constants, and ``and``/``or``/``not`` of those, are rewritten: arithmetic on
the numbers stays as written. It belongs to control-flow conversion: without it
(``control_flow=False``) the pass does nothing; ``--disable item-predicate-to-tensor`` turns it off.

Example::

    >>> import torch, fxport
    >>> class Net(torch.nn.Module):
    ...     def forward(self, x):
    ...         return torch.full([], x.max().item() > 0.99999999)
    >>> program = torch.export.export(Net(), (torch.ones(3),))
    >>> records = []
    >>> program = fxport.rules.resolve(disable=[]).apply_graph_rules(program, records)
    >>> [r.rule for r in records], program.module()(torch.ones(3)).item()
    (['item-predicate-to-tensor'], True)
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy
import torch
import torch.fx

import fxport
from fxport.rewrites._graph import Caller

aten = torch.ops.aten

_COMPARISONS = {
    operator.gt: (aten.gt, operator.lt), operator.lt: (aten.lt, operator.gt),
    operator.ge: (aten.ge, operator.le), operator.le: (aten.le, operator.ge),
    operator.eq: (aten.eq, operator.eq), operator.ne: (aten.ne, operator.ne),
}
_LOGICAL = {operator.and_: aten.logical_and.default, operator.or_: aten.logical_or.default}
_NUMBERS = (bool, int, float)


@fxport.rules.graph_pass(name="item-predicate-to-tensor", priority=fxport.rules.BUILTIN_PRIORITY)
def item_predicate_to_tensor(graph_module: torch.fx.GraphModule, context) -> list:
    """A converted `if t.item() > c:` compares tensors in float64, as Python does, not float32."""
    if not context.control_flow:
        return []  # part of control-flow conversion: the model's own code is left as captured
    graph = graph_module.graph
    records, changed = [], False
    for node in list(graph.nodes):
        slot = _predicate_slot(node)
        if slot is None:
            continue
        changed = True  # a refused predicate may leave half-built nodes: clean up below
        with graph.inserting_before(node):
            tensor = _PredicateBuilder(graph).build(slot(node))
        if tensor is None:
            continue
        records.append(context.record(
            node, "a comparison of .item() numbers became a tensor comparison (float64, as Python compares)",
            tier="control-flow"))
        _replace(node, tensor, graph)
    if changed:
        graph.eliminate_dead_code()
    return records


def _predicate_slot(node: torch.fx.Node):
    """A getter for the SymBool a ``full([], sym)`` or a cond predicate reads, else None."""
    if node.op != "call_function":
        return None
    if node.target is aten.full.default and node.args[0] in ([], ()) and isinstance(node.args[1], torch.fx.Node):
        return lambda n: n.args[1]
    if node.target is torch.ops.higher_order.cond and isinstance(node.args[0], torch.fx.Node) \
            and not isinstance(node.args[0].meta.get("val"), torch.Tensor):
        return lambda n: n.args[0]
    return None


def _replace(node: torch.fx.Node, tensor: torch.fx.Node, graph: torch.fx.Graph) -> None:
    if node.target is torch.ops.higher_order.cond:
        node.args = (tensor,) + tuple(node.args[1:])
        return
    dtype = node.kwargs.get("dtype")
    if dtype is not None and dtype != torch.bool:
        with graph.inserting_before(node):
            tensor = Caller(graph)(aten._to_copy.default, (tensor,), {"dtype": dtype})
    node.replace_all_uses_with(tensor)
    graph.erase_node(node)


class _PredicateBuilder:
    """Builds the tensor form of a SymBool expression over ``item`` nodes and constants."""

    def __init__(self, graph: torch.fx.Graph):
        self.graph = graph
        self.call = Caller(graph)

    def build(self, value: Any) -> torch.fx.Node | None:
        if not isinstance(value, torch.fx.Node) or value.op != "call_function":
            return None
        if value.target in _COMPARISONS and len(value.args) == 2:
            return self._comparison(value)
        if value.target in _LOGICAL and len(value.args) == 2:
            left, right = (self.build(a) for a in value.args)
            return None if left is None or right is None else self.call(_LOGICAL[value.target], (left, right))
        if value.target is torch.sym_not and len(value.args) == 1:
            inner = self.build(value.args[0])
            return None if inner is None else self.call(aten.logical_not.default, (inner,))
        return None

    def _comparison(self, node: torch.fx.Node) -> torch.fx.Node | None:
        left, right = node.args
        sides = [_item_source(left), _item_source(right)]
        if sides[0] is None and sides[1] is None:
            return None
        if any(s is None and not isinstance(v, _NUMBERS) for s, v in zip(sides, (left, right))):
            return None
        dtype = self._common_dtype([left, right], sides)
        if dtype is None:
            return None
        op, flipped = _COMPARISONS[node.target]
        if sides[0] is None:  # constant on the left: compare the other way round
            left, right, sides = right, left, sides[::-1]
            op = _COMPARISONS[flipped][0]
        b = self._constant(right, dtype) if sides[1] is None else self._as_scalar_tensor(sides[1], dtype)
        if b is None:
            return None
        return self.call(op.Tensor, (self._as_scalar_tensor(sides[0], dtype), b))

    def _constant(self, value, dtype: torch.dtype) -> torch.fx.Node | None:
        """``value`` as a 0-d tensor of ``dtype``, exactly.

        torch.onnx (2.13) writes every Python float constant as float32, so a float64 constant
        is built as the sum of float32-exact pieces (24 bits each; three cover a double's 53).
        """
        if dtype != torch.float64 or not math.isfinite(value):
            return self.call(aten.scalar_tensor.default, (value,), {"dtype": dtype})
        if isinstance(value, int) and abs(value) > 2 ** 53:
            return None  # Python compares big ints with floats exactly; float64 cannot
        pieces, rest = [], float(value)
        while rest != 0.0 and len(pieces) < 3:
            piece = float(numpy.float32(rest))
            if not math.isfinite(piece) or piece == 0.0:
                return None  # outside float32's range: no exact split
            pieces.append(piece)
            rest -= piece
        if rest != 0.0:
            return None
        total = self.call(aten.scalar_tensor.default, (pieces[0] if pieces else 0.0,), {"dtype": dtype})
        for piece in pieces[1:]:
            total = self.call(aten.add.Tensor, (total, self.call(aten.scalar_tensor.default, (piece,), {"dtype": dtype})))
        return total

    @staticmethod
    def _common_dtype(values, sources) -> torch.dtype | None:
        dtypes = []
        for value, source in zip(values, sources):
            if source is not None:
                dtypes.append(source.meta["val"].dtype)
            else:
                dtypes.append({bool: torch.bool, int: torch.int64, float: torch.float64}[type(value)])
        if any(d.is_complex for d in dtypes):
            return None
        if any(d.is_floating_point for d in dtypes):
            return torch.float64  # Python compares floats in double precision
        if all(d == torch.bool for d in dtypes):
            return torch.bool
        return torch.int64

    def _as_scalar_tensor(self, source: torch.fx.Node, dtype: torch.dtype) -> torch.fx.Node:
        scalar = source if source.meta["val"].dim() == 0 else self.call(aten.reshape.default, (source, []))
        return self.call(aten._to_copy.default, (scalar,), {"dtype": dtype})


def _item_source(value: Any) -> torch.fx.Node | None:
    """The tensor an ``aten.item`` node reads (a one-element tensor), else None."""
    if isinstance(value, torch.fx.Node) and value.op == "call_function" and value.target is aten.item.default:
        source = value.args[0]
        if isinstance(source, torch.fx.Node) and isinstance(source.meta.get("val"), torch.Tensor):
            return source
    return None
