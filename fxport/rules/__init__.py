"""fxport's rule API: patch, graph and op rules, and the rule sets the pipeline applies.

Three tiers, one protocol (:class:`~fxport.rules.base.Rule`: name, target, scope, priority):

* ``@fxport.patch(target)`` replaces a function, method or module class while capturing;
* ``@fxport.graph_rule(pattern=..., example_inputs=...)`` rewrites the exported aten graph;
* ``@fxport.onnx_op(op)`` translates an aten or custom op to ONNX with onnxscript.

Rule files are plain Python modules; :func:`resolve` collects them with the built-ins in
``rewrites/`` and those installed under the entry-point group ``fxport.rules``.
See docs/rules.md.

Example::

    >>> import fxport
    >>> ruleset = fxport.rules.resolve(opset=18, device="cpu")
    >>> ruleset.get("aten::erfinv").tier
    'op'
"""

from fxport.rules.base import BUILTIN_PRIORITY, Rule, Scope, rules_of
from fxport.rules.graph import GraphRule, Match, graph_rule
from fxport.rules.op import OpRule, custom_node, onnx_op
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

__all__ = [
    "BUILTIN_PRIORITY",
    "ENTRY_POINT_GROUP",
    "GraphRule",
    "Match",
    "OpRule",
    "PROVENANCE_KEY",
    "PatchRule",
    "Rule",
    "RuleSet",
    "Scope",
    "builtin_rules",
    "collect",
    "custom_node",
    "graph_rule",
    "load_rule_file",
    "onnx_op",
    "patch",
    "resolve",
    "rule_of_node",
    "rules_of",
]
