"""Indexing with a computed index → ``_fx.getitem`` / ``_fx.setitem``.

``x[i]`` (an index with a name or a call in it) becomes ``_fx.getitem(x, i)`` and
``x[i] = v`` becomes ``x = _fx.setitem(x, i, v)``: with a traced 0-d index the operators
select/update without a guard on the index's value. Constant indices stay as written.

A statement of the function's own body (not inside an ``if``/``while``/``for``, where
state_targets.py has made the attribute a carried local) writing into an attribute,
``self.cache_k[:bsz, pos:pos + t] = xk``, becomes ``_fx.targets.item_written(self, 'cache_k',
index, xk)``: in place as written where the index is Python's, by position where it is traced (a
module called from a converted loop's body, whose position is the loop's counter).

Example::

    >>> import ast
    >>> from fxport.controlflow.context import Context
    >>> def f(x, i):
    ...     x[i] += x[0]
    >>> ctx = Context(f)
    >>> SliceConverter(ctx).apply()
    >>> ast.unparse(ctx.fdef.body[0])
    'x = _fx.setitem(x, i, _fx.getitem(x, i) + x[0])'
"""

from __future__ import annotations

import ast
import copy

from fxport.controlflow.astutil import call, located, name, rt, tuple_
from fxport.controlflow.converters.base import ExpressionConverter
from fxport.controlflow.facts import is_static_index


class SliceConverter(ExpressionConverter):
    def apply(self) -> None:
        self._own_statements = {id(stmt) for stmt in self.ctx.fdef.body}  # the function's own body
        super().apply()

    def visit_Call(self, node):
        """``x.narrow(dim, start, length)`` / ``torch.narrow(x, ...)`` → ``_fx.narrow(x, ...)``: a start
        that is a traced counter selects rows without reading it as a number (NeMo's RNN-T
        ``x.narrow(dim=0, start=time_idx, length=1)``); any other start runs as written. ``x.roll(s, d)``
        / ``torch.roll(x, s, d)`` → ``_fx.indexing.roll(x, s, d)``: a traced shift gathers the rows."""
        self.generic_visit(node)
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr in ("narrow", "roll")):
            return node
        if isinstance(func.value, ast.Name) and func.value.id == "torch":
            args = list(node.args)
        else:
            args = [func.value, *node.args]
        operator = rt("narrow") if func.attr == "narrow" else ast.Attribute(value=rt("indexing"), attr="roll", ctx=ast.Load())
        read = ast.Call(func=operator, args=args, keywords=list(node.keywords))
        return located(ast.copy_location(read, node), node) if getattr(node, "lineno", None) is not None else read

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and not is_static_index(node.slice):
            read = ast.copy_location(call(rt("getitem"), node.value, _index_expr(node.slice)), node)
            return located(read, node) if getattr(node, "lineno", None) is not None else read  # errors at its line
        return node

    def visit_Assign(self, node):
        target = node.targets[0]
        if len(node.targets) == 1 and _is_unpacked_into_items(target, node.value):
            return self._assign_each(target, node)
        if len(node.targets) == 1 and _is_dynamic_item_store(target):
            self.generic_visit(node.value)
            node.value = self.visit(node.value)
            index = _index_expr(self.visit(target.slice))
            value = call(rt("setitem"), name(target.value.id), index, node.value)
            return ast.copy_location(ast.Assign(targets=[name(target.value.id, True)], value=value), node)
        if len(node.targets) == 1 and _is_dynamic_chained_store(target):
            return self._chained_store(target, node)
        if len(node.targets) == 1 and _is_dynamic_attribute_store(target) and self._own(node):
            return self._attribute_item_store(target, node)
        self.generic_visit(node)
        return node

    def _own(self, node: ast.stmt) -> bool:
        """A statement of the function's own body (set by :meth:`apply`)."""
        return id(node) in getattr(self, "_own_statements", ())

    def _attribute_item_store(self, target: ast.Subscript, node: ast.Assign) -> ast.Expr:
        """``owner.key[i] = v`` → ``_fx.targets.item_written(owner, 'key', i, v)`` (see the module doc)."""
        owner = self.visit(target.value.value)
        index = _index_expr(self.visit(target.slice))
        operator = ast.Attribute(value=rt("targets"), attr="item_written", ctx=ast.Load())
        write = call(operator, owner, ast.Constant(target.value.attr), index, self.visit(node.value))
        return located(ast.copy_location(ast.Expr(value=write), node), node)

    def _chained_store(self, target: ast.Subscript, node: ast.Assign) -> ast.Assign:
        """``x[i][j] = v`` with a computed index → ``x = _fx.targets.chained_setitem(x, (i, j), v)``:
        ``x[i]`` is a view where ``i`` picks one position, so the write reaches ``x``, which the
        analysis then sees written (``_fx.getitem(x, i)[j] = v`` would write a copy at a traced ``i``)."""
        indices, root = [], target
        while isinstance(root, ast.Subscript):
            indices.insert(0, _index_expr(self.visit(root.slice)))
            root = root.value
        node.value = self.visit(node.value)
        operator = ast.Attribute(value=rt("targets"), attr="chained_setitem", ctx=ast.Load())
        value = call(operator, name(root.id), tuple_(indices), node.value)
        return located(ast.copy_location(ast.Assign(targets=[name(root.id, True)], value=value), node), node)

    def _assign_each(self, target: ast.Tuple, node: ast.Assign) -> list[ast.stmt]:
        """``a[i], a[j] = a[j].clone(), a[i].clone()`` (a swap), ``out[i], state = step(state)`` (a
        call's tuple) → the value unpacked into temporaries first, then one store each, left to
        right, as Python assigns them."""
        self._swaps = getattr(self, "_swaps", 0) + 1
        temps = [f"_fx_unpacked_{self._swaps}_{k}" for k in range(len(target.elts))]
        if isinstance(node.value, ast.Tuple):
            value = ast.Tuple([self.visit(v) for v in node.value.elts], ast.Load())
        else:
            value = self.visit(node.value)
        first = ast.Assign(targets=[ast.Tuple([name(t, True) for t in temps], ast.Store())], value=value)
        stores = [self.visit_Assign(ast.copy_location(ast.Assign(targets=[element], value=name(temp)), node))
                  for element, temp in zip(target.elts, temps)]
        return [ast.copy_location(first, node), *stores]

    def visit_AugAssign(self, node):
        target = node.target
        attribute = _is_dynamic_attribute_store(target) and self._own(node)
        if _is_dynamic_item_store(target) or _is_dynamic_chained_store(target) or attribute:
            load = _loaded(target)
            combined = ast.copy_location(ast.BinOp(left=load, op=node.op, right=node.value), node)
            assign = ast.copy_location(ast.Assign(targets=[target], value=combined), node)
            if attribute:
                self._own_statements.add(id(assign))
            return self.visit_Assign(assign)
        self.generic_visit(node)
        return node


def _index_expr(index: ast.expr) -> ast.expr:
    """The index of a subscript as an ordinary expression (``a:b`` → ``_fx.slice_(a, b, None)``: a
    slice, or a TensorSlice where a bound is traced)."""
    if isinstance(index, ast.Slice):
        parts = [p if p is not None else ast.Constant(None) for p in (index.lower, index.upper, index.step)]
        width = _written_width(index)
        extra = {"width": ast.Constant(width)} if width is not None else {}
        return ast.copy_location(call(rt("slice_"), *parts, **extra), index)
    if isinstance(index, ast.Tuple):
        return ast.copy_location(tuple_([_index_expr(e) for e in index.elts]), index)
    return index


def _written_width(index: ast.Slice) -> int | None:
    """``k`` of a slice written ``a:a + k`` (``a`` a name, ``k`` a positive int, no step), else None:
    the slice's length when ``a`` is a loop counter that keeps it whole (operators/counters.py)."""
    upper = index.upper
    if index.step is not None or not isinstance(index.lower, ast.Name) or not isinstance(upper, ast.BinOp):
        return None
    if not (isinstance(upper.op, ast.Add) and isinstance(upper.left, ast.Name) and upper.left.id == index.lower.id):
        return None
    width = upper.right
    if isinstance(width, ast.Constant) and type(width.value) is int and width.value > 0:
        return width.value
    return None


def _loaded(target: ast.Subscript) -> ast.Subscript:
    """A copy of the store target ``x[i]`` / ``x[i][j]`` as a read."""
    load = copy.deepcopy(target)
    for sub in ast.walk(load):
        if isinstance(sub, (ast.Subscript, ast.Name)) and isinstance(sub.ctx, ast.Store):
            sub.ctx = ast.Load()
    return load


def _is_dynamic_chained_store(target: ast.expr) -> bool:
    """``x[i][j]`` (two indices or more) on a name with a computed index among them."""
    if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Subscript)):
        return False
    parts, root = [], target
    while isinstance(root, ast.Subscript):
        parts.append(root.slice)
        root = root.value
    return isinstance(root, ast.Name) and not all(is_static_index(p) for p in parts)


def _is_dynamic_attribute_store(target: ast.expr) -> bool:
    """``owner.key[i]`` with a computed index, ``owner`` a name or a chain of attributes of one
    (``self.cache_k``, ``self.kv.cache``)."""
    if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Attribute)):
        return False
    root = target.value.value
    while isinstance(root, ast.Attribute):
        root = root.value
    return isinstance(root, ast.Name) and not is_static_index(target.slice)


def _is_dynamic_item_store(target: ast.expr) -> bool:
    return isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and not is_static_index(target.slice)


def _is_unpacked_into_items(target: ast.expr, value: ast.expr) -> bool:
    """``a[i], b[j] = v1, v2`` (or ``= f()``) with a computed index among the targets, and a tuple of
    as many values or any other expression (unpacked as Python unpacks it: too many or too few
    values raise the same ValueError)."""
    return (isinstance(target, (ast.Tuple, ast.List))
            and (not isinstance(value, ast.Tuple) or len(target.elts) == len(value.elts))
            and any(_is_dynamic_item_store(e) for e in target.elts)
            and all(isinstance(e, ast.Name) or _is_dynamic_item_store(e) or isinstance(e, ast.Subscript)
                    for e in target.elts))
