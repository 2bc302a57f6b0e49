"""A comparison that reads a size in an ``if``/``while`` test → ``_fx.sizes.compare``.

``if x.shape[0] > 0:``, ``while i < x.shape[0]:``, ``if len(xs) == 0:`` compare sizes; torch
may answer such a question for sizes of at least 2 only (fxport/controlflow/operators/sizes.py),
so these comparisons are decided by the operator, which turns an answer the range leaves open
into a tensor condition. Only comparisons whose text reads a size (``.shape``, ``.size(``,
``len(``, ``.numel(``) in a test (also under ``and``/``or``/``not``) are rewritten.

Example::

    >>> import ast
    >>> from fxport.controlflow.context import Context
    >>> def f(x):
    ...     if x.shape[0] > 0 and x.sum() > 1:
    ...         x = x + 1
    ...     return x
    >>> ctx = Context(f)
    >>> SizeComparisons(ctx).apply()
    >>> ast.unparse(ctx.fdef.body[0].test)
    "_fx.sizes.compare(x.shape[0], '>', 0) and x.sum() > 1"
"""

from __future__ import annotations

import ast

from fxport.controlflow.astutil import call, rt
from fxport.controlflow.converters.base import ExpressionConverter

_OPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}


class SizeComparisons(ExpressionConverter):
    """Rewrite the size comparisons of ``if``/``while`` tests and of ``a if c else b`` (by then
    an ``_fx.ifexp`` call)."""

    def visit_If(self, node):
        self.generic_visit(node)
        node.test = _in_test(node.test)
        return node

    visit_While = visit_If

    def visit_Call(self, node):
        """``_fx.ifexp(test, ...)``: what the conditional-expression converter made of ``a if c else b``."""
        self.generic_visit(node)
        if ast.unparse(node.func) == "_fx.ifexp" and node.args:
            node.args[0] = _in_test(node.args[0])
        return node


def _in_test(node: ast.expr) -> ast.expr:
    """``node`` with its size comparisons rewritten, through ``and``/``or``/``not`` and the
    thunks the logical converter makes of them."""
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _OPS and _reads_a_size(node):
        op = ast.Constant(_OPS[type(node.ops[0])])
        return ast.copy_location(call(ast.Attribute(rt("sizes"), "compare", ast.Load()), node.left, op,
                                      node.comparators[0]), node)
    if isinstance(node, ast.BoolOp):
        node.values = [_in_test(v) for v in node.values]
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        node.operand = _in_test(node.operand)
    elif isinstance(node, ast.Lambda):
        node.body = _in_test(node.body)
    elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("_fx.and_", "_fx.or_", "_fx.not_"):
        node.args = [_in_test(a) for a in node.args]
    return node


def _reads_a_size(node: ast.Compare) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr in ("shape", "size", "numel"):
            return True
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "len":
            return True
    return False
