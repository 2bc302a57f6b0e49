"""Input domains: what values each model input may take, derived from the captured program.

Verification draws fresh inputs; drawn naively they leave the model's domain (token ids past
the vocabulary, attention masks with rows where every position is padding, unsorted
boundaries for ``searchsorted``) and a correct model is refused. This module reads the
captured program and the example to say, per tensor input, what a valid value looks like:

- **index**: the input (through views, casts and slices) indexes a table: ``embedding``'s
  weight rows, ``index_select``'s dimension. Values are drawn in ``[0, rows)``.
- **padding mask**: an integer or bool input of 0/1 values, rank ≥ 2, whose example is shaped
  like padding along the last axis (each row a run of ones touching one end, at least one
  valid position). Generated sets use all-ones, right-padded and left-padded masks.
- **sorted**: the input feeds an argument that must be sorted along its last axis
  (``searchsorted``'s sequence, ``bucketize``'s boundaries). Drawn values are sorted.

Example::

    >>> class Embed(torch.nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.table = torch.nn.Embedding(50, 4)
    ...     def forward(self, ids, mask):
    ...         return self.table(ids) * mask[..., None]
    >>> ids, mask = torch.tensor([[1, 2, 3]]), torch.tensor([[1, 1, 0]])
    >>> program = torch.export.export(Embed(), (ids, mask))
    >>> domains = input_domains(program, InputSet((ids, mask)))
    >>> domains[0].describe(), domains[1].describe()
    ('ids in [0, 50) (embedding table)', '0/1 padding mask')
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Iterator

import torch

from fxport.eager.inputs import InputSet

aten = torch.ops.aten


@dataclasses.dataclass(frozen=True)
class InputDomain:
    """The values one tensor input may take.

    Attributes:
        index_bound: values lie in ``[0, index_bound)``: the input indexes a table of that size.
        index_source: what the table is (``"embedding table"``), for messages.
        padding_mask: a 0/1 mask shaped like padding along the last axis.
        sorted_last_axis: values must be sorted along the last axis (an op's precondition).
    """

    index_bound: int | None = None
    index_source: str = ""
    padding_mask: bool = False
    sorted_last_axis: bool = False

    def describe(self) -> str:
        """One phrase for reports, e.g. ``"ids in [0, 100) (embedding table)"``."""
        parts = []
        if self.index_bound is not None:
            parts.append(f"ids in [0, {self.index_bound}) ({self.index_source})")
        if self.padding_mask:
            parts.append("0/1 padding mask")
        if self.sorted_last_axis:
            parts.append("sorted along the last axis")
        return ", ".join(parts) or "any value of the example's range"


#: Ops through which an input's values reach a consumer unchanged (views, casts, copies).
_VALUE_PRESERVING = {
    aten.view.default, aten.reshape.default, aten._unsafe_view.default, aten.clone.default,
    aten.contiguous.default, aten.alias.default, aten.expand.default, aten.slice.Tensor,
    aten.select.int, aten.unsqueeze.default, aten.squeeze.dim, aten.squeeze.dims,
    aten.squeeze.default, aten.flatten.using_ints, aten.permute.default, aten.transpose.int,
    aten.t.default, aten._to_copy.default, aten.to.dtype, aten.to.dtype_layout, aten.lift_fresh_copy.default,
    aten.detach.default, aten.repeat.default, aten.cat.default, aten.narrow.default,
}

#: op → (argument position of the index tensor, function of the node giving the table size).
_INDEXING = {
    aten.embedding.default: (1, lambda node: _dim(node.args[0], 0), "embedding table"),
    aten.index_select.default: (2, lambda node: _dim(node.args[0], node.args[1]), "index_select"),
}

#: op → argument positions that must be sorted along the last axis.
_SORTED_ARGUMENTS = {
    aten.searchsorted.Tensor: (0,),
    aten.searchsorted.Scalar: (0,),
    aten.bucketize.Tensor: (1,),
}


def input_domains(program: torch.export.ExportedProgram, example: InputSet) -> dict[int, InputDomain]:
    """Tensor input index → :class:`InputDomain`, for inputs with something to say.

    Inputs absent from the result may take any value of the example's dtype and range.
    """
    tensors = example.tensors()
    domains: dict[int, InputDomain] = {}
    for index, placeholder in enumerate(_user_tensor_placeholders(program)):
        if index >= len(tensors):
            break
        bound, source, must_sort = _consumer_facts(program.graph_module, placeholder)
        domain = InputDomain(
            index_bound=bound,
            index_source=source,
            padding_mask=bound is None and is_padding_shaped(tensors[index]),
            sorted_last_axis=must_sort,
        )
        if domain != InputDomain():
            domains[index] = domain
    return domains


def _user_tensor_placeholders(program: torch.export.ExportedProgram) -> list[torch.fx.Node]:
    user_inputs = set(program.graph_signature.user_inputs)
    return [node for node in program.graph.nodes
            if node.op == "placeholder" and node.name in user_inputs
            and isinstance(node.meta.get("val"), torch.Tensor)]


def _consumer_facts(root: torch.nn.Module, placeholder: torch.fx.Node) -> tuple[int | None, str, bool]:
    """(smallest table size it indexes, the table's kind, must be sorted) over every consumer."""
    bound, source, must_sort = None, "", False
    for node, position in _value_uses(root, placeholder):
        if node.target in _INDEXING:
            argument, size_of, kind = _INDEXING[node.target]
            size = size_of(node) if position == argument else None
            if size is not None and (bound is None or size < bound):
                bound, source = size, kind
        if position in _SORTED_ARGUMENTS.get(node.target, ()):
            must_sort = True
    return bound, source, must_sort


def _value_uses(root: torch.nn.Module, start: torch.fx.Node) -> Iterator[tuple[torch.fx.Node, int]]:
    """(consumer, argument position) for every op that reads ``start``'s values.

    Follows value-preserving ops and the operands of ``cond`` / ``while_loop`` into their
    subgraphs (operand i is the subgraph's placeholder i).
    """
    seen: set[torch.fx.Node] = set()
    frontier = [start]
    while frontier:
        value = frontier.pop()
        if value in seen:
            continue
        seen.add(value)
        for user in value.users:
            for position in _positions(user, value):
                yield user, position
            if user.target in _VALUE_PRESERVING and user.args and _flows_through(user, value):
                frontier.append(user)
            frontier.extend(_subgraph_placeholders(root, user, value))


def _positions(node: torch.fx.Node, value: torch.fx.Node) -> list[int]:
    return [i for i, arg in enumerate(node.args) if arg is value]


def _flows_through(node: torch.fx.Node, value: torch.fx.Node) -> bool:
    """True when ``value`` is the data operand (not, say, a shape) of a value-preserving op."""
    first = node.args[0]
    return first is value or (isinstance(first, (list, tuple)) and value in first)


def _subgraph_placeholders(root: torch.nn.Module, node: torch.fx.Node, value: torch.fx.Node) -> list[torch.fx.Node]:
    """The placeholders of ``node``'s subgraphs that receive ``value`` (cond, while_loop)."""
    if node.target is torch.ops.higher_order.cond:
        _, true_fn, false_fn, operands = node.args[:4]
        graphs, flat = (true_fn, false_fn), list(operands)
    elif node.target is torch.ops.higher_order.while_loop:
        cond_fn, body_fn, carried, extra = node.args[:4]
        graphs, flat = (cond_fn, body_fn), [*carried, *extra]
    else:
        return []
    found = []
    for graph_node in graphs:
        module = _submodule(root, graph_node)
        if module is None:
            continue
        placeholders = [n for n in module.graph.nodes if n.op == "placeholder"]
        found += [placeholders[i] for i, operand in enumerate(flat)
                  if operand is value and i < len(placeholders)]
    return found


def _submodule(root: torch.nn.Module, node) -> torch.fx.GraphModule | None:
    if not isinstance(node, torch.fx.Node) or node.op != "get_attr":
        return None
    # a get_attr inside a cond branch / loop body names an attribute of that subgraph's module
    owner = node.graph.owning_module or root
    module = operator.attrgetter(node.target)(owner)
    return module if isinstance(module, torch.fx.GraphModule) else None


def _dim(node, axis) -> int | None:
    value = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    if not isinstance(value, torch.Tensor) or not isinstance(axis, int):
        return None
    try:
        return int(value.shape[axis])
    except (TypeError, ValueError, IndexError):  # a symbolic size has no single bound
        return None


def is_padding_shaped(tensor: torch.Tensor) -> bool:
    """0/1 integer or bool tensor, rank ≥ 2, each last-axis row a run of ones touching an end.

    Example::

        >>> is_padding_shaped(torch.tensor([[1, 1, 0], [0, 1, 1], [1, 1, 1]]))
        True
        >>> is_padding_shaped(torch.tensor([[1, 0, 1]]))
        False
    """
    if tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dim() < 2 or tensor.numel() == 0:
        return False
    values = tensor.detach().cpu().to(torch.int64)
    if not bool(((values == 0) | (values == 1)).all()):
        return False
    rows = values.reshape(-1, values.shape[-1])
    lengths = rows.sum(-1)
    positions = torch.arange(rows.shape[-1])
    right_padded = positions[None, :] < lengths[:, None]
    left_padded = positions[None, :] >= rows.shape[-1] - lengths[:, None]
    shaped = (rows.bool() == right_padded).all(-1) | (rows.bool() == left_padded).all(-1)
    return bool(shaped.all() and (lengths > 0).all())


def padding_mask(shape: tuple[int, ...], dtype: torch.dtype, side: str, generator: torch.Generator) -> torch.Tensor:
    """A 0/1 mask padded on ``side`` (``"right"``, ``"left"`` or ``"none"``) along the last axis.

    Every row keeps at least one valid position; with more than one row and a last axis of
    size ≥ 2, the first row is full and some row is padded.

    Example::

        >>> padding_mask((2, 4), torch.int64, "left", torch.Generator().manual_seed(0))[0].tolist()
        [1, 1, 1, 1]
    """
    length = shape[-1] if shape else 1
    rows = 1
    for size in shape[:-1]:
        rows *= size
    if side == "none" or length == 0 or rows == 0:
        return torch.ones(shape, dtype=dtype)
    valid = torch.randint(1, length + 1, (rows,), generator=generator)
    valid[0] = length
    if rows > 1 and length > 1:
        valid[-1] = min(int(valid[-1]), (length + 1) // 2)
    positions = torch.arange(length)[None, :]
    if side == "right":
        mask = positions < valid[:, None]
    else:
        mask = positions >= length - valid[:, None]
    return mask.reshape(shape).to(dtype)
