"""Which tensors a name may be a view of: a write through the view writes its base.

``view = g[:, 1:3]; view.mul_(2)`` inside a branch or loop body writes ``g``, though the code
never names ``g`` in the write. The analysis follows assignments from view expressions —
subscripts, view methods (``view``, ``reshape``, ``t``, ``transpose``, ``narrow``, ``unbind``,
…, and ``to``/``contiguous``, which may return the tensor itself), their ``torch.`` function
forms, tuple targets (``a, b = g.unbind(0)``) and loop targets (``for row in g``) — back to
their bases, over-approximating: a base that was not really written is only carried for nothing.

Example::

    >>> import ast
    >>> body = ast.parse("v = g[:, 1:3]\\nr = torch.select(v, 0, 1)\\na, b = h.unbind(0)").body
    >>> sorted(view_bases({"r", "a"}, body))
    ['g', 'h', 'v']
"""

from __future__ import annotations

import ast
from typing import Sequence

from fxport.controlflow.scopes import walk_same_scope

#: Tensor methods whose result may share memory with the tensor.
VIEW_METHODS = frozenset({
    "view", "view_as", "reshape", "reshape_as", "t", "transpose", "swapaxes", "swapdims", "permute",
    "movedim", "moveaxis", "narrow", "select", "squeeze", "unsqueeze", "expand", "expand_as", "flatten",
    "unflatten", "diagonal", "unfold", "detach", "as_strided", "contiguous", "real", "imag", "mT", "T",
    "H", "mH", "data", "split", "chunk", "unbind", "tensor_split", "hsplit", "vsplit", "dsplit",
    "split_with_sizes", "to", "type", "type_as", "float", "double", "half", "bfloat16", "int", "long",
    "bool", "cpu", "cuda", "view_as_real", "view_as_complex", "align_as",
})

#: Modules whose ``module.fn(t, ...)`` is the function form of a tensor method.
_FUNCTION_ROOTS = frozenset({"torch", "F", "functional"})


def view_base(value: ast.AST) -> str | None:
    """The name ``value`` may be a view of (``g`` for ``g``, ``g[:, 1:3]``, ``g.t()[0]``,
    ``torch.narrow(g, 0, 0, 1)``, ``_fx.getitem(g, i)``, ``_fx.narrow(g, 0, t, 1)``); None for anything that makes a new tensor."""
    while True:
        if isinstance(value, ast.Name):
            return value.id
        if isinstance(value, ast.Subscript):
            value = value.value
        elif isinstance(value, ast.Attribute) and value.attr in VIEW_METHODS:
            value = value.value
        elif isinstance(value, ast.Call) and value.args and ast.unparse(value.func) in ("_fx.getitem", "_fx.narrow"):
            value = value.args[0]
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in VIEW_METHODS:
            function_form = isinstance(value.func.value, ast.Name) and value.func.value.id in _FUNCTION_ROOTS
            if function_form and not value.args:
                return None
            value = value.args[0] if function_form else value.func.value
        elif isinstance(value, ast.NamedExpr):
            value = value.value
        else:
            return None


def view_assignments(nodes: Sequence[ast.AST]) -> dict[str, set[str]]:
    """``{name: bases}`` for every name ``nodes`` bind to a possible view of another name."""
    bases: dict[str, set[str]] = {}

    def bind(targets, value) -> None:
        base = view_base(value)
        if base is None:
            return
        for target in targets:
            for sub in ast.walk(target):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store) and sub.id != base:
                    bases.setdefault(sub.id, set()).add(base)

    for node in nodes:
        for sub in walk_same_scope(node):
            if isinstance(sub, ast.Assign):
                bind(sub.targets, sub.value)
            elif isinstance(sub, ast.AnnAssign) and sub.value is not None:
                bind([sub.target], sub.value)
            elif isinstance(sub, ast.NamedExpr):
                bind([sub.target], sub.value)
            elif isinstance(sub, (ast.For, ast.comprehension)):
                bind([sub.target], sub.iter)  # for row in g: each row is a view of g
    return bases


def view_bases(names: set[str], nodes: Sequence[ast.AST]) -> set[str]:
    """The names that ``names`` may be views of (transitively) by assignments in ``nodes``."""
    bases = view_assignments(nodes)
    found: set[str] = set()
    todo = list(names)
    while todo:
        for base in bases.get(todo.pop(), ()):
            if base not in found and base not in names:
                found.add(base)
                todo.append(base)
    return found
