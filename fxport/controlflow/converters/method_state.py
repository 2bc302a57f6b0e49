"""Attributes of ``self`` that the methods a statement calls read and write.

A stateful decoder keeps its state in attributes and its step in a method (NVIDIA Tacotron 2:
``self.initialize_decoder_states(memory)``, then ``while True: out = self.decode(x)``, where
``decode`` reads and rebinds ``self.attention_hidden`` and a dozen more). When an
``if``/``while``/``for`` writes such attributes, directly or through the methods it calls,
:class:`~fxport.controlflow.converters.state_targets.StateTargets` carries each as a local, and
every statement of the construct that calls a method of ``self`` runs it on an overlay
(``_fx.targets.overlay``): ``self`` with those attributes standing for the locals, read back
into the locals after the call. The method itself runs as written and sees, and writes, the
carried values::

    # before                                  # after (inside the converted loop's body)
    out = self.decode(x)                      _fx_self = _fx.targets.overlay(self, ('h',), (_fx_v_self_h,))
                                              _fx_call = _fx_self.decode(x)
                                              _fx_v_self_h, = _fx.targets.overlaid(_fx_self, ('h',))
                                              out = _fx_call

The same holds for a local bound to an object the function makes of a user's class
(:func:`object_classes`: ``fade = Fade(...)`` in torchaudio's tutorial, ``q = priorityQ_torch(i)``):
its attributes that the construct or its methods write are carried, and ``fade(out)`` (a module's
``forward``) or ``q.pop()`` runs on its overlay (``_fx_self_q``). A call whose methods write no
attribute runs on an overlay made where it stands, so it may sit in a loop test or a ``return``
(``while not q.isEmpty()``).

What cannot be told from the source leaves the attributes as written (refused as side effects
under a tensor condition, plain Python otherwise): a method without source, a property,
``self`` passed on whole, a method taken without calling it, a writing call in a loop test or a
``return``, a read of an attribute a method of the same statement writes after that call, or an
object whose class the function's code does not show (a parameter, a name bound otherwise too).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import sys
import textwrap
import types

import torch

from fxport.controlflow import analysis
from fxport.controlflow.astutil import at, call, located, name, rt, tuple_
from fxport.controlflow.scopes import walk_same_scope

#: the overlay's local in generated code, and the call's result held while the locals are read back
OVERLAY, RESULT = "_fx_self", "_fx_call"
_COMPOUND = (ast.If, ast.While, ast.For, ast.With, ast.Try)


@dataclasses.dataclass
class MethodAttributes:
    """What the methods a statement calls (and the methods they call) do to ``self``."""

    touched: set[str]  # attributes read or written (and the methods' own names)
    written: set[str]  # attributes assigned or written into
    assigned: set[str]  # of those, the ones rebound (``self.h = ...``)
    in_place: set[str]  # of those, the ones written into (``self.h += x``, ``self.buf[i] = v``)
    methods: set[str] = dataclasses.field(default_factory=set)  # the methods of the class called


def methods_called(node: ast.AST, fn, self_name: str | None, cls: type | None = None) -> MethodAttributes | None:
    """The attributes of ``self`` the methods ``node`` calls read and write, transitively; None
    when it cannot be told (no source, a property, the class not found). ``cls``: the class of
    the object ``self_name`` holds (another object's, :func:`object_classes`), else the class
    ``fn`` is a method of; with ``cls``, ``obj(x)`` calls its ``forward`` (a module) or ``__call__``.

    >>> class KMeans:
    ...     def fit(self, x):
    ...         for _ in range(3):
    ...             self.centroids = self.nearest(x)
    ...     def nearest(self, x):
    ...         self.calls += 1
    ...         return x * self.scale
    >>> loop = ast.parse("for _ in range(3):\\n    self.centroids = self.nearest(x)").body[0]
    >>> found = methods_called(loop, KMeans.fit, "self")
    >>> sorted(found.touched), sorted(found.written), found.methods
    (['calls', 'nearest', 'scale'], ['calls'], {'nearest'})
    """
    pending = [m for m in (called_method(sub, self_name, cls) for sub in walk_same_scope(node)) if m is not None]
    found = MethodAttributes(set(), set(), set(), set())
    if not pending:
        return found
    cls = cls if cls is not None else owner_class(fn)
    if cls is None:
        return None
    seen: set[str] = set()
    while pending:
        method = pending.pop()
        if method in seen:
            continue
        seen.add(method)
        member = inspect.getattr_static(cls, method, None)
        if not isinstance(member, (types.FunctionType, staticmethod, classmethod, property)):
            continue  # a submodule, a tensor attribute, a builtin: no code of the class reads self here
        one = _one_method(member)
        if one is None:
            return None
        found.touched |= one.touched | {method}
        found.methods.add(method)
        found.written |= one.written
        found.assigned |= one.assigned
        found.in_place |= one.in_place
        pending.extend(one.touched)
    return found


def is_self_method_call(node: ast.AST, self_name: str | None) -> bool:
    """``self.helper(x)`` (a submodule's ``self.fc(x)`` too: the caller tells them apart)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == self_name)


def called_method(node: ast.AST, owner: str | None, cls: type | None) -> str | None:
    """The method of ``owner`` that ``node`` calls: ``m`` for ``owner.m(x)``; for ``owner(x)``, where
    ``cls`` is known, ``forward`` (a module) or ``__call__``; None for anything else."""
    if not isinstance(node, ast.Call):
        return None
    if is_self_method_call(node, owner):
        return node.func.attr
    if cls is not None and isinstance(node.func, ast.Name) and node.func.id == owner:
        return "forward" if issubclass(cls, torch.nn.Module) else "__call__"
    return None


def object_classes(fdef: ast.FunctionDef, fn) -> dict[str, type]:
    """The locals of ``fdef`` bound only to instances made there by calling a class of the user's
    files (``fade = Fade(fade_in_len=0)``, ``q = priorityQ_torch(i)``): name → class. A parameter,
    or a name bound otherwise anywhere in the function, is left out (its class cannot be told)."""
    classes: dict[str, type] = {}
    others = {a.arg for a in ast.walk(fdef.args) if isinstance(a, ast.arg)}
    bindings = set()  # the targets of those assignments
    for sub in walk_same_scope(fdef):
        made = _class_called(sub, fn) if isinstance(sub, ast.Assign) and len(sub.targets) == 1 else None
        if made is not None and isinstance(sub.targets[0], ast.Name):
            bindings.add(id(sub.targets[0]))
            if classes.setdefault(sub.targets[0].id, made) is not made:
                others.add(sub.targets[0].id)
        elif isinstance(sub, ast.Name) and not isinstance(sub.ctx, ast.Load) and id(sub) not in bindings:
            others.add(sub.id)
    return {n: c for n, c in classes.items() if n not in others}


def _class_called(assign: ast.Assign, fn) -> type | None:
    """The user's class whose call ``assign`` binds (``Fade(...)``), found in ``fn``'s globals."""
    value = assign.value
    if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name)):
        return None
    cls = getattr(fn, "__globals__", {}).get(value.func.id)
    if not isinstance(cls, type) or not _in_user_file(cls):
        return None
    return cls


def _in_user_file(cls: type) -> bool:
    from fxport.common.frames import is_user_file

    return is_user_file(getattr(sys.modules.get(cls.__module__), "__file__", None))


def owner_class(fn) -> type | None:
    """The class a method is defined in (``Net`` for ``Net.forward``), when it can be found."""
    parts = fn.__qualname__.split(".")[:-1]
    if not parts or "<locals>" in parts:
        return None
    owner = fn.__globals__.get(parts[0])
    for part in parts[1:]:
        owner = getattr(owner, part, None)
    return owner if isinstance(owner, type) else None


def _one_method(member) -> MethodAttributes | None:
    """What one method's code does to its first parameter; None when it uses that parameter
    other than as ``self.attr`` (passes it on, ``getattr(self, n)``) or has no source."""
    if isinstance(member, staticmethod):
        return MethodAttributes(set(), set(), set(), set())
    fn = member.fget if isinstance(member, property) else getattr(member, "__func__", member)
    try:
        fdef = ast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
    except (OSError, TypeError, SyntaxError, IndexError):
        return None
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)) or not fdef.args.args:
        return None
    owner = fdef.args.args[0].arg
    accesses = [sub for sub in ast.walk(fdef)
                if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == owner]
    if sum(isinstance(sub, ast.Name) and sub.id == owner for sub in ast.walk(fdef)) != len(accesses):
        return None  # self used other than as ``self.attr``
    in_place, assigned = analysis.written_targets(fdef.body, {owner})
    return MethodAttributes({sub.attr for sub in accesses}, _attributes_of(in_place + assigned, owner),
                            _attributes_of(assigned, owner), _attributes_of(in_place, owner))


def _attributes_of(paths, owner: str) -> set[str]:
    """``{"h", "cache"}`` for ``self.h`` and ``self.cache[0]``."""
    names = set()
    for path in paths:
        while isinstance(path, (ast.Attribute, ast.Subscript)):
            if isinstance(path, ast.Attribute) and isinstance(path.value, ast.Name) and path.value.id == owner:
                names.add(path.attr)
            path = path.value
    return names


def uses_self_otherwise(node: ast.AST, self_name: str | None, methods: set[str], cls: type | None = None) -> bool:
    """Whether ``node`` uses ``self`` other than reading an attribute or calling one of its
    methods (``helper(self)``, ``f = self.step`` of a method): what then reads self's
    attributes cannot be seen. With ``cls`` (another object's class), ``obj(x)`` is a call."""
    calls = {id(sub.func) for sub in walk_same_scope(node) if called_method(sub, self_name, cls) is not None}
    for sub in walk_same_scope(node):
        if isinstance(sub, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)) and self_name in {
                n.id for n in ast.walk(sub) if isinstance(n, ast.Name)}:
            return True
        if (isinstance(sub, ast.Name) and sub.id == self_name and not _is_attribute_root(sub, node)
                and id(sub) not in calls):
            return True
        if (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == self_name
                and sub.attr in methods and id(sub) not in calls):
            return True
    return False


def _is_attribute_root(name_node: ast.Name, tree: ast.AST) -> bool:
    return any(isinstance(sub, ast.Attribute) and sub.value is name_node for sub in walk_same_scope(tree))


def overlay_name(owner: str) -> str:
    """The local holding ``owner``'s overlay in generated code (``_fx_self`` for ``self``)."""
    return OVERLAY if owner == "self" else f"{OVERLAY}_{owner}"


def sync_method_calls(node: ast.stmt, self_name: str, local_by_attribute: dict[str, str],
                      methods: MethodAttributes, cls: type) -> bool:
    """Run every method call of ``self`` (the object ``self_name`` holds, of class ``cls``) inside
    ``node`` on an overlay holding the carried locals of ``local_by_attribute`` (see the module
    doc); ``methods``: what those methods do to ``self``. A call whose methods write no attribute
    runs on an overlay made where it is called (also in a loop test or a ``return``); a statement
    calling one that writes is wrapped, the locals read back after it. False (``node``
    unchanged) when a writing call sits where no statement can wrap it (a loop test, a
    ``return``) or a read of such an attribute follows the call."""
    trial = _Sync(self_name, local_by_attribute, methods, cls)
    blocks = [node.body] + ([node.orelse] if getattr(node, "orelse", None) else [])
    trial.header(node)
    new_blocks = [trial.block(block) for block in blocks]
    if trial.failed:
        return False
    node.body = new_blocks[0]
    if len(new_blocks) > 1:
        node.orelse = new_blocks[1]
    return True


_HEADERS = {ast.If: ("test",), ast.While: ("test",), ast.For: ("iter", "target"), ast.With: ("items",), ast.Try: ()}


class _Sync:
    """The statement-level rewrite of :func:`sync_method_calls`."""

    def __init__(self, self_name: str, local_by_attribute: dict[str, str], methods: MethodAttributes, cls: type):
        self.self_name, self.cls = self_name, cls
        self.overlay = overlay_name(self_name)
        self.methods = methods.methods
        self.attributes = tuple(sorted(local_by_attribute))
        self.locals = tuple(local_by_attribute[a] for a in self.attributes)
        self.copied = tuple(a in methods.in_place for a in self.attributes)
        self.written_locals = {local_by_attribute[a] for a in methods.written if a in local_by_attribute}
        self.failed = False

    def header(self, stmt: ast.stmt) -> None:
        """The calls in the parts of a compound statement that are not its blocks: each on an
        overlay of its own where its methods write nothing, else the rewrite fails."""
        parts = [getattr(stmt, h) for h in _HEADERS[type(stmt)]]
        for part in parts:
            for tree in (part if isinstance(part, list) else [part]):
                calls = self._calls(tree)
                if any(self._writes(c) for c in calls):
                    self.failed = True
                for found in calls:
                    self._redirect(found, self._made_here(copied=False))

    def _calls(self, tree: ast.AST) -> list[ast.Call]:
        """The calls of methods of the class in ``tree`` (a submodule's ``self.fc(x)`` is none)."""
        return [sub for sub in walk_same_scope(tree)
                if called_method(sub, self.self_name, self.cls) in self.methods]

    def _writes(self, found: ast.Call) -> bool:
        """Whether the method ``found`` calls (or one it calls) writes an attribute."""
        one = methods_called(found, None, self.self_name, self.cls)
        return one is None or bool(one.written)

    def _redirect(self, found: ast.Call, overlay: ast.expr) -> None:
        """``found`` calls its method on ``overlay`` instead of the object."""
        if isinstance(found.func, ast.Attribute):
            found.func.value = overlay
        else:
            found.func = overlay

    def _made_here(self, copied: bool) -> ast.Call:
        """``_fx.targets.overlay(self, names, locals, copied)``."""
        copies = self.copied if copied else (False,) * len(self.attributes)
        return call(_targets("overlay"), name(self.self_name), _constants(self.attributes),
                    tuple_([name(local) for local in self.locals]), _constants(copies))

    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            if isinstance(stmt, _COMPOUND):
                self.header(stmt)
                for field in ("body", "orelse", "finalbody"):
                    if getattr(stmt, field, None):
                        setattr(stmt, field, self.block(getattr(stmt, field)))
                for handler in getattr(stmt, "handlers", ()):
                    handler.body = self.block(handler.body)
                out.append(stmt)
            elif self._calls(stmt):
                out.extend(self._wrap(stmt))
            else:
                out.append(stmt)
        return out

    def _wrap(self, stmt: ast.stmt) -> list[ast.stmt]:
        calls = self._calls(stmt)
        if not any(self._writes(c) for c in calls):
            for found in calls:  # read only: each call on an overlay of the locals as they are there
                self._redirect(found, self._made_here(copied=False))
            return [stmt]
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr)) or self._read_after(stmt, calls):
            self.failed = True
            return [stmt]
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id in self.written_locals:
            self.failed = True  # ``self.h += self.step()``: the old value is read before the call
            return [stmt]
        for found in calls:
            self._redirect(found, name(self.overlay))
        before = at(ast.Assign([name(self.overlay, True)], self._made_here(copied=True)), stmt)
        after = at(ast.Assign([tuple_([name(l, True) for l in self.locals], store=True)],
                              call(_targets("overlaid"), name(self.overlay), _constants(self.attributes))), stmt)
        if isinstance(stmt, ast.Expr):
            return [located(s, stmt) for s in (before, stmt, after)]
        held = at(ast.Assign([name(RESULT, True)], stmt.value), stmt)
        stmt.value = name(RESULT)
        return [located(s, stmt) for s in (before, held, after, stmt)]

    def _read_after(self, stmt: ast.stmt, calls: list[ast.Call]) -> bool:
        """A read of a local a method writes, placed after the end of a call to it in ``stmt``."""
        ends = [(c.end_lineno or 0, c.end_col_offset or 0) for c in calls]
        value = stmt.value if hasattr(stmt, "value") else stmt
        for sub in walk_same_scope(value):
            if isinstance(sub, ast.Name) and sub.id in self.written_locals and isinstance(sub.ctx, ast.Load):
                if any((sub.lineno, sub.col_offset) >= end for end in ends):
                    return True
        return False


def _constants(values) -> ast.Tuple:
    return tuple_([ast.Constant(v) for v in values])


def _targets(fn: str) -> ast.Attribute:
    """``_fx.targets.<fn>``."""
    return ast.Attribute(value=rt("targets"), attr=fn, ctx=ast.Load())
