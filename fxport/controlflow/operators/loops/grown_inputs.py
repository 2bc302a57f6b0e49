"""What the body of a loop whose state grows reads from outside it, as the op's inputs.

Each value the body reads that the loop does not change becomes one
:class:`Free`: a tensor input, a size rebuilt from a
dimension of a tensor (``dim``), a traced number passed as a 0-d tensor, or a constant.

Example::

    >>> import torch
    >>> inputs, spec = free_inputs([torch.ones(2), 3], [torch.zeros(4)])
    >>> [f.kind for f in spec], len(inputs)
    (['tensor', 'constant'], 1)
"""

from __future__ import annotations

import dataclasses

import torch
import torch.utils._pytree as pytree

from fxport.controlflow.operators.lists.appender import Appender
from fxport.controlflow.operators.loops.closures import closure_tree
from fxport.controlflow.operators.values import as_int64, dense, is_symbolic


@dataclasses.dataclass
class Free:
    """One value the body reads that the loop does not change.

    ``kind``: ``"tensor"`` (an input of the op), ``"dim"`` (a size equal to dimension
    ``where = (input, axis)`` of a tensor input), ``"number"`` (a traced number passed as a 0-d
    tensor input and read back with ``.item()``), ``"constant"`` (``value`` itself) or
    ``"carrier"`` (an empty ``(size, 0)`` input that only carries a ``dim``; last, no value) or
    ``"list"`` (a list an earlier loop grew, ``value`` its pytree spec, rebuilt from the ``leaves``
    values that follow it: crf's ``history[:seq_ends[idx]]`` in the body of the backtrack loop;
    or a function whose closure holds tensors, sizes or modules, rebuilt with cells holding the
    body's values: :mod:`~fxport.controlflow.operators.loops.closures`).
    """

    kind: str
    value: object = None
    where: tuple[int, int] | None = None
    dtype: torch.dtype | None = None
    leaves: int = 0  # ``"list"``: how many of the following values are its tensors


def free_inputs(free, state, growing=None):
    """The op's tensor inputs for the values the body reads, and one :class:`Free` per value.

    A size the body reads (``length = tokens.shape[1]``) is rebuilt from a dimension of a tensor
    that has it, looked for in the free tensors first and then in the carried state, never on an
    axis that grows: ``seq = tokens.clone()`` grown along axis 1 has ``tokens``' size only
    before the first iteration (``growing``: state index → growing axes). Where no tensor has
    it, an empty tensor of shape ``(size, 0)`` is passed to carry it (no data).
    """
    entries = []
    for value in free:
        grown = value.as_inputs() if isinstance(value, Appender) else None
        closure = closure_tree(value)
        if grown is not None and grown.mode in ("grow", "concat"):  # its tensors, not the outer trace's, in the body
            leaves, treespec = pytree.tree_flatten(grown)
            entries.append(("list", (treespec, len(leaves))))
            entries.extend(_entry(leaf) for leaf in leaves)
        elif closure is not None:  # a function holding the outer trace's tensors: rebuilt from the body's
            leaves, treespec = pytree.tree_flatten(closure)
            entries.append(("list", (treespec, len(leaves))))
            entries.extend(_entry(leaf) for leaf in leaves)
        else:
            entries.append(_entry(value))
    blocked = {(index, axis) for index, axes in (growing or {}).items() for axis in axes}
    free_tensors = [value for kind, value in entries if kind == "tensor"]
    sources = [(tensor, ()) for tensor in free_tensors] + [
        (tensor, tuple(a for i, a in blocked if i == index)) for index, tensor in enumerate(state)]
    found, carriers = {}, []
    for position, (kind, value) in enumerate(entries):
        if kind == "dim":
            found[position] = _dim_of(value, sources)
            if found[position] is None:  # no tensor has it: an empty tensor of that length carries it
                carriers.append(torch.empty((value, 0)))
                found[position] = (carriers[-1], 0)
    # the carriers come last: the body pops tensors and numbers in ``spec`` order, and no entry
    # pops a carrier (a number passed as a tensor and read with .item() inside would be unbacked
    # there, which dynamo refuses as the input of a cond in the body)
    inputs = [value for kind, value in entries if kind in ("tensor", "number")] + carriers
    shapes = list(state) + inputs
    spec = []
    for position, (kind, value) in enumerate(entries):
        if kind == "tensor":
            spec.append(Free("tensor"))
        elif kind == "number":
            spec.append(Free("number", dtype=value.dtype))
        elif kind == "dim":
            tensor, axis = found[position]
            spec.append(Free("dim", where=(next(i for i, t in enumerate(shapes) if t is tensor), axis)))
        elif kind == "list":
            spec.append(Free("list", value=value[0], leaves=value[1]))
        else:
            spec.append(Free("constant", value))
    return inputs, spec + [Free("carrier") for _ in carriers]


def input_count(spec) -> int:
    """How many of the op's inputs the values of ``spec`` (:func:`free_inputs`) take: tensors,
    numbers and carriers."""
    return sum(1 for f in spec if f.kind in ("tensor", "number", "carrier"))


def free_values(spec, tensors, shapes_of) -> list:
    """The values :func:`free_inputs` was given, rebuilt from its ``inputs`` (``tensors``); a
    ``dim`` is read from ``shapes_of[index].shape[axis]`` (the tensors its ``where`` counts in)."""
    tensors, values, lists = list(tensors), [], []
    for item in spec:
        if item.kind == "list":  # rebuilt from the values of its leaves, below
            lists.append((len(values), item))
            continue
        if item.kind == "tensor":
            values.append(tensors.pop(0))
        elif item.kind == "number":
            values.append(tensors.pop(0).item())
        elif item.kind == "dim":
            index, axis = item.where
            values.append(shapes_of[index].shape[axis])
        elif item.kind == "carrier":  # a size's empty carrier (the last inputs): no value
            tensors.pop(0)
        else:
            values.append(item.value)
    for start, item in reversed(lists):  # (a list's leaves are tensors: no list holds another)
        values[start:start + item.leaves] = [pytree.tree_unflatten(values[start:start + item.leaves], item.value)]
    return values


def _entry(value) -> tuple[str, object]:
    """``(kind, value)`` of one value the body reads (see :class:`Free`)."""
    if isinstance(value, torch.Tensor):
        return "tensor", dense(value)
    if isinstance(value, torch.SymInt) and is_symbolic(value):
        return "dim", value
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)) and is_symbolic(value):
        dtype = torch.bool if isinstance(value, torch.SymBool) else torch.get_default_dtype()
        return "number", torch.full((), value, dtype=dtype)
    return "constant", value

def _dim_of(size, sources):
    """``(tensor, axis)`` of a dimension whose size is ``size`` among ``sources`` (``(tensor,
    axes not to use)``, in order of preference), if any."""
    for tensor, excluded in sources:
        if not isinstance(tensor, torch.Tensor):
            continue
        for axis, dim in enumerate(tensor.shape):
            if axis not in excluded and isinstance(dim, torch.SymInt) and dim.node.expr == size.node.expr:
                return tensor, axis
    return None
