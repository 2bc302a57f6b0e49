"""The control-flow conversions as rules: listed by ``fxport rules``, switched off by name.

:mod:`fxport.controlflow` converts data-dependent ``if``/``while``/``for`` at the source level
while the model is captured; each conversion has the name its records carry (``if-to-where``,
``while-to-while_loop``, …) in ``fxport.controlflow.CONTROL_FLOW_RULES``. Here each becomes a
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
import typing

from fxport.errors import SourceLocation
from fxport.rules.base import BUILTIN_PRIORITY, Rule


@dataclasses.dataclass
class ControlFlowRule(Rule):
    """One source-level control-flow conversion of :mod:`fxport.controlflow` (not applied by
    the rule set: the conversion installed around capture reads which ones are disabled)."""

    tier: typing.ClassVar[str] = "control-flow"


def control_flow_rules() -> list[ControlFlowRule]:
    """A rule per name in ``fxport.controlflow.CONTROL_FLOW_RULES``, in its order."""
    where = SourceLocation(_control_flow_package().__file__, 1)
    return [ControlFlowRule(name=name, target=f"control-flow:{name}", doc=doc, priority=BUILTIN_PRIORITY,
                            defined_at=where)
            for name, doc in control_flow_names().items()]


def control_flow_names() -> dict[str, str]:
    """``{name: one-line description}`` of the control-flow conversions."""
    table = getattr(_control_flow_package(), "CONTROL_FLOW_RULES", None)
    return dict(table) if table is not None else dict(_UNTIL_CONTROLFLOW_LISTS_THEM)


def _control_flow_package():
    import fxport.controlflow  # lazily: the control-flow package imports the rules' modules

    return fxport.controlflow


#: Used only while ``fxport.controlflow`` does not export ``CONTROL_FLOW_RULES`` yet.
_UNTIL_CONTROLFLOW_LISTS_THEM = {
    "if-to-where": "a tensor-conditioned if/else whose branches are pure and cheap becomes torch.where",
    "if-to-cond": "a tensor-conditioned if/else becomes torch.cond",
    "ifexp-to-where": "a tensor-conditioned `a if c else b` becomes torch.where",
    "ifexp-to-cond": "a tensor-conditioned `a if c else b` becomes torch.cond",
    "while-to-while_loop": "a while loop with a tensor condition becomes torch while_loop",
    "for-to-while_loop": "a for loop over a tensor-sized range becomes torch while_loop",
    "if-in-traced-body": "an if nested in a converted branch or loop body is converted inside it",
    "ifexp-in-traced-body": "an `a if c else b` nested in a converted branch or loop body",
    "while-in-traced-body": "a while loop nested in a converted branch or loop body",
    "for-in-traced-body": "a for loop nested in a converted branch or loop body",
}
