"""Two local names for one tensor stay one tensor through converted statements.

``b_ref = b`` makes two names for one object. A converted ``if``/loop that rebinds ``b`` on
some paths only (``if i == 3: b = b + 1`` in a data-dependent loop) returns new tensors, so
after it nothing says whether ``b_ref`` and ``b`` are still one object — and an in-place write
to either (``b_ref += 1``) reaches the other exactly when they are. This rewrite carries that
fact: a flag (``_fx.aliases.same``) set before the first such statement and again after every
rebinding of either name, carried by the statement converters like any other local, and after
each in-place write to one name, ``_fx.aliases.follow`` gives the other the written value where
the flag holds. Only pairs that need it are rewritten: an alias, then a statement that rebinds
one of the two names, then an in-place write to one of them.

Example::

    >>> from fxport.controlflow.engine import convert_function
    >>> def forward(self, b, n):
    ...     b_ref = b
    ...     if n.sum() > 0:
    ...         b = b * 2
    ...     b_ref += 1
    ...     return b
    >>> print(convert_function(forward).source.after)  # doctest: +NORMALIZE_WHITESPACE
    def forward(self, b, n):
        b_ref = b
        _fx_same_b_ref_b = _fx.aliases.same(b_ref, b)
    <BLANKLINE>
        def _fx_true_0(_fx_same_b_ref_b, b, b_ref):
            b = b * 2
            _fx_same_b_ref_b = _fx.aliases.same(b_ref, b)
            return (_fx_same_b_ref_b, b)
    <BLANKLINE>
        def _fx_false_0(_fx_same_b_ref_b, b, b_ref):
            return (_fx_same_b_ref_b, b)
        _fx_same_b_ref_b, b = _fx.if_stmt(n.sum() > 0, _fx_true_0, _fx_false_0, (_fx_same_b_ref_b, b, b_ref), _fx.statement(_fx_meta, 0))
        b_ref += 1
        b = _fx.aliases.follow(_fx_same_b_ref_b, b_ref, b, 'b_ref', 'b')
        return b
"""

from __future__ import annotations

import ast

from fxport.controlflow import analysis
from fxport.controlflow.astutil import at, call, located, map_blocks, name
from fxport.controlflow.context import ALIAS_FLAG_PREFIX
from fxport.controlflow.converters.base import Canonicalization

_CONSTRUCTS = (ast.If, ast.While, ast.For)


class Aliases(Canonicalization):
    """Rewrite the alias pairs that a converted statement may split (see the module doc)."""

    def apply(self) -> None:
        self.ctx.fdef.body = self._block(self.ctx.fdef.body)

    def _block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        for stmt in stmts:
            map_blocks(stmt, self._block)
        for index, pair in _alias_pairs(stmts):
            start = _first_split(stmts, index, pair)
            if start is not None and _written_after(stmts[start:], pair):
                stmts = self._rewrite(stmts, start, pair)
        return stmts

    def _rewrite(self, stmts: list[ast.stmt], start: int, pair: tuple[str, str]) -> list[ast.stmt]:
        """``stmts`` with the flag of ``pair`` set before ``stmts[start]`` and kept from there on."""
        flag = f"{ALIAS_FLAG_PREFIX}{pair[0]}_{pair[1]}"
        self.ctx.local_names.add(flag)
        out = stmts[:start] + [located(_set_flag(flag, pair, stmts[start]), stmts[start])]
        for stmt in stmts[start:]:
            if isinstance(stmt, _CONSTRUCTS):
                _flag_inside(stmt, flag, pair)
            out.append(stmt)
            rebound = analysis.rebound_names([stmt]) & set(pair)
            if rebound and not isinstance(stmt, _CONSTRUCTS):
                out.append(located(_set_flag(flag, pair, stmt), stmt))
            elif written := analysis.mutated([stmt]) & set(pair):
                out.extend(located(_follow(flag, w, pair), stmt) for w in sorted(written))
        return out


def _alias_pairs(stmts: list[ast.stmt]) -> list[tuple[int, tuple[str, str]]]:
    """``(index, (x, y))`` for each ``x = y`` between two plain local names in ``stmts``."""
    return [(i, (s.targets[0].id, s.value.id)) for i, s in enumerate(stmts)
            if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)
            and isinstance(s.value, ast.Name) and s.targets[0].id != s.value.id
            and not s.value.id.startswith("_fx_") and not s.targets[0].id.startswith("_fx_")]


def _first_split(stmts: list[ast.stmt], index: int, pair: tuple[str, str]) -> int | None:
    """The index of the first if/loop after ``stmts[index]`` that rebinds one name of ``pair``;
    None when a plain statement rebinds one first (the alias is over) or there is none."""
    for position in range(index + 1, len(stmts)):
        stmt = stmts[position]
        if isinstance(stmt, _CONSTRUCTS) and _rebinds(stmt, pair):
            return position
        if not isinstance(stmt, _CONSTRUCTS) and analysis.rebound_names([stmt]) & set(pair):
            return None
    return None


def _rebinds(stmt, pair: tuple[str, str]) -> bool:
    found = analysis.rebound_names(stmt.body + stmt.orelse)
    if isinstance(stmt, ast.For):
        found |= analysis.writes(stmt.target)
    return bool(found & set(pair))


def _written_after(stmts: list[ast.stmt], pair: tuple[str, str]) -> bool:
    """Whether a statement after the first one writes one name of ``pair`` in place."""
    return any(analysis.mutated([stmt]) & set(pair) for stmt in stmts[1:])


def _flag_inside(node, flag: str, pair: tuple[str, str]) -> None:
    """Set ``flag`` again after every statement inside ``node`` that rebinds a name of ``pair``."""
    if isinstance(node, ast.For) and analysis.writes(node.target) & set(pair):
        node.body.insert(0, located(_set_flag(flag, pair, node), node))

    def flagged(block: list[ast.stmt]) -> list[ast.stmt]:
        out = []
        for stmt in block:
            out.append(stmt)
            if hasattr(stmt, "body"):  # a compound statement (a nested def is left alone)
                _flag_inside(stmt, flag, pair)
            elif analysis.rebound_names([stmt]) & set(pair):
                out.append(located(_set_flag(flag, pair, stmt), stmt))
        return out

    map_blocks(node, flagged)


def _set_flag(flag: str, pair: tuple[str, str], where: ast.stmt) -> ast.stmt:
    return at(ast.Assign([name(flag, store=True)], call(_operator("same"), name(pair[0]), name(pair[1]))), where)


def _follow(flag: str, written: str, pair: tuple[str, str]) -> ast.stmt:
    other = pair[1] if written == pair[0] else pair[0]
    value = call(_operator("follow"), name(flag), name(written), name(other), ast.Constant(written), ast.Constant(other))
    return ast.Assign([name(other, store=True)], value)


def _operator(attr: str) -> ast.expr:
    return ast.Attribute(ast.Attribute(ast.Name("_fx", ast.Load()), "aliases", ast.Load()), attr, ast.Load())
