"""Lists of ints that converted code may hold as a tensor → ``_fx.lists.number_lists``.

``xs = [c] * n``, ``xs = n * [c]``, ``xs = [c for _ in range(...)]`` (``c`` an int constant or a
name) and ``xs = list(range(...))`` become ``_fx.lists.number_lists.repeat/repeat_range/range_list``
calls, and every ``xs[i] = v`` a ``number_lists.setitem``, when each use of ``xs`` in the
function is an item read or write (``xs[i]``, not a slice), ``len(xs)``, or a swap with another
such list (``a, b = b, a``), and the name is bound nowhere else. At run time the list is then a
1-D int64 tensor where its length is a dynamic size (operators/lists/number_lists.py); any other
use (``xs.append``, ``for x in xs``, ``xs + ys``, ``return xs``, ``torch.tensor(xs)``) leaves it a
Python list as written, since a tensor would answer those differently; of those, a list of one
constant (``[-1 for _ in range(n)]``) becomes ``number_lists.uniform``: at a dynamic length, an
object whose every item read is the constant, and which refuses any other use in one line.

Example::

    >>> import ast
    >>> from fxport.controlflow.context import Context
    >>> def f(x):
    ...     d = [0] * len(x)
    ...     d[0] = 1
    ...     return d[-1]
    >>> ctx = Context(f)
    >>> NumberLists(ctx).apply()
    >>> print(ast.unparse(ctx.fdef.body[0]))
    d = _fx.lists.number_lists.repeat(0, len(x))
"""

from __future__ import annotations

import ast
import copy

from fxport.controlflow.astutil import call, located, name
from fxport.controlflow.converters.base import Canonicalization


def _operator(attr: str) -> ast.Attribute:
    lists = ast.Attribute(value=ast.Attribute(value=name("_fx"), attr="lists", ctx=ast.Load()),
                          attr="number_lists", ctx=ast.Load())
    return ast.Attribute(value=lists, attr=attr, ctx=ast.Load())


def _is_item(node: ast.expr) -> bool:
    """An expression that may be an int: a constant int (not a bool, float or string), -k, or a name."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Name) or (isinstance(node, ast.Constant) and type(node.value) is int)


def _range_args(node: ast.expr) -> list[ast.expr] | None:
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"
            and 1 <= len(node.args) <= 3 and not node.keywords):
        return list(node.args)
    return None


def creation(value: ast.expr) -> ast.Call | None:
    """The ``number_lists`` call for a list creation this converter rewrites, else None."""
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult):
        for one, count in ((value.left, value.right), (value.right, value.left)):
            if isinstance(one, ast.List) and len(one.elts) == 1 and _is_item(one.elts[0]):
                return call(_operator("repeat"), one.elts[0], count)
    if isinstance(value, ast.ListComp) and len(value.generators) == 1:
        gen = value.generators[0]
        bounds = _range_args(gen.iter)
        if (bounds is not None and not gen.ifs and not gen.is_async and isinstance(gen.target, ast.Name)
                and _is_item(value.elt) and not (isinstance(value.elt, ast.Name) and value.elt.id == gen.target.id)):
            return call(_operator("repeat_range"), value.elt, *bounds)
    if (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "list"
            and len(value.args) == 1 and not value.keywords and _range_args(value.args[0]) is not None):
        return call(_operator("range_list"), *_range_args(value.args[0]))
    return None


def _parents(fdef: ast.AST) -> dict:
    parents = {}
    for node in ast.walk(fdef):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    return parents


def _swap_names(node: ast.Assign) -> set[str] | None:
    """The names of ``a, b = b, a`` (tuples of the same names on both sides), else None."""
    if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Tuple) or not isinstance(node.value, ast.Tuple):
        return None
    left, right = node.targets[0].elts, node.value.elts
    if not all(isinstance(e, ast.Name) for e in left + right):
        return None
    names = {e.id for e in left}
    return names if names == {e.id for e in right} and len(names) == len(left) == len(right) else None


def _use_ok(node: ast.Name, parents: dict, candidates: set[str], created: dict) -> bool:
    """One occurrence of a candidate name: an item read/write, len(), a swap, or its creation."""
    parent = parents.get(node)
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return not isinstance(parent.slice, (ast.Slice, ast.Tuple)) and not isinstance(parents.get(parent), ast.Delete)
    if isinstance(node.ctx, ast.Load) and isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) \
            and parent.func.id == "len" and parent.args == [node] and not parent.keywords:
        return True
    if isinstance(parent, ast.Tuple) and isinstance(parents.get(parent), ast.Assign):
        names = _swap_names(parents[parent])
        return names is not None and names <= candidates
    if isinstance(parent, ast.Assign) and isinstance(node.ctx, ast.Store) and parent.targets == [node]:
        return parent in created.get(node.id, ())
    return False


def candidates_of(fdef: ast.FunctionDef) -> dict[str, list[ast.Assign]]:
    """Names bound only by a rewritable creation (or a swap) and used only as :func:`_use_ok` allows."""
    created: dict[str, list[ast.Assign]] = {}
    for node in ast.walk(fdef):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and creation(node.value) is not None:
            created.setdefault(node.targets[0].id, []).append(node)
    params = {a.arg for a in fdef.args.args + fdef.args.posonlyargs + fdef.args.kwonlyargs}
    params |= {a.arg for a in (fdef.args.vararg, fdef.args.kwarg) if a is not None}
    candidates = set(created) - params
    parents = _parents(fdef)
    nested = {n for d in ast.walk(fdef) if d is not fdef and isinstance(d, (ast.FunctionDef, ast.Lambda,
                                                                          ast.AsyncFunctionDef, ast.ClassDef))
              for n in ast.walk(d) if isinstance(n, ast.Name)}
    changed = True
    while changed:
        changed = False
        for node in ast.walk(fdef):
            if isinstance(node, ast.Name) and node.id in candidates and (
                    node in nested or not _use_ok(node, parents, candidates, created)):
                candidates.discard(node.id)
                changed = True
        for node in ast.walk(fdef):  # global/nonlocal names are the enclosing scope's
            if isinstance(node, (ast.Global, ast.Nonlocal)) and candidates & set(node.names):
                candidates -= set(node.names)
                changed = True
    return {n: created[n] for n in candidates}


def _constant(node: ast.expr) -> bool:
    """A literal constant (``-1``, ``0.0``, ``None``, ``"x"``): the same object each item."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant)


def uniform(value: ast.expr) -> ast.Call | None:
    """The ``number_lists.uniform`` call for ``[c] * n`` / ``[c for _ in range(...)]`` with a constant ``c``."""
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult):
        for one, count in ((value.left, value.right), (value.right, value.left)):
            if isinstance(one, ast.List) and len(one.elts) == 1 and _constant(one.elts[0]):
                return call(_operator("uniform"), one.elts[0], count)
    if isinstance(value, ast.ListComp) and len(value.generators) == 1 and _constant(value.elt):
        gen = value.generators[0]
        bounds = _range_args(gen.iter)
        if bounds is not None and not gen.ifs and not gen.is_async and isinstance(gen.target, ast.Name):
            return call(_operator("uniform_range"), value.elt, *bounds)
    return None


class NumberLists(Canonicalization, ast.NodeTransformer):
    """Rewrite the creations and item writes of :func:`candidates_of`'s lists (before the
    canonicalisations that carry in-place writes: an item write here is a rebinding)."""

    def apply(self) -> None:
        self._lists = candidates_of(self.ctx.fdef)
        self.ctx.fdef.body = [self.visit(stmt) for stmt in self.ctx.fdef.body]

    def visit_FunctionDef(self, node):
        return node  # nested user functions are left as written

    visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = visit_FunctionDef

    def visit_Assign(self, node):
        target = node.targets[0] if len(node.targets) == 1 else None
        if isinstance(target, ast.Name) and target.id in self._lists and node in self._lists[target.id]:
            node.value = located(ast.copy_location(creation(node.value), node.value), node)
            return node
        if isinstance(target, ast.Name) and uniform(node.value) is not None:  # any other list of one constant
            node.value = located(ast.copy_location(uniform(node.value), node.value), node)
            return node
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id in self._lists:
            value = self.visit(node.value)
            write = call(_operator("setitem"), name(target.value.id), self.visit(target.slice), value)
            return located(ast.copy_location(ast.Assign(targets=[name(target.value.id, True)], value=write), node), node)
        self.generic_visit(node)
        return node

    def visit_AugAssign(self, node):
        target = node.target
        if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id in self._lists:
            read = ast.Subscript(value=name(target.value.id), slice=copy.deepcopy(target.slice), ctx=ast.Load())
            value = ast.copy_location(ast.BinOp(left=read, op=node.op, right=node.value), node)
            return self.visit_Assign(ast.copy_location(ast.Assign(targets=[target], value=value), node))
        self.generic_visit(node)
        return node
