"""The walk shared by the ``try`` and ``with`` canonicalisations.

:func:`rewrite_blocks` visits every statement of a function (nested blocks first, nested
``def``/``class`` left as written) and replaces it by what ``rewrite(stmt, in_control_flow)``
returns; ``in_control_flow`` is True inside the body of an ``if``/``while``/``for``.
:func:`has_control_flow` says whether a statement holds an ``if``/``while``/``for``: the
statements fxport outlines, whose state the analysis cannot follow through a ``try``/``with``.

Example::

    >>> import ast
    >>> tree = ast.parse("with a:\\n    if c:\\n        y = 1")
    >>> has_control_flow(tree.body[0]), has_control_flow(tree.body[0].body[0].body[0])
    (True, False)
"""

from __future__ import annotations

import ast
from typing import Callable

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_CONTROL_FLOW = (ast.If, ast.While, ast.For)
_BLOCKS = ("body", "orelse", "finalbody")

Rewrite = Callable[[ast.stmt, bool], list[ast.stmt]]


def rewrite_blocks(fdef: ast.FunctionDef, rewrite: Rewrite) -> None:
    """Replace every statement of ``fdef`` by ``rewrite(stmt, in_control_flow)`` (see module doc)."""
    fdef.body = _block(fdef.body, rewrite, False)


def _block(stmts: list[ast.stmt], rewrite: Rewrite, in_control_flow: bool) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for stmt in stmts:
        if not isinstance(stmt, _SCOPES):
            inner = in_control_flow or isinstance(stmt, _CONTROL_FLOW)
            for field in _BLOCKS:
                block = getattr(stmt, field, None)
                if isinstance(block, list) and block:
                    setattr(stmt, field, _block(block, rewrite, inner))
            for handler in getattr(stmt, "handlers", ()):
                handler.body = _block(handler.body, rewrite, inner)
        out.extend(rewrite(stmt, in_control_flow))
    return out


def has_control_flow(stmt: ast.stmt) -> bool:
    """True when ``stmt`` is or holds an ``if``/``while``/``for`` (same function scope)."""
    todo: list[ast.AST] = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, _CONTROL_FLOW):
            return True
        if isinstance(node, _SCOPES):
            continue
        todo.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, (ast.stmt, ast.excepthandler)))
    return False


def holds(stmt: ast.stmt, kinds: tuple) -> ast.AST | None:
    """The first node of ``kinds`` inside ``stmt`` (same function scope), or None."""
    todo: list[ast.AST] = list(ast.iter_child_nodes(stmt))
    while todo:
        node = todo.pop(0)
        if isinstance(node, kinds):
            return node
        if not isinstance(node, _SCOPES):
            todo.extend(ast.iter_child_nodes(node))
    return None
