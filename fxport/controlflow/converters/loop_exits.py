"""``break``/``continue`` → flags (canonicalisation); loop bodies end up without them.

A body's leading ``if t: break`` becomes the loop's stop test (``_fx_stop(t)``). Other
``break``/``continue`` set a flag; the rest of the body is guarded with ``if not flag:``, a
``while`` test becomes ``not _fx_break_N and (test)`` and a ``for`` loop's operator checks the
break flag before each iteration (the flag is recorded in ``ctx.break_flags`` for the
analysis). Flags are numbered per function, innermost loops first, so converting a function
twice gives the same source. Before all that (and before ``xs += [..]`` become appends),
:class:`BreakTails` moves the last statements of the only break path of a ``while True`` that
rebind a list the loop grows to right after the loop (:func:`move_break_tails`).

Example::

    >>> import ast
    >>> src = "def f(x):\\n    while x:\\n        if x > 9:\\n            break\\n        x = x - 1\\n        if x == 3:\\n            break\\n        x = x * 2"
    >>> fdef = ast.parse(src).body[0]
    >>> flags = canonicalize_loop_exits(fdef)
    >>> print(ast.unparse(fdef))
    def f(x):
        _fx_break_1 = False
        while not _fx_break_1 and x:
            _fx_stop(x > 9)
            x = x - 1
            if x == 3:
                _fx_break_1 = True
            if not _fx_break_1:
                x = x * 2
    >>> list(flags.values())
    ['_fx_break_1']
"""

from __future__ import annotations

import ast
import itertools

from fxport.controlflow.analysis import contains, reads, writes
from fxport.controlflow.astutil import assign, name
from fxport.controlflow.facts import expensive_reasons
from fxport.controlflow.converters.base import Canonicalization


class LoopExits(Canonicalization):
    """break/continue → flags (see the module doc)."""

    def apply(self) -> None:
        self.ctx.break_flags.update(canonicalize_loop_exits(self.ctx.fdef))


class BreakTails(Canonicalization):
    """The statements before the only ``break`` of a ``while True`` that rebind a list the loop
    grows → after the loop (see :func:`move_break_tails`); before ``xs += [..]`` become appends."""

    def apply(self) -> None:
        move_break_tails(self.ctx.fdef)


def _const(value) -> ast.Constant:
    return ast.Constant(value=value)


def _flags_test(flags: list[str], like: ast.AST) -> ast.expr:
    """``not (f1 or f2)`` for the guard of the statements after an exit."""
    flag_expr = name(flags[0]) if len(flags) == 1 else ast.BoolOp(op=ast.Or(), values=[name(f) for f in flags])
    return ast.copy_location(ast.UnaryOp(op=ast.Not(), operand=flag_expr), like)


class _LoopExits(ast.NodeTransformer):
    """break/continue → flags; innermost loops first."""

    def __init__(self):
        self.counter = itertools.count(1)  # per function: the same function gives the same names
        self.break_flags: dict[ast.AST, str] = {}

    def visit_FunctionDef(self, node):
        return node

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef

    def _visit_loop(self, node):
        self.generic_visit(node)
        _fold_leading_break(node)
        has_break = contains(node.body, ast.Break, stop_at_loops=True)
        has_continue = contains(node.body, ast.Continue, stop_at_loops=True)
        if not (has_break or has_continue):
            return node
        n = next(self.counter)
        flags = {}
        if has_break:
            flags[ast.Break] = f"_fx_break_{n}"
        if has_continue:
            flags[ast.Continue] = f"_fx_continue_{n}"
        body = _guard_block(node.body, flags)
        prefix: list[ast.stmt] = []
        if has_continue:  # reset at each iteration's start, after a folded stop test (read before it)
            marker = 1 if stop_test(node) is not None else 0
            body.insert(marker, assign(flags[ast.Continue], _const(False), node.body[0]))
        if has_break:
            brk = flags[ast.Break]
            prefix.append(assign(brk, _const(False), node))
            self.break_flags[node] = brk
            if isinstance(node, ast.While):
                node.test = ast.copy_location(
                    ast.BoolOp(op=ast.And(), values=[ast.UnaryOp(op=ast.Not(), operand=name(brk)), node.test]), node.test
                )
            if node.orelse:
                node.orelse = [ast.copy_location(ast.If(test=_flags_test([brk], node), body=node.orelse, orelse=[]), node.orelse[0])]
        node.body = body
        return prefix + [node]

    visit_While = visit_For = _visit_loop


#: loop bodies keep a folded leading break test as ``_fx_stop(t)``, their first statement, which
#: the expression passes convert and liveness reads as the iteration's first read; the loop
#: converters take it out as the loop's stop test (see _fold_leading_break)
STOP = "_fx_stop"


def _fold_leading_break(node) -> None:
    """``for x in it: if t: break; rest`` → ``for x in it: _fx_stop(t); rest`` (and the same for a
    ``while``): ``t`` becomes the loop's stop test, asked before each iteration (after a
    ``while``'s test). Not with an ``else`` clause, nor where ``t`` reads a ``for`` target.

    A break that is the body's first statement leaves before the iteration does anything, so it
    is part of the loop's test: folded there, the rest of the body is not guarded by an ``if``
    whose sides differ in shape (``if finished.all(): break`` before a cache that grows).
    """
    while _leading_break(node) is not None:
        test = node.body.pop(1 if stop_test(node) is not None else 0).test
        before = stop_test(node)
        if before is not None:
            node.body.pop(0)
            test = ast.copy_location(ast.BoolOp(op=ast.Or(), values=[before, test]), test)
        marker = ast.Expr(value=ast.Call(func=name(STOP), args=[test], keywords=[]))
        node.body.insert(0, ast.copy_location(marker, test))


def stop_test(node) -> ast.expr | None:
    """The folded stop test of a ``for`` loop (its body's ``_fx_stop(t)``), or None."""
    first = node.body[0] if node.body else None
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Call) and isinstance(first.value.func, ast.Name)
            and first.value.func.id == STOP):
        return first.value.args[0]
    return None


def _leading_break(node) -> ast.expr | None:
    """The test of ``if t: break`` opening a loop's body, when it may fold (see above)."""
    if not isinstance(node, (ast.While, ast.For)) or node.orelse or len(node.body) < 2:
        return None
    first = node.body[1] if stop_test(node) is not None else node.body[0]
    if first is not node.body[0] and len(node.body) < 3:
        return None
    if not (isinstance(first, ast.If) and not first.orelse and len(first.body) == 1 and isinstance(first.body[0], ast.Break)):
        return None
    if isinstance(node, ast.For) and (reads(first.test) & writes(node.target) or contains(first.test, ast.NamedExpr)):
        return None
    if expensive_reasons([ast.Expr(value=first.test)]):
        return None  # a loop test runs where the iteration would not (past the end): only a cheap, safe one
    return first.test


def _guard_block(stmts: list[ast.stmt], flags: dict) -> list[ast.stmt]:
    kinds = tuple(flags)
    out: list[ast.stmt] = []
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, kinds):
            out.append(assign(flags[type(stmt)], _const(True), stmt))
            return out
        if contains(stmt, kinds, stop_at_loops=True):
            out.append(_guard_nested(stmt, flags))
            rest = stmts[i + 1 :]
            if rest:
                out.append(ast.copy_location(ast.If(test=_flags_test(list(flags.values()), rest[0]), body=_guard_block(rest, flags), orelse=[]), rest[0]))
            return out
        out.append(stmt)
    return out


def _guard_nested(stmt: ast.stmt, flags: dict) -> ast.stmt:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(stmt, field, None)
        if block and not isinstance(stmt, (ast.While, ast.For)):
            setattr(stmt, field, _guard_block(block, flags))
    if isinstance(stmt, (ast.While, ast.For)) and stmt.orelse:
        stmt.orelse = _guard_block(stmt.orelse, flags)
    for handler in getattr(stmt, "handlers", []):
        handler.body = _guard_block(handler.body, flags)
    return stmt


def move_break_tails(fdef: ast.FunctionDef) -> None:
    """Move the tail of the break path of each ``while True`` loop that leaves only by one
    ``break`` out of the loop, where that tail rebinds a list the loop grows.

    ``while True: ...; outs.append(o); if stop: outs = torch.cat(outs); break`` (ESPnet's TTS
    decoder) makes ``outs`` a list on the paths that go on and a tensor on the one that leaves:
    no traced loop can carry that. The statements run just before the ``break`` (the run of
    them, in its block, that holds no ``break``/``continue``/``return``) run last in the loop, and
    the loop is left only there, so the same statements right after the loop run on the same
    values, in the same order, and nothing of the loop runs between them: the loop then carries a
    list only. Only when the path from the loop's body to the ``break`` goes through ``if``
    statements alone (a ``try``/``with`` would run its exit code between them), the loop's test
    is a true constant and it has no ``else``; anything else is left as written.

    >>> src = ("def f(x):\\n    outs = []\\n    while True:\\n        outs += [x]\\n"
    ...        "        if len(outs) > 2:\\n            outs = sum(outs)\\n            break\\n    return outs")
    >>> fdef = ast.parse(src).body[0]
    >>> move_break_tails(fdef)
    >>> print(ast.unparse(fdef))
    def f(x):
        outs = []
        while True:
            outs += [x]
            if len(outs) > 2:
                break
        outs = sum(outs)
        return outs
    """
    fdef.body = [s for stmt in fdef.body for s in _as_list(_BreakTails().visit(stmt))]


_EXITS = (ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom, ast.Await)


class _BreakTails(ast.NodeTransformer):
    def visit_FunctionDef(self, node):
        return node

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef

    def visit_While(self, node):
        self.generic_visit(node)
        if node.orelse or not (isinstance(node.test, ast.Constant) and node.test.value):
            return node
        breaks = list(_breaks(node.body, through_ifs_only=True))
        if len(breaks) != 1 or breaks[0] is None:
            return node
        block, at = breaks[0]
        start = at
        while start > 0 and not contains(block[start - 1], _EXITS, stop_at_loops=True):
            start -= 1
        tail = block[start:at]
        if not tail or not (writes(tail) & _grown_lists(node.body, tail)):
            return node
        del block[start:at]
        return [node, *tail]


def _breaks(stmts: list[ast.stmt], through_ifs_only: bool):
    """``(block, index)`` of each ``break`` of the loop whose body is ``stmts`` (None for one
    reached through anything but ``if`` statements)."""
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, ast.Break):
            yield (stmts, i) if through_ifs_only else None
        elif isinstance(stmt, ast.If):
            yield from _breaks(stmt.body, through_ifs_only)
            yield from _breaks(stmt.orelse, through_ifs_only)
        elif isinstance(stmt, (ast.While, ast.For, ast.AsyncFor)):
            yield from _breaks(stmt.orelse, False)  # a loop's else breaks the enclosing loop
        elif not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for block in _blocks(stmt):
                yield from _breaks(block, False)


def _blocks(stmt: ast.stmt):
    for field in ("body", "orelse", "finalbody"):
        block = getattr(stmt, field, None)
        if isinstance(block, list):
            yield block
    for handler in getattr(stmt, "handlers", []):
        yield handler.body
    for case in getattr(stmt, "cases", []):
        yield case.body


def _grown_lists(body: list[ast.stmt], tail: list[ast.stmt]) -> set[str]:
    """Names the loop body grows as lists outside ``tail``: ``xs.append(..)``, ``xs.extend(..)``,
    ``xs.insert(..)``, ``xs += [..]``."""
    in_tail = {id(n) for stmt in tail for n in ast.walk(stmt)}
    grown = set()
    for stmt in body:
        for node in ast.walk(stmt):
            if id(node) in in_tail:
                continue
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("append", "extend", "insert") and isinstance(node.func.value, ast.Name)):
                grown.add(node.func.value.id)
            elif (isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and isinstance(node.target, ast.Name)
                  and isinstance(node.value, (ast.List, ast.ListComp))):
                grown.add(node.target.id)
    return grown


def canonicalize_loop_exits(fdef: ast.FunctionDef) -> dict[ast.AST, str]:
    """Rewrite break/continue in ``fdef``'s loops into flags; ``{loop: its break flag}``."""
    pass_ = _LoopExits()
    fdef.body = [s for stmt in fdef.body for s in _as_list(pass_.visit(stmt))]
    return pass_.break_flags


def _as_list(value):
    return value if isinstance(value, list) else [value]
