"""Writes into attributes, buffers, dict/list entries and locals become carried locals.

An ``if``/``while``/``for`` that changes state outside its own locals — ``self.running.mul_(0.9)``,
``self.buf[0] = v``, ``self.count += 1``, ``self.h = self.h * 2``, ``d["k"].add_(1)``,
``d["k"] = v``, ``cache[k][i] = v``, ``xs[0].mul_(2)`` — is rewritten to work on a local that
the statement converters then carry like any other state: the target is read into the local
before the statement (``_fx.targets.load``), every use inside refers to the local, and the
result is written back after it (``_fx.targets.store``: ``copy_`` where the user wrote in
place, a rebinding where they assigned). A local written in place only (``y.add_(1)``,
``out[i] = h``; ``y`` may be a caller's input or a view) is remembered before the statement and
updated in place after it (``_fx.targets.into``), so aliases, views and the caller see the write.

Targets whose path changes inside the statement (``self.bufs[i]`` with ``i`` assigned there)
are left as written; the facts report them as side effects (refused under a tensor condition).

A function defined inside the converted one and used inside a statement reads and writes the
enclosing function's variables there (:class:`NestedFunctionCalls`): each use is bound to the
statement's locals for them (``_fx.calls.bound``), so the analysis sees those reads and writes.

Size: the three canonicalisations of state a statement changes outside its own locals
(attributes and entries, locals written in place, the enclosing variables a nested function
changes) share this module's reading of what a statement writes and its locals' naming.

Example::

    >>> from fxport.controlflow.engine import convert_function
    >>> def forward(self, x):
    ...     if x.sum() > 0:
    ...         self.running.mul_(0.5)
    ...     return x + self.running
    >>> print(convert_function(forward).source.after)  # doctest: +NORMALIZE_WHITESPACE
    def forward(self, x):
        _fx_v_self_running = _fx.targets.load(self, 'running', 'attr', 'self.running')
    <BLANKLINE>
        def _fx_true_0(_fx_v_self_running):
            _fx_v_self_running.mul_(0.5)
            return (_fx_v_self_running,)
    <BLANKLINE>
        def _fx_false_0(_fx_v_self_running):
            return (_fx_v_self_running,)
        _fx_v_self_running, = _fx.if_stmt(x.sum() > 0, _fx_true_0, _fx_false_0, (_fx_v_self_running,), _fx.statement(_fx_meta, 0))
        _fx.targets.store(self, 'running', 'attr', _fx_v_self_running, True, 'self.running')
        return x + self.running
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import re

import torch

from fxport.controlflow import analysis, scopes
from fxport.controlflow.astutil import at, call, located, map_blocks, name, rt, tuple_
from fxport.controlflow.context import STATE_TARGET_PREFIXES
from fxport.controlflow.converters import method_state
from fxport.controlflow.converters.base import Canonicalization
from fxport.controlflow.facts import is_static_index
from fxport.controlflow.views import view_bases

#: prefixes of the locals this converter makes (carried like user locals)
VALUE_PREFIX, ORIGINAL_PREFIX = STATE_TARGET_PREFIXES
_CONSTRUCTS = (ast.If, ast.While, ast.For)


@dataclasses.dataclass
class Target:
    """One written expression of a statement and the local standing for it."""

    path: ast.expr  # self.running, d["k"], y
    local: str  # _fx_v_self_running (a path) or _fx_was_y (the object a local name had)
    in_place: bool  # written into (copy_ back) rather than assigned (rebound)
    line: int | None = None  # where an attribute or entry is first assigned

    @property
    def text(self) -> str:
        return ast.unparse(self.path)


class StateTargets(Canonicalization):
    """Rewrite every if/while/for writing state outside its locals (see the module doc)."""

    def apply(self) -> None:
        self.taken: set[str] = set(self.ctx.local_names)
        self.lists = _names_bound_only_to_lists(self.ctx.fdef)
        self.objects = method_state.object_classes(self.ctx.fdef, self.ctx.fn)
        _ItemWritesAsStores().visit(self.ctx.fdef)
        self.ctx.fdef.body = _without_stale_guards(self._block(self.ctx.fdef.body))

    def _block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            if isinstance(stmt, _CONSTRUCTS):
                before, after = self._rewrite(stmt)
                out.extend(before)
                out.append(stmt)
                out.extend(after)
            else:
                out.append(stmt)
            map_blocks(stmt, self._block)
        return out

    def _rewrite(self, node) -> tuple[list[ast.stmt], list[ast.stmt]]:
        """The statements to put before and after ``node``; ``node`` now uses the locals."""
        names, paths = self._targets(node)
        enclosing = self._enclosing_names(node)
        before, after = [], []
        for target in enclosing:  # read into a local here, copied back into the enclosing function's object
            before.append(_assign(target.local, name(target.text), node))
            after.append(at(ast.Expr(call(_operator("into_enclosing"), name(target.text), name(target.local),
                                          ast.Constant(target.text))), node))
        if enclosing:
            _Rename({t.text: t.local for t in enclosing}).visit(node)
        for target in paths:
            owner, key, kind = _owner_key(target.path)
            args = (owner, key, ast.Constant(kind))
            line = ast.Constant(target.line) if target.line else None
            load = call(_operator("load"), *copy.deepcopy(args), ast.Constant(target.text), *([line] if line else []))
            before.append(_assign(target.local, load, node))
            after.append(at(ast.Expr(call(_operator("store"), *args, name(target.local), ast.Constant(target.in_place),
                                          ast.Constant(target.text))), node))
        if paths:
            _Replace({ast.dump(_loaded(t.path)): t.local for t in paths}).visit(node)
        if len(names) > 1:
            texts = [ast.Constant(t.text) for t in names]
            after.append(at(ast.Expr(call(_operator("apart"), tuple_([name(t.local) for t in names]),
                                          tuple_([name(t.text) for t in names]), tuple_(texts))), node))
        for target in names:
            before.append(_assign(target.local, name(target.text), node))
            after.append(_assign(target.text, call(_operator("into"), name(target.local), name(target.text)), node))
        lists = {t.text for t in names} & self.lists
        if lists and isinstance(node, (ast.While, ast.For)):
            _EntryWrites(lists).rewrite(node)
        if isinstance(node, (ast.While, ast.For)):
            node.body = _guarded_stores(node.body, nested=False)
        self.ctx.local_names |= {t.local for t in names + paths + enclosing}
        return [located(s, node) for s in before], [located(s, node) for s in after]

    def _enclosing_names(self, node) -> list[Target]:
        """Variables of the enclosing function (free variables of a nested def) that ``node``
        writes into in place: they become locals for the construct and are copied back."""
        free = set(getattr(getattr(self.ctx.fn, "__code__", None), "co_freevars", ()))
        if not free:
            return []
        block = node.body + node.orelse
        in_place, _ = analysis.written_targets(block, free)
        written = {analysis.root_name(p) for p in in_place if analysis.root_name(p) is not None}
        rebound = analysis.rebound_names(block) | analysis.writes(self.ctx.fdef.body)
        chosen = sorted((written & free) - rebound - {self.ctx.self_name})
        return [Target(name(n), self._fresh(VALUE_PREFIX + n), True) for n in chosen]

    def _targets(self, node) -> tuple[list[Target], list[Target]]:
        """(local names written in place only, attribute/entry paths) of ``node``."""
        block = node.body + node.orelse
        in_place, assigned = analysis.written_targets(block, self.ctx.local_names)
        rebound = analysis.rebound_names(block)
        if isinstance(node, ast.For):
            rebound |= analysis.writes(node.target)
        elif isinstance(node, ast.While):
            rebound |= analysis.writes(node.test)
        locals_ = self.ctx.local_names
        in_place = [_stable_part(p, rebound) for p in in_place]
        written_names = {t.id for t in in_place if isinstance(t, ast.Name)}
        written_names |= view_bases(written_names, block)  # view = g[0]; view.add_(1) writes g: copy it back
        names = sorted(written_names & locals_ - rebound - {self.ctx.self_name})
        candidates: dict[str, Target] = {}
        for path, writes_into in [(p, True) for p in in_place] + [(p, False) for p in assigned]:
            if isinstance(path, ast.Name) or not analysis.is_path(path):
                continue
            if analysis.path_names(path) & rebound or analysis.root_name(path) not in locals_:
                continue
            key = ast.dump(_loaded(path))
            if key not in candidates:
                candidates[key] = Target(path, "", writes_into)
            candidates[key].in_place &= writes_into
            if not writes_into and candidates[key].line is None:
                candidates[key].line = path.lineno
        paths = [t for t in candidates.values() if not _overlaps(t, candidates.values(), names)]
        paths = _not_used_otherwise(node, paths, set(self.objects))
        paths = self._with_method_state(node, paths)
        for target in paths:
            if not target.local:
                target.local = self._fresh(VALUE_PREFIX + re.sub(r"\W+", "_", target.text).strip("_"))
        return [Target(name(n), self._fresh(ORIGINAL_PREFIX + n), True) for n in names], paths

    def _with_method_state(self, node, paths: list[Target]) -> list[Target]:
        """``paths`` with the attributes the methods ``node`` calls write, of ``self`` and of the
        locals holding objects of the user's classes (method_state.object_classes), each where
        those methods can run on an overlay of the carried locals (``node`` is then rewritten
        so); otherwise without the attributes the methods may read or write, which stay as written."""
        for owner, cls in self._method_owners():
            paths = self._with_owner_methods(node, paths, owner, cls)
        return paths

    def _method_owners(self) -> list[tuple[str, type | None]]:
        """``self`` (its class from the method's name) and the locals of the user's classes."""
        owners = [(self.ctx.self_name, method_state.owner_class(self.ctx.fn))] if self.ctx.self_name else []
        return owners + [(n, c) for n, c in sorted(self.objects.items()) if n != self.ctx.self_name]

    def _with_owner_methods(self, node, paths: list[Target], owner: str, cls: type | None) -> list[Target]:
        """:meth:`_with_method_state` for the object ``owner`` holds, of class ``cls``."""
        methods = method_state.methods_called(node, self.ctx.fn, owner, cls)
        if methods is not None and not methods.touched:
            return paths
        mine = [t for t in paths if _self_attribute_in(t.path, owner, None)]
        plain = {t.path.attr: t for t in mine if _is_plain_attribute(t.path, owner)}
        shared = [t for t in mine if methods is None or _self_attribute_in(t.path, owner, methods.touched)]
        others = [t for t in paths if all(t is not s for s in shared)]
        if (methods is None or not (methods.written or shared)
                or method_state.uses_self_otherwise(node, owner, methods.methods, cls)
                or any(not _is_plain_attribute(t.path, owner) for t in shared)):
            return others
        targets = dict(plain)
        for attribute in sorted(methods.written - set(targets)):
            targets[attribute] = Target(ast.Attribute(value=name(owner), attr=attribute, ctx=ast.Load()), "", True)
        for attribute, target in targets.items():
            target.in_place &= attribute not in methods.assigned
            if not target.local:
                target.local = self._fresh(VALUE_PREFIX + f"{owner}_{attribute}")
        trial = _Replace({ast.dump(_loaded(t.path)): t.local for t in paths + list(targets.values())}).visit(copy.deepcopy(node))
        if not method_state.sync_method_calls(trial, owner, {a: t.local for a, t in targets.items()}, methods, cls):
            return others
        for field in node._fields:
            setattr(node, field, getattr(trial, field))
        self.ctx.local_names.add(method_state.overlay_name(owner))
        self.ctx.local_names.add(method_state.RESULT)
        return [t for t in paths if t not in targets.values()] + list(targets.values())

    def _fresh(self, wanted: str) -> str:
        candidate, number = wanted, 1
        while candidate in self.taken:
            number += 1
            candidate = f"{wanted}_{number}"
        self.taken.add(candidate)
        return candidate


def _self_attribute_in(path: ast.expr, self_name: str | None, attributes: set[str] | None) -> bool:
    """Whether ``path`` (``self.h``, ``self.cache[0]``) is an attribute of ``self`` in
    ``attributes`` (any, when None)."""
    if analysis.root_name(path) != self_name:
        return False
    while isinstance(path, (ast.Attribute, ast.Subscript)):
        if isinstance(path, ast.Attribute) and isinstance(path.value, ast.Name):
            return attributes is None or path.attr in attributes
        path = path.value
    return attributes is None


def _is_plain_attribute(path: ast.expr, self_name: str | None) -> bool:
    """``self.h`` (not ``self.cache[0]`` nor ``self.a.b``)."""
    return isinstance(path, ast.Attribute) and isinstance(path.value, ast.Name) and path.value.id == self_name


def _stable_part(path: ast.expr, rebound: set[str]) -> ast.expr:
    """The part of a path written in place that names the same object all through the
    statement: ``self.buf`` for ``self.buf[i].add_(1)`` in a loop assigning ``i`` (a write into
    a row is a write into the tensor)."""
    while isinstance(path, (ast.Attribute, ast.Subscript)) and analysis.path_names(path) & rebound:
        path = path.value
    return path


def _not_used_otherwise(node, paths: list[Target], objects: set[str]) -> list[Target]:
    """The paths whose container the statement uses only through them: ``d["k"].add_(1)`` next
    to ``sum(d.values())`` would read the entry from before the write, so ``d["k"]`` stays as
    written (and the facts report the write as a side effect under a tensor condition).
    Other attributes (``self.fc``) and other constant keys (``d["v"]``) are other objects; a
    call of an object of the user's class (``fade(out)``, ``objects``) is its method's call,
    which :meth:`StateTargets._with_method_state` runs on an overlay of the carried attributes."""
    if not paths:
        return paths
    rest = _Replace({ast.dump(_loaded(t.path)): t.local for t in paths}).visit(copy.deepcopy(node))
    called = {id(sub.func) for sub in ast.walk(rest)
              if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in objects}
    uses = [_steps(chain) for chain in _whole_uses(rest) if id(chain) not in called]
    return [t for t in paths if not any(_conflict(use, _steps(t.path)) for use in uses)]


def _steps(chain: ast.AST) -> tuple[str | None, list[tuple]]:
    """``("d", [("item", "'k'", True)])`` for ``d["k"]``: the root and each access."""
    steps = []
    while isinstance(chain, (ast.Attribute, ast.Subscript)):
        if isinstance(chain, ast.Attribute):
            steps.append(("attr", chain.attr, True))
        else:
            steps.append(("item", ast.dump(_loaded(chain.slice)), isinstance(chain.slice, ast.Constant)))
        chain = chain.value
    return (chain.id if isinstance(chain, ast.Name) else None), steps[::-1]


def _conflict(use, path) -> bool:
    """Whether a use may read or write the object ``path`` names other than through it."""
    (use_root, use_steps), (root, steps) = use, path
    if use_root != root:
        return False
    for mine, theirs in zip(use_steps, steps):
        if mine == theirs:
            continue
        same_kind = mine[0] == theirs[0] and mine[2] and theirs[2]
        return not same_kind  # d.values vs d["k"], d[j] vs d["k"]: maybe the same object
    return len(use_steps) < len(steps)  # the container itself (d, self.cache)


def _whole_uses(node: ast.AST):
    """Names and access chains used as a whole (``d`` in ``sum(d.values())``... as ``d.values``;
    ``d["k"]`` but not its ``d``)."""
    if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript)):
        yield node
        inner = node
        while isinstance(inner, (ast.Attribute, ast.Subscript)):
            if isinstance(inner, ast.Subscript):
                yield from _whole_uses(inner.slice)
            inner = inner.value
        return
    for child in ast.iter_child_nodes(node):
        yield from _whole_uses(child)


def _overlaps(target: Target, others, names: list[str]) -> bool:
    """True when another target contains this one or lies inside it (``d`` and ``d["k"]``):
    the two locals would not see each other's writes, so neither path is rewritten."""
    if analysis.root_name(target.path) in names:
        return True
    text = target.text
    return any(other is not target and (_inside(other.text, text) or _inside(text, other.text)) for other in others)


def _inside(text: str, outer: str) -> bool:
    """``d["k"]`` is inside ``d``; ``self.head`` is not inside ``self.h``."""
    return text.startswith(outer) and text[len(outer):len(outer) + 1] in (".", "[")


def _owner_key(path: ast.expr) -> tuple[ast.expr, ast.expr, str]:
    """``(owner, key, kind)``: ``(self, 'running', 'attr')`` for ``self.running``, ``(d, 'k', 'item')``
    for ``d["k"]``."""
    if isinstance(path, ast.Attribute):
        return _loaded(path.value), ast.Constant(path.attr), "attr"
    return _loaded(path.value), _loaded(path.slice), "item"


def _loaded(node: ast.expr) -> ast.expr:
    node = copy.deepcopy(node)
    for sub in ast.walk(node):
        if hasattr(sub, "ctx"):
            sub.ctx = ast.Load()
    return node


def _operator(fn: str) -> ast.Attribute:
    """``_fx.targets.<fn>``."""
    return ast.Attribute(value=rt("targets"), attr=fn, ctx=ast.Load())


def _assign(target: str, value: ast.expr, like: ast.AST) -> ast.Assign:
    return at(ast.Assign(targets=[name(target, True)], value=value), like)


class _Replace(ast.NodeTransformer):
    """Replace every occurrence of the paths (loaded or stored) with their locals."""

    def __init__(self, locals_by_path: dict[str, str]):
        self.locals_by_path = locals_by_path

    def _replace(self, node):
        local = self.locals_by_path.get(ast.dump(_loaded(node)))
        if local is not None:
            return ast.copy_location(name(local, store=isinstance(node.ctx, ast.Store)), node)
        return self.generic_visit(node)

    visit_Attribute = visit_Subscript = _replace


class _Rename(ast.NodeTransformer):
    """Rename every use of some names (a variable of the enclosing function → its local)."""

    def __init__(self, renamed: dict[str, str]):
        self.renamed = renamed

    def visit_Name(self, node):
        if node.id in self.renamed:
            return ast.copy_location(ast.Name(id=self.renamed[node.id], ctx=node.ctx), node)
        return node


#: the operator guarding an attribute assignment nested in an inner construct of a loop body
EFFECT_GUARD = "effect_here"
_NESTING = (ast.If, ast.For, ast.While)


def _guarded_stores(stmts: list[ast.stmt], nested: bool) -> list[ast.stmt]:
    """``stmts`` of a loop body with ``_fx.targets.effect_here('assignment to o.a at line N')``
    before each attribute assignment that sits in an inner ``if``/``for``/``while`` (``nested``)
    and is left as written: whether it runs is decided where it is met (a ``for`` over an empty
    list, an ``if`` on a Python value not taken), so the loop leaves it to the guard, which
    refuses it where the loop traces its body, and to the inner ``if``, which refuses it on a
    tensor test (loop_state.py drops it from the loop's own side effects)."""
    out: list[ast.stmt] = []
    for stmt in stmts:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append(stmt)
            continue
        if nested and not _is_guard(out[-1] if out else None):
            for target in _attribute_targets(stmt):
                text = f"assignment to {ast.unparse(target)} at line {target.lineno}"
                out.append(located(at(ast.Expr(call(_operator(EFFECT_GUARD), ast.Constant(text))), stmt), stmt))
        out.append(stmt)
        inner = nested or isinstance(stmt, _NESTING)
        map_blocks(stmt, lambda block, inner=inner: _guarded_stores(block, inner))
    return out


def _attribute_targets(stmt: ast.stmt) -> list[ast.Attribute]:
    """The attributes ``stmt`` assigns (``o.a = v``, ``o.a, b = v``, ``o.a += v``)."""
    if isinstance(stmt, ast.Assign):
        targets = stmt.targets
    elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign)):
        targets = [stmt.target]
    else:
        return []
    return [n for t in targets for n in ast.walk(t) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)]


def _is_guard(stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
            and ast.unparse(stmt.value.func) == f"_fx.targets.{EFFECT_GUARD}")


def _without_stale_guards(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """``stmts`` without the guards whose assignment an inner construct made a carried local
    (its ``store`` after that construct decides then, as for any attribute it carries)."""
    out: list[ast.stmt] = []
    for position, stmt in enumerate(stmts):
        if _is_guard(stmt):
            following = stmts[position + 1] if position + 1 < len(stmts) else None
            texts = {f"assignment to {ast.unparse(t)} at line {t.lineno}" for t in _attribute_targets(following)} \
                if following is not None else set()
            if stmt.value.args[0].value not in texts:
                continue
        out.append(stmt)
        map_blocks(stmt, _without_stale_guards)
    return out


def guarded_effects(body: list[ast.stmt]) -> set[str]:
    """The side effects (``assignment to o.a at line N``) guarded in ``body`` where they run."""
    found = set()
    for node in ast.walk(ast.Module(body=list(body), type_ignores=[])):
        if isinstance(node, ast.Expr) and _is_guard(node) and isinstance(node.value.args[0], ast.Constant):
            found.add(node.value.args[0].value)
    return found


def _names_bound_only_to_lists(fdef: ast.FunctionDef) -> set[str]:
    """Names the function binds to list displays, comprehensions or ``[..] * n`` and to nothing
    else (no parameter, no other assignment, no loop or ``with`` target)."""
    lists, others = set(), {a.arg for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs}
    for node in scopes.walk_same_scope(fdef):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and _is_list_value(node.value):
                    lists.add(target.id)
                else:
                    others |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.With, ast.NamedExpr)):
            targets = [node.target] if not isinstance(node, ast.With) else [i.optional_vars for i in node.items if i.optional_vars]
            others |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    return lists - others


def _is_list_value(value: ast.expr) -> bool:
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.Mult):
        return _is_list_value(value.left) or _is_list_value(value.right)
    return isinstance(value, (ast.List, ast.ListComp))


class _EntryWrites(ast.NodeTransformer):
    """``xs[i] = v`` (and ``xs[i] += v``) in a loop body, ``xs`` a list (a name bound only to
    list displays) the loop writes into by index only → ``xs = _fx.targets.entry_written(xs, i,
    v, static)``: a Python list written at a position known at trace time (a constant, the
    counter of a static inner loop over layers) is rebound to a list with that entry replaced
    where the loop traces its body, so the loop carries its entries like other state, and
    :func:`~fxport.controlflow.operators.targets.into` writes them back into the list object
    after the loop. Writes under an inner ``if`` are left as written: the ``if`` selects the
    entries of a list its branches write (lists/selected.py) from the facts of writes in place."""

    def __init__(self, names: set[str]):
        self.names = names

    def rewrite(self, node) -> None:
        node.body = [self.visit(s) for s in node.body]
        node.orelse = [self.visit(s) for s in node.orelse]

    def _scope(self, node):
        return node  # a nested function, lambda or class writes its own names

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = visit_If = _scope

    def _entry(self, target) -> bool:
        return (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                and target.value.id in self.names and not any(isinstance(n, ast.Slice) for n in ast.walk(target.slice)))

    def _written(self, target: ast.Subscript, value: ast.expr, like: ast.stmt) -> ast.Assign:
        static = ast.Constant(is_static_index(target.slice))
        write = call(_operator("entry_written"), name(target.value.id), _loaded(target.slice), value, static)
        return located(ast.copy_location(ast.Assign(targets=[name(target.value.id, True)], value=write), like), like)

    def visit_Assign(self, node):
        if len(node.targets) == 1 and self._entry(node.targets[0]):
            return self._written(node.targets[0], node.value, node)
        return self.generic_visit(node)

    def visit_AugAssign(self, node):
        if self._entry(node.target):
            combined = ast.copy_location(ast.BinOp(left=_loaded(node.target), op=node.op, right=node.value), node)
            return self._written(node.target, combined, node)
        return self.generic_visit(node)


class _ItemWritesAsStores(ast.NodeTransformer):
    """``x[i].add_(v)`` with a computed index → ``x[i] = x[i].add(v)`` (``copy_``/``fill_`` →
    ``x[i] = v``, ``zero_()`` → ``x[i] = 0``, ``torch.relu_(x[i])`` → ``x[i] = torch.relu(x[i])``).

    With a traced index, reading ``x[i]`` is an ``index_select`` (a copy), so the in-place
    call would write a copy; the store is an ``index_put`` into ``x`` itself.
    """

    def visit_FunctionDef(self, node):
        node.body = [self.visit(stmt) for stmt in node.body]
        return node

    def generic_visit(self, node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return node  # nested scopes are left as written
        return super().generic_visit(node)

    def visit_Expr(self, node):
        store = _as_store(node.value)
        return located(ast.copy_location(store, node), node) if store is not None else node


def _as_store(value: ast.expr) -> ast.Assign | None:
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)):
        return None
    method = value.func.attr
    if not method.endswith("_") or method.endswith("__") or value.keywords:
        return None
    item, args, function_form = value.func.value, value.args, False
    if not _is_computed_item(item) and args and _is_computed_item(args[0]):
        item, args, function_form = args[0], args[1:], True
    if not _is_computed_item(item):
        return None
    new = _replacement(item, method, args, value.func.value if function_form else None)
    if new is None:
        return None
    target = copy.deepcopy(item)
    target.ctx = ast.Store()
    return ast.Assign(targets=[target], value=new)


def _is_computed_item(node: ast.AST) -> bool:
    return isinstance(node, ast.Subscript) and analysis.is_path(node.value) and not is_static_index(node.slice)


def _replacement(item: ast.Subscript, method: str, args: list, module: ast.expr | None) -> ast.expr | None:
    """The value stored by the in-place call, or None for a method with no out-of-place form."""
    if module is None and method in ("copy_", "fill_") and len(args) == 1:
        return args[0]
    if module is None and method == "zero_" and not args:
        return ast.Constant(0)
    plain = method[:-1]
    if module is None and hasattr(torch.Tensor, plain):
        return call(ast.Attribute(value=_loaded(item), attr=plain, ctx=ast.Load()), *args)
    if module is not None and hasattr(torch, plain) and analysis.root_name(module) in ("torch", "F"):
        return call(ast.Attribute(value=module, attr=plain, ctx=ast.Load()), _loaded(item), *args)
    return None


class NestedFunctionCalls(Canonicalization):
    """A function defined inside the converted one, used inside an if/while/for, reads and
    writes the enclosing function's variables there (``def find(i): while parent[i] != i:
    parent[i] = parent[parent[i]]`` called in a loop): the construct's outlined body holds
    those variables as its own locals, so each use becomes ``_fx.calls.bound(find, {'parent':
    parent}, (parent,))``, the function bound to the body's values (and the analysis sees the
    reads, and the in-place writes in the tuple). Functions it uses that read them too are bound
    with it (:func:`~fxport.controlflow.operators.calls.bound`)."""

    def apply(self) -> None:
        nested = scopes.nested_functions(self.ctx.fdef)
        locals_ = self.ctx.local_names - set(nested) - {self.ctx.self_name}
        reads = {n: scopes.free_names(d) & locals_ for n, d in nested.items()}
        writes = {n: analysis.mutated(d.body) & reads[n] for n, d in nested.items()}
        used = {}
        for fn_name in nested:  # what it reads and writes itself and through the nested functions it uses
            through = [fn_name, *_functions_used(fn_name, nested)]
            fn_reads = set().union(*(reads[u] for u in through))
            if fn_reads:
                used[fn_name] = (sorted(fn_reads), sorted(set().union(*(writes[u] for u in through))))
        if used:
            self.ctx.fdef.body = [_BoundUses(used, _first_bindings(self.ctx.fdef)).visit(s) for s in self.ctx.fdef.body]


class _BoundUses(ast.NodeTransformer):
    """Each read of a nested function inside an if/while/for → ``_fx.calls.bound(...)`` (see
    :class:`NestedFunctionCalls`); ``used``: name → (variables it reads, those it writes in place)."""

    def __init__(self, used: dict, bindings: dict):
        self.used, self.bindings, self.depth = used, bindings, 0

    def _construct(self, node):
        self.depth += 1
        try:
            return self.generic_visit(node)
        finally:
            self.depth -= 1

    visit_If = visit_While = visit_For = _construct

    def _scope(self, node):
        return node  # a nested function or class reads its own names

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = _scope

    def visit_Name(self, node):
        if not (self.depth and isinstance(node.ctx, ast.Load) and node.id in self.used) or not hasattr(node, "lineno"):
            return node  # (a name an earlier converter generated has no place to compare bindings with)
        reads, writes = self.used[node.id]
        here = (node.lineno, node.col_offset)
        known = [n for n in reads if self.bindings.get(n, here) < here]  # bound before this use
        values = ast.Dict(keys=[ast.Constant(n) for n in known], values=[name(n) for n in known])
        written = tuple_([name(n) for n in writes if n in known])
        bound = call(ast.Attribute(value=rt("calls"), attr="bound", ctx=ast.Load()), name(node.id), values, written)
        return located(ast.copy_location(bound, node), node)


def _functions_used(start: str, nested: dict) -> set[str]:
    """The nested functions ``start`` uses, directly or through the ones it uses."""
    found, todo = set(), [start]
    while todo:
        current = todo.pop()
        for used in scopes.free_names(nested[current]) & set(nested):
            if used not in found and used != start:
                found.add(used)
                todo.append(used)
    return found


_UNPLACED = 1 << 30  #: the line of a binding without a source location


def _first_bindings(fdef) -> dict[str, tuple[int, int]]:
    """Where each name of ``fdef``'s scope is first bound (parameters: before anything)."""
    first: dict[str, tuple[int, int]] = {a.arg: (0, 0) for a in ast.walk(fdef.args) if isinstance(a, ast.arg)}
    for node in scopes.walk_same_scope(fdef):
        bound = None
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound = node.id
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not fdef:
            bound = node.name
        if bound is not None:  # a binding an earlier converter generated counts as after every use
            where = (getattr(node, "lineno", _UNPLACED), getattr(node, "col_offset", 0))
            first[bound] = min(first.get(bound, where), where)
    return first
