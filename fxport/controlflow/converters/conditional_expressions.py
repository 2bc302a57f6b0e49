"""``a if c else b`` → ``_fx.ifexp(c, lambda: a, lambda: b, _fx.statement(_fx_meta, i))``.

Example::

    >>> import ast
    >>> from fxport.controlflow.context import Context
    >>> def f(x):
    ...     return x if x > 0 else -x
    >>> ctx = Context(f)
    >>> IfExpConverter(ctx).apply()
    >>> ast.unparse(ctx.fdef.body[0])
    'return _fx.ifexp(x > 0, lambda: x, lambda: -x, _fx.statement(_fx_meta, 0))'
"""

from __future__ import annotations

import ast

from fxport.controlflow.astutil import call, lambda_, meta, rt
from fxport.controlflow.converters.base import ExpressionConverter
from fxport.controlflow.operators.info import StatementInfo


class IfExpConverter(ExpressionConverter):
    def visit_IfExp(self, node):
        self.generic_visit(node)
        index = self.ctx.add_info(StatementInfo("ifexp", self.ctx.location(node), ("<value>",)))
        return ast.copy_location(call(rt("ifexp"), node.test, lambda_(node.body), lambda_(node.orelse), meta(index)), node)
