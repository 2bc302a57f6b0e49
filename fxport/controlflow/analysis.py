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

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _walk_same_scope(node: ast.AST):
    """ast.walk that does not descend into nested function/class bodies (but sees their defaults)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, _SCOPES) and current is not node:
            continue
        stack.extend(ast.iter_child_nodes(current))


def _free_names(scope: ast.AST) -> set[str]:
    """Names a nested function/lambda reads from its enclosing scope (approximation)."""
    loaded, stored = set(), set()
    for node in ast.walk(scope):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else stored).add(node.id)
        elif isinstance(node, ast.arg):
            stored.add(node.arg)
    return loaded - stored


def writes(node: ast.AST | Sequence[ast.AST]) -> set[str]:
    """Names bound by ``node`` (or a list of statements) in the current scope."""
    if isinstance(node, (list, tuple)):
        return set().union(*(writes(n) for n in node)) if node else set()
    found: set[str] = set()
    for sub in _walk_same_scope(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            found.add(sub.id)
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and sub is not node:
            found.add(sub.name)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            for alias in sub.names:
                found.add((alias.asname or alias.name).split(".")[0])
    return found


def mutated(node: ast.AST | Sequence[ast.AST]) -> set[str]:
    """Names whose object is changed in place: ``v[i] = ...``, ``v.attr = ...``, ``v.add_(...)``,
    ``torch.relu_(v)`` (a module-like callee such as ``torch`` is reported too; callers keep
    only their locals)."""
    if isinstance(node, (list, tuple)):
        return set().union(*(mutated(n) for n in node)) if node else set()
    found: set[str] = set()
    for sub in _walk_same_scope(node):
        if isinstance(sub, (ast.Subscript, ast.Attribute)) and isinstance(sub.ctx, ast.Store):
            root = root_name(sub.value)
            if root:
                found.add(root)
        elif isinstance(sub, ast.AugAssign) and isinstance(sub.target, ast.Name):
            found.add(sub.target.id)  # `t += 1` is in place for tensors
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
            name = sub.func.attr
            if name.endswith("_") and not name.endswith("__"):
                root = root_name(sub.func.value)
                if root:
                    found.add(root)
                # the function form writes its first argument: torch.relu_(h), F.relu_(h)
                first = root_name(sub.args[0]) if sub.args else None
                if first:
                    found.add(first)
    return found


def root_name(node: ast.AST) -> str | None:
    """``x`` for ``x``, ``x.a.b`` and ``x[i].a``; None when the root is not a name."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def reads(node: ast.AST | Sequence[ast.AST]) -> set[str]:
    """Names read by ``node``, including free names of nested functions and lambdas."""
    if isinstance(node, (list, tuple)):
        return set().union(*(reads(n) for n in node)) if node else set()
    found: set[str] = set()
    for sub in _walk_same_scope(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
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
    if isinstance(stmt, (ast.With, ast.Try)):
        return reads(stmt) | live_out
    if isinstance(stmt, ast.Return):
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
