"""``xs.append(v)`` followed by in-place writes into ``v`` in a loop body → the append after the
writes (canonicalisation).

In eager the list holds the object ``v`` itself, so a write into ``v`` later in the same trip is
in the list too. SpeechBrain's greedy searcher appends a step's scores, then masks them::

    log_probs_lst.append(log_probs)
    inp_tokens = log_probs.argmax(dim=-1)
    log_probs[has_ended] = float("inf")

A converted loop keeps a list it grows as rows of a buffer, copied at the append, so the write
would be lost (the loop facts refuse it: :mod:`fxport.controlflow.append_aliases`). Appending
after the last such write appends the value the list holds from then on, and nothing in between
can tell the difference when every statement the append moves past

- leaves the list's name unread (no ``len(xs)``, no ``xs[-1]``, no call given ``xs``),
- does not bind ``v`` again (a write into ``v`` after that is a write into another object),
- cannot leave the trip (no ``break``, ``continue``, ``return``, ``raise``, ``yield``).

The append moves within its own block only, past whole statements (a write inside an ``if`` of
the same block counts: the append goes after that ``if``). Anything else is left as written, and
the loop facts still refuse a write the list would see.

Example::

    >>> import ast
    >>> from fxport.controlflow.context import Context
    >>> def f(x, n):
    ...     outs = []
    ...     for _ in range(n):
    ...         outs.append(x)
    ...         y = x.sum()
    ...         x[x > y] = 0
    ...         x = x * 2
    ...     return outs
    >>> ctx = Context(f)
    >>> AppendsAfterWrites(ctx).apply()
    >>> print(ast.unparse(ctx.fdef.body[1].body))
    y = x.sum()
    x[x > y] = 0
    outs.append(x)
    x = x * 2
"""

from __future__ import annotations

import ast

from fxport.controlflow import analysis
from fxport.controlflow.astutil import map_blocks
from fxport.controlflow.converters.base import Canonicalization
from fxport.controlflow.scopes import walk_same_scope

_LEAVING = (ast.Break, ast.Continue, ast.Return, ast.Raise, ast.Yield, ast.YieldFrom, ast.Await)


class AppendsAfterWrites(Canonicalization):
    """Moves ``xs.append(v)`` in a loop body past the in-place writes into ``v`` that follow it."""

    def apply(self) -> None:
        _visit(self.ctx.fdef.body, in_loop=False)


def _visit(block: list[ast.stmt], in_loop: bool) -> list[ast.stmt]:
    """``block`` and the blocks nested in it, each once, with the appends of those inside a loop
    moved (a nested ``def`` is another scope, left alone by :func:`map_blocks`)."""
    for stmt in block:
        inside = in_loop or isinstance(stmt, (ast.For, ast.While))
        map_blocks(stmt, lambda inner, inside=inside: _visit(inner, inside))
    if in_loop:
        _defer_appends(block)
    return block


def _defer_appends(block: list[ast.stmt]) -> None:
    position = 0
    while position < len(block):
        appended = _append_of_a_name(block[position])
        if appended is None:
            position += 1
            continue
        owner, value = appended
        target = _after_last_write(block, position, owner, value)
        if target > position + 1:
            block.insert(target - 1, block.pop(position))
            continue  # the statement now at ``position`` is the next one
        position += 1


def _append_of_a_name(stmt: ast.stmt) -> tuple[str, str] | None:
    """``(xs, v)`` of a statement ``xs.append(v)`` with both plain names, else None."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    call = stmt.value
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "append" and isinstance(call.func.value, ast.Name)
            and len(call.args) == 1 and isinstance(call.args[0], ast.Name) and not call.keywords):
        return None
    return call.func.value.id, call.args[0].id


def _after_last_write(block: list[ast.stmt], position: int, owner: str, value: str) -> int:
    """The index just past the last statement after ``block[position]`` that writes into ``value``
    in place, among those the append may move past; ``position + 1`` when there is none."""
    target = position + 1
    for index in range(position + 1, len(block)):
        stmt = block[index]
        if _reads(stmt, owner) or _leaves(stmt):
            break
        if _binds(stmt, value):
            break
        if value in analysis.mutated(stmt):  # v[m] = inf, v.masked_fill_(..), through a view of v too
            target = index + 1
    return target


def _reads(stmt: ast.stmt, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(stmt))


def _leaves(stmt: ast.stmt) -> bool:
    return any(isinstance(n, _LEAVING) for n in walk_same_scope(stmt))


def _binds(stmt: ast.stmt, name: str) -> bool:
    """``stmt`` binds ``name`` itself (an assignment, a for target, a with item, ``x += 1`` on it)."""
    return any(isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, (ast.Store, ast.Del))
               for node in walk_same_scope(stmt))
