"""``del x`` of a name that only an outlined block binds: the name left out of the ``del``.

A name bound inside a loop body or a branch and not read after it is not loop or branch state
(:mod:`fxport.controlflow.analysis`: a ``del`` reads no value), so once the block is outlined
into ``_fx_body_N`` / ``_fx_true_N`` the converted function never binds it, and a ``del`` of it
after the statement (YOLOX's ``del topk_ious, dynamic_ks, pos_idx`` after its SimOTA loop)
would always raise ``UnboundLocalError`` where Python deletes the last trip's value. Nothing
reads the name after a ``del`` without binding it again (Python would raise there too), so the
value is not needed, only its removal: the name is left out of the ``del`` (a ``pass`` where
none is left), and the converted function leaves it unbound, as Python does after the ``del``.
Python's own ``UnboundLocalError`` where no trip or branch bound it (a loop of 0 trips) is not
raised: such an input is outside the model's domain (eager fails on it).

Applied in every function of the converted code (a ``del`` in a loop body of a name a branch
inside it binds); a name the function binds itself, a parameter, or a name declared
``global``/``nonlocal`` keeps its ``del``.

Example::

    >>> import ast
    >>> from types import SimpleNamespace
    >>> tree = ast.parse('''
    ... def f(x, n):
    ...     y = x
    ...     def _fx_body_0(i, y):
    ...         t = y * i
    ...         return (y + t,)
    ...     y, = _fx.for_stmt(n, _fx_body_0, (y,), None)
    ...     del t, y
    ...     return x
    ... ''')
    >>> DeletedInBlocks(SimpleNamespace(fdef=tree.body[0])).apply()
    >>> print(ast.unparse(tree.body[0].body[3]))
    del y
"""

from __future__ import annotations

import ast

from fxport.controlflow.analysis import writes
from fxport.controlflow.converters.base import Finalization
from fxport.controlflow.scopes import SCOPES, walk_same_scope

OUTLINED_PREFIX = "_fx_"  # the functions the statement converters outline (_fx_body_0, _fx_true_1, ...)


class DeletedInBlocks(Finalization):
    """``del`` of names only outlined blocks bind → those names left out (see the module)."""

    def apply(self) -> None:
        for scope in _functions(self.ctx.fdef):
            _drop_block_names(scope)


def _functions(fdef: ast.FunctionDef) -> list[ast.FunctionDef]:
    """``fdef`` and the functions outlined inside it, at any depth."""
    found = [fdef]
    for node in walk_same_scope(fdef):
        if isinstance(node, ast.FunctionDef) and node is not fdef and node.name.startswith(OUTLINED_PREFIX):
            found.extend(_functions(node))
    return found


def _drop_block_names(scope: ast.FunctionDef) -> None:
    """Rewrite the ``del`` statements of ``scope`` (its own, not its nested functions')."""
    bound_here = _bound_in(scope)
    bound_in_blocks = _bound_in_outlined(scope)
    for node in walk_same_scope(scope):
        if isinstance(node, SCOPES) and node is not scope:
            continue  # a nested function's statements are its own scope's
        for field, block in ast.iter_fields(node):
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                setattr(node, field, [_without_block_names(s, bound_here, bound_in_blocks) for s in block])


def _without_block_names(stmt: ast.stmt, bound_here: set[str], bound_in_blocks: set[str]) -> ast.stmt:
    if not isinstance(stmt, ast.Delete):
        return stmt
    kept = [t for t in stmt.targets
            if not (isinstance(t, ast.Name) and t.id not in bound_here and t.id in bound_in_blocks)]
    if len(kept) == len(stmt.targets):
        return stmt
    replacement = ast.Delete(targets=kept) if kept else ast.Pass()
    return ast.copy_location(replacement, stmt)


def _bound_in(scope: ast.FunctionDef) -> set[str]:
    """Names ``scope`` binds itself (parameters, assignments, imports, ``global``/``nonlocal``);
    a ``del`` binds nothing."""
    params = {a.arg for a in ast.walk(scope.args) if isinstance(a, ast.arg)}
    deleted = {n.id for n in walk_same_scope(scope) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Del)}
    stored = {n.id for n in walk_same_scope(scope) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    declared = {name for n in walk_same_scope(scope) if isinstance(n, (ast.Global, ast.Nonlocal)) for name in n.names}
    others = writes(scope.body) - deleted  # defs, classes, imports
    return params | stored | declared | others


def _bound_in_outlined(scope: ast.FunctionDef) -> set[str]:
    """Names the functions outlined in ``scope`` bind (at any depth)."""
    found: set[str] = set()
    for node in walk_same_scope(scope):
        if isinstance(node, ast.FunctionDef) and node is not scope and node.name.startswith(OUTLINED_PREFIX):
            for inner in _functions(node):
                found |= _bound_in(inner)
    return found
