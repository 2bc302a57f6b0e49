"""``and``/``or``/``not`` and chained comparisons → ``_fx.and_``/``_fx.or_``/``_fx.not_``;
``x in c`` → ``_fx.in_`` (a bool tensor for a traced ``x`` in a literal tuple or list, or for
any ``x`` in a traced tensor ``c``; Python's ``in`` for the rest);
``bool(c)`` as an ``if``/``while`` test (or an operand of its ``and``/``or``/``not``) → ``c``:
Python asks the same truth of both, and a traced ``c`` stays a tensor condition the statement
converts, where ``bool()`` would read its value (``if bool(done.all()): break``).

The operands of ``and``/``or`` become thunks, so the right one runs only when Python would
run it; ``a < b < c`` is ``a < b and b < c`` (Python calls ``bool()`` in between).

Example::

    >>> import ast
    >>> def f(x, y):
    ...     return not (x and y) or 0 < x < 1
    >>> from fxport.controlflow.context import Context
    >>> ctx = Context(f)
    >>> LogicalConverter(ctx).apply()
    >>> ast.unparse(ctx.fdef.body[0])
    'return _fx.or_(lambda: _fx.not_(_fx.and_(lambda: x, lambda: y)), lambda: _fx.and_(lambda: 0 < x, lambda: x < 1))'
"""

from __future__ import annotations

import ast
import copy

from fxport.controlflow.astutil import call, lambda_, rt
from fxport.controlflow.converters.base import ExpressionConverter


class LogicalConverter(ExpressionConverter):
    def visit_If(self, node):
        node.test = _truth_of(node.test)
        self.generic_visit(node)
        return node

    def visit_While(self, node):
        node.test = _truth_of(node.test)
        self.generic_visit(node)
        return node

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        op = "and_" if isinstance(node.op, ast.And) else "or_"
        result = node.values[-1]
        for value in reversed(node.values[:-1]):
            result = call(rt(op), lambda_(value), lambda_(result))
        return ast.copy_location(result, node)

    def visit_Compare(self, node):
        """``a < b < c`` → ``_fx.and_(lambda: a < b, lambda: b < c)``."""
        self.generic_visit(node)
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)):
            # y not in (blank, unk): y may be a traced item(); label in labels: a traced tensor
            found = ast.copy_location(call(rt("in_"), node.left, node.comparators[0]), node)
            return ast.copy_location(call(rt("not_"), found), node) if isinstance(node.ops[0], ast.NotIn) else found
        if len(node.ops) == 1:
            return node
        operands = [node.left] + node.comparators
        pairs = [
            ast.copy_location(ast.Compare(left=operands[i], ops=[op], comparators=[copy.deepcopy(operands[i + 1])]), node)
            for i, op in enumerate(node.ops)
        ]
        result = pairs[-1]
        for pair in reversed(pairs[:-1]):
            result = call(rt("and_"), lambda_(pair), lambda_(result))
        return ast.copy_location(result, node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(call(rt("not_"), node.operand), node)
        return node


def _truth_of(test: ast.expr) -> ast.expr:
    """``test`` with a ``bool(c)`` at its top, or at the top of an operand of its ``and``/``or``/
    ``not``, replaced by ``c`` (the same truth: Python calls ``bool()`` on a test's value)."""
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "bool" \
            and len(test.args) == 1 and not test.keywords:
        return _truth_of(test.args[0])
    if isinstance(test, ast.BoolOp):
        test.values = [_truth_of(v) for v in test.values]
    elif isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test.operand = _truth_of(test.operand)
    return test
