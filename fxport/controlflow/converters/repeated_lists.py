"""A repeated list that ``torch.stack`` / ``torch.cat`` read → ``_fx.lists.repeated.repeat(...)``.

``torch.stack([e] * n, dim)``, ``torch.cat(n * [a, b])`` and ``torch.stack([e for _ in range(n)])``
(``e`` a name or an attribute, the same value on every trip): Python needs ``n`` as a number to
build the list, which fixes a dynamic size to the example's. The list argument becomes
``_fx.lists.repeated.repeat([e], n)`` / ``repeat_range(e, ...)``, which stays the list as written
where ``n`` is a number and is the stack or concatenation tiled ``n`` times where ``n`` is a
dynamic size (operators/lists/repeated.py). Only the list written as that argument is rewritten:
a list kept under a name may be read any other way.

Example::

    >>> import ast
    >>> from fxport.controlflow.context import Context
    >>> def f(self, x):
    ...     return torch.stack([self.w] * x.shape[0], dim=1) + torch.cat([x] * 2)
    >>> ctx = Context(f)
    >>> RepeatedLists(ctx).apply()
    >>> print(ast.unparse(ctx.fdef.body[0].value))
    torch.stack(_fx.lists.repeated.repeat([self.w], x.shape[0]), dim=1) + torch.cat([x] * 2)
    >>> print(ast.unparse(repeated_list(ast.parse("[w] * x.shape[0]", mode="eval").body)))
    _fx.lists.repeated.repeat([w], x.shape[0])
    >>> print(ast.unparse(repeated_list(ast.parse("[self.w for _ in range(n)]", mode="eval").body)))
    _fx.lists.repeated.repeat_range(self.w, n)
    >>> repeated_list(ast.parse("[w] * 3", mode="eval").body) is None  # a number: Python's list
    True
"""

from __future__ import annotations

import ast

from fxport.controlflow.astutil import call, located, rt
from fxport.controlflow.converters.base import ExpressionConverter

#: the torch functions whose first argument a repeated list is rewritten in (CallConverter then
#: sends them to ``_fx.stack`` / ``_fx.cat``, which read a :class:`Repeated`)
_READERS = ("stack", "cat", "concat", "concatenate")


class RepeatedLists(ExpressionConverter):
    """``torch.stack/cat(<repeated list>, ...)`` → the list argument through :func:`repeated_list`."""

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        if (isinstance(func, ast.Attribute) and func.attr in _READERS and isinstance(func.value, ast.Name)
                and func.value.id == "torch" and node.args):
            node.args[0] = repeated_list(node.args[0]) or node.args[0]
        return node


def repeated_list(node: ast.expr) -> ast.Call | None:
    """The ``_fx.lists.repeated`` call for a repeated list (see the module docstring), else None."""
    made = _repetition(node) or _comprehension_of_one_value(node)
    return located(ast.copy_location(made, node), node) if made is not None else None


def _repetition(node: ast.expr) -> ast.Call | None:
    """``[a, ...] * n`` / ``n * [a, ...]`` with ``n`` not an int literal → ``repeat([a, ...], n)``."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult)):
        return None
    for items, count in ((node.left, node.right), (node.right, node.left)):
        if (isinstance(items, ast.List) and items.elts and not any(isinstance(e, ast.Starred) for e in items.elts)
                and not isinstance(count, (ast.Constant, ast.List))):
            return call(rt("lists.repeated.repeat"), items, count)
    return None


def _comprehension_of_one_value(node: ast.expr) -> ast.Call | None:
    """``[e for v in range(a[, b])]`` with ``e`` a name or attribute chain other than ``v``
    (no condition) → ``repeat_range(e, a[, b])``."""
    if not (isinstance(node, ast.ListComp) and len(node.generators) == 1):
        return None
    loop = node.generators[0]
    bounds = loop.iter.args if _is_range_call(loop.iter) else None
    if (bounds is None or loop.ifs or loop.is_async or not isinstance(loop.target, ast.Name)
            or not _is_plain_read(node.elt, loop.target.id)):
        return None
    return call(rt("lists.repeated.repeat_range"), node.elt, *bounds)


def _is_range_call(node: ast.expr) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"
            and len(node.args) in (1, 2) and not node.keywords
            and not any(isinstance(a, ast.Starred) for a in node.args))


def _is_plain_read(node: ast.expr, loop_variable: str) -> bool:
    """A name or an attribute chain on one (``w``, ``self.proj.weight``) that is not the loop's
    variable: a read that gives the same value on every trip."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id != loop_variable
