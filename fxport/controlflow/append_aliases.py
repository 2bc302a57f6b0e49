"""In-place writes into a value a data-dependent loop appended to a list (a loop's side effect).

A converted loop keeps a list it appends to as rows of a buffer, copied at the append; in eager
the list holds the object itself and sees every later in-place write into it. The loop facts
(:mod:`fxport.controlflow.facts`) count such a write as a side effect the loop cannot carry, so
the loop is refused in one line instead of lowered to a file that differs from eager.
"""

from __future__ import annotations

import ast


def aliased_appends(stmts) -> list[str]:
    r"""In-place writes into a value a loop body appended to a list, while the list still holds it.

    ``xs.append(v)`` then ``v[mask] = inf`` (or ``v.masked_fill_(...)``) before ``v`` is bound
    again: in eager the list holds the same object and sees the write; a data-dependent loop
    keeps the list as rows of a buffer, copied at the append (SpeechBrain's greedy searcher:
    ``log_probs_lst.append(log_probs)``, then ``log_probs[has_ended] = inf``). The same on the
    next trip when the write comes before the append and nothing binds ``v`` in between. Events
    are taken in source order (a write on another path than the append is counted too), except
    after an append whose block then leaves the loop (``det_max.append(dc); break``, a break
    already a flag ``_fx_break_N = True`` here, or ``return`` / ``raise``).

    >>> body = ast.parse("xs.append(v)\nv[0] = 1").body
    >>> [what.split(' (')[0] for what in aliased_appends(body)]
    ["in-place write into 'v' at line 2 after xs.append(v) at line 1"]
    >>> aliased_appends(ast.parse("xs.append(v.clone())\nv[0] = 1").body)
    []
    >>> aliased_appends(ast.parse("if c:\n    xs.append(v)\n    break\nv[0] = 1").body)
    []
    """
    events = []  # (order, sub-order, kind, name, text, line): statement order, not line order
    leaving = _appends_that_leave(stmts)
    for order, node in enumerate(_in_statement_order(stmts)):
        line = _line(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            func = node.func
            if id(node) in leaving:
                continue  # ``xs.append(v); break``: nothing of this trip or a next one runs after it
            if func.attr == "append" and len(node.args) == 1 and isinstance(node.args[0], ast.Name):
                events.append((order, 0, "append", node.args[0].id, ast.unparse(node), line))
            elif func.attr.endswith("_") and not func.attr.endswith("__") and isinstance(func.value, ast.Name):
                events.append((order, 0, "write", func.value.id, "", line))
        elif isinstance(node, ast.Assign) and _is_converted_write(node):  # v = _fx.setitem(v, i, x)
            events.append((order, 0, "write", node.targets[0].id, "", line))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Subscript) and isinstance(sub.value, ast.Name):
                        events.append((order, 0, "write", sub.value.id, "", line))
                if not isinstance(node, ast.AugAssign):
                    for name in _target_names(target):
                        events.append((order, 1, "bind", name, "", line))
    events.sort(key=lambda e: (e[0], e[1]))
    found = []
    for position, (_, _, kind, name, text, line) in enumerate(events):
        if kind != "append":
            continue
        after = events[position + 1:]
        wrap = events[:position]  # the next trip's statements before this append
        for later in _until_bound(after, name) + (_until_bound(wrap, name) if not _binds(after, name) else []):
            found.append(f"in-place write into {name!r} at line {later[5]} after {text} at line {line} (in eager "
                         f"the list holds the same tensor and sees the write; append after the write, or append "
                         f"{name}.clone())")
            break
    return found


def _in_statement_order(stmts):
    """Every node of ``stmts``, each before its children, statements in the order they run (a
    statement a canonicalisation moved keeps its line: :mod:`~fxport.controlflow.converters.deferred_appends`)."""
    for stmt in stmts:
        yield from _preorder(stmt)


def _preorder(node: ast.AST):
    yield node
    for child in ast.iter_child_nodes(node):
        yield from _preorder(child)


def _appends_that_leave(stmts) -> set[int]:
    """``id``s of the ``xs.append(v)`` calls that a ``break`` (or its flag), ``return`` or
    ``raise`` later in the same block follows: the trip leaves the loop from there."""
    leaving: set[int] = set()
    for node in ast.walk(ast.Module(body=list(stmts), type_ignores=[])):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            for position, stmt in enumerate(block):
                if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                        and isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr == "append"
                        and any(_leaves(later) for later in block[position + 1:])):
                    leaving.add(id(stmt.value))
    return leaving


def _leaves(stmt: ast.stmt) -> bool:
    """``break`` / ``return`` / ``raise``, or the flag a canonicalised break sets (loop_exits.py)."""
    if isinstance(stmt, (ast.Break, ast.Return, ast.Raise)):
        return True
    return (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id.startswith("_fx_break_") and isinstance(stmt.value, ast.Constant)
            and stmt.value.value is True)


_CONVERTED_WRITES = ("_fx.setitem", "_fx.targets.chained_setitem")


def _is_converted_write(node: ast.Assign) -> bool:
    """``v = _fx.setitem(v, i, x)``: the indexing converter's form of ``v[i] = x`` (slices.py)."""
    value, targets = node.value, node.targets
    return (len(targets) == 1 and isinstance(targets[0], ast.Name) and isinstance(value, ast.Call)
            and ast.unparse(value.func) in _CONVERTED_WRITES and bool(value.args)
            and isinstance(value.args[0], ast.Name) and value.args[0].id == targets[0].id)


def _line(node: ast.AST) -> int:
    """The node's line; 0 for one a converter made without a location."""
    return getattr(node, "lineno", 0) or 0


def _until_bound(events: list, name: str) -> list:
    """The writes into ``name`` among ``events`` before the first binding of ``name``."""
    writes = []
    for event in events:
        if event[3] == name and event[2] == "bind":
            break
        if event[3] == name and event[2] == "write":
            writes.append(event)
    return writes


def _binds(events: list, name: str) -> bool:
    return any(e[3] == name and e[2] == "bind" for e in events)


def _target_names(target: ast.AST) -> set[str]:
    """Plain names an assignment target binds (``a``, ``a, b``), not subscripts or attributes."""
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_target_names(e) for e in target.elts)) if target.elts else set()
    return set()
