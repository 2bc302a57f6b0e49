"""``try`` statements in converted code: ``try/finally`` is inlined, ``except`` is refused.

A ``try`` is in converted code when it holds an ``if``/``while``/``for`` or sits in the body
of one: fxport outlines those statements into functions, and their state cannot be followed
through a ``try`` (before this converter an ``if`` inside a ``try`` lost its assignments).

* ``try: B finally: F`` becomes ``B`` then ``F``. On the normal path that is what Python runs;
  a traced graph has no exceptional path (an exception stops the export). ``break`` and
  ``continue`` are flags by now (:mod:`~fxport.controlflow.converters.loop_exits`, applied
  before), so ``F`` still runs after a ``break`` and the rest of the body is skipped, as in
  Python; a ``return`` inside a loop is a flag and a ``break`` too.
* A ``return`` left inside ``try/finally`` (not in a loop) is refused: assign and return after.
* ``except`` handlers are refused: the graph never raises, so a handler would never run in the
  ONNX file although it runs in eager PyTorch.

Other ``try`` statements are left as written. Refusals are one line at the ``try``'s line.

Example::

    >>> import ast
    >>> from fxport.controlflow.context import Context
    >>> def f(x, n):
    ...     while x.sum() < n:
    ...         try:
    ...             x = x * 2
    ...         finally:
    ...             n = n - 1
    ...     return x
    >>> ctx = Context(f)
    >>> TryStatements(ctx).apply()
    >>> print(ast.unparse(ctx.fdef.body[0]))
    while x.sum() < n:
        x = x * 2
        n = n - 1
"""

from __future__ import annotations

import ast

from fxport.controlflow.converters.base import Canonicalization
from fxport.controlflow.converters.exception_blocks import has_control_flow, holds, rewrite_blocks
from fxport.errors import ControlFlowError

_TRY = (ast.Try, ast.TryStar) if hasattr(ast, "TryStar") else (ast.Try,)


class TryStatements(Canonicalization):
    def apply(self) -> None:
        rewrite_blocks(self.ctx.fdef, self._rewrite)

    def _rewrite(self, stmt: ast.stmt, in_control_flow: bool) -> list[ast.stmt]:
        if not isinstance(stmt, _TRY) or not (in_control_flow or has_control_flow(stmt)):
            return [stmt]
        if stmt.handlers:
            self._refuse(stmt, "try/except inside or around an if/loop fxport converts cannot be converted: "
                         "a traced graph never raises, so the except body would never run in the ONNX model",
                         "move the try/except out of the model's forward (validate inputs before calling it) "
                         "or use torch._check for checks that must stay")
        returned = holds(stmt, (ast.Return,))
        if returned is not None:
            self._refuse(returned, "return inside try/finally around or inside an if/loop fxport converts "
                         "cannot be converted", "assign the result to a variable and return it after the try statement")
        return stmt.body + stmt.finalbody

    def _refuse(self, node: ast.AST, what: str, hint: str) -> None:
        raise ControlFlowError(what, where=self.ctx.location(node), hint=hint)
