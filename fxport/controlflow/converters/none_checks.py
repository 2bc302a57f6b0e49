"""``x is None`` / ``x is not None`` → ``_fx.optional.is_none(x)`` / ``is_not_none(x)`` (and
``x == None`` / ``x != None`` → ``equals_none`` / ``differs_from_none``).

A variable that is None on some paths once that is data (``mask = None; if seqlen > 1: mask =
...`` on a traced condition) is a :class:`~fxport.controlflow.operators.optional.MaybeNone`; its
None-check is then a bool tensor, and ``if mask is not None:`` a tensor condition. For every
other value the operators answer with Python's ``is``. In the branch where the check says it is
set (``if x is not None:``'s body, ``if x is None:``'s ``else``, also of ``a if c else b``), its
reads are its value (``_fx.optional.known_set(x)``).

Example::

    >>> import ast
    >>> from fxport.controlflow.context import Context
    >>> def f(x, m=None):
    ...     return x if m is None else x + m
    >>> ctx = Context(f)
    >>> NoneChecks(ctx).apply()
    >>> ast.unparse(ctx.fdef.body[0])
    'return x if _fx.optional.is_none(m) else x + _fx.optional.known_set(m)'
"""

from __future__ import annotations

import ast

from fxport.controlflow.astutil import call, rt
from fxport.controlflow.converters.base import ExpressionConverter


class NoneChecks(ExpressionConverter):
    def apply(self) -> None:
        self.locals = _plain_locals(self.ctx.fdef)
        super().apply()

    def visit_If(self, node):
        """``if x is not None: A else: B``: in ``A`` (in ``B`` for ``x is None``) ``x`` is known to
        be set: its reads there are ``_fx.optional.known_set(x)`` (its value, where it is a
        MaybeNone). Not where the block assigns ``x`` (a read after it would be of the new value)."""
        self.generic_visit(node)
        name, checked_set = _none_check(node.test)
        block = node.body if checked_set else node.orelse
        if name is not None and name in self.locals and not _assigns(block, name):
            block[:] = [_KnownSet(name).visit(stmt) for stmt in block]
        return node

    def visit_IfExp(self, node):
        self.generic_visit(node)
        name, checked_set = _none_check(node.test)
        if name is not None and name in self.locals:
            if checked_set:
                node.body = _KnownSet(name).visit(node.body)
            else:
                node.orelse = _KnownSet(name).visit(node.orelse)
        return node

    def visit_Compare(self, node):
        """``x is None`` / ``x is not None``, and ``x == None`` / ``x != None`` (``equals_none``:
        Python's ``==`` for anything but a MaybeNone)."""
        self.generic_visit(node)
        if len(node.ops) != 1 or type(node.ops[0]) not in _CHECKS:
            return node
        left, right = node.left, node.comparators[0]
        checked = left if _is_none(right) else right if _is_none(left) else None
        if checked is None or _is_none(checked):
            return node
        check = _CHECKS[type(node.ops[0])]
        return ast.copy_location(call(ast.Attribute(rt("optional"), check, ast.Load()), checked), node)


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


_CHECKS = {ast.Is: "is_none", ast.IsNot: "is_not_none", ast.Eq: "equals_none", ast.NotEq: "differs_from_none"}


def _plain_locals(fdef) -> set[str]:
    """The function's parameters and the names it assigns, less those declared global/nonlocal
    (only a local can hold a MaybeNone: the operators make them for branch and loop state)."""
    args = fdef.args
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a is not None}
    declared = set()
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
    return names - declared


def _none_check(test: ast.expr) -> tuple[str | None, bool]:
    """(``x``, True) for a converted ``x is not None``, (``x``, False) for ``x is None``; else (None, False)."""
    if (isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and len(test.args) == 1
            and isinstance(test.args[0], ast.Name) and ast.unparse(test.func.value) == ast.unparse(rt("optional"))
            and test.func.attr in _CHECKS.values()):
        return test.args[0].id, test.func.attr in ("is_not_none", "differs_from_none")
    return None, False


def _assigns(block: list[ast.stmt], name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)
               for stmt in block for n in ast.walk(stmt))


def _known_set(name: str) -> ast.expr:
    return call(ast.Attribute(rt("optional"), "known_set", ast.Load()), ast.Name(name, ast.Load()))


class _KnownSet(ast.NodeTransformer):
    """Reads of ``name`` in an expression where it is known to be set → ``known_set(name)``."""

    def __init__(self, name: str):
        self.name = name

    def visit_Name(self, node):
        if node.id == self.name and isinstance(node.ctx, ast.Load):
            return ast.copy_location(_known_set(self.name), node)
        return node

    def visit_Lambda(self, node):
        return node

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda
