"""``xs += [a, b]`` on a list → ``xs.append(a); xs.append(b)``, and ``xs.insert(i, v)`` →
``_fx.lists.front.insert_into(xs, i, v, lambda e: xs.append(e))`` (canonicalisation).

Decoders collect their steps either way (NVIDIA's Tacotron 2: ``mel_outputs += [mel_output]``);
as appends, a loop carries the list as it carries any list grown by ``append`` (one pass or two,
docs/control-flow.md). Backtraces collect theirs at the front (pytorch_HMM's Viterbi:
``z_star_i.insert(0, z_t)``): a list grown at the front is one grown by ``append`` read in the
other order, so the loop sees the append it makes and carries the list as any other
(:mod:`fxport.controlflow.operators.lists.front`; a Python list is inserted into as written). Only
names the function binds to list displays and to nothing else are rewritten, so ``t += [1.0]`` on
a tensor stays as written.

Example::

    >>> import ast
    >>> from fxport.controlflow.context import Context
    >>> def f(x, n):
    ...     outs, total = [], x
    ...     for _ in range(n):
    ...         outs += [x, x * 2]
    ...         total += [1.0]
    ...     return outs, total
    >>> ctx = Context(f)
    >>> ListExtensions(ctx).apply()
    >>> print(ast.unparse(ctx.fdef.body[1].body))
    outs.append(x)
    outs.append(x * 2)
    total += [1.0]
"""

from __future__ import annotations

import ast

from fxport.controlflow.astutil import lambda_, located, rt
from fxport.controlflow.converters.base import Canonicalization
from fxport.controlflow.scopes import walk_same_scope


class ListExtensions(Canonicalization):
    """``xs += [..]`` → appends, for names bound only to list displays."""

    def apply(self) -> None:
        lists = _names_bound_only_to_lists(self.ctx.fdef)
        if lists:
            _Rewriter(lists).generic_visit(self.ctx.fdef)  # the function's own body; nested defs are left alone


def _names_bound_only_to_lists(fdef: ast.FunctionDef) -> set[str]:
    """Names bound to list displays and to nothing else where ``xs += [..]`` can meet them: a
    rebinding in no loop after the last ``xs += [..]`` (``mel_outputs, ... =
    self.parse_decoder_outputs(mel_outputs, ...)`` after the decoding loop) does not count."""
    extended = _last_list_extension(fdef)
    in_loops = _in_loops(fdef)
    lists, others = set(), set()
    for node in walk_same_scope(fdef):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for name, value in _pairs(target, node.value):
                    if isinstance(value, ast.List):
                        lists.add(name)
                    elif not _after_every_extension(node, name, extended, in_loops):
                        others.add(name)
        elif isinstance(node, (ast.AnnAssign, ast.For, ast.With, ast.NamedExpr)):
            targets = [node.target] if not isinstance(node, ast.With) else [i.optional_vars for i in node.items if i.optional_vars]
            for target in targets:
                others |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and not isinstance(node.value, ast.List):
            others.add(node.target.id)
    arguments = fdef.args
    others |= {a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs}
    return lists - others


def _last_list_extension(fdef: ast.FunctionDef) -> dict[str, int]:
    """name → the last line where ``name += [..]`` or ``name.insert(..)`` ends (``path =
    torch.tensor(path)`` after a backtrace's loop does not count against ``path``)."""
    last: dict[str, int] = {}
    for node in walk_same_scope(fdef):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and isinstance(node.value, ast.List):
            last[node.target.id] = max(last.get(node.target.id, 0), node.end_lineno or node.lineno)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "insert"
              and isinstance(node.func.value, ast.Name)):
            last[node.func.value.id] = max(last.get(node.func.value.id, 0), node.end_lineno or node.lineno)
    return last


def _after_every_extension(node: ast.Assign, name: str, extended: dict[str, int], in_loops: set[int]) -> bool:
    """Whether ``node`` is a statement in no loop of the function (a branch is fine: control only
    goes forward outside loops) after the last ``name += [..]``: no extension can meet the value
    it binds (``if self.postnet is not None: outs = outs + self.postnet(outs)`` after the loop)."""
    return name in extended and node.lineno > extended[name] and id(node) not in in_loops


def _in_loops(fdef: ast.FunctionDef) -> set[int]:
    """ids of the nodes inside the function's own loops."""
    inside: set[int] = set()
    for loop in walk_same_scope(fdef):
        if isinstance(loop, (ast.For, ast.AsyncFor, ast.While)):
            inside |= {id(n) for stmt in loop.body + loop.orelse for n in walk_same_scope(stmt)}
    return inside


def _pairs(target: ast.expr, value: ast.expr):
    """(name, value) of an assignment, unpacking ``a, b = [], []``; a value it cannot pair is None."""
    if isinstance(target, ast.Name):
        yield target.id, value
    elif isinstance(target, (ast.Tuple, ast.List)):
        values = value.elts if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts) \
            and not any(isinstance(e, ast.Starred) for e in target.elts) else [None] * len(target.elts)
        for sub, sub_value in zip(target.elts, values):
            yield from _pairs(sub, sub_value) if not isinstance(sub, ast.Starred) else _pairs(sub.value, None)


class _Rewriter(ast.NodeTransformer):
    def __init__(self, lists: set[str]):
        self.lists = lists

    def visit_FunctionDef(self, node):
        return node  # another scope

    visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_FunctionDef

    def visit_Expr(self, node):
        """``xs.insert(i, v)`` → ``_fx.lists.front.insert_into(xs, i, v, lambda e: xs.append(e))``: the
        append the loop's facts see (a loop carries a list it appends to), made only where the list
        is one a loop grows (front.py)."""
        call = node.value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "insert"
                and isinstance(call.func.value, ast.Name) and call.func.value.id in self.lists
                and len(call.args) == 2 and not call.keywords and not any(isinstance(a, ast.Starred) for a in call.args)):
            return self.generic_visit(node)
        owner = call.func.value.id
        element = "_fx_item_front"
        appends = lambda_(ast.Call(func=ast.Attribute(value=ast.Name(owner, ast.Load()), attr="append", ctx=ast.Load()),
                                   args=[ast.Name(element, ast.Load())], keywords=[]), element)
        rewritten = ast.Call(func=rt("lists.front.insert_into"), args=[ast.Name(owner, ast.Load()), *call.args, appends],
                             keywords=[])
        return located(ast.copy_location(ast.Expr(ast.copy_location(rewritten, call)), node), node)

    def visit_AugAssign(self, node):
        if (isinstance(node.op, ast.Add) and isinstance(node.target, ast.Name) and node.target.id in self.lists
                and isinstance(node.value, ast.List) and not any(isinstance(e, ast.Starred) for e in node.value.elts)):
            return [located(ast.copy_location(ast.Expr(ast.Call(
                func=ast.Attribute(value=ast.Name(node.target.id, ast.Load()), attr="append", ctx=ast.Load()),
                args=[element], keywords=[])), node), node) for element in node.value.elts]
        return node
