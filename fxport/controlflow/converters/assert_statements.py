"""``assert test, message`` → ``_fx.asserts.assert_stmt(test, lambda: message, _fx.statement(_fx_meta, i))``.

The operator runs Python's assert for Python values and refuses a tensor condition while
exporting (:mod:`fxport.controlflow.operators.asserts`). Under ``python -O`` asserts are left
as written, so Python drops them as it would.

Example::

    >>> from fxport.controlflow.engine import convert_function
    >>> def f(self, x):
    ...     assert x.sum() > 0, "x must sum above 0"
    ...     return x
    >>> print(convert_function(f).source.after)
    def f(self, x):
        _fx.asserts.assert_stmt(x.sum() > 0, lambda: 'x must sum above 0', _fx.statement(_fx_meta, 0))
        return x
"""

from __future__ import annotations

import ast

from fxport.controlflow.astutil import at, call, lambda_, meta, rt
from fxport.controlflow.converters.base import StatementConverter
from fxport.controlflow.operators.info import StatementInfo
from fxport.controlflow.operators.left_out import register


class AssertConverter(StatementConverter):
    node_type = ast.Assert

    def convert(self, node: ast.Assert, defined: set[str]) -> list[ast.stmt]:
        if not __debug__:
            return [node]
        info = StatementInfo("assert", self.ctx.location(node), ())
        index = self.ctx.add_info(info)
        register(info)  # the key of its marker, should it be left out of the file
        message = lambda_(node.msg) if node.msg is not None else ast.Constant(None)
        operator = ast.Attribute(value=rt("asserts"), attr="assert_stmt", ctx=ast.Load())
        return [at(ast.Expr(call(operator, node.test, message, meta(index))), node)]
