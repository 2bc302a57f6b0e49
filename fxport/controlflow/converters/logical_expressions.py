"""``and``/``or``/``not`` and chained comparisons → ``_fx.and_``/``_fx.or_``/``_fx.not_``;
``x in (a, b)`` over a literal tuple or list → ``_fx.in_`` (a bool tensor for a traced ``x``).

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
        if len(node.ops) == 1 and isinstance(node.ops[0], (ast.In, ast.NotIn)) and isinstance(
                node.comparators[0], (ast.Tuple, ast.List)):  # y not in (blank, unk): y may be a traced item()
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
