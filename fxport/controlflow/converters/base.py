"""The four kinds of converter the engine applies, in this order.

* :class:`Canonicalization` — rewrites the whole function into a simpler form with the same
  meaning (``return``/``break``/``continue`` become flags); runs before the analysis.
* :class:`ExpressionConverter` — an ``ast.NodeTransformer`` over the function body that
  rewrites one kind of expression into an operator call (``a and b`` → ``_fx.and_(...)``).
* :class:`StatementConverter` — converts one kind of compound statement (``ast.If``, …) into
  outlined functions plus an operator call; the engine's block walk dispatches on
  ``node_type`` and the converter recurses into its own blocks with ``ctx.nested``.
* :class:`Finalization` — rewrites the converted function (its outlined blocks included) where
  outlining changed what a statement means (a ``del`` of a name now bound in a block only).

Example::

    >>> import ast
    >>> class NegConstants(ExpressionConverter):
    ...     def visit_Constant(self, node):
    ...         return ast.Constant(-node.value) if isinstance(node.value, int) else node
    >>> ast.unparse(NegConstants(None).visit(ast.parse("y = 2")))
    'y = -2'
"""

from __future__ import annotations

import ast
from typing import ClassVar


class Converter:
    """One construct's conversion; ``stage`` says when the engine applies it."""

    stage: ClassVar[str] = ""

    def __init__(self, ctx):
        self.ctx = ctx  # fxport.controlflow.context.Context


class Canonicalization(Converter):
    """Rewrite ``ctx.fdef`` in place into a simpler form with the same meaning."""

    stage: ClassVar[str] = "canonicalize"

    def apply(self) -> None:
        raise NotImplementedError


class ExpressionConverter(Converter, ast.NodeTransformer):
    """Rewrite expressions of one kind; nested functions and classes are left as written."""

    stage: ClassVar[str] = "expressions"

    def apply(self) -> None:
        self.ctx.fdef.body = [self.visit(stmt) for stmt in self.ctx.fdef.body]

    def visit_FunctionDef(self, node):
        return node  # nested user functions are left as written

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef


class StatementConverter(Converter):
    """Convert one kind of statement (``node_type``) given the names ``defined`` before it."""

    stage: ClassVar[str] = "statements"
    node_type: ClassVar[type]

    def convert(self, node: ast.stmt, defined: set[str]) -> list[ast.stmt]:
        raise NotImplementedError


class Finalization(Converter):
    """Rewrite ``ctx.fdef`` in place after the statement converters outlined its blocks."""

    stage: ClassVar[str] = "finalize"

    def apply(self) -> None:
        raise NotImplementedError
