"""Call sites → ``_fx.call(f)(...)``, so user functions called from converted code are
converted too; ``torch.stack/cat`` of a list → ``_fx.stack/cat`` and ``len(xs)`` →
``_fx.len_(xs)`` (lists grown in a data-dependent loop); ``int(t)`` → ``_fx.int_(t)``;
``float(t)`` → ``_fx.float_(t)`` and ``t.tolist()`` → ``_fx.tolist(t)``;
``t.item()`` inside a branch or loop body → ``_fx.item_(t)`` (an integer stays a 0-d tensor there);
``t.data`` → ``_fx.data_(t, nested)`` and ``t.numpy()`` → ``_fx.numpy_(t)`` (``int(t.numpy())`` →
``int(_fx.without_numpy(t))``);
``torch.cat([torch.tensor(z) for z in zs])`` → ``_fx.lists.ragged.cat_each`` (lists whose elements'
lengths are data, read whole);
``torch.equal`` / ``torch.allclose`` → ``_fx.equal`` / ``_fx.allclose`` and the builtins
``all(t)`` / ``any(t)`` → ``_fx.all_`` / ``_fx.any_`` (and ``map(int, box)`` → ``map(_fx.int_, box)``; ``torch.tensor(data)`` and ``torch.Tensor([..])``
→ ``_fx.tensor_``: built from traced values without reading them) (0-d bool tensors while exporting, so a loop
exit on them converts); ``print(...)`` inside a branch or loop body →
``_fx.print_(lambda: (args, kwargs))``: it prints when the code runs eagerly and is left out of
the traced graph (``float(t)`` and ``t.tolist()`` keep a traced number symbolic everywhere; ``t.item()``
needs no rewrite at the top level, where torch reads it symbolically itself; ``nested`` is False there).

Size: one rewrite per kind of call site, all dispatched from the one visit of a Call node (the
order of their tests is the rewrite's meaning); split, each part would need the others' tests.

Plain names, ``self.method`` / ``module.function`` and the methods of other objects
(``self.assigner.assign``, ``solver.run``) are wrapped; builtins, methods a tensor or a builtin
container has by name (``x.sum``, ``xs.append``) and calls into ``torch``/``math``/… are left as
written.

Example::

    >>> import ast
    >>> from fxport.controlflow.context import Context
    >>> def f(self, x):
    ...     if x.sum() > 0:
    ...         x = x * float(x.mean())
    ...     return torch.stack([self.block(x), helper(x).sum(), int(x)])
    >>> ctx = Context(f)
    >>> CallConverter(ctx).apply()
    >>> print(ast.unparse(ctx.fdef))
    def f(self, x):
        if x.sum() > 0:
            x = x * _fx.float_(x.mean())
        return _fx.stack([_fx.call(self.block)(x), _fx.call(helper)(x).sum(), _fx.int_(x)])
"""

from __future__ import annotations

import ast
import builtins

import torch

from fxport.controlflow.astutil import RUNTIME, call, lambda_, located, rt
from fxport.controlflow.converters import method_state
from fxport.controlflow.converters.base import ExpressionConverter
from fxport.controlflow.operators.numbers import MATH_FUNCTIONS

_PLAIN_CALL_ROOTS = {
    "torch", "F", "nn", "math", "np", "numpy", "operator", "functools", "itertools", RUNTIME,
}
_BUILTINS = set(dir(builtins))


class CallConverter(ExpressionConverter):
    depth = 0  # how many if/while/for bodies (or conditional-expression branches) enclose the node

    def visit_If(self, node):
        return self._visit_nested(node, ("test",), ("body", "orelse"))

    def visit_While(self, node):
        return self._visit_nested(node, ("test",), ("body", "orelse"))

    def visit_For(self, node):
        return self._visit_nested(node, ("target", "iter"), ("body", "orelse"))

    def visit_IfExp(self, node):
        return self._visit_nested(node, ("test",), ("body", "orelse"))

    def _visit_nested(self, node, heads: tuple[str, ...], bodies: tuple[str, ...]):
        for field in heads:
            setattr(node, field, self.visit(getattr(node, field)))
        self.depth += 1
        try:
            for field in bodies:
                part = getattr(node, field)
                setattr(node, field, [self.visit(s) for s in part] if isinstance(part, list) else self.visit(part))
        finally:
            self.depth -= 1
        return node

    def visit_Attribute(self, node):
        """``t.data`` read as a value → ``_fx.data_(t, nested)``; ``t.data.fill_(v)``,
        ``t.data[i] = v`` (the tensor changed in place through it) are left as written."""
        if isinstance(node.value, ast.Attribute) and node.value.attr == "data" and _is_in_place_method(node.attr):
            node.value.value = self.visit(node.value.value)
            return node
        self.generic_visit(node)
        if node.attr == "data" and isinstance(node.ctx, ast.Load):
            return located(ast.copy_location(call(rt("data_"), node.value, ast.Constant(self.depth > 0)), node), node)
        return node

    def visit_Subscript(self, node):
        if isinstance(node.value, ast.Attribute) and node.value.attr == "data" and not isinstance(node.ctx, ast.Load):
            node.value.value = self.visit(node.value.value)
            node.slice = self.visit(node.slice)
            return node
        return self.generic_visit(node)

    def visit_ListComp(self, node):
        """``[v.tolist() for v in rows]`` → ``_fx.lists.tensor_items.tolist_rows(rows, lambda: [...])``:
        of a traced integer tensor whose number of rows is a dynamic size, ``rows.tolist()`` read
        as the tensor (tensor_items.py), where Python's loop over the rows would fix their number."""
        self.generic_visit(node)
        rows = _rows_listed(node)
        if rows is None:
            return node
        made = call(rt("lists.tensor_items.tolist_rows"), rows, lambda_(node))
        return located(ast.copy_location(made, node), node)

    def visit_Call(self, node):
        self.generic_visit(node)
        _number_of_numpy(node)
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "numpy" and not node.args and not node.keywords:
            return located(ast.copy_location(call(rt("numpy_"), func.value), node), node)
        number_read = self._number_read(node)
        if number_read is not None:
            return number_read
        concatenated = _concatenated_comprehension(node)
        if concatenated is not None:
            return concatenated
        if _is_torch_attr(func, ("stack", "cat", "concat", "concatenate")) and node.args:
            node.func = ast.copy_location(rt(func.attr if func.attr in ("stack", "cat") else "cat"), func)
            return node
        if isinstance(func, ast.Name) and func.id == "print" and self.depth > 0:
            return located(ast.copy_location(call(rt("print_"), _deferred_arguments(node)), node), node)
        if _is_torch_attr(func, ("equal", "allclose")):  # a bool about tensors: a tensor, so if/while on it convert
            node.func = ast.copy_location(rt(func.attr), func)
            return node
        if (isinstance(func, ast.Attribute) and func.attr in ("equal", "allclose") and node.args
                and not (isinstance(func.value, ast.Name) and func.value.id in _PLAIN_CALL_ROOTS)):  # a.equal(b)
            method = call(rt(func.attr + "_method"), func.value, *node.args)
            method.keywords = node.keywords
            return ast.copy_location(method, node)
        columns = _comprehension_of_fields(node)
        if columns is not None:
            return columns
        if _is_torch_attr(func, ("tensor",)) and node.args:  # torch.tensor([[i, 0]]) with a traced counter
            node.func = ast.copy_location(rt("tensor_"), func)
            rows = _flattened_rows(node)
            if rows is not None:  # torch.tensor([t for r in rows for t in r]): the rows' concatenation
                made = ast.Call(func=rt("lists.ragged.flat_tensor"), args=[rows, lambda_(node)], keywords=node.keywords)
                return located(ast.copy_location(made, node), node)
            return node
        constructed = _tensor_construction(node)
        if constructed is not None:
            return constructed
        if _is_torch_attr(func, tuple(_LEGACY_TENSORS)) and len(node.args) == 1 and not node.keywords:
            return self._legacy_tensor(node, func)
        if (isinstance(func, ast.Name) and func.id == "map" and len(node.args) >= 2
                and isinstance(node.args[0], ast.Name) and node.args[0].id == "int"):  # x1, y1 = map(int, box)
            node.args[0] = ast.copy_location(rt("int_"), node.args[0])
            return node
        if isinstance(func, ast.Name) and func.id in ("int", "len", "all", "any") and len(node.args) == 1 and not node.keywords:
            node.func = ast.copy_location(rt(func.id + "_"), func)
            return node
        number = _number_function(node)
        if number is not None:
            return number
        if not self._may_be_user_function(func):
            return node
        node.func = ast.copy_location(call(rt("call"), func), func)
        return node

    def _number_read(self, node: ast.Call) -> ast.Call | None:
        """``float(t)`` → ``_fx.float_(t)``, ``t.tolist()`` → ``_fx.tolist(t)``."""
        func = node.func
        if node.keywords:
            return None
        if isinstance(func, ast.Name) and func.id == "float" and len(node.args) == 1:
            return located(ast.copy_location(call(rt("float_"), node.args[0]), node), node)
        if isinstance(func, ast.Attribute) and func.attr == "tolist" and not node.args:
            return located(ast.copy_location(call(rt("tolist"), func.value), node), node)
        if isinstance(func, ast.Attribute) and func.attr == "item" and not node.args and self.depth > 0:
            return located(ast.copy_location(call(rt("item_"), func.value), node), node)
        return None

    def _legacy_tensor(self, node: ast.Call, func: ast.Attribute) -> ast.Call:
        """``torch.LongTensor(xs)``: a list literal → ``_fx.tensor_`` (built from traced values);
        any other argument → ``_fx.legacy_tensor_``, which decides at run time (a list, or a list
        grown in a loop, is data; a number is a size, as the constructor reads it)."""
        torch_name = ast.Name(id="torch", ctx=ast.Load())
        dtype_name = _LEGACY_TENSORS[func.attr]
        dtype = (ast.Attribute(value=torch_name, attr=dtype_name, ctx=ast.Load()) if dtype_name
                 else call(ast.Attribute(value=torch_name, attr="get_default_dtype", ctx=ast.Load())))
        dtype = ast.copy_location(dtype, func)
        if isinstance(node.args[0], (ast.List, ast.Tuple)):
            converted = call(rt("tensor_"), node.args[0])
        else:
            converted = call(rt("legacy_tensor_"), func, node.args[0])
        converted.keywords = [ast.keyword(arg="dtype", value=dtype)]
        return ast.copy_location(converted, node)

    def _may_be_user_function(self, func: ast.expr) -> bool:
        """Plain names, ``self.method`` / ``module.function``, and the methods of other objects
        (``self.assigner.assign(...)``, ``solver.run(...)``, ``Solver().run(...)``) unless the
        method's name is a tensor's or a builtin container's (``x.sum()``, ``xs.append(v)`` stay
        as written); at run time :func:`~fxport.controlflow.operators.calls.call` converts only
        user code and calls anything else as it is."""
        if isinstance(func, ast.Name):
            return func.id not in _BUILTINS and func.id not in _PLAIN_CALL_ROOTS and not func.id.startswith("_fx_")
        if not isinstance(func, ast.Attribute):
            return False
        root = _root_name(func.value)
        if root == self.ctx.self_name and isinstance(func.value, ast.Name):
            return True
        if _is_overlay(func.value):
            return True  # a method of a user object on its overlay (method_state.py): ``q.pop()`` too
        if root in _PLAIN_CALL_ROOTS and not (root == RUNTIME and isinstance(func.value, ast.Call)):
            return False  # torch.x.y(...), _fx.optional.is_none(...); not ``_fx.call(Solver)().run``
        if isinstance(func.value, ast.Name) and root not in self.ctx.local_names:
            return True  # module.function
        return not _is_value_method(func.attr)


def _is_overlay(node: ast.expr) -> bool:
    """An overlay of a user object (method_state.py): its local, or ``_fx.targets.overlay(...)``."""
    if isinstance(node, ast.Name):
        return node.id == method_state.OVERLAY or node.id.startswith(method_state.OVERLAY + "_")
    return isinstance(node, ast.Call) and ast.unparse(node.func) == f"{RUNTIME}.targets.overlay"


def _root_name(node: ast.expr) -> str | None:
    """``a`` of ``a.b.c`` (or of ``a.b().c``); None for any other expression."""
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


#: types whose methods are left as written at call sites (a tensor's, a list's, a dict's, ...)
_VALUE_TYPES = (torch.Tensor, list, dict, set, tuple, str, bytes, int, float)


def _is_value_method(name: str) -> bool:
    """A method name a tensor or a builtin value has (``sum``, ``append``, ``items``, ``format``)."""
    return any(hasattr(kind, name) for kind in _VALUE_TYPES)


#: legacy constructors given one list (torch.Tensor([to, d[to]]), torch.LongTensor(keep)) → their dtype
_LEGACY_TENSORS = {"Tensor": None, "FloatTensor": "float32", "DoubleTensor": "float64", "LongTensor": "int64",
                   "IntTensor": "int32", "BoolTensor": "bool"}


def _tensor_construction(node: ast.Call) -> ast.Call | None:
    """``x.new_tensor(data, ...)`` → ``_fx.new_tensor_(x, data, ...)``, ``x.new_full(...)``
    → ``_fx.new_full_(x, ...)``, ``torch.as_tensor(data, ...)`` → ``_fx.as_tensor_``:
    data holding numbers read from tensors is built from them (no value read)."""
    func = node.func
    if _is_torch_attr(func, ("as_tensor",)) and node.args:
        node.func = ast.copy_location(rt("as_tensor_"), func)
        return node
    if (isinstance(func, ast.Attribute) and func.attr in ("new_tensor", "new_full") and node.args
            and not (isinstance(func.value, ast.Name) and func.value.id in _PLAIN_CALL_ROOTS)):
        made = ast.Call(func=ast.copy_location(rt(func.attr + "_"), func), args=[func.value, *node.args],
                        keywords=node.keywords)
        return located(ast.copy_location(made, node), node)
    return None


#: builtins of numbers → their operator (operators/numbers.py: a number read from a tensor, kept a tensor)
_NUMBER_BUILTINS = {"min": "min_", "max": "max_", "divmod": "divmod_", "bool": "bool_", "round": "round_",
                    "isinstance": "lists.tensor_items.isinstance_"}


def _number_function(node: ast.Call) -> ast.Call | None:
    """``min(a, b)`` → ``_fx.min_(min, a, b)`` (so for ``max``, ``divmod``, ``bool``, ``round``,
    ``isinstance``: a list held as a tensor, tensor_items.py) and
    ``math.sqrt(x)`` → ``_fx.math_(math.sqrt, x)`` (of the functions
    :data:`~fxport.controlflow.operators.numbers.MATH_FUNCTIONS` names): the operators compute a
    number read from a tensor with tensor ops; the function itself is passed, so a name that is
    not the builtin where it is called (``from torch import max``) is called as written."""
    func = node.func
    if isinstance(func, ast.Name) and func.id in _NUMBER_BUILTINS and node.args and not any(
            isinstance(a, ast.Starred) for a in node.args):
        node.args = [ast.copy_location(ast.Name(id=func.id, ctx=ast.Load()), func), *node.args]
        node.func = ast.copy_location(rt(_NUMBER_BUILTINS[func.id]), func)
        return node
    if (isinstance(func, ast.Attribute) and func.attr in MATH_FUNCTIONS and isinstance(func.value, ast.Name)
            and func.value.id == "math" and node.args and not node.keywords):
        made = ast.Call(func=ast.copy_location(rt("math_"), func), args=[func, *node.args], keywords=[])
        return located(ast.copy_location(made, node), node)
    return None


def _is_in_place_method(attr: str) -> bool:
    return attr.endswith("_") and not attr.startswith("__")


def _number_of_numpy(node: ast.Call) -> None:
    """``int(t.numpy())``, ``float(..)``, ``t.numpy().item()``, ``t.numpy().tolist()``: the number is
    read from ``t`` itself while exporting (``_fx.numpy_(t)`` → ``_fx.without_numpy(t)``)."""
    func = node.func
    if isinstance(func, ast.Name) and func.id in ("int", "float") and len(node.args) == 1 and _is_numpy_call(node.args[0]):
        node.args[0].func = ast.copy_location(rt("without_numpy"), node.args[0].func)
    elif isinstance(func, ast.Attribute) and func.attr in ("item", "tolist") and not node.args and _is_numpy_call(func.value):
        func.value.func = ast.copy_location(rt("without_numpy"), func.value.func)


def _is_numpy_call(node: ast.expr) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "numpy_"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == RUNTIME)


def _comprehension_of_fields(node: ast.Call) -> ast.Call | None:
    """``torch.tensor([f(p) for p in xs], ...)`` whose element reads ``p`` only as ``p.field`` or
    ``p[k]`` (constants and arithmetic around them) → ``_fx.lists.columns.tensor_of(lambda p: f(p),
    xs, ...)``: of a list of records a data-dependent loop grew, every element at once (columns.py)."""
    if not (_is_torch_attr(node.func, ("tensor",)) and len(node.args) == 1 and isinstance(node.args[0], ast.ListComp)):
        return None
    comp = node.args[0]
    if len(comp.generators) != 1 or comp.generators[0].ifs or comp.generators[0].is_async:
        return None
    target, source = comp.generators[0].target, comp.generators[0].iter
    if not (isinstance(target, ast.Name) and isinstance(source, ast.Name)) or not _reads_fields_only(comp.elt, target.id):
        return None
    made = ast.Call(func=rt("lists.columns.tensor_of"), args=[lambda_(comp.elt, target.id), source], keywords=node.keywords)
    return located(ast.copy_location(made, node), node)


def _flattened_rows(node: ast.Call) -> ast.expr | None:
    """``rows`` of ``torch.tensor([t for r in rows for t in r], ...)`` (two plain generators, the
    second over the first's element, the element that of the second; ``rows`` a name or an
    attribute, read once more by the rewrite), else None."""
    comp = node.args[0]
    if len(node.args) != 1 or not isinstance(comp, ast.ListComp) or len(comp.generators) != 2:
        return None
    if any(k.arg is None for k in node.keywords):
        return None
    outer, inner = comp.generators
    if any(g.ifs or g.is_async or not isinstance(g.target, ast.Name) for g in (outer, inner)):
        return None
    if not isinstance(outer.iter, (ast.Name, ast.Attribute)) or outer.target.id == inner.target.id:
        return None
    if not (isinstance(inner.iter, ast.Name) and inner.iter.id == outer.target.id):
        return None
    return outer.iter if isinstance(comp.elt, ast.Name) and comp.elt.id == inner.target.id else None


def _rows_listed(comp: ast.ListComp) -> ast.expr | None:
    """``rows`` of ``[_fx.tolist(v) for v in rows]`` (one plain generator over a name or an
    attribute, read once more by the rewrite), else None."""
    if len(comp.generators) != 1 or comp.generators[0].ifs or comp.generators[0].is_async:
        return None
    target, rows = comp.generators[0].target, comp.generators[0].iter
    elt = comp.elt
    if not (isinstance(target, ast.Name) and isinstance(rows, (ast.Name, ast.Attribute))):
        return None
    if not (isinstance(elt, ast.Call) and len(elt.args) == 1 and not elt.keywords
            and ast.dump(elt.func) == ast.dump(rt("tolist"))):
        return None
    return rows if isinstance(elt.args[0], ast.Name) and elt.args[0].id == target.id else None


def _concatenated_comprehension(node: ast.Call) -> ast.Call | None:
    """``torch.cat([E for z in zs], ...)`` whose element ``E`` commutes with concatenation (``z``,
    ``z.long()``, ``z.to(d)``, ``torch.tensor(z, dtype=d)``, ``torch.as_tensor(z)``,
    ``torch.LongTensor(z)``, ``torch.stack(z)``: already converted here, the children come first)
    → ``_fx.lists.ragged.cat_each(lambda z: E, zs, ..., kind=...)``: of a list a data-dependent loop
    grew, whose elements' lengths are data, every element at once (ragged.py)."""
    if not (_is_torch_attr(node.func, ("cat", "concat", "concatenate")) and node.args
            and isinstance(node.args[0], ast.ListComp)) or any(k.arg is None or k.arg == "out" for k in node.keywords):
        return None
    comp = node.args[0]
    if len(comp.generators) != 1 or comp.generators[0].ifs or comp.generators[0].is_async:
        return None
    target, source = comp.generators[0].target, comp.generators[0].iter
    kind = _concatenated_kind(comp.elt, target.id) if isinstance(target, ast.Name) else None
    if kind is None:
        return None
    made = ast.Call(func=rt("lists.ragged.cat_each"), args=[lambda_(comp.elt, target.id), source, *node.args[1:]],
                    keywords=[*node.keywords, ast.keyword(arg="kind", value=ast.Constant(kind))])
    return located(ast.copy_location(made, node), node)


#: tensor methods that change only the dtype (elementwise: they commute with concatenation)
_DTYPE_METHODS = ("long", "int", "float", "double", "half", "bool", "to", "type")
#: the converted constructors of a tensor from a list (call_trees' own rewrites of torch.tensor and kin)
_CONSTRUCTORS = ("tensor_", "as_tensor_")


def _concatenated_kind(elt: ast.expr, name: str) -> str | None:
    """What ``elt`` does to the comprehension's element ``name`` (a :data:`ragged.KINDS` entry), or
    None when it may do anything else (then the comprehension runs as written)."""
    def is_target(node) -> bool:
        return isinstance(node, ast.Name) and node.id == name

    def free_of_target(nodes) -> bool:
        return not any(is_target(n) for node in nodes for n in ast.walk(node))

    if is_target(elt):
        return "tensor"
    if not isinstance(elt, ast.Call) or not free_of_target([k.value for k in elt.keywords]):
        return None
    func = elt.func
    if isinstance(func, ast.Attribute) and is_target(func.value) and func.attr in _DTYPE_METHODS:
        return "tensor" if free_of_target(elt.args) else None
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == RUNTIME):
        return None
    if func.attr in _CONSTRUCTORS and len(elt.args) == 1 and is_target(elt.args[0]):
        return "constructor"
    if func.attr == "legacy_tensor_" and len(elt.args) == 2 and is_target(elt.args[1]) and free_of_target(elt.args[:1]):
        return "constructor"
    if func.attr == "stack" and len(elt.args) == 1 and is_target(elt.args[0]) and not elt.keywords:
        return "stack"
    return None


def _reads_fields_only(elt: ast.expr, name: str) -> bool:
    """``elt`` is made of ``name.field``, ``name[k]`` (a constant ``k``), constants, other names,
    arithmetic and list/tuple displays of those; ``name`` appears nowhere else."""
    fields = {id(n.value) for n in ast.walk(elt) if isinstance(n, ast.Attribute)
              or isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant)}
    allowed = (ast.Attribute, ast.Subscript, ast.Constant, ast.Name, ast.BinOp, ast.UnaryOp, ast.List, ast.Tuple,
               ast.operator, ast.unaryop, ast.expr_context)
    for n in ast.walk(elt):
        if not isinstance(n, allowed):
            return False
        if isinstance(n, ast.Name) and n.id == name and id(n) not in fields:
            return False
        if isinstance(n, (ast.Attribute, ast.Subscript)) and not (isinstance(n.value, ast.Name) and n.value.id == name):
            return False
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(elt))


def _is_torch_attr(func: ast.expr, attrs: tuple[str, ...]) -> bool:
    return isinstance(func, ast.Attribute) and func.attr in attrs and isinstance(func.value, ast.Name) and func.value.id == "torch"


def _deferred_arguments(node: ast.Call) -> ast.Lambda:
    """``lambda: ((args...), {kwargs...})``: a call's arguments, evaluated only when it runs."""
    positional = ast.Tuple(elts=list(node.args), ctx=ast.Load())
    keywords = ast.Dict(keys=[ast.Constant(k.arg) if k.arg else None for k in node.keywords],
                        values=[k.value for k in node.keywords])
    empty = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    return ast.Lambda(args=empty, body=ast.Tuple(elts=[positional, keywords], ctx=ast.Load()))
