"""Patch rules: replace a Python function, method or module class while fxport captures.

The replacement is installed by :func:`apply_patches` (a context manager) and removed when the
capture ends, whatever happens; the original stays reachable as ``replacement.original``.
Patch the name the model's code looks up: a function imported with ``from lib import f`` into
``mymodel`` is patched as ``"mymodel.f"``.

Example::

    >>> import fxport, math
    >>> @fxport.patch("math.hypot")
    ... def hypot(*coords):
    ...     '''math.hypot, but counted.'''
    ...     return hypot.original(*coords)
    >>> with fxport.rules.patching.apply_patches(fxport.rules.rules_of(hypot), records=[]):
    ...     math.hypot(3, 4)
    5.0
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import itertools
import os
import sys
import types
import typing
from typing import Any, Callable, Iterator, Sequence

import torch

from fxport.errors import RuleError
from fxport.report.result import AppliedRewrite
from fxport.rules.base import Rule, Scope, attach, definition_site, first_doc_line, make_scope


@dataclasses.dataclass
class PatchRule(Rule):
    """Replace ``target`` (a dotted path) with ``replacement`` during capture.

    Attributes:
        replacement: a function (for a function/method target) or a class whose own attributes
            replace the same attributes of the target class.
    """

    tier: typing.ClassVar[str] = "patch"

    replacement: Any = None


def patch(
    target: str | Any,
    *,
    name: str | None = None,
    priority: int = 0,
    scope: Scope | None = None,
    opset: int | tuple[int | None, int | None] | None = None,
    devices: Sequence[str] | str | None = None,
    torch_version: str | None = None,
) -> Callable[[Any], Any]:
    """Decorator: replace ``target`` with the decorated function or class while capturing.

    Args:
        target: a dotted path (``"pkg.module.function"``, ``"pkg.module.Class.method"``,
            ``"pkg.module.Class"``) or the object itself (a function or a class).
            For a class target, decorate a class: each attribute it defines (``forward``,
            helper methods, staticmethods) replaces the target class's attribute, so existing
            instances and subclasses that do not override it see the replacement.
        name: the rule's name; defaults to ``patch:<target>``.

    The original is reachable from the replacement as ``replacement.original`` (for a class:
    ``Replacement.original.forward`` etc.) while the patch is applied.

    Example::

        @fxport.patch("mymodel.layers.my_add")
        def my_add(a, b):
            '''my_add without the opaque kernel.'''
            return 2 * a + b
    """

    path = target if isinstance(target, str) else dotted_path_of(target)

    def decorate(replacement: Any) -> Any:
        rule = PatchRule(
            name=name or f"patch:{path}",
            target=path,
            doc=first_doc_line(replacement),
            scope=make_scope(scope, opset=opset, devices=devices, torch=torch_version),
            priority=priority,
            defined_at=definition_site(replacement),
            replacement=replacement,
        )
        return attach(replacement, rule)

    return decorate


def dotted_path_of(obj: Any) -> str:
    """``module.qualname`` of a function or class; RuleError for anything else."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not module or not qualname or "<locals>" in qualname:
        raise RuleError(
            f"patch target {obj!r} has no importable dotted path",
            hint="pass the path as a string, e.g. 'package.module.function'",
        )
    return f"{module}.{qualname}"


def locate(path: str) -> tuple[Any, str]:
    """The object that owns the last component of ``path``, and that component's name.

    Raises RuleError naming the first part of the path that does not exist.
    """
    parts = path.split(".")
    owner: Any = None
    for split in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:split])
        try:
            owner = importlib.import_module(module_name)
        except ImportError:
            continue
        for attr in parts[split:-1]:
            if not hasattr(owner, attr):
                raise RuleError(
                    f"patch target {path!r} not found: {type_name(owner)} has no attribute "
                    f"{attr!r}",
                    hint=_not_found_hint(parts[0]),
                )
            owner = getattr(owner, attr)
        break
    if owner is None:
        raise RuleError(f"patch target {path!r} not found: no module of it can be imported",
                        hint="use 'package.module.function' with an importable module")
    if not hasattr(owner, parts[-1]):
        raise RuleError(
            f"patch target {path!r} not found: {type_name(owner)} has no attribute {parts[-1]!r}",
            hint=_not_found_hint(parts[0]),
        )
    return owner, parts[-1]


def _not_found_hint(first: str) -> str:
    """What to check; for a model file named like a module imported before it (``json.py``), that."""
    shadowed = _file_shadowed_by_module(first)
    if shadowed:
        other = getattr(sys.modules[first], "__file__", None) or "built in"
        return (f"{os.path.basename(shadowed)} is not reachable as {first!r}: a module of that name was "
                f"imported first ({other}); rename the file")
    return "check the dotted path of the function or class to replace"


def _file_shadowed_by_module(name: str) -> str | None:
    """A file ``NAME.py`` loaded under another top-level name (fxport loads a model's file so)
    while ``NAME`` is another module, or None."""
    holder = sys.modules.get(name)
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None) or ""
        if (holder is not None and module is not holder and "." not in getattr(module, "__name__", ".")
                and os.path.splitext(os.path.basename(file))[0] == name):
            return file
    return None


def type_name(owner: Any) -> str:
    if isinstance(owner, types.ModuleType):
        return f"module {owner.__name__!r}"
    return f"{getattr(owner, '__qualname__', type(owner).__name__)!r}"


#: key → calls of one rule's replacements while its patches are applied
_CALLS: dict[int, int] = {}
_COUNTER_KEYS = itertools.count()


class _CallCounter:
    """Counts calls of the replacements of one rule.

    The count lives in a module global, keyed by an int the wrapper closes over, and is not
    kept while dynamo traces (a ``torch.cond`` branch): dynamo can neither wrap a counter
    object held by a closure it reached without a source nor let a branch change state
    outside it. The calls it misses there are calls the capture around the branch makes too.
    """

    def __init__(self) -> None:
        self.key = next(_COUNTER_KEYS)
        _CALLS[self.key] = 0

    @property
    def calls(self) -> int:
        return _CALLS.get(self.key, 0)

    def wrap(self, function: Callable) -> Callable:
        key = self.key

        @functools.wraps(function)
        def counted(*args, **kwargs):
            if not torch.compiler.is_dynamo_compiling():
                _CALLS[key] = _CALLS.get(key, 0) + 1
            return function(*args, **kwargs)

        # No __wrapped__: the control-flow converter unwraps decorated user functions, and
        # unwrapping this counter would bypass it (the patch would run but go unrecorded).
        del counted.__wrapped__
        return counted

    def wrap_attribute(self, value: Any) -> Any:
        if isinstance(value, staticmethod):
            return staticmethod(self.wrap(value.__func__))
        if isinstance(value, classmethod):
            return classmethod(self.wrap(value.__func__))
        if isinstance(value, types.FunctionType):
            return self.wrap(value)
        return value


_SKIPPED_CLASS_ATTRS = {"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__",
                        "__fxport_rules__", "original", "__annotations__",
                        "__firstlineno__", "__static_attributes__"}


def _replacements(rule: PatchRule, original: Any, counter: _CallCounter) -> dict[str, Any]:
    """Attribute name → new value; for a class target one entry per attribute it defines."""
    replacement = rule.replacement
    if isinstance(replacement, type):
        if not isinstance(original, type):
            raise RuleError(f"patch rule {rule.name!r}: a class replaces a class, but "
                            f"{rule.target!r} is {type(original).__name__}", where=rule.defined_at)
        return {
            attr: counter.wrap_attribute(value)
            for attr, value in vars(replacement).items()
            if attr not in _SKIPPED_CLASS_ATTRS
        }
    if not callable(replacement):
        raise RuleError(f"patch rule {rule.name!r}: the replacement is not callable",
                        where=rule.defined_at)
    return {"": counter.wrap(replacement)}


@contextlib.contextmanager
def apply_patches(rules: Sequence[PatchRule], records: list[AppliedRewrite]) -> Iterator[None]:
    """Install ``rules`` for the duration of the block, then restore every original.

    After the block, one :class:`AppliedRewrite` per rule whose replacement was called is
    appended to ``records``. A target that does not exist raises RuleError before anything is
    patched.
    """
    plans = []
    for rule in rules:
        owner, attr = locate(rule.target)
        original = owner.__dict__[attr] if attr in getattr(owner, "__dict__", {}) else getattr(
            owner, attr)
        counter = _CallCounter()
        plans.append((rule, owner, attr, original, counter, _replacements(rule, original, counter)))
    undo: list[Callable[[], None]] = []
    try:
        for rule, owner, attr, original, _, new_values in plans:
            undo.extend(_install(rule, owner, attr, original, new_values))
        yield
    finally:
        for restore in reversed(undo):
            restore()
        for rule, *_, counter, _new in plans:
            if counter.calls:
                records.append(AppliedRewrite(
                    rule=rule.name, tier="patch", location=rule.defined_at,
                    detail=f"replaced {rule.target} during capture ({counter.calls} call(s))",
                    data={"target": rule.target, "calls": counter.calls},
                ))
            _CALLS.pop(counter.key, None)


def _install(rule: PatchRule, owner: Any, attr: str, original: Any,
             new_values: dict[str, Any]) -> list[Callable[[], None]]:
    undo = []
    if "" in new_values:  # a function or method
        _set_original(rule.replacement, _unwrap_descriptor(original))
        setattr(owner, attr, _rewrap_descriptor(original, new_values[""]))
        undo.append(lambda: setattr(owner, attr, original))
        undo.append(lambda: _set_original(rule.replacement, None))
        return undo
    target_class = original
    saved = {}
    for name, value in new_values.items():
        saved[name] = target_class.__dict__.get(name, _MISSING)
        if saved[name] is _MISSING and hasattr(target_class, name):
            saved[name] = _Inherited(getattr(target_class, name))
        setattr(target_class, name, value)
        undo.append(functools.partial(_restore_attr, target_class, name, saved[name]))
    _set_original(rule.replacement, types.SimpleNamespace(**{
        name: (value.value if isinstance(value, _Inherited) else value)
        for name, value in saved.items() if value is not _MISSING
    }))
    undo.append(lambda: _set_original(rule.replacement, None))
    return undo


_MISSING = object()


@dataclasses.dataclass
class _Inherited:
    value: Any


def _restore_attr(cls: type, name: str, saved: Any) -> None:
    if saved is _MISSING or isinstance(saved, _Inherited):
        delattr(cls, name)
    else:
        setattr(cls, name, saved)


def _unwrap_descriptor(value: Any) -> Any:
    return value.__func__ if isinstance(value, (staticmethod, classmethod)) else value


def _rewrap_descriptor(original: Any, function: Callable) -> Any:
    if isinstance(original, staticmethod):
        return staticmethod(function)
    if isinstance(original, classmethod):
        return classmethod(function)
    return function


def _set_original(replacement: Any, original: Any) -> None:
    try:
        replacement.original = original
    except (AttributeError, TypeError):
        pass
