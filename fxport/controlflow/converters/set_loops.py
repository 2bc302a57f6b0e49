"""``for v in set(xs):`` whose body cannot tell the set's order → ``_fx.lists.distinct.iterated``
(canonicalisation).

GPT2-chitchat's repetition penalty, inside the decoding loop that appends to ``generated``::

    for id in set(generated):
        next_token_logits[id] /= self.repetition_penalty

``set(xs)`` of a list a data-dependent loop is still growing has a number of elements only the
data knows; :func:`~fxport.controlflow.operators.lists.distinct.iterated` gives its distinct values
ascending, and the ``for`` becomes a data-dependent loop over them. Python's set iterates in an
order of its own (by hash, then by insertion), so the header is rewritten only where no order
can show in the result:

- every statement of the body writes ``t[v]`` (``=`` or an augmented assignment), ``v`` the loop
  variable: distinct values write distinct positions;
- the body reads each such ``t`` only as ``t[v]``, binds no other name, calls nothing but
  ``torch``/``math``/``F`` functions (no method, no user function: a side effect could count the
  order), and has no ``else``;
- ``v`` is read nowhere after the loop (its last value is the set's last in Python's order).

Anything else is left as written: ``set(xs)`` is the builtin, and of a list grown in its loop it
is refused in one line as before.

Example::

    >>> import ast
    >>> from fxport.controlflow.context import Context
    >>> def f(logits, generated):
    ...     for id in set(generated):
    ...         logits[id] /= 1.2
    ...     for id in set(generated):
    ...         logits[0] += logits[id]
    ...     return logits
    >>> ctx = Context(f)
    >>> SetLoops(ctx).apply()
    >>> print(ast.unparse(ctx.fdef.body[0].iter), '|', ast.unparse(ctx.fdef.body[1].iter))
    _fx.lists.distinct.iterated(set, generated) | set(generated)
"""

from __future__ import annotations

import ast

from fxport.controlflow.astutil import located, rt
from fxport.controlflow.converters.base import Canonicalization
from fxport.controlflow.scopes import walk_same_scope

_PURE_ROOTS = ("torch", "math", "F")


class SetLoops(Canonicalization):
    """``for v in set(xs)`` with an order-free body → ``for v in _fx.lists.distinct.iterated(set, xs)``."""

    def apply(self) -> None:
        fdef = self.ctx.fdef
        for loop in walk_same_scope(fdef):
            if isinstance(loop, ast.For) and _is_set_of_a_name(loop.iter) and order_free_body(loop) \
                    and not _read_outside(fdef, loop, loop.target.id):
                made = ast.Call(func=rt("lists.distinct.iterated"), args=[ast.Name("set", ast.Load()), loop.iter.args[0]],
                                keywords=[])
                loop.iter = located(ast.copy_location(made, loop.iter), loop.iter)


def _is_set_of_a_name(node: ast.expr) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "set"
            and len(node.args) == 1 and isinstance(node.args[0], ast.Name) and not node.keywords)


def order_free_body(loop: ast.For) -> bool:
    """Whether each trip of ``loop`` writes only ``t[v]`` and reads only ``t[v]`` of what it
    writes, so the trips commute over distinct values of ``v`` (see the module doc)."""
    if not isinstance(loop.target, ast.Name) or loop.orelse or not loop.body:
        return False
    variable, written = loop.target.id, set()
    for stmt in loop.body:
        target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else \
            stmt.target if isinstance(stmt, ast.AugAssign) else None
        if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and _is_name(target.slice, variable)):
            return False
        written.add(target.value.id)
    if variable in written or _is_name(loop.iter.args[0], *written):
        return False
    return all(_reads_only_own_position(stmt, variable, written) for stmt in loop.body)


def _reads_only_own_position(stmt: ast.stmt, variable: str, written: set[str]) -> bool:
    own = {id(node.value) for node in ast.walk(stmt)  # the names ``t`` of every ``t[v]``, the target's too
           if isinstance(node, ast.Subscript) and _is_name(node.value, *written) and _is_name(node.slice, variable)}
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and node.id in written and id(node) not in own:
            return False
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)) and id(node) not in own:
            return False
        if isinstance(node, (ast.NamedExpr, ast.Lambda, ast.Yield, ast.YieldFrom, ast.Await)):
            return False
        if isinstance(node, ast.Call) and not _pure_call(node.func):
            return False
    return True


def _pure_call(func: ast.expr) -> bool:
    """A function of ``torch``/``math``/``F`` (``torch.log(x)``, ``F.relu(x)``), not an in-place one."""
    root = func
    while isinstance(root, ast.Attribute):
        root = root.value
    return (isinstance(func, ast.Attribute) and isinstance(root, ast.Name) and root.id in _PURE_ROOTS
            and not func.attr.endswith("_"))


def _is_name(node: ast.expr, *names: str) -> bool:
    return isinstance(node, ast.Name) and node.id in names


def _read_outside(fdef: ast.FunctionDef, loop: ast.For, variable: str) -> bool:
    """``variable`` is read outside ``loop``, other than inside another ``for`` that binds it."""
    skipped = {id(n) for other in walk_same_scope(fdef)
               if isinstance(other, ast.For) and _is_name(other.target, variable) for n in ast.walk(other)}
    return any(isinstance(n, ast.Name) and n.id == variable and isinstance(n.ctx, ast.Load) and id(n) not in skipped
               for n in walk_same_scope(fdef))
