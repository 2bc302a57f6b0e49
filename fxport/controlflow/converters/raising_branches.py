"""``if c: raise E`` → ``_fx.asserts.raise_if(c, lambda: E, ...)``: a check, like ``assert not c``.

A branch that only raises is a check on the model's input, not a computation: ``if x.numel() ==
0: raise ValueError(...)``, the ``else: raise ValueError("Unexpected trace")`` that ends the
``if``/``elif`` chain of Whisper's DTW backtrace. Canonicalised into a call (before the exits and
the analysis), it is no longer a side effect of the loop or branch around it. The operator
(:func:`fxport.controlflow.operators.asserts.raise_if`) raises as Python does for a Python
value and whenever the model runs eagerly (verification, coverage); on a tensor's value while
exporting it is left out of the file with one warning at the ``raise`` (as an assert on a
tensor is), or refused there with ``--disable raise-on-tensor``. Only a branch whose one
statement is ``raise E`` (an exception, no ``from``) is rewritten; the other branch's statements
follow the check.

Example::

    >>> import ast
    >>> from fxport.controlflow.context import Context
    >>> def f(x):
    ...     if x.sum() < 0:
    ...         raise ValueError("negative")
    ...     elif x.sum() > 9:
    ...         x = x / 9
    ...     else:
    ...         raise ValueError("unexpected")
    ...     return x
    >>> ctx = Context(f)
    >>> RaisingBranches(ctx).apply()
    >>> print(ast.unparse(ctx.fdef.body[0]))
    _fx.asserts.raise_if(x.sum() < 0, lambda: ValueError('negative'), _fx.statement(_fx_meta, 1))
    >>> print(ast.unparse(ctx.fdef.body[1]))
    _fx.asserts.raise_if(x.sum() > 9, lambda: ValueError('unexpected'), _fx.statement(_fx_meta, 0), negate=True)
"""

from __future__ import annotations

import ast

from fxport.controlflow.astutil import at, call, lambda_, meta, rt
from fxport.controlflow.converters.base import Canonicalization
from fxport.controlflow.operators.info import StatementInfo
from fxport.controlflow.operators.left_out import register


class RaisingBranches(Canonicalization):
    """``if c: raise E`` / ``else: raise E`` → a ``raise_if`` check and the other branch (module doc)."""

    def apply(self) -> None:
        _Rewriter(self.ctx).visit(self.ctx.fdef)


class _Rewriter(ast.NodeTransformer):
    def __init__(self, ctx):
        self.ctx = ctx
        self.top = True

    def visit_FunctionDef(self, node):
        if not self.top:
            return node  # nested user functions are left as written
        self.top = False
        self.generic_visit(node)
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        return node

    def visit_If(self, node: ast.If):
        self.generic_visit(node)  # inner elif chains first
        if _only_raise(node.body) and not _only_raise(node.orelse):
            return [self._check(node, node.body[0], negate=False), *node.orelse]
        if _only_raise(node.orelse) and node.body:
            return [self._check(node, node.orelse[0], negate=True), *node.body]
        return node

    def _check(self, node: ast.If, raised: ast.Raise, negate: bool) -> ast.stmt:
        info = StatementInfo("raise", self.ctx.location(raised), ())
        index = self.ctx.add_info(info)
        register(info)  # the key of its marker, should it be left out of the file
        operator = ast.Attribute(value=rt("asserts"), attr="raise_if", ctx=ast.Load())
        check = call(operator, node.test, lambda_(raised.exc), meta(index))
        if negate:
            check.keywords.append(ast.keyword(arg="negate", value=ast.Constant(True)))
        return at(ast.Expr(check), raised)


def _only_raise(stmts: list[ast.stmt]) -> bool:
    """``[raise E]``: one statement, a raise of an exception without ``from`` (not a bare re-raise)."""
    return (len(stmts) == 1 and isinstance(stmts[0], ast.Raise) and stmts[0].exc is not None
            and stmts[0].cause is None)
