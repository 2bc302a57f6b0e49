"""Typed facts about each ``if``/``while``/``for`` of a function, computed before rewriting.

:func:`analyze` walks a (canonicalised) function once and returns a :class:`FunctionFacts`:
per statement an :class:`IfFacts` or :class:`LoopFacts` with the names it reads, writes,
writes in place and appends to, what is live after it, whether its branches are cheap to run
both (and why not) and the side effects a traced version could not carry. The converters
decide from these facts; they never inspect generated code. After the expression converters
ran, :meth:`FunctionFacts.refreshed` recomputes the name facts on the rewritten tree and keeps
the cost facts of the statements as the user wrote them.

Example::

    >>> import ast
    >>> fdef = ast.parse('''
    ... def f(x, i):
    ...     if x.sum() > 0:
    ...         y = x[i] * 2
    ...     else:
    ...         y = x
    ...     return y
    ... ''').body[0]
    >>> facts = analyze(fdef).of(fdef.body[0])
    >>> sorted(facts.writes), sorted(facts.live_after), facts.cheap
    (['y'], ['y'], False)
    >>> facts.expensive
    ('indexing with i at line 4 may be out of range on the other path',)
"""

from __future__ import annotations

import ast
import dataclasses
import re
from typing import Mapping, Sequence

from fxport.controlflow import analysis
from fxport.controlflow.astutil import RUNTIME
from fxport.controlflow.append_aliases import aliased_appends

#: methods that change the object they are called on
_MUTATING_METHODS = ("append", "extend", "insert", "pop", "update", "add", "clear", "remove")


@dataclasses.dataclass(frozen=True)
class SideEffect:
    """An effect in a branch or loop body that a traced version could not carry.

    ``owner``: for a mutating method call (``xs.pop()``), the name it is called on; the effect
    counts only when that name is not a local of the outlined block. ``append``: it is an
    ``.append`` (a loop carries those as a growing list).
    """

    what: str
    owner: str | None = None
    append: bool = False

    def applies(self, local_names, *, allow_append: bool) -> bool:
        if self.append and allow_append:
            return False
        return self.owner is None or self.owner not in local_names


@dataclasses.dataclass(frozen=True)
class IfFacts:
    """What an ``if`` statement does with names, and whether running both branches is safe."""

    node: ast.If
    reads: frozenset[str]  # names read by the branches (not the test)
    writes: frozenset[str]  # names assigned in either branch
    writes_true: frozenset[str]
    writes_false: frozenset[str]
    written_in_place: frozenset[str]  # roots changed in place: y.add_(1), h[m] = 0, y += 1
    appended: frozenset[str]  # lists .append-ed to and not reassigned in the branches
    live_after: frozenset[str]
    live_in: frozenset[str]  # names a branch reads before assigning them (with live_after read after)
    expensive: tuple[str, ...]  # why running both branches is costly or unsafe (empty: cheap)
    side_effects: tuple[SideEffect, ...]

    @property
    def cheap(self) -> bool:
        return not self.expensive


@dataclasses.dataclass(frozen=True)
class LoopFacts:
    """What a ``while``/``for`` loop does with names (the loop state is derived from these)."""

    node: ast.While | ast.For
    head_reads: frozenset[str]  # the while test / the for iterable
    head_writes: frozenset[str]  # names a while test binds (``while (n := f()) > 0``)
    reads: frozenset[str]  # names read by the body (and the while test)
    writes: frozenset[str]  # names assigned in the body
    target_writes: frozenset[str]  # names bound by the for target
    written_in_place: frozenset[str]
    appended: frozenset[str]  # lists .append-ed to in the body (not reassigned there)
    exact_appends: frozenset[str]  # lists appended to exactly once, at the body's top level
    body_live_in: frozenset[str]
    live_after: frozenset[str]
    break_flag: str | None  # the flag a canonicalised break sets
    side_effects: tuple[SideEffect, ...]

    @property
    def kind(self) -> str:
        return "while" if isinstance(self.node, ast.While) else "for"


@dataclasses.dataclass
class FunctionFacts:
    """The facts of every ``if``/``while``/``for`` of one function (nested ones included)."""

    statements: dict
    break_flags: Mapping[ast.AST, str]

    def of(self, node: ast.stmt) -> IfFacts | LoopFacts:
        return self.statements[node]

    def refreshed(self, fdef: ast.FunctionDef) -> "FunctionFacts":
        """Facts recomputed on ``fdef`` as it is now; cost facts kept from these ones."""
        return analyze(fdef, self.break_flags, costs_from=self)


def analyze(fdef: ast.FunctionDef, break_flags: Mapping[ast.AST, str] | None = None, *,
            costs_from: FunctionFacts | None = None) -> FunctionFacts:
    """The facts of every compound statement of ``fdef`` (see the module doc)."""
    break_flags = dict(break_flags or {})
    live = analysis.liveness(fdef.body, set(), break_flags)
    statements: dict = {}
    for node in _statements(fdef.body):
        live_after = frozenset(live.live_out.get(node, set()))
        if isinstance(node, ast.If):
            earlier = costs_from.statements.get(node) if costs_from is not None else None
            statements[node] = _if_facts(node, live_after, earlier.expensive if earlier is not None else None)
        else:
            statements[node] = _loop_facts(node, live_after, frozenset(live.body_live_in.get(node, set())),
                                           break_flags.get(node))
    return FunctionFacts(statements, break_flags)


def _statements(stmts: Sequence[ast.stmt]):
    """Every if/while/for in ``stmts`` in the same function scope, outer ones first."""
    todo = list(reversed(stmts))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, (ast.If, ast.While, ast.For)):
            yield node
        for field in ("orelse", "finalbody", "body"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                todo.extend(reversed(block))
        for handler in getattr(node, "handlers", ()):
            todo.extend(reversed(handler.body))


def _if_facts(node: ast.If, live_after: frozenset, expensive: tuple | None) -> IfFacts:
    block = node.body + node.orelse
    writes = frozenset(analysis.writes(block))
    return IfFacts(
        node=node,
        reads=frozenset(analysis.reads(block)),
        writes=writes,
        writes_true=frozenset(analysis.writes(node.body)),
        writes_false=frozenset(analysis.writes(node.orelse)),
        written_in_place=frozenset(analysis.mutated(block)),
        appended=frozenset(appended_lists(block) - writes),
        live_after=live_after,
        live_in=frozenset(analysis.live_in(node.body, live_after) | analysis.live_in(node.orelse, live_after)),
        expensive=expensive if expensive is not None else tuple(expensive_reasons(block)),
        side_effects=tuple(side_effects(block)),
    )


def _loop_facts(node, live_after: frozenset, body_live_in: frozenset, flag: str | None) -> LoopFacts:
    is_for = isinstance(node, ast.For)
    writes = frozenset(analysis.writes(node.body))
    target_writes = frozenset(analysis.writes(node.target)) if is_for else frozenset()
    body_reads = analysis.reads(node.body + ([] if is_for else [node.test]))
    return LoopFacts(
        node=node,
        head_reads=frozenset(analysis.reads(node.iter if is_for else node.test)),
        head_writes=frozenset() if is_for else frozenset(analysis.writes(node.test)),
        reads=frozenset(body_reads),
        writes=writes,
        target_writes=target_writes,
        written_in_place=frozenset(analysis.mutated(node.body)),
        appended=frozenset(appended_lists(node.body)),
        exact_appends=frozenset(_top_level_appends(node.body)),
        body_live_in=body_live_in,
        live_after=live_after,
        break_flag=flag,
        side_effects=tuple(side_effects(node.body, asserts=False)) + tuple(SideEffect(what) for what in aliased_appends(node.body)),
    )


def appended_lists(stmts) -> set[str]:
    """Names ``x`` of ``x.append(...)`` calls in ``stmts`` (nested scopes included)."""
    found = set()
    for node in ast.walk(ast.Module(body=list(stmts), type_ignores=[])):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "append"
            and isinstance(node.func.value, ast.Name)
        ):
            found.add(node.func.value.id)
    return found


def _top_level_appends(stmts) -> set[str]:
    """Lists appended to exactly once by a statement at the top level of a loop body."""
    counts: dict[str, int] = {}
    for stmt in stmts:
        if isinstance(stmt, ast.Expr) and appended_lists([stmt]):
            for name in appended_lists([stmt]):
                counts[name] = counts.get(name, 0) + 1
    nested = appended_lists([s for s in stmts if not isinstance(s, ast.Expr)])
    return {n for n, c in counts.items() if c == 1 and n not in nested}


def expensive_reasons(stmts) -> list[str]:
    """Why evaluating both branches of an ``if`` as the user wrote it would be costly or unsafe
    (empty: cheap): loops, nested ifs, calls of submodules/methods, indexing with a computed
    index or at a position (``x[0]`` is out of range on an empty dimension), in-place writes
    into names the branch makes, and ops that fail on some values (``.item()``, ``nonzero``,
    ``inverse``, an integer ``//`` or ``%`` by a divisor the condition guards)."""
    reasons: list[str] = []
    for node in ast.walk(ast.Module(body=list(stmts), type_ignores=[])):
        if isinstance(node, (ast.For, ast.While)):
            reasons.append(f"loop at line {node.lineno}")
        elif isinstance(node, ast.If):
            reasons.append(f"nested if at line {node.lineno}")
        elif isinstance(node, ast.Call):
            text = ast.unparse(node.func)
            if text.startswith("self."):
                reasons.append(f"calls {text} at line {node.lineno}")
            elif text.endswith((".item", ".tolist", ".nonzero")) or text in ("torch.nonzero", "torch.linalg.inv", "torch.inverse"):
                reasons.append(f"{text} at line {node.lineno} may fail on the other path")
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and (
                not is_static_index(node.slice) or _picks_a_tensor_position(node)):
            # x[0] fails on an empty (dynamic) dimension the other path never indexes
            reasons.append(f"indexing with {_index_text(node.slice)} at line {node.lineno} may be out of range on the other path")
        elif (isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, (ast.FloorDiv, ast.Mod))) or (
                isinstance(node, ast.Call) and ast.unparse(node.func) in _DIVISIONS):
            # an integer x // d or x % d raises on d == 0 where the other path guards it (if d != 0)
            reasons.append(f"division or modulo at line {node.lineno} may divide by zero on the other path")
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Subscript) and not is_static_index(node.target.slice):
            # x[i] += v reads x[i] too
            reasons.append(f"indexing with {_index_text(node.target.slice)} at line {node.lineno} may be out of range on the other path")
    reasons += _writes_into_names_made_here(stmts)
    return list(dict.fromkeys(reasons))


#: calls that divide integers (and raise on a zero divisor in ONNX Runtime, as in eager)
_DIVISIONS = frozenset({"torch.floor_divide", "torch.remainder", "torch.fmod", "torch.div", "torch.divide"})


def _writes_into_names_made_here(stmts) -> list[str]:
    """In-place writes into a name the branch itself assigns: it may be a view of a tensor from
    outside (``v = self.buf[1:3]; v.add_(1)``), which running both branches would write
    whatever the condition (a cond runs only the taken one)."""
    made_here = analysis.writes(list(stmts))
    written = analysis.mutated(list(stmts)) & made_here
    return [f"in-place write into {name!r}, made in the branch (it may be a view of another tensor)"
            for name in sorted(written)]


def _picks_a_tensor_position(node: ast.Subscript) -> bool:
    """True when ``node`` may pick a position of a tensor (``x[0]``, ``x[:, -1]``) rather than
    only slice it; ``x.shape[0]``, ``x.size()[1]`` and string keys (``cfg["scale"]``) do not."""
    owner = node.value
    if isinstance(owner, ast.Attribute) and owner.attr == "shape":
        return False
    if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Attribute) and owner.func.attr == "size":
        return False
    parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    return any(not isinstance(part, ast.Slice)
               and not (isinstance(part, ast.Constant) and (part.value in (None, ...) or isinstance(part.value, str)))
               for part in parts)


def _index_text(index: ast.expr) -> str:
    """The index as the indexing operator receives it (``a:b`` → ``slice(a, b, None)``)."""
    if isinstance(index, ast.Slice):
        parts = [ast.unparse(p) if p is not None else "None" for p in (index.lower, index.upper, index.step)]
        return f"slice({', '.join(parts)})"
    if isinstance(index, ast.Tuple):
        return "(" + ", ".join(_index_text(e) for e in index.elts) + ("," if len(index.elts) == 1 else "") + ")"
    return ast.unparse(index)


def is_static_index(index: ast.expr) -> bool:
    """True for an index made of constants only (no names, no calls): ``x[0]``, ``x[:, 1:]``."""
    for node in ast.walk(index):
        if isinstance(node, (ast.Name, ast.Call)):
            return False
    return True


def side_effects(stmts, *, asserts: bool = True) -> list[SideEffect]:
    """Effects in ``stmts`` a tensor-conditioned branch or loop cannot carry (see SideEffect);
    ``asserts=False`` for a loop body, whose trips all run what a traced trip runs: its
    ``assert`` decides for itself (a Python test as Python, a tensor's value refused at the
    assert's line: :mod:`fxport.controlflow.operators.asserts`).

    A ``raise`` or ``assert`` under an ``if`` nested in ``stmts`` is that ``if``'s effect, not the
    block's: the nested ``if`` (converted like every ``if``) runs as Python when its test is a
    Python value (the ``else: raise`` of an ``if self.mode == ...`` chain never runs) and
    refuses the effect itself when its test is a tensor."""
    found = []
    guarded = _guarded_exits(stmts)
    for node in ast.walk(ast.Module(body=list(stmts), type_ignores=[])):
        if isinstance(node, (ast.Raise, ast.Assert)) and id(node) in guarded:
            continue
        if isinstance(node, ast.Assert) and not asserts:
            continue
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            found.append(SideEffect(f"assignment to {ast.unparse(node)} at line {node.lineno}"))
        elif isinstance(node, (ast.Raise, ast.Assert)):
            found.append(SideEffect(f"{type(node).__name__.lower()} at line {node.lineno}"))
        elif _writes_outside_names(node):
            found.append(SideEffect(f"in-place write to {_as_written(_writes_outside_names(node))} at line {node.lineno}"))
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            found.append(SideEffect(f"{type(node).__name__.lower()} {', '.join(node.names)} at line {node.lineno}"))
        elif isinstance(node, ast.Call):
            text = ast.unparse(node.func)
            if isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATING_METHODS:
                owner = analysis.root_name(node.func.value)
                if owner is not None:
                    found.append(SideEffect(f"{text}() on outer {owner!r} at line {node.lineno}", owner,
                                            append=node.func.attr == "append"))
    return found


def _guarded_exits(stmts) -> set[int]:
    """``id``s of the ``raise`` / ``assert`` statements that sit under an ``if`` nested in ``stmts``."""
    guarded: set[int] = set()
    for node in ast.walk(ast.Module(body=list(stmts), type_ignores=[])):
        if isinstance(node, ast.If):
            for inner in ast.walk(ast.Module(body=node.body + node.orelse, type_ignores=[])):
                if isinstance(inner, (ast.Raise, ast.Assert)):
                    guarded.add(id(inner))
    return guarded


#: modules whose ``name.fn_(t)`` writes ``t`` (the function form); anything else is a method call
_FUNCTION_FORM_ROOTS = frozenset({"torch", "F", "nn", "functional"})


def _writes_outside_names(node: ast.AST) -> ast.expr | None:
    """The target of an in-place write that is not a plain name (``self.bufs[i].add_(1)`` where
    the converter could not give the target a local: its index changes in the block, or the
    block also uses the container otherwise), or None."""
    if isinstance(node, ast.Call):
        func = node.func
        if not (isinstance(func, ast.Attribute) and func.attr.endswith("_") and not func.attr.endswith("__")):
            return None
        if analysis.root_name(func.value) == RUNTIME:  # fxport's own helpers (_fx.lists.tensor_items.isinstance_)
            return None
        function_form = analysis.root_name(func.value) in _FUNCTION_FORM_ROOTS and node.args
        targets = [node.args[0]] if function_form else [func.value]
    elif isinstance(node, ast.AugAssign):
        targets = [node.target.value if isinstance(node.target, ast.Subscript) else node.target]
    elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
        targets = [node.value]
    else:
        return None
    for target in targets:
        written = analysis.written_object(target)
        if (_is_item(written) or isinstance(written, ast.Attribute)) and analysis.root_name(_item_root(written)) is not None:
            return written  # converted targets are plain names (converters/state_targets.py)
    return None


def _is_item(node: ast.AST) -> bool:
    """``v[i]``, or ``_fx.getitem(v, i)`` as the indexing converter writes it."""
    return isinstance(node, ast.Subscript) or (isinstance(node, ast.Call) and ast.unparse(node.func) == "_fx.getitem")


def _item_root(node: ast.AST) -> ast.AST:
    while _is_item(node) or isinstance(node, ast.Attribute):
        node = node.args[0] if isinstance(node, ast.Call) else node.value
    return node


def _as_written(node: ast.AST) -> str:
    """The source of ``node`` with ``_fx.getitem(v, i)`` shown as the user wrote it, ``v[i]``."""
    text = ast.unparse(node)
    while "_fx.getitem(" in text:
        text = re.sub(r"_fx\.getitem\(([^(),]+), ([^()]+?)\)", r"\1[\2]", text, count=1)
        if "_fx.getitem(" in text and not re.search(r"_fx\.getitem\(([^(),]+), ([^()]+?)\)", text):
            break
    return text
