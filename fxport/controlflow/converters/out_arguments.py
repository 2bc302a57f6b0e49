"""``f(..., out=t)`` and a dead ``t.resize_as_(u)`` on a local tensor nothing else holds →
plain assignments (canonicalisation).

amdegroot/ssd.pytorch's NMS keeps scratch tensors and fills them with ``out=``::

    xx1 = boxes.new()
    while idx.numel() > 0:
        ...
        torch.index_select(x1, 0, idx, out=xx1)   # resizes xx1 to len(idx), writes it
        xx1 = torch.clamp(xx1, min=x1[i])
        w.resize_as_(xx2)                          # w is rebound on the next line
        w = xx2 - xx1

An ``out=`` write resizes the tensor to the result's shape: inside a converted loop a carried
tensor would change size in place, which neither ``while_loop`` nor ``cond`` can trace. Where no
other name can hold the object ``t`` names, the write is only a new value for ``t``:
``t = f(...)``, for the torch functions whose ``out=`` must already have the result's dtype
(``index_select``, ``gather``, ``take``, ``masked_select``, ``clamp``, ``clip``; arithmetic casts
into ``out``'s dtype and is left as written).
A ``t.resize_(...)`` / ``t.resize_as_(...)`` whose ``t`` is bound again in the same block before
anything reads it changes nothing anyone sees, and is dropped.

``t`` qualifies when it is a local of the function (not a parameter, ``global`` or
``nonlocal``), every binding of it is a plain ``t = ...``, and it is never given to another name
or container: not the value of another assignment (``u = t``, ``u = t[1:]``, ``u = t.view(-1)``),
not in a list, tuple, set or dict display, not passed to ``append``/``extend``/``insert``, not
yielded. Anything else is left as written.

Example::

    >>> import ast
    >>> from fxport.controlflow.context import Context
    >>> def f(x, idx):
    ...     buf = x.new()
    ...     w = x.new()
    ...     torch.index_select(x, 0, idx, out=buf)
    ...     w.resize_as_(buf)
    ...     w = buf * 2
    ...     return w
    >>> ctx = Context(f)
    >>> OutArguments(ctx).apply()
    >>> print(ast.unparse(ctx.fdef.body[2:]))
    buf = torch.index_select(x, 0, idx)
    w = buf * 2
    return w
"""

from __future__ import annotations

import ast

from fxport.controlflow.astutil import located, map_blocks
from fxport.controlflow.converters.base import Canonicalization
from fxport.controlflow.scopes import walk_same_scope

_RESIZES = frozenset({"resize_", "resize_as_"})
#: torch functions whose ``out=`` must already have the result's dtype (eager raises otherwise,
#: tests/controlflow/test_out_arguments.py checks each): their result is what ``out=`` holds.
#: Arithmetic (``torch.add(a, b, out=t)``) casts into ``t``'s dtype and is left as written.
SAME_DTYPE_OUT = frozenset({"index_select", "gather", "take", "masked_select", "clamp", "clip"})
_HOLDERS = frozenset({"append", "extend", "insert"})


class OutArguments(Canonicalization):
    """Rewrites ``out=`` calls into locals nothing else holds, and drops their dead resizes."""

    def apply(self) -> None:
        fdef = self.ctx.fdef
        private = _private_locals(fdef)
        if _out_targets(fdef, private) or any(_resized_name(n, private) for n in walk_same_scope(fdef)
                                              if isinstance(n, ast.stmt)):
            fdef.body = _rewrite_blocks(fdef.body, private)


def _private_locals(fdef: ast.FunctionDef) -> set[str]:
    """The locals whose object no other name or container can hold (see the module doc)."""
    params = {a.arg for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs}
    params |= {a.arg for a in (fdef.args.vararg, fdef.args.kwarg) if a is not None}
    bound, excluded = set(), set(params)
    for node in walk_same_scope(fdef):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            excluded |= set(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, ast.Assign) and not (len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            excluded |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.For, ast.AugAssign, ast.AnnAssign, ast.NamedExpr, ast.comprehension)):
            excluded |= _names_in(node.target)
        elif isinstance(node, ast.With):
            excluded |= {n for item in node.items if item.optional_vars is not None for n in _names_in(item.optional_vars)}
        excluded |= _held(node)
    return bound - excluded


def _names_in(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _held(node: ast.AST) -> set[str]:
    """Names whose object ``node`` gives to another name or container."""
    if isinstance(node, ast.Assign):
        return _aliased_by(node.value)
    if isinstance(node, ast.Set) or (isinstance(node, (ast.List, ast.Tuple)) and isinstance(node.ctx, ast.Load)):
        return {e.id for e in node.elts if isinstance(e, ast.Name)}
    if isinstance(node, ast.Dict):
        return {v.id for v in node.values if isinstance(v, ast.Name)}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _HOLDERS:
        return {a.id for a in node.args if isinstance(a, ast.Name)}
    if isinstance(node, (ast.Yield, ast.YieldFrom)) and isinstance(node.value, ast.Name):
        return {node.value.id}
    return set()


def _aliased_by(value: ast.expr) -> set[str]:
    """``u = t``, ``u = t[1:]``, ``u = t.view(-1)``, ``u = t.T``: the name a view or alias comes from."""
    while isinstance(value, (ast.Subscript, ast.Attribute)) or (
            isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
        value = value.value if not isinstance(value, ast.Call) else value.func.value
    return {value.id} if isinstance(value, ast.Name) else set()


def _out_targets(fdef: ast.FunctionDef, private: set[str]) -> set[str]:
    return {found[1] for node in walk_same_scope(fdef) if isinstance(node, ast.stmt)
            for found in [_out_target(node, private)] if found is not None}


def _rewrite_blocks(block: list[ast.stmt], private: set[str]) -> list[ast.stmt]:
    """``block`` rewritten, and the blocks nested in it (a nested ``def`` is left alone)."""
    kept: list[ast.stmt] = []
    for position, stmt in enumerate(block):
        map_blocks(stmt, lambda inner: _rewrite_blocks(inner, private))
        resized = _resized_name(stmt, private)
        if resized is not None and _rebound_before_read(block[position + 1:], resized):
            continue
        kept.append(_as_assignment(stmt, private) or stmt)
    return kept


def _out_target(stmt: ast.stmt, private: set[str]) -> tuple[ast.Call, str] | None:
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    out = next((k for k in stmt.value.keywords if k.arg == "out"), None)
    if out is None or not isinstance(out.value, ast.Name) or out.value.id not in private \
            or _function_name(stmt.value.func) not in SAME_DTYPE_OUT:
        return None
    return stmt.value, out.value.id


def _function_name(func: ast.expr) -> str | None:
    """``index_select`` of ``torch.index_select`` (called as ``torch.<name>`` only)."""
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "torch":
        return func.attr
    return None


def _as_assignment(stmt: ast.stmt, private: set[str]) -> ast.stmt | None:
    """``torch.f(..., out=t)`` → ``t = torch.f(...)``; None for any other statement."""
    found = _out_target(stmt, private)
    if found is None:
        return None
    made, target = found
    value = ast.Call(func=made.func, args=made.args, keywords=[k for k in made.keywords if k.arg != "out"])
    assigned = ast.Assign(targets=[ast.Name(target, ast.Store())], value=value)
    return located(ast.copy_location(assigned, stmt), stmt)


def _resized_name(stmt: ast.stmt, private: set[str]) -> str | None:
    """``t`` of a statement ``t.resize_(...)`` / ``t.resize_as_(u)`` on a private local."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    func = stmt.value.func
    if isinstance(func, ast.Attribute) and func.attr in _RESIZES and isinstance(func.value, ast.Name) \
            and func.value.id in private:
        return func.value.id
    return None


def _rebound_before_read(rest: list[ast.stmt], name: str) -> bool:
    """Whether the statements after a resize bind ``name`` (a plain ``name = ...`` that does not
    read it) before any statement reads it or could leave the block."""
    for stmt in rest:
        loads = any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
                    for n in walk_same_scope(stmt))
        if loads or not isinstance(stmt, (ast.Assign, ast.Expr)):
            return False
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            return True
    return False
