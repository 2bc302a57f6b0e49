"""Static analysis of a function's AST: which names a statement reads and writes, and liveness.

The converters need, per compound statement (``if``, ``while``, ``for``), the names it
*modifies* (assigned anywhere inside, not counting nested function scopes) and the names
*live* after it (read later before being overwritten, on some path): branch and loop state is
``modified & live``, temporaries are not carried. :mod:`fxport.controlflow.facts` packs these
into typed facts per statement.

Example::

    >>> import ast
    >>> tree = ast.parse("y = x + 1\\nz = y * 2\\nw = 0")
    >>> sorted(reads(tree.body[0])), sorted(writes(tree.body[0]))
    (['x'], ['y'])
    >>> sorted(liveness(tree.body, {"z"}).live_out[tree.body[0]])
    ['y']
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Mapping, Sequence

from fxport.controlflow.scopes import (
    SCOPES as _SCOPES,
    comprehension_local_reads as _comprehension_local_reads,
    comprehension_targets as _comprehension_targets,
    free_names as _free_names,
    walk_same_scope as _walk_same_scope,
)
from fxport.controlflow.views import view_bases

RUNTIME = "_fx"  # the name converted code calls fxport's operators by (astutil.RUNTIME)


def writes(node: ast.AST | Sequence[ast.AST]) -> set[str]:
    """Names bound by ``node`` (or a list of statements) in the current scope: a nested ``def`` or
    ``class`` binds its name only (what its body assigns is its own scope's).

    >>> sorted(writes(ast.parse("def phi(s):\\n    g0_new = s\\n    return g0_new").body))
    ['phi']
    """
    if isinstance(node, (list, tuple)):
        return set().union(*(writes(n) for n in node)) if node else set()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    found: set[str] = set()
    comprehension_targets = _comprehension_targets(node)
    for sub in _walk_same_scope(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            if id(sub) not in comprehension_targets:
                found.add(sub.id)
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and sub is not node:
            found.add(sub.name)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            for alias in sub.names:
                found.add((alias.asname or alias.name).split(".")[0])
    return found


def mutated(node: ast.AST | Sequence[ast.AST]) -> set[str]:
    """Names whose object is changed in place: ``v[i] = ...``, ``v.attr = ...``, ``v.add_(...)``,
    ``v.view(-1).add_(...)`` (a write through a view), ``torch.relu_(v)``, ``out=v`` (a
    module-like callee such as ``torch`` is reported too; callers keep only their locals)."""
    nodes = list(node) if isinstance(node, (list, tuple)) else [node]
    found = set().union(*(_written_in_place(n) for n in nodes)) if nodes else set()
    return found | view_bases(found, nodes)  # view = g[:, 1:3]; view.mul_(2) writes g too


def _written_in_place(node: ast.AST) -> set[str]:
    found: set[str] = set()
    for sub in _walk_same_scope(node):
        if isinstance(sub, (ast.Subscript, ast.Attribute)) and isinstance(sub.ctx, ast.Store):
            root = root_name(sub.value)
            if root:
                found.add(root)
        elif isinstance(sub, ast.AugAssign) and isinstance(sub.target, ast.Name):
            found.add(sub.target.id)  # `t += 1` is in place for tensors
        elif isinstance(sub, ast.Call) and _is_setitem(sub) and isinstance(sub.args[0], ast.Name):
            found.add(sub.args[0].id)  # x = _fx.setitem(x, i, v) writes x in place unless i is traced
        elif isinstance(sub, ast.Call):
            targets = in_place_call_targets(sub)
            # the function form's argument as written (torch.relu_(h)); out.add_(x.mean(0)) leaves x alone
            roots = [root_name(t) if sub.args and t is sub.args[0] else written_root_name(t) for t in targets]
            found |= {root for root in roots if root}
    return found


def in_place_call_targets(node: ast.Call, local_names=None) -> list[ast.expr]:
    """What a call writes in place: the object of ``v.add_(...)``, and for the function form
    (``torch.relu_(h)``) its first argument, plus an ``out=`` argument.

    With ``local_names``, a call on a local (``out.add_(x[k])``) is a method call and a call on
    anything else (``torch``, ``F``) the function form; without, both are reported.
    """
    found = [kw.value for kw in node.keywords if kw.arg == "out"]
    func = node.func
    if _is_bound_function(node):  # _fx.calls.bound(find, {...}, (parent,)): the function writes parent
        return list(node.args[2].elts)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == RUNTIME:
        return found  # fxport's own operators (_fx.len_, _fx.float_, _fx.print_) write nothing in place
    if isinstance(func, ast.Attribute) and func.attr.endswith("_") and not func.attr.endswith("__"):
        on_local = local_names is not None and root_name(written_object(func.value)) in local_names
        if local_names is None or on_local:
            found.append(func.value)
        if node.args and not on_local:
            found.append(node.args[0])
    return found


def _is_bound_function(node: ast.Call) -> bool:
    """``_fx.calls.bound(f, values, written)`` (converters/state_targets.py: a nested function
    bound to a construct's locals); ``written``: a tuple of the names it writes in place."""
    return (ast.unparse(node.func) == "_fx.calls.bound" and len(node.args) == 3
            and isinstance(node.args[2], ast.Tuple))


def root_name(node: ast.AST) -> str | None:
    """``x`` for ``x``, ``x.a.b`` and ``x[i].a``; None when the root is not a name."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def written_root_name(node: ast.AST) -> str | None:
    """The name whose object a write into ``node`` changes, through views made by method calls:
    ``x`` for ``x.view(-1)``, ``x[0].t()`` and ``x.a``."""
    return root_name(written_object(node))


def written_object(node: ast.AST) -> ast.AST:
    """``node`` without the method calls (views) on top of it: ``x`` for ``x.view(-1)`` and
    ``x.t()[0]``, ``self.buf`` for ``self.buf.t()``; ``_fx.getitem(v, i)`` counts as ``v[i]``."""
    while (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not _is_getitem(node)) or (
            isinstance(node, ast.Subscript) and isinstance(node.value, ast.Call)):
        node = node.func.value if isinstance(node, ast.Call) else node.value
    return node


def _is_getitem(node: ast.Call) -> bool:
    return ast.unparse(node.func) == "_fx.getitem"


def _is_setitem(node: ast.Call) -> bool:
    """``_fx.setitem(x, i, v)``, or ``_fx.targets.chained_setitem(x, (i, j), v)`` (``x[i][j] = v``)."""
    return ast.unparse(node.func) in ("_fx.setitem", "_fx.targets.chained_setitem") and bool(node.args)


# --- state targets: attributes, dict/list entries and locals written by a statement -------


def path_names(node: ast.AST) -> set[str]:
    """Every name an access path reads: its root and the names in its indices."""
    return {sub.id for sub in ast.walk(node) if isinstance(sub, ast.Name)}


def is_path(node: ast.AST) -> bool:
    """True for ``x``, ``x.a``, ``x["k"]``, ``x[0]``, ``x[k].a``: a name followed by attributes
    and indices made of constants and names (no calls, no slices)."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Subscript) and not _is_simple_index(node.slice):
            return False
        node = node.value
    return isinstance(node, ast.Name)


def _is_simple_index(index: ast.AST) -> bool:
    if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
        index = index.operand
    if isinstance(index, ast.Tuple):
        return all(_is_simple_index(e) for e in index.elts)
    return isinstance(index, (ast.Constant, ast.Name)) or (isinstance(index, ast.Attribute) and is_path(index))


def written_targets(stmts: Sequence[ast.AST], local_names) -> tuple[list[ast.expr], list[ast.expr]]:
    """``(written in place, assigned)``: the expressions ``stmts`` change (nested scopes aside).

    Written in place: the object of ``v.add_(1)``/``v.view(-1).add_(1)``, the first argument
    of ``torch.relu_(v)``, ``out=v``, ``v`` of ``v[i] = e`` / ``v[i] += e`` (a tensor write;
    with a string key, the entry ``v["k"]`` itself), ``v += e`` and ``self.n += e``.
    Assigned: attribute and string-keyed entry targets (``self.h = e``, ``d["k"] = e``).
    Plain names assigned are not targets (they are ordinary state). ``local_names`` tells a
    method call on a local from the function form (see :func:`in_place_call_targets`).
    """
    in_place: list[ast.expr] = []
    assigned: list[ast.expr] = []
    for stmt in stmts:
        for sub in _walk_same_scope(stmt):
            if isinstance(sub, ast.Call):
                in_place.extend(written_object(t) for t in in_place_call_targets(sub, local_names))
            elif isinstance(sub, ast.AugAssign):
                target = sub.target
                in_place.append(target.value if _is_tensor_item(target) else target)
            elif isinstance(sub, (ast.Assign, ast.AnnAssign)):
                for target in _flat_targets(sub.targets if isinstance(sub, ast.Assign) else [sub.target]):
                    if _is_tensor_item(target):
                        in_place.append(written_object(target.value))
                    elif isinstance(target, (ast.Attribute, ast.Subscript)):
                        assigned.append(target)
    return in_place, assigned


def _is_tensor_item(target: ast.AST) -> bool:
    """``v[i]`` with an index that is not a string constant: a write into the tensor ``v``."""
    if not isinstance(target, ast.Subscript):
        return False
    return not (isinstance(target.slice, ast.Constant) and isinstance(target.slice.value, str))


def _flat_targets(targets) -> list[ast.expr]:
    out = []
    for target in targets:
        if isinstance(target, (ast.Tuple, ast.List)):
            out.extend(_flat_targets(target.elts))
        elif isinstance(target, ast.Starred):
            out.extend(_flat_targets([target.value]))
        else:
            out.append(target)
    return out


def rebound_names(stmts: Sequence[ast.AST]) -> set[str]:
    """Names ``stmts`` bind to a new object (``y = e``, a ``for`` target, ``with … as y``, a
    walrus); ``y += e`` is not counted (in place for tensors)."""
    augmented = {id(s.target) for stmt in stmts for s in _walk_same_scope(stmt) if isinstance(s, ast.AugAssign)}
    found = set()
    for stmt in stmts:
        for sub in _walk_same_scope(stmt):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)) and id(sub) not in augmented:
                found.add(sub.id)
    return found


def reads(node: ast.AST | Sequence[ast.AST]) -> set[str]:
    """Names read by ``node``, including free names of nested functions and lambdas."""
    if isinstance(node, (list, tuple)):
        return set().union(*(reads(n) for n in node)) if node else set()
    found: set[str] = set()
    comprehension_reads = _comprehension_local_reads(node)
    for sub in _walk_same_scope(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            if id(sub) not in comprehension_reads:
                found.add(sub.id)
        elif isinstance(sub, ast.AugAssign) and isinstance(sub.target, ast.Name):
            found.add(sub.target.id)
        elif isinstance(sub, _SCOPES) and sub is not node:
            found |= _free_names(sub)
    return found


# --- liveness -------------------------------------------------------------------------------


@dataclasses.dataclass
class Liveness:
    """Names live at each point of a function body (see :func:`liveness`).

    ``live_out[stmt]``: names read after ``stmt`` before being overwritten, on some path.
    ``body_live_in[loop]``: names the loop body needs at its start (around the back edge too).
    """

    live_out: dict = dataclasses.field(default_factory=dict)
    body_live_in: dict = dataclasses.field(default_factory=dict)


def liveness(stmts: Sequence[ast.stmt], live_out: set[str] = frozenset(),
             break_flags: Mapping[ast.AST, str] | None = None) -> Liveness:
    """Liveness of every statement in ``stmts`` (nested blocks included).

    ``break_flags`` maps a loop to the flag its canonicalised ``break`` sets; the loop reads
    it before each iteration.
    """
    result = Liveness()
    _live_in(stmts, set(live_out), break_flags or {}, result)
    return result


def live_in(stmts: Sequence[ast.stmt], live_out: set[str] = frozenset(),
            break_flags: Mapping[ast.AST, str] | None = None) -> set[str]:
    """Names ``stmts`` read before assigning them, on some path (with ``live_out`` read after).

    >>> sorted(live_in(ast.parse("y = x + 1; z = y * w").body))
    ['w', 'x']
    """
    return _live_in(stmts, set(live_out), break_flags or {}, Liveness())


def _live_in(stmts, live_out: set[str], flags, result: Liveness) -> set[str]:
    live = set(live_out)
    for stmt in reversed(stmts):
        result.live_out[stmt] = set(live)
        live = _live_in_stmt(stmt, live, flags, result)
    return live


def _live_in_stmt(stmt: ast.stmt, live_out: set[str], flags, result: Liveness) -> set[str]:
    if isinstance(stmt, ast.If):
        return reads(stmt.test) | _live_in(stmt.body, live_out, flags, result) | _live_in(stmt.orelse, live_out, flags, result)
    if isinstance(stmt, (ast.While, ast.For)):
        return _live_in_loop(stmt, live_out, flags, result)
    if isinstance(stmt, ast.With):  # the body runs once, through: its assignments kill what follows
        bound = set().union(*(writes(item.optional_vars) for item in stmt.items if item.optional_vars is not None))
        return reads(stmt.items) | (_live_in(stmt.body, live_out, flags, result) - bound)
    if isinstance(stmt, ast.Try):
        return reads(stmt) | live_out
    if isinstance(stmt, (ast.Return, ast.Raise)):  # the path ends: nothing after it is read on it
        return reads(stmt)
    killed = _definite_writes(stmt)
    return (live_out - killed) | reads(stmt)


def _live_in_loop(stmt: ast.While | ast.For, live_out: set[str], flags, result: Liveness) -> set[str]:
    head_reads = reads(stmt.test) if isinstance(stmt, ast.While) else reads(stmt.iter)
    if flags.get(stmt):
        head_reads = head_reads | {flags[stmt]}  # the runtime checks it before each iteration
    after = _live_in(stmt.orelse, live_out, flags, result) | live_out
    body_in: set[str] = set()
    for _ in range(3):  # fixed point: what the body needs may be live around the back edge
        body_out = after | body_in | head_reads
        new_in = _live_in(stmt.body, body_out, flags, result)
        if isinstance(stmt, ast.For):
            new_in -= writes(stmt.target)
        if new_in == body_in:
            break
        body_in = new_in
    result.body_live_in[stmt] = set(body_in)
    return head_reads | body_in | after


def _definite_writes(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, ast.Assign):
        return set().union(*(_target_names(t) for t in stmt.targets))
    if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        return _target_names(stmt.target)
    if isinstance(stmt, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
        return writes(stmt)
    return set()


def _target_names(target: ast.AST) -> set[str]:
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_target_names(e) for e in target.elts)) if target.elts else set()
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return set()


def contains(nodes: Sequence[ast.AST] | ast.AST, kinds: tuple, *, stop_at_loops: bool = False) -> bool:
    """True when a node of ``kinds`` appears in ``nodes`` (same function scope).

    With ``stop_at_loops``, nested ``while``/``for`` bodies are not searched (for break/continue).
    """
    todo = list(nodes) if isinstance(nodes, (list, tuple)) else [nodes]
    while todo:
        node = todo.pop()
        if isinstance(node, kinds):
            return True
        if isinstance(node, _SCOPES):
            continue
        if stop_at_loops and isinstance(node, (ast.While, ast.For)):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return False
