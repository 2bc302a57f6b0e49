"""The control-flow conversions as rules: listed by ``fxport rules``, switched off by name.

:mod:`fxport.controlflow` converts data-dependent ``if``/``while``/``for`` at the source level
while the model is captured; each conversion has the name its records carry (``if-to-where``,
``while-to-while_loop``, …) in ``CONTROL_FLOW_RULES``. Here each becomes a
:class:`ControlFlowRule` (tier ``"control-flow"``) so that a rule set lists them beside the
other rules and ``disable=[name]`` is checked like any rule name; the conversion itself reads
:attr:`fxport.rules.RuleSet.disabled_control_flow`.

Example::

    >>> rows = {rule.name: rule.tier for rule in control_flow_rules()}
    >>> rows["if-to-cond"]
    'control-flow'
"""

from __future__ import annotations

import dataclasses
import types
import typing

from fxport.errors import SourceLocation
from fxport.rules.base import BUILTIN_PRIORITY, Rule


@dataclasses.dataclass
class ControlFlowRule(Rule):
    """One source-level control-flow conversion of :mod:`fxport.controlflow` (not applied by
    the rule set: the conversion installed around capture reads which ones are disabled)."""

    tier: typing.ClassVar[str] = "control-flow"


def control_flow_rules() -> list[ControlFlowRule]:
    """A rule per name in ``CONTROL_FLOW_RULES``, in its order (a conversion that is also a built-in
    rule, the pass ``item-predicate-to-tensor``, is listed once: :func:`fxport.rules.resolve`)."""
    table, module = _table()
    where = SourceLocation(module.__file__, 1)
    return [ControlFlowRule(name=name, target=f"control-flow:{name}", doc=doc, priority=BUILTIN_PRIORITY,
                            defined_at=where)
            for name, doc in table.items()]


def control_flow_names() -> dict[str, str]:
    """``{name: one-line description}`` of the control-flow conversions."""
    return dict(_table()[0])


def _table() -> tuple[dict[str, str], types.ModuleType]:
    # imported lazily: the control-flow package is heavier than the rule API, and imports it
    import fxport.controlflow
    from fxport.controlflow.operators import rule_names

    return getattr(fxport.controlflow, "CONTROL_FLOW_RULES", rule_names.CONTROL_FLOW_RULES), rule_names
