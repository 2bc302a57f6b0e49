"""Call sites → ``_fx.call(f)(...)``, so user functions called from converted code are
converted too; ``torch.stack/cat`` of a list → ``_fx.stack/cat`` (lists grown in a
data-dependent loop) and ``int(t)`` → ``_fx.int_(t)``.

Plain names and ``self.method`` / ``module.function`` are wrapped; builtins, methods of local
values and calls into ``torch``/``math``/… are left as written.

Example::

    >>> import ast
    >>> from fxport.controlflow.context import Context
    >>> def f(self, x):
    ...     return torch.stack([self.block(x), helper(x).sum(), int(x)])
    >>> ctx = Context(f)
    >>> CallConverter(ctx).apply()
    >>> ast.unparse(ctx.fdef.body[0])
    'return _fx.stack([_fx.call(self.block)(x), _fx.call(helper)(x).sum(), _fx.int_(x)])'
"""

from __future__ import annotations

import ast
import builtins

from fxport.controlflow.astutil import RUNTIME, call, rt
from fxport.controlflow.converters.base import ExpressionConverter

_PLAIN_CALL_ROOTS = {
    "torch", "F", "nn", "math", "np", "numpy", "operator", "functools", "itertools", RUNTIME,
}
_BUILTINS = set(dir(builtins))


class CallConverter(ExpressionConverter):
    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        if _is_torch_attr(func, ("stack", "cat", "concat", "concatenate")) and node.args:
            node.func = rt(func.attr if func.attr in ("stack", "cat") else "cat")
            return node
        if isinstance(func, ast.Name) and func.id == "int" and len(node.args) == 1 and not node.keywords:
            node.func = ast.copy_location(rt("int_"), func)
            return node
        if not self._may_be_user_function(func):
            return node
        node.func = ast.copy_location(call(rt("call"), func), func)
        return node

    def _may_be_user_function(self, func: ast.expr) -> bool:
        """Plain names and ``self.method`` / ``module.function``; not methods of local values."""
        if isinstance(func, ast.Name):
            return func.id not in _BUILTINS and func.id not in _PLAIN_CALL_ROOTS
        if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
            return False
        root = func.value.id
        if root == self.ctx.self_name:
            return True
        return root not in self.ctx.local_names and root not in _PLAIN_CALL_ROOTS


def _is_torch_attr(func: ast.expr, attrs: tuple[str, ...]) -> bool:
    return isinstance(func, ast.Attribute) and func.attr in attrs and isinstance(func.value, ast.Name) and func.value.id == "torch"
