"""Python's scopes as the analysis sees them: which nodes belong to the function being
converted, and which names a nested function or a comprehension keeps to itself.

A comprehension's ``for`` targets are local to it (Python 3): ``[float(i) for i in r]`` inside
a loop body neither writes nor reads ``i`` in the function, but it still calls ``float`` and
reads ``r`` there, and a walrus inside it binds in the function.

Example::

    >>> import ast
    >>> tree = ast.parse("y = [i * q for i in r]")
    >>> loads = [n for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    >>> sorted(n.id for n in loads if id(n) not in comprehension_local_reads(tree)), names_bound_by_comprehensions(tree)
    (['q', 'r'], {'i'})
"""

from __future__ import annotations

import ast

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def walk_same_scope(node: ast.AST):
    """ast.walk that does not descend into nested function/class bodies (but sees their defaults)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, SCOPES) and current is not node:
            continue
        stack.extend(ast.iter_child_nodes(current))


def free_names(scope: ast.AST) -> set[str]:
    """Names a nested function/lambda reads from its enclosing scope (approximation)."""
    loaded, stored = set(), set()
    for node in ast.walk(scope):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else stored).add(node.id)
        elif isinstance(node, ast.arg):
            stored.add(node.arg)
    return loaded - stored


COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _target_names(comprehension) -> list[ast.Name]:
    """The Name nodes a comprehension's ``for`` clauses bind."""
    return [n for g in comprehension.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)]


def comprehension_targets(node: ast.AST) -> set[int]:
    """The ids of the Name nodes a comprehension's ``for`` binds: local to the comprehension
    (Python 3), so not written in the enclosing scope (a walrus inside one still is)."""
    return {id(n) for sub in walk_same_scope(node) if isinstance(sub, COMPREHENSIONS) for n in _target_names(sub)}


def comprehension_local_reads(node: ast.AST) -> set[int]:
    """The ids of the Name nodes inside a comprehension that read its own ``for`` targets (the
    first iterable is evaluated in the enclosing scope and is not among them)."""
    local: set[int] = set()
    for sub in walk_same_scope(node):
        if not isinstance(sub, COMPREHENSIONS):
            continue
        bound = {n.id for n in _target_names(sub)}
        outer = {id(n) for n in ast.walk(sub.generators[0].iter)}
        local |= {id(n) for n in ast.walk(sub) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                  and n.id in bound and id(n) not in outer}
    return local


def names_bound_by_comprehensions(nodes) -> set[str]:
    """The names comprehensions in ``nodes`` (a node or a list) bind for themselves: locals of
    the code, though not of the function."""
    return {n.id for node in (nodes if isinstance(nodes, list) else [nodes]) for sub in walk_same_scope(node)
            if isinstance(sub, COMPREHENSIONS) for n in _target_names(sub)}


def nested_functions(fdef: ast.FunctionDef) -> dict[str, ast.FunctionDef]:
    """The functions ``fdef`` defines with ``def`` in its own scope (in any of its blocks) whose
    name nothing else binds there (no other def, assignment, parameter, import or
    ``global``/``nonlocal``), undecorated and declaring no ``nonlocal``/``global`` themselves:
    each name stands for that one function wherever the scope reads it.

    >>> tree = ast.parse("def f(x):\\n    def g(i):\\n        return x[i]\\n    h = 1\\n    def h(): pass\\n    return g(0)")
    >>> sorted(nested_functions(tree.body[0]))
    ['g']
    """
    defs: dict[str, list] = {}
    other: set[str] = {a.arg for a in ast.walk(fdef.args) if isinstance(a, ast.arg)}
    for node in walk_same_scope(fdef):
        if node is fdef:
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.ClassDef):
            other.add(node.name)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            other.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            other |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            other |= set(node.names)
    return {name: found[0] for name, found in defs.items()
            if len(found) == 1 and name not in other and isinstance(found[0], ast.FunctionDef)
            and not found[0].decorator_list and not _declares_outer(found[0])}


def _declares_outer(fdef: ast.FunctionDef) -> bool:
    return any(isinstance(node, (ast.Global, ast.Nonlocal)) for node in ast.walk(fdef))
