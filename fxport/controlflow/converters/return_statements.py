"""``return`` inside loops and ifs → flags and a single tail return (canonicalisation).

After these converters the only ``return`` of a function is its last statement (AutoGraph's
return canonicalisation):

* ``return`` inside a loop → ``_fx_retval = v; _fx_do_return = True; break`` and, after the
  loop, ``if _fx_do_return: return _fx_retval`` (``break`` again in an enclosing loop).
* ``return`` inside an ``if`` → the rest of the function moves into the branch that falls
  through; every path then ends in a tail return, which becomes ``_fx_retval = v`` with one
  ``return _fx_retval`` at the end.

Example::

    >>> import ast
    >>> fdef = ast.parse("def f(x):\\n    if x:\\n        return 1\\n    return 2").body[0]
    >>> canonicalize_returns(fdef)
    >>> print(ast.unparse(fdef))
    def f(x):
        if x:
            _fx_retval = 1
        else:
            _fx_retval = 2
        return _fx_retval
"""

from __future__ import annotations

import ast
import copy

from fxport.controlflow.analysis import contains
from fxport.controlflow.astutil import assign, name
from fxport.controlflow.converters.base import Canonicalization

#: the variable holding the value a canonicalised ``return`` returns
RETVAL = "_fx_retval"
#: the flag a ``return`` inside a loop sets
DO_RETURN = "_fx_do_return"


class ReturnsInLoops(Canonicalization):
    """``return`` inside loops → flags and ``break`` (runs before break/continue become flags)."""

    def apply(self) -> None:
        canonicalize_returns_in_loops(self.ctx.fdef)


class ReturnsInIfs(Canonicalization):
    """``return`` inside ifs → one tail return (after break/continue became flags)."""

    def apply(self) -> None:
        canonicalize_returns(self.ctx.fdef, self.ctx.break_flags)


def _const(value) -> ast.Constant:
    return ast.Constant(value=value)


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
        exit_stmt = ast.Return(value=name(RETVAL)) if self.depth == 0 else ast.Break()
        after = ast.copy_location(ast.If(test=name(DO_RETURN), body=[ast.copy_location(exit_stmt, node)], orelse=[]), node)
        return [node, after]

    visit_While = visit_For = _visit_loop

    def visit_Return(self, node):
        if self.depth == 0:
            return node
        self.replaced += 1
        value = node.value if node.value is not None else _const(None)
        return [assign(RETVAL, value, node), assign(DO_RETURN, _const(True), node), ast.copy_location(ast.Break(), node)]


def canonicalize_returns_in_loops(fdef: ast.FunctionDef) -> None:
    """``return`` inside loops → flags, ``break`` and a return after the loop."""
    pass_ = _ReturnInLoop()
    fdef.body = [s for stmt in fdef.body for s in _as_list(pass_.visit(stmt))]
    if pass_.used:
        first = fdef.body[0]
        fdef.body[:0] = [assign(DO_RETURN, _const(False), first), assign(RETVAL, _const(None), first)]


def _as_list(value):
    return value if isinstance(value, list) else [value]


def _has_return(stmts) -> bool:
    return contains(stmts, ast.Return, stop_at_loops=True)


def lift_returns(stmts: list[ast.stmt], break_flags: dict | None = None) -> tuple[list[ast.stmt], bool]:
    """Move the statements after an ``if`` that returns into its falling-through branch.

    Returns the new statements and whether every path through them returns. A copy of a loop
    in ``break_flags`` (loop → flag) gets the loop's flag.
    """
    break_flags = break_flags if break_flags is not None else {}
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, ast.Return):
            return stmts[: i + 1], True
        if isinstance(stmt, ast.If) and _has_return(stmt.body + stmt.orelse):
            rest = stmts[i + 1 :]
            stmt.body, body_returns = _lift_branch(stmt.body, rest, break_flags)
            stmt.orelse, else_returns = _lift_branch(stmt.orelse, rest, break_flags)
            return stmts[:i] + [stmt], body_returns and else_returns
    return stmts, False


def _lift_branch(branch: list[ast.stmt], rest: list[ast.stmt], break_flags: dict) -> tuple[list[ast.stmt], bool]:
    lifted, returns = lift_returns(branch, break_flags)
    if returns or not rest:
        return lifted, returns
    return lift_returns(lifted + _copy(rest, break_flags), break_flags)


def _copy(stmts: list[ast.stmt], break_flags: dict) -> list[ast.stmt]:
    """A deep copy of ``stmts``; copied loops keep their break flag."""
    memo: dict = {}
    copied = copy.deepcopy(stmts, memo)
    for loop, flag in list(break_flags.items()):
        if id(loop) in memo:
            break_flags[memo[id(loop)]] = flag
    return copied


def _tail_to_retval(stmts: list[ast.stmt], like: ast.AST) -> list[ast.stmt]:
    if not stmts:
        return [assign(RETVAL, _const(None), like)]
    last = stmts[-1]
    if isinstance(last, ast.Return):
        return stmts[:-1] + [assign(RETVAL, last.value or _const(None), last)]
    if isinstance(last, ast.If) and _has_return(last.body + last.orelse):
        last.body = _tail_to_retval(last.body, last)
        last.orelse = _tail_to_retval(last.orelse, last)
        return stmts
    return stmts + [assign(RETVAL, _const(None), last)]


def canonicalize_returns(fdef: ast.FunctionDef, break_flags: dict | None = None) -> None:
    """Make the function's only return its last statement (when returns sit inside ifs).

    ``break_flags`` (loop → flag, from :mod:`.loop_exits`) gains the copies of flagged loops.
    """
    nested = any(_has_return([s]) for s in fdef.body if not isinstance(s, ast.Return))
    if not nested:
        return
    body, _ = lift_returns(fdef.body, break_flags)
    body = _tail_to_retval(body, fdef)
    fdef.body = body + [ast.copy_location(ast.Return(value=name(RETVAL)), body[-1])]
