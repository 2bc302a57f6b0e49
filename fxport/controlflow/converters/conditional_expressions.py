"""``a if c else b`` → ``_fx.ifexp(c, lambda: a, lambda: b, _fx.statement(_fx_meta, i))``.

An arm that is an empty list or tuple (``annotations[:, 0] if len(annotations) else []``) whose
value is only ever read as a sequence of rows (:func:`read_as_rows`) is marked in the
statement's ``rows``: under a tensor condition it becomes an empty tensor of the other arm's rows.

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

#: the value of an ``a if c else b`` in its StatementInfo's names
VALUE = "<value>"


class IfExpConverter(ExpressionConverter):
    def apply(self) -> None:
        self.rows = _ifexps_read_as_rows(self.ctx.fdef, read_as_rows(self.ctx))
        super().apply()

    def visit_IfExp(self, node):
        rows = (VALUE,) if id(node) in self.rows else ()
        self.generic_visit(node)
        index = self.ctx.add_info(StatementInfo("ifexp", self.ctx.location(node), (VALUE,), rows=rows))
        return ast.copy_location(call(rt("ifexp"), node.test, lambda_(node.body), lambda_(node.orelse), meta(index)), node)


def _ifexps_read_as_rows(fdef: ast.AST, names: set[str]) -> set[int]:
    """ids of the ``a if c else []`` (an arm an empty list or tuple) whose value is read only as
    rows: assigned to one of ``names``, or used in place as rows (``x in (a if c else [])``)."""
    parents = _parents(fdef)
    found = set()
    for node in ast.walk(fdef):
        if not (isinstance(node, ast.IfExp) and (is_empty_sequence(node.body) or is_empty_sequence(node.orelse))):
            continue
        parent = parents.get(id(node))
        assigned = (isinstance(parent, ast.Assign) and parent.value is node and len(parent.targets) == 1
                    and isinstance(parent.targets[0], ast.Name) and parent.targets[0].id in names)
        if assigned or _row_use(node, parents, frozenset()):
            found.add(id(node))
    return found


def is_empty_sequence(node: ast.AST | None) -> bool:
    """``[]``, ``()``, ``list()`` or ``tuple()`` as written (the operator checks the value itself)."""
    if isinstance(node, ast.Call):
        return (isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple") and not node.args
                and not node.keywords)
    return isinstance(node, (ast.List, ast.Tuple)) and not node.elts


def read_as_rows(ctx) -> set[str]:
    """The function's local names every read of which (as the user wrote the function, nested
    functions included) treats the value as a sequence of rows, where an empty list and a tensor
    of no rows mean the same: ``x in v`` / ``x not in v`` (False), ``len(v)`` (0), ``list(v)`` /
    ``tuple(v)`` (empty), and iterating it (``for r in v``, a comprehension, ``enumerate(v)``,
    ``zip(..., v)``: no item). ``v += ...``, ``bool(v)``, ``v[i]``, ``v.attr``, passing ``v`` to a
    function, returning it or binding it to another name are not (an empty tensor differs there).

    >>> from fxport.controlflow.context import Context
    >>> def f(a, n):
    ...     labels = a[:, 0] if n else []
    ...     kept = [] if n else a
    ...     return [x for x in a if x not in labels], len(labels), kept
    >>> sorted(read_as_rows(Context(f)) & {'labels', 'kept'})
    ['labels']
    """
    fdef = ast.parse(ctx.source_before).body[0]
    module_names = getattr(ctx.fn, "__globals__", {})
    shadowed = frozenset(b for b in _SEQUENCE_BUILTINS if b in module_names)
    parents = _parents(fdef)
    stored, bad = set(), set()
    for node in ast.walk(fdef):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            if node.id in ("locals", "vars", "eval", "exec"):
                return set()  # reads the source does not show
            if not _row_use(node, parents, shadowed):
                bad.add(node.id)
        elif isinstance(node, ast.Name):
            stored.add(node.id)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            bad.add(node.target.id)  # a list extends, a tensor adds
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bad |= set(node.names)
    return stored - bad


#: the builtins :func:`read_as_rows` knows (a module that defines its own is read as written)
_SEQUENCE_BUILTINS = ("len", "list", "tuple", "enumerate", "zip")


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}


def _row_use(node: ast.AST, parents: dict, shadowed: frozenset) -> bool:
    parent = parents.get(id(node))
    if (isinstance(parent, ast.Compare) and len(parent.ops) == 1 and isinstance(parent.ops[0], (ast.In, ast.NotIn))
            and parent.comparators[0] is node):
        return True
    if _builtin_call(parent, ("len", "list", "tuple"), shadowed) and parent.args == [node]:
        return True
    return _iterated(node, parents, shadowed)


def _iterated(node: ast.AST, parents: dict, shadowed: frozenset) -> bool:
    """``node`` is what a for loop or comprehension iterates, directly or through
    ``enumerate(node)`` / ``zip(..., node, ...)``."""
    parent = parents.get(id(node))
    if isinstance(parent, (ast.For, ast.AsyncFor, ast.comprehension)):
        return parent.iter is node
    if _builtin_call(parent, ("enumerate",), shadowed) and parent.args == [node] \
            or _builtin_call(parent, ("zip",), shadowed) and any(a is node for a in parent.args):
        return _iterated(parent, parents, shadowed)
    return False


def _builtin_call(node, names: tuple[str, ...], shadowed: frozenset) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names
            and node.func.id not in shadowed and not node.keywords
            and not any(isinstance(a, ast.Starred) for a in node.args))
