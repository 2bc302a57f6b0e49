"""What every fxport rule shares: a name, a tier, a target, a scope, a priority, provenance.

Rules are data. The decorators in :mod:`fxport.rules.op`, :mod:`fxport.rules.patching` and
:mod:`fxport.rules.graph` build them; :mod:`fxport.rules.registry` resolves a set of them into
the :class:`~fxport.rules.registry.RuleSet` the pipeline applies.

Example::

    >>> from fxport.rules.base import Scope
    >>> scope = Scope(opset=(18, None), devices=("cpu",))
    >>> scope.why_not(opset=17, device="cpu")
    'needs opset >= 18, converting at opset 17'
    >>> scope.why_not(opset=18, device="cpu") is None
    True
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any, ClassVar

import torch
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from fxport.errors import RuleError, SourceLocation

#: Priority of every built-in rule (``fxport.rewrites``): any user rule (default priority 0) overrides them.
BUILTIN_PRIORITY = -10

#: The tiers, in the order a conversion meets them (and ``fxport rules`` lists them); decisions
#: are verification's (:mod:`fxport.rules.decisions`).
TIERS = ("patch", "control-flow", "pass", "graph", "op", "decision")


@dataclasses.dataclass(frozen=True)
class Scope:
    """Where a rule applies. ``None`` everywhere means: always.

    Attributes:
        opset: inclusive ``(min, max)`` ONNX opset range; either end may be None.
        devices: device types the conversion may target (``"cpu"``, ``"cuda"``), or None for any.
        torch: a PEP 440 specifier the torch version must satisfy, e.g. ``">=2.13,<2.14"``.
    """

    opset: tuple[int | None, int | None] = (None, None)
    devices: tuple[str, ...] | None = None
    torch: str | None = None

    def __post_init__(self) -> None:
        if self.torch is not None:
            try:
                SpecifierSet(self.torch)
            except InvalidSpecifier as err:
                raise RuleError(f"invalid torch version scope {self.torch!r}: {err}") from None
        if self.devices is not None and isinstance(self.devices, str):
            object.__setattr__(self, "devices", (self.devices,))

    def why_not(self, *, opset: int | None = None, device: str | None = None) -> str | None:
        """None when the rule applies to a conversion at ``opset`` on ``device``, else why not."""
        low, high = self.opset
        if opset is not None and low is not None and opset < low:
            return f"needs opset >= {low}, converting at opset {opset}"
        if opset is not None and high is not None and opset > high:
            return f"needs opset <= {high}, converting at opset {opset}"
        if device is not None and self.devices is not None:
            kind = torch.device(device).type
            if kind not in self.devices:
                return f"needs device {'/'.join(self.devices)}, converting for {kind}"
        if self.torch is not None:
            running = Version(torch.__version__.split("+")[0])
            if running not in SpecifierSet(self.torch):
                return f"needs torch {self.torch}, running {running}"
        return None

    def __str__(self) -> str:
        parts = []
        low, high = self.opset
        if low is not None or high is not None:
            parts.append(f"opset {low or ''}..{high or ''}")
        if self.devices is not None:
            parts.append("device " + "/".join(self.devices))
        if self.torch is not None:
            parts.append(f"torch {self.torch}")
        return ", ".join(parts) or "any"


def make_scope(scope: Scope | None = None, **fields: Any) -> Scope:
    """Build a Scope from keyword shorthands (``opset=18`` means ``opset=(18, None)``)."""
    if scope is not None:
        return scope
    opset = fields.get("opset")
    if isinstance(opset, int):
        opset = (opset, None)
    devices = fields.get("devices")
    if isinstance(devices, str):
        devices = (devices,)
    return Scope(
        opset=tuple(opset) if opset else (None, None),
        devices=tuple(devices) if devices else None,
        torch=fields.get("torch"),
    )


@dataclasses.dataclass
class Rule:
    """Base of the rule tiers (patch, control-flow, pass, graph, op, decision).

    Attributes:
        name: unique, user-visible name (``fxport rules`` lists it, ``--disable NAME`` removes it).
        target: what the rule claims: an op name, a dotted Python path, a pattern name.
            Two enabled rules of one tier with the same target need different priorities.
        doc: one line saying what the rule does (the first line of its docstring by default).
        scope: where it applies.
        priority: the higher wins when two rules claim one target.
        defined_at: where the rule was written (for error messages and ``fxport rules``).
    """

    tier: ClassVar[str] = "rule"

    name: str
    target: str
    doc: str = ""
    scope: Scope = dataclasses.field(default_factory=Scope)
    priority: int = 0
    defined_at: SourceLocation | None = None

    @property
    def key(self) -> tuple[str, str]:
        """What two conflicting rules share: (tier, target)."""
        return (self.tier, self.target)

    def describe(self) -> dict:
        """One row of ``fxport rules``."""
        return {
            "name": self.name,
            "tier": self.tier,
            "target": self.target,
            "scope": str(self.scope),
            "priority": self.priority,
            "doc": self.doc,
            "defined_at": str(self.defined_at) if self.defined_at else None,
        }


def first_doc_line(obj: Any) -> str:
    """The first line of ``obj``'s docstring, or an empty string."""
    doc = inspect.getdoc(obj) or ""
    return doc.strip().splitlines()[0].strip() if doc.strip() else ""


def definition_site(obj: Any) -> SourceLocation | None:
    """Where ``obj`` (a function or class) is defined."""
    try:
        filename = inspect.getsourcefile(obj) or inspect.getfile(obj)
        _, lineno = inspect.getsourcelines(obj)
    except (TypeError, OSError):
        return None
    return SourceLocation(filename, lineno, getattr(obj, "__qualname__", None))


def attach(obj: Any, rule: Rule) -> Any:
    """Mark ``obj`` as defining ``rule`` so rule files can be scanned for it."""
    rules = list(getattr(obj, "__fxport_rules__", ()))
    rules.append(rule)
    try:
        obj.__fxport_rules__ = rules
    except (AttributeError, TypeError) as err:
        raise RuleError(f"cannot attach rule {rule.name!r} to {obj!r}: {err}") from None
    return obj


def rules_of(obj: Any) -> list[Rule]:
    """The rules ``obj`` carries: a Rule itself, or what a decorator attached to it."""
    if isinstance(obj, Rule):
        return [obj]
    found = getattr(obj, "__fxport_rules__", None)
    if isinstance(found, list) and all(isinstance(r, Rule) for r in found):
        return list(found)
    return []
