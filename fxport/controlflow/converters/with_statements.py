"""``with`` statements in converted code.

* Around an ``if``/``while``/``for``: a context manager that only switches autograd or does
  nothing (``torch.no_grad()``, ``torch.enable_grad()``, ``torch.inference_mode()``,
  ``torch.set_grad_enabled(...)``, ``contextlib.nullcontext()``, ``record_function(...)``,
  without ``as``) is inlined: the values are the same and the statements inside are outlined
  as usual. Any other one (``torch.autocast``, your own) is refused at the ``with`` line: its
  effect cannot be carried into the outlined branches and loop bodies.
* Inside the body of an ``if``/``while``/``for``: the context expression ``cm`` becomes
  ``_fx.context(cm, where)``, which lets ``torch.autocast`` and the harmless ones through and
  refuses any other context manager when the body is traced by ``torch.cond``/``while_loop``
  (its ``__enter__``/``__exit__`` would run once at trace time, not in the ONNX model).

Example::

    >>> import ast
    >>> from fxport.controlflow.context import Context
    >>> def f(self, x):
    ...     with torch.no_grad():
    ...         if x.sum() > 0:
    ...             with self.tracker():
    ...                 x = x * 2
    ...     return x
    >>> ctx = Context(f)
    >>> WithStatements(ctx).apply()
    >>> print(ast.unparse(ctx.fdef.body[0]).replace(ctx.filename, "m.py"))
    if x.sum() > 0:
        with _fx.context(self.tracker(), 'self.tracker()', 'm.py', 4, 'f'):
            x = x * 2
"""

from __future__ import annotations

import ast

from fxport.controlflow.astutil import call, located, rt
from fxport.controlflow.converters.base import Canonicalization
from fxport.controlflow.converters.exception_blocks import has_control_flow, rewrite_blocks
from fxport.errors import ControlFlowError

#: context managers that change nothing a traced graph computes, by the name they are called by
HARMLESS = {
    "torch.no_grad", "no_grad", "torch.enable_grad", "enable_grad", "torch.inference_mode", "inference_mode",
    "torch.set_grad_enabled", "set_grad_enabled", "torch.autograd.set_grad_enabled",
    "contextlib.nullcontext", "nullcontext",
    "torch.autograd.profiler.record_function", "torch.profiler.record_function", "record_function",
}
#: context managers left as written inside branch and loop bodies (torch traces them)
TRACED_AS_WRITTEN = HARMLESS | {
    "torch.autocast", "autocast", "torch.amp.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast",
}


class WithStatements(Canonicalization):
    def apply(self) -> None:
        rewrite_blocks(self.ctx.fdef, self._rewrite)

    def _rewrite(self, stmt: ast.stmt, in_control_flow: bool) -> list[ast.stmt]:
        if not isinstance(stmt, ast.With):
            return [stmt]
        if has_control_flow(stmt):
            return self._inlined(stmt)
        if in_control_flow:
            for item in stmt.items:
                if not _is_harmless(item, TRACED_AS_WRITTEN):
                    item.context_expr = self._checked(item.context_expr)
        return [stmt]

    def _inlined(self, stmt: ast.With) -> list[ast.stmt]:
        for item in stmt.items:
            if not _is_harmless(item):
                text = ast.unparse(item.context_expr)
                raise ControlFlowError(
                    f"with {text} around an if/loop fxport converts cannot be converted: the context "
                    "manager's effect cannot be carried into the outlined branches and loop bodies",
                    where=self.ctx.location(stmt),
                    hint="move the if/loop out of the with block, or the with block into the branch or loop body",
                )
        return stmt.body

    def _checked(self, expr: ast.expr) -> ast.expr:
        """``_fx.context(expr, 'expr', file, line, function)``: the refusal's parts are constants."""
        where = self.ctx.location(expr)
        parts = (ast.unparse(expr), where.filename, where.lineno, where.function)
        checked = call(rt("context"), expr, *(ast.Constant(p) for p in parts))
        return located(ast.copy_location(checked, expr), expr)


def _is_harmless(item: ast.withitem, names: set[str] = HARMLESS) -> bool:
    """A call of a context manager in ``names``; ``as`` is allowed only where it stays as written."""
    expr = item.context_expr
    if not isinstance(expr, ast.Call) or ast.unparse(expr.func) not in names:
        return False
    return item.optional_vars is None or names is TRACED_AS_WRITTEN
