"""Value predicates and small tensor helpers shared by the operators.

Every "is this traced?" question goes through here: a Python bool (or a tensor outside of
export) keeps Python semantics, a tensor seen while exporting or a symbolic scalar is traced.

Example::

    >>> import torch
    >>> from fxport.controlflow.operators import values
    >>> values.is_traced(True), values.is_traced(torch.tensor(1.0))   # not exporting here
    (False, False)
    >>> values.scalar(3).dtype, values.as_bool_tensor(2)
    (torch.int64, tensor(True))
"""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree
from torch.fx.experimental.symbolic_shapes import has_static_value, statically_known_true

from fxport.controlflow.operators.failures import fail


class Undefined:
    """Stands for a variable that has no value yet on this path; any use is an error."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"Undefined({self.name!r})"

    def __bool__(self):
        raise NameError(f"local variable {self.name!r} is not defined on this path")

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise NameError(f"local variable {self.name!r} is not defined on this path")


def undefined(name: str) -> Undefined:
    """``Undefined(name)``, made by a function: converted code reaches the operators through a
    closure that dynamo may see without a source (a function reached through an object made in
    a traced branch), and from there it can call a function of this module but not a class."""
    return Undefined(name)


_SCALAR_TYPES = (bool, int, float, torch.SymBool, torch.SymInt, torch.SymFloat)


def is_symbolic(value) -> bool:
    """True for a SymBool/SymInt/SymFloat whose value is not fixed (e.g. ``x.shape[0] > 3``).

    Inside a body dynamo traces (a cond branch, a while_loop body) a symbolic scalar passes
    ``isinstance(v, bool/int/float)`` and fails ``isinstance(v, torch.SymBool)``, and Python's
    ``if v:`` would silently specialise it to the example's value. torch's ``has_static_value``
    answers correctly in both worlds, so every check goes through here.
    """
    if isinstance(value, torch.Tensor) or not isinstance(value, _SCALAR_TYPES):
        return False
    return not has_static_value(value)


def is_bool_like(value) -> bool:
    return isinstance(value, (bool, torch.SymBool))


def is_number(value) -> bool:
    return isinstance(value, (bool, int, float, torch.SymInt, torch.SymFloat, torch.SymBool))


def is_traced(value) -> bool:
    """True for a symbolic scalar (:func:`is_symbolic`), or a tensor seen while exporting."""
    if isinstance(value, torch.Tensor):
        return torch.compiler.is_exporting() or torch.compiler.is_dynamo_compiling()
    return is_symbolic(value)


def predicate(pred, info):
    """A bool scalar tensor (or SymBool) for a traced condition."""
    if not isinstance(pred, torch.Tensor):
        return pred if is_bool_like(pred) else pred != 0
    if pred.dim() > 0 and not all(isinstance(s, int) and s == 1 for s in pred.shape):
        fail(f"{info.kind} condition is a tensor of shape {tuple(pred.shape)}, not a single value", info,
             "reduce it with .any()/.all() or compare a single element")
    pred = pred.reshape(())
    return pred if pred.dtype == torch.bool else pred != 0


def scalar(value, dtype=None):
    """A 0-d tensor for a Python/Sym number, built with ``full`` (a pure op, unlike as_tensor)."""
    if dtype is None:
        if isinstance(value, (bool, torch.SymBool)):
            dtype = torch.bool
        elif isinstance(value, (int, torch.SymInt)):
            dtype = torch.int64
        else:
            dtype = torch.get_default_dtype()
    return torch.full((), value, dtype=dtype)


def as_bool_tensor(pred):
    """A 0-d bool tensor for a tensor, symbolic or Python condition."""
    if isinstance(pred, torch.Tensor):
        return pred.reshape(()).to(torch.bool) if pred.dtype != torch.bool else pred.reshape(())
    if is_symbolic(pred):
        return torch.full((), pred if is_bool_like(pred) else pred != 0, dtype=torch.bool)
    return torch.full((), bool(pred), dtype=torch.bool)


def as_int64(value):
    """A 0-d int64 tensor for a tensor, SymInt or int."""
    if isinstance(value, torch.Tensor):
        return value.reshape(()).to(torch.int64)
    if is_symbolic(value):
        return torch.full((), value, dtype=torch.int64)
    return torch.full((), int(value), dtype=torch.int64)


def dense(tensor):
    """A fresh contiguous copy: no aliasing, and static strides (dynamo cannot lift a view with
    symbolic strides into a higher-order op)."""
    return tensor.clone(memory_format=torch.contiguous_format)


def dtype_name(dtype_or_tensor) -> str:
    """``float32`` for ``torch.float32`` or a float32 tensor."""
    dtype = dtype_or_tensor.dtype if isinstance(dtype_or_tensor, torch.Tensor) else dtype_or_tensor
    return str(dtype).replace("torch.", "")


def same_size(x, y) -> bool:
    """True when two (possibly symbolic) sizes are known equal."""
    return statically_known_true(x == y)


def same_layout(a: torch.Tensor, b: torch.Tensor) -> bool:
    """One dtype, one rank, and every size known equal: ``a`` can take ``b``'s value in place."""
    return a.dtype == b.dtype and a.dim() == b.dim() and all(same_size(x, y) for x, y in zip(a.shape, b.shape))


def size_relations(tensors) -> list[tuple]:
    """``(i, axis_i, j, axis_j)`` for symbolic sizes of ``tensors`` known equal here, and
    ``(i, axis_i, None, size)`` for their static sizes.

    torch traces a cond branch or while_loop body with dynamo, which gives each operand fresh
    size symbols: inside, ``x.shape[0] == g.shape[0]`` is no longer known even when both are
    the batch size outside, and a carried ``(3,)`` may come in as ``(s49,)`` while a row of a
    free tensor is ``(3,)``. :func:`restore_size_relations` re-states these facts in the body.
    """
    known: list[tuple[int, int, object]] = []
    relations = []
    for i, tensor in enumerate(tensors):
        if not isinstance(tensor, torch.Tensor):
            continue
        for axis, size in enumerate(tensor.shape):
            if not is_symbolic(size):
                relations.append((i, axis, None, int(size)))
                continue
            match = next(((j, axis_j) for j, axis_j, other in known if same_size(size, other)), None)
            if match is None:
                known.append((i, axis, size))
            else:
                relations.append((i, axis) + match)
    return relations


def restore_size_relations(tensors, relations) -> None:
    """Inside a traced body: ``torch._check`` the size equalities that held outside."""
    for i, axis_i, j, axis_j in relations:
        size = tensors[i].shape[axis_i]
        if j is None:
            if is_symbolic(size):
                torch._check(size == axis_j)
        else:
            torch._check(size == tensors[j].shape[axis_j])


def bound_merged_sizes(outs) -> None:
    """A size the branches give differently stays at least the smaller of their lower bounds.

    Where the branches give an output different sizes (a mask that grows by one in one branch
    and not in the other), ``torch.cond`` gives it a fresh unbacked size, which may be 0 for
    all torch knows: ``mask[:, :1]`` after the if is then ``Min(1, u0)`` long and comparisons
    of it stay undecided. The merged size is one of the branches' sizes, so it is at least the
    smaller of their lower bounds (read from the cond's branch graphs), said with ``torch._check``.
    """
    from torch.fx.experimental.proxy_tensor import get_proxy_mode

    if torch.compiler.is_dynamo_compiling():  # a cond inside a loop body dynamo traces: no tracer to read
        return
    mode = get_proxy_mode()
    leaves = [leaf for leaf in pytree.tree_leaves(outs) if isinstance(leaf, torch.Tensor)]
    if mode is None or not leaves:
        return
    node = next((n for n in reversed(mode.tracer.graph.nodes)
                 if n.op == "call_function" and n.target is torch.ops.higher_order.cond), None)
    if node is None:
        return
    results = [_branch_outputs(getattr(mode.tracer.root, arg.target, None)) for arg in node.args[1:3]]
    if None in results or any(len(r) != len(leaves) for r in results):
        return
    for leaf, true_val, false_val in zip(leaves, *results):
        for axis, size in enumerate(leaf.shape):
            if is_symbolic(size) and axis < min(true_val.dim(), false_val.dim()):
                _bound_below(size, (true_val.shape[axis], false_val.shape[axis]))


def _bound_below(size, branch_sizes) -> None:
    """A merged size is one of the branches' sizes: at least the smaller of their lower bounds
    (see :func:`bound_merged_sizes`)."""
    shape_env = size.node.shape_env
    lows = [int(s) if not isinstance(s, torch.SymInt) else shape_env.bound_sympy(s.node.expr).lower
            for s in branch_sizes]
    low = min(lows)
    if low > 0 and low != float("inf"):
        torch._check(size >= int(low))


def _branch_outputs(branch) -> list | None:
    if not isinstance(branch, torch.fx.GraphModule):
        return None
    output = next(n for n in reversed(branch.graph.nodes) if n.op == "output")
    values = [arg.meta.get("val") if isinstance(arg, torch.fx.Node) else None for arg in pytree.tree_leaves(output.args[0])]
    return values if all(isinstance(v, torch.Tensor) for v in values) else None


def is_row_of_numbers(value) -> bool:
    """A non-empty list or tuple of numbers and one-element tensors (``[i, j]``, ``[t.argmax(), 0]``)."""
    return isinstance(value, (list, tuple)) and bool(value) and all(
        (isinstance(v, torch.Tensor) and isinstance(v.numel(), int) and v.numel() == 1) or
        (not isinstance(v, torch.Tensor) and is_number(v)) for v in value)


def row_of_numbers(values) -> torch.Tensor:
    """``[i, j]`` of numbers and one-element tensors as one 1-d tensor, dtypes promoted as
    ``torch.tensor`` promotes them."""
    parts = [v.reshape(()) if isinstance(v, torch.Tensor) else scalar(v) for v in values]
    dtype = parts[0].dtype
    for part in parts[1:]:
        dtype = torch.promote_types(dtype, part.dtype)
    return torch.stack([p.to(dtype) for p in parts])


def numbers_as_tensors(values) -> list:
    """A list's elements with each Python or symbolic number as a 0-d tensor (``[blank_id] * k``,
    an ``idx.item()``): how a list whose length becomes data holds its initial elements."""
    return [scalar(v) if is_number(v) else v for v in values]
