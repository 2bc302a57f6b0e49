"""Lists used only as a stack or a queue → ``_fx.lists.stacks`` (canonicalisation).

``stack = [source]; while stack: node = stack.pop(); ...; stack.append(nb)`` (DFS) and ``queue
= [s]; while queue: v = queue.pop(0); ...`` (BFS) push and pop a list whose length, once a
data-dependent loop pushes, is data. A name is rewritten when every use of it in the function is

* a creation ``xs = [a, b]`` / ``xs = []`` (or ``deque([..])``, ``collections.deque([..])``),
* ``t = xs.pop()`` / ``xs.pop()`` as a statement (also ``pop(-1)``, ``pop(0)``, ``popleft()``),
* ``xs.append(v)`` / ``xs.extend(vs)`` as a statement,
* ``len(xs)``, an item read ``xs[i]``, or a test of its emptiness (``while xs:``, ``if not xs``),

with at least one pop, and the name is not a parameter, global or read by a nested function.
Each becomes a rebinding (``t, xs = _fx.lists.stacks.take_last(xs)``, ``xs =
_fx.lists.stacks.push(xs, v, 'xs')``) and each test a length (``len(xs) > 0``), so loops and branches carry the name as
state; at run time the list is one tensor of its items where they are scalars with a tensor among
them (operators/lists/stacks.py), Python's list otherwise. Runs after the appends are moved
behind the in-place writes into their values (deferred_appends), before the exits.

Example::

    >>> import ast
    >>> from fxport.controlflow.context import Context
    >>> def f(x):
    ...     stack = [x]
    ...     while stack:
    ...         v = stack.pop()
    ...         stack.append(v - 1)
    ...     return len(stack)
    >>> ctx = Context(f)
    >>> ListStacks(ctx).apply()
    >>> print(ast.unparse(ctx.fdef.body[1]))
    while len(stack) > 0:
        v, stack = _fx.lists.stacks.take_last(stack)
        stack = _fx.lists.stacks.push(stack, v - 1, 'stack')
"""

from __future__ import annotations

import ast

from fxport.controlflow.astutil import call, located, name, rt, tuple_
from fxport.controlflow.converters.base import Canonicalization
from fxport.controlflow.scopes import SCOPES, walk_same_scope

_POPS = {"pop", "popleft"}
_PUSHES = {"append": "push", "extend": "push_all"}  # the operator of each (not named like a list method:
# a call of one is no mutation of an outer object to the side-effect analysis)


def _deque_call(value: ast.expr) -> bool:
    func = value.func if isinstance(value, ast.Call) else None
    return (isinstance(func, ast.Name) and func.id == "deque") or (
        isinstance(func, ast.Attribute) and func.attr == "deque" and isinstance(func.value, ast.Name)
        and func.value.id == "collections")


def _creation(value: ast.expr) -> bool:
    """A list display, or ``deque([..])`` of one: what a stack starts as."""
    if isinstance(value, ast.List):
        return True
    return (_deque_call(value) and len(value.args) == 1 and not value.keywords
            and isinstance(value.args[0], ast.List))


def _pop_call(node: ast.expr, xs: str) -> bool:
    """``xs.pop()``, ``xs.pop(0)``, ``xs.pop(-1)`` or ``xs.popleft()``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _POPS
            and isinstance(node.func.value, ast.Name) and node.func.value.id == xs and not node.keywords):
        return False
    if node.func.attr == "popleft" or not node.args:
        return not node.args
    return len(node.args) == 1 and ast.unparse(node.args[0]) in ("0", "-1")


def _in_test(node: ast.expr, parents: dict) -> bool:
    """``node`` read for its truth: a test of ``if``/``while``/``a if c else b``/``assert``,
    through ``not`` and ``and``/``or`` that are themselves such tests."""
    child, parent = node, parents.get(node)
    while isinstance(parent, (ast.BoolOp, ast.UnaryOp)) and (not isinstance(parent, ast.UnaryOp)
                                                            or isinstance(parent.op, ast.Not)):
        child, parent = parent, parents.get(parent)
    return isinstance(parent, (ast.If, ast.While, ast.IfExp, ast.Assert)) and parent.test is child


def _use_ok(node: ast.Name, parents: dict, creations: set) -> str | None:
    """The kind of one occurrence of a candidate name ("pop", "push", "read", "creation"), or
    None where it is used any other way."""
    parent = parents.get(node)
    if isinstance(node.ctx, ast.Store):
        return "creation" if isinstance(parent, ast.Assign) and parent in creations and parent.targets == [node] else None
    if isinstance(parent, ast.Attribute) and parent.attr in _POPS | set(_PUSHES):
        method_call = parents.get(parent)
        statement = parents.get(method_call)
        if parent.attr in _POPS and _pop_call(method_call, node.id):
            ok = (isinstance(statement, ast.Expr) or isinstance(statement, ast.Assign)
                  and statement.value is method_call and len(statement.targets) == 1)
            return "pop" if ok else None
        if (parent.attr in _PUSHES and isinstance(method_call, ast.Call) and method_call.func is parent
                and len(method_call.args) == 1 and not method_call.keywords and isinstance(statement, ast.Expr)):
            return "push"
        return None
    if isinstance(parent, ast.Subscript) and parent.value is node:
        return "read" if not isinstance(parent.slice, (ast.Slice, ast.Tuple)) and isinstance(parent.ctx, ast.Load) else None
    if (isinstance(parent, ast.Call) and isinstance(parent.func, ast.Name) and parent.func.id == "len"
            and parent.args == [node] and not parent.keywords):
        return "read"
    return "read" if _in_test(node, parents) else None


def _parents(fdef: ast.AST) -> dict:
    return {child: node for node in walk_same_scope(fdef) for child in ast.iter_child_nodes(node)}


def stacks_of(fdef: ast.FunctionDef) -> set[str]:
    """The names :mod:`this converter <fxport.controlflow.converters.list_stacks>` rewrites."""
    creations = {node for node in walk_same_scope(fdef) if isinstance(node, ast.Assign) and len(node.targets) == 1
                 and isinstance(node.targets[0], ast.Name) and _creation(node.value)}
    candidates = {node.targets[0].id for node in creations}
    arguments = fdef.args
    candidates -= {a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs}
    candidates -= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    for node in walk_same_scope(fdef):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            candidates -= set(node.names)
        if isinstance(node, SCOPES) and node is not fdef:  # read or bound by a nested function
            candidates -= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    parents = _parents(fdef)
    kinds: dict[str, set] = {c: set() for c in candidates}
    for node in walk_same_scope(fdef):
        if isinstance(node, ast.Name) and node.id in kinds:
            kind = _use_ok(node, parents, creations)
            kinds[node.id].add(kind)
    return {xs for xs, seen in kinds.items() if None not in seen and "pop" in seen}


def _stack_call(attr: str, *args: ast.expr) -> ast.Call:
    return call(rt(f"lists.stacks.{attr}"), *args)


class _Rewriter(ast.NodeTransformer):
    """The rewrites of the module docstring, for the names in ``stacks``."""

    def __init__(self, stacks: set[str]):
        self.stacks = stacks

    def visit_FunctionDef(self, node):
        return node  # nested user functions are left as written

    visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = visit_FunctionDef

    def _popped(self, value: ast.expr) -> ast.Call | None:
        """The ``stacks.take_last`` / ``take_first`` call for a pop of one of the stacks, else None."""
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                and isinstance(value.func.value, ast.Name) and value.func.value.id in self.stacks
                and value.func.attr in _POPS):
            return None
        xs = name(value.func.value.id)
        front = value.func.attr == "popleft" or (value.args and ast.unparse(value.args[0]) == "0")
        return _stack_call("take_first" if front else "take_last", xs)

    def visit_Assign(self, node):
        target = node.targets[0]
        if isinstance(target, ast.Name) and target.id in self.stacks and _creation(node.value):
            items = node.value if isinstance(node.value, ast.List) else node.value.args[0]
            items = self.visit(items)
            args = [items] if isinstance(node.value, ast.List) else [items, node.value.func]
            return located(ast.copy_location(ast.Assign(targets=node.targets, value=_stack_call("new", *args)), node), node)
        popped = self._popped(node.value)
        if popped is not None and len(node.targets) == 1:
            xs = popped.args[0].id
            targets = [tuple_([target, name(xs, True)], store=True)]
            return located(ast.copy_location(ast.Assign(targets=targets, value=popped), node), node)
        self.generic_visit(node)
        return node

    def visit_Expr(self, node):
        popped = self._popped(node.value)
        if popped is not None:
            xs = popped.args[0].id
            value = ast.Subscript(value=popped, slice=ast.Constant(1), ctx=ast.Load())
            return located(ast.copy_location(ast.Assign(targets=[name(xs, True)], value=value), node), node)
        value = node.value
        if (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _PUSHES
                and isinstance(value.func.value, ast.Name) and value.func.value.id in self.stacks):
            xs = value.func.value.id
            pushed = self.visit(value.args[0])
            write = _stack_call(_PUSHES[value.func.attr], name(xs), pushed, ast.Constant(xs))
            return located(ast.copy_location(ast.Assign(targets=[name(xs, True)], value=write), node), node)
        self.generic_visit(node)
        return node

    def _test(self, test: ast.expr) -> ast.expr:
        """A test with each bare stack name ``xs`` read as ``len(xs) > 0`` (``not xs``: ``len(xs) == 0``)."""
        if isinstance(test, ast.Name) and test.id in self.stacks:
            return ast.copy_location(_length_test(test.id, ast.Gt()), test)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and isinstance(test.operand, ast.Name) \
                and test.operand.id in self.stacks:
            return ast.copy_location(_length_test(test.operand.id, ast.Eq()), test)
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            test.operand = self._test(test.operand)
            return test
        if isinstance(test, ast.BoolOp):
            test.values = [self._test(v) for v in test.values]
            return test
        return self.visit(test)

    def visit_If(self, node):
        node.test = located(self._test(node.test), node)
        node.body = [self.visit(s) for s in node.body]
        node.orelse = [self.visit(s) for s in node.orelse]
        return node

    visit_While = visit_If

    def visit_IfExp(self, node):
        node.test = located(self._test(node.test), node)
        node.body, node.orelse = self.visit(node.body), self.visit(node.orelse)
        return node

    def visit_Assert(self, node):
        node.test = located(self._test(node.test), node)
        if node.msg is not None:
            node.msg = self.visit(node.msg)
        return node


def _length_test(xs: str, op: ast.cmpop) -> ast.Compare:
    return ast.Compare(left=call(name("len"), name(xs)), ops=[op], comparators=[ast.Constant(0)])


class ListStacks(Canonicalization):
    """Rewrite the stacks of :func:`stacks_of` (see the module docstring)."""

    def apply(self) -> None:
        stacks = stacks_of(self.ctx.fdef)
        self.ctx.stacks |= stacks
        if stacks:
            rewriter = _Rewriter(stacks)
            self.ctx.fdef.body = [rewriter.visit(stmt) for stmt in self.ctx.fdef.body]
