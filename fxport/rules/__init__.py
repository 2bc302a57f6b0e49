"""fxport's rule API: patch rules, graph passes, graph and op rules, and the rule sets the
pipeline applies.

Tiers sharing one protocol (:class:`~fxport.rules.base.Rule`: name, target, scope, priority):

* ``@fxport.patch(target)`` replaces a function, method or module class while capturing;
* control-flow conversions (``if-to-cond``, …: :mod:`fxport.rules.controlflow`) are listed and
  disabled by name like any rule;
* ``@fxport.rules.graph_pass()`` runs a function on every graph of the exported program, cond
  branches and loop bodies included (:mod:`fxport.rules.passes`, :func:`iter_graphs`);
* ``@fxport.graph_rule(pattern=..., example_inputs=...)`` rewrites the exported aten graphs;
* ``@fxport.onnx_op(op)`` translates an aten or custom op to ONNX with onnxscript;
* ``@fxport.decision(op)`` tells verification how to replay the op's decision on tied keys
  (:mod:`fxport.rules.decisions`; ``decision:<op>`` in ``fxport rules``).

Rule files are plain Python modules; :func:`resolve` collects them with the built-ins in
``fxport.rewrites`` and those installed under the entry-point group ``fxport.rules``.
See docs/rules.md.

Example::

    >>> import fxport
    >>> ruleset = fxport.rules.resolve(opset=18, device="cpu")
    >>> ruleset.get("aten::erfinv").tier
    'op'
"""

from fxport.rules.base import BUILTIN_PRIORITY, Rule, Scope, rules_of
from fxport.rules.controlflow import ControlFlowRule
from fxport.rules.decisions import DecisionRule, decision, keys_within, valid_indices
from fxport.rules.graph import GraphRule, Match, graph_rule
from fxport.rules.op import OpRule, custom_node, onnx_op
from fxport.rules.passes import GraphContext, GraphPass, graph_pass
from fxport.rules.patching import PatchRule, patch
from fxport.rules.registry import (
    ENTRY_POINT_GROUP,
    PROVENANCE_KEY,
    RuleSet,
    builtin_rules,
    collect,
    load_rule_file,
    resolve,
    rule_of_node,
)
from fxport.rules.walk import ProgramGraph, iter_graphs

__all__ = [
    "BUILTIN_PRIORITY",
    "ControlFlowRule",
    "DecisionRule",
    "ENTRY_POINT_GROUP",
    "GraphContext",
    "GraphPass",
    "GraphRule",
    "Match",
    "OpRule",
    "PROVENANCE_KEY",
    "PatchRule",
    "ProgramGraph",
    "Rule",
    "RuleSet",
    "Scope",
    "builtin_rules",
    "collect",
    "custom_node",
    "decision",
    "graph_pass",
    "graph_rule",
    "iter_graphs",
    "keys_within",
    "load_rule_file",
    "onnx_op",
    "patch",
    "resolve",
    "rule_of_node",
    "rules_of",
    "valid_indices",
]
