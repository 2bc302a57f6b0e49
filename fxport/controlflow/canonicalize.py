"""Canonicalisation passes: rewrite exits (return/break/continue) into flags and tail returns.

After these passes the only ``return`` of a function is its last statement, and loop bodies
contain no ``break``/``continue`` (AutoGraph's return/break/continue canonicalisation):

* ``return`` inside a loop → ``_fx_retval = v; _fx_do_return = True; break`` and, after the
  loop, ``if _fx_do_return: return _fx_retval``.
* ``break``/``continue`` → a flag; the rest of the body is guarded with ``if not flag:`` and a
  ``while`` test becomes ``not _fx_break_N and (test)`` (``for`` loops get an extra test).
* ``return`` inside an ``if`` → the rest of the function moves into the branch that falls
  through; every path then ends in a tail return, which becomes ``_fx_retval = v`` with one
  ``return _fx_retval`` at the end.
"""

from __future__ import annotations

import ast
import copy
import itertools

from fxport.controlflow.analysis import contains

RETVAL = "_fx_retval"
DO_RETURN = "_fx_do_return"


def _name(id_: str, store: bool = False) -> ast.Name:
    return ast.Name(id=id_, ctx=ast.Store() if store else ast.Load())


def _assign(name: str, value: ast.expr, like: ast.AST) -> ast.Assign:
    return ast.copy_location(ast.Assign(targets=[_name(name, True)], value=value), like)


def _const(value) -> ast.Constant:
    return ast.Constant(value=value)


def _flags_test(flags: list[str], like: ast.AST) -> ast.expr:
    """``not (f1 or f2)`` for the guard of the statements after an exit."""
    flag_expr = _name(flags[0]) if len(flags) == 1 else ast.BoolOp(op=ast.Or(), values=[_name(f) for f in flags])
    return ast.copy_location(ast.UnaryOp(op=ast.Not(), operand=flag_expr), like)


# --- return inside loops ---------------------------------------------------------------------


class _ReturnInLoop(ast.NodeTransformer):
    """``return`` inside loops → retval/do_return flags + break; re-return after the loop."""

    def __init__(self):
        self.depth = 0
        self.used = False
        self.replaced = 0  # returns rewritten so far

    def visit_FunctionDef(self, node):  # nested scopes keep their own returns
        return node

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef

    def _visit_loop(self, node):
        self.depth += 1
        before = self.replaced
        self.generic_visit(node)
        self.depth -= 1
        if self.replaced == before:
            return node
        self.used = True
        exit_stmt = ast.Return(value=_name(RETVAL)) if self.depth == 0 else ast.Break()
        after = ast.copy_location(ast.If(test=_name(DO_RETURN), body=[ast.copy_location(exit_stmt, node)], orelse=[]), node)
        return [node, after]

    visit_While = visit_For = _visit_loop

    def visit_Return(self, node):
        if self.depth == 0:
            return node
        self.replaced += 1
        value = node.value if node.value is not None else _const(None)
        return [_assign(RETVAL, value, node), _assign(DO_RETURN, _const(True), node), ast.copy_location(ast.Break(), node)]


def canonicalize_returns_in_loops(fdef: ast.FunctionDef) -> None:
    pass_ = _ReturnInLoop()
    fdef.body = [s for stmt in fdef.body for s in _as_list(pass_.visit(stmt))]
    if pass_.used:
        first = fdef.body[0]
        fdef.body[:0] = [_assign(DO_RETURN, _const(False), first), _assign(RETVAL, _const(None), first)]


def _as_list(value):
    return value if isinstance(value, list) else [value]


# --- break / continue ------------------------------------------------------------------------

_counter = itertools.count(1)


class _LoopExits(ast.NodeTransformer):
    """break/continue → flags; innermost loops first."""

    def visit_FunctionDef(self, node):
        return node

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef

    def _visit_loop(self, node):
        self.generic_visit(node)
        has_break = contains(node.body, ast.Break, stop_at_loops=True)
        has_continue = contains(node.body, ast.Continue, stop_at_loops=True)
        if not (has_break or has_continue):
            return node
        n = next(_counter)
        flags = {}
        if has_break:
            flags[ast.Break] = f"_fx_break_{n}"
        if has_continue:
            flags[ast.Continue] = f"_fx_continue_{n}"
        body = _guard_block(node.body, flags)
        prefix: list[ast.stmt] = []
        if has_continue:
            body.insert(0, _assign(flags[ast.Continue], _const(False), node.body[0]))
        if has_break:
            brk = flags[ast.Break]
            prefix.append(_assign(brk, _const(False), node))
            node._fx_break_flag = brk
            if isinstance(node, ast.While):
                node.test = ast.copy_location(
                    ast.BoolOp(op=ast.And(), values=[ast.UnaryOp(op=ast.Not(), operand=_name(brk)), node.test]), node.test
                )
            if node.orelse:
                node.orelse = [ast.copy_location(ast.If(test=_flags_test([brk], node), body=node.orelse, orelse=[]), node.orelse[0])]
        node.body = body
        return prefix + [node]

    visit_While = visit_For = _visit_loop


def _guard_block(stmts: list[ast.stmt], flags: dict) -> list[ast.stmt]:
    kinds = tuple(flags)
    out: list[ast.stmt] = []
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, kinds):
            out.append(_assign(flags[type(stmt)], _const(True), stmt))
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


def canonicalize_loop_exits(fdef: ast.FunctionDef) -> None:
    fdef.body = [s for stmt in fdef.body for s in _as_list(_LoopExits().visit(stmt))]


# --- return inside if ------------------------------------------------------------------------


def _has_return(stmts) -> bool:
    return contains(stmts, ast.Return, stop_at_loops=True)


def lift_returns(stmts: list[ast.stmt]) -> tuple[list[ast.stmt], bool]:
    """Move the statements after an ``if`` that returns into its falling-through branch.

    Returns the new statements and whether every path through them returns.
    """
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, ast.Return):
            return stmts[: i + 1], True
        if isinstance(stmt, ast.If) and _has_return(stmt.body + stmt.orelse):
            rest = stmts[i + 1 :]
            stmt.body, body_returns = _lift_branch(stmt.body, rest)
            stmt.orelse, else_returns = _lift_branch(stmt.orelse, rest)
            return stmts[:i] + [stmt], body_returns and else_returns
    return stmts, False


def _lift_branch(branch: list[ast.stmt], rest: list[ast.stmt]) -> tuple[list[ast.stmt], bool]:
    lifted, returns = lift_returns(branch)
    if returns or not rest:
        return lifted, returns
    return lift_returns(lifted + copy.deepcopy(rest))


def _tail_to_retval(stmts: list[ast.stmt], like: ast.AST) -> list[ast.stmt]:
    if not stmts:
        return [_assign(RETVAL, _const(None), like)]
    last = stmts[-1]
    if isinstance(last, ast.Return):
        return stmts[:-1] + [_assign(RETVAL, last.value or _const(None), last)]
    if isinstance(last, ast.If) and _has_return(last.body + last.orelse):
        last.body = _tail_to_retval(last.body, last)
        last.orelse = _tail_to_retval(last.orelse, last)
        return stmts
    return stmts + [_assign(RETVAL, _const(None), last)]


def canonicalize_returns(fdef: ast.FunctionDef) -> None:
    """Make the function's only return its last statement (when returns sit inside ifs)."""
    nested = any(_has_return([s]) for s in fdef.body if not isinstance(s, ast.Return))
    if not nested:
        return
    body, _ = lift_returns(fdef.body)
    body = _tail_to_retval(body, fdef)
    fdef.body = body + [ast.copy_location(ast.Return(value=_name(RETVAL)), body[-1])]
