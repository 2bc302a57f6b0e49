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
        _fx_v_self_running, = _fx.if_stmt(x.sum() > 0, _fx_true_0, _fx_false_0, (_fx_v_self_running,), _fx_meta[0])
        _fx.targets.store(self, 'running', 'attr', _fx_v_self_running, True, 'self.running')
        return x + self.running
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import re

from fxport.controlflow import analysis
from fxport.controlflow.astutil import at, call, located, name, rt, tuple_
from fxport.controlflow.context import STATE_TARGET_PREFIXES
from fxport.controlflow.converters.base import Canonicalization
from fxport.controlflow.operators import targets as _targets  # noqa: F401  (generated code calls _fx.targets.*)

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
        self.ctx.fdef.body = self._block(self.ctx.fdef.body)

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
            if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                for field in ("body", "orelse", "finalbody"):
                    block = getattr(stmt, field, None)
                    if isinstance(block, list) and block:
                        setattr(stmt, field, self._block(block))
                for handler in getattr(stmt, "handlers", ()):
                    handler.body = self._block(handler.body)
        return out

    def _rewrite(self, node) -> tuple[list[ast.stmt], list[ast.stmt]]:
        """The statements to put before and after ``node``; ``node`` now uses the locals."""
        names, paths = self._targets(node)
        before, after = [], []
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
        self.ctx.local_names |= {t.local for t in names + paths}
        return [located(s, node) for s in before], [located(s, node) for s in after]

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
        names = sorted({t.id for t in in_place if isinstance(t, ast.Name)} & locals_ - rebound - {self.ctx.self_name})
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
        for target in paths:
            target.local = self._fresh(VALUE_PREFIX + re.sub(r"\W+", "_", target.text).strip("_"))
        return [Target(name(n), self._fresh(ORIGINAL_PREFIX + n), True) for n in names], paths

    def _fresh(self, wanted: str) -> str:
        candidate, number = wanted, 1
        while candidate in self.taken:
            number += 1
            candidate = f"{wanted}_{number}"
        self.taken.add(candidate)
        return candidate


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
