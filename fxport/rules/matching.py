"""Matching graph-rule patterns, and saying why a pattern did not match.

The rewrite (:func:`fxport.rules.graph.apply_graph_rules`) runs ``torch.fx``'s
``replace_pattern_with_filters``, whose ``SubgraphMatcher`` finds the matches and whose filter is
:func:`verdict` (the rule's ``check``). :func:`explain_graph` runs that same matcher, with the same
settings, and reports its results per candidate node: a match, the rule's refusal, or the first
pattern node the matcher failed on (a subclass notes it while the matcher backtracks).

Example::

    >>> import torch, fxport
    >>> @fxport.graph_rule(pattern=lambda x: torch.exp(x) + 1, example_inputs=(torch.randn(2),), name="exp-plus-one")
    ... def exp_plus_one(x):
    ...     return torch.special.expit(x)
    >>> class Net(torch.nn.Module):
    ...     def forward(self, x):
    ...         return torch.exp(x) + 2
    >>> fxport.rules.rules_of(exp_plus_one)[0].explain(torch.export.export(Net(), (torch.randn(3),)))
    ['add: argument 1 of add is 2, the pattern has 1']
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.fx
from torch.fx.passes.utils.fuser_utils import validate_partition
from torch.fx.passes.utils.matcher_utils import InternalMatch, SubgraphMatcher

from fxport.errors import RuleError


@dataclasses.dataclass
class Match:
    """One place the pattern matched, handed to a rule's ``check``.

    Attributes:
        inputs: pattern parameter name → the graph node bound to it.
        nodes: the graph nodes the pattern covers (inputs excluded).
    """

    inputs: dict[str, torch.fx.Node]
    nodes: list[torch.fx.Node]

    def value(self, name: str) -> Any:
        """The fake tensor (shape, dtype) or Python value bound to pattern input ``name``."""
        node = self.inputs[name]
        return node.meta.get("val") if isinstance(node, torch.fx.Node) else node


def verdict(rule: Any, internal_match: Any, pattern_graph: torch.fx.Graph) -> Any:
    """True when the rule's check accepts the matcher's ``internal_match``, else its reason."""
    if rule.check is None:
        return True
    placeholders = [n for n in pattern_graph.nodes if n.op == "placeholder"]
    inputs = {p.name: internal_match.nodes_map[p] for p in placeholders
              if p in internal_match.nodes_map}
    covered = [g for p, g in internal_match.nodes_map.items()
               if p.op not in ("placeholder", "output")]
    return run_check(rule, Match(inputs, covered))


def run_check(rule: Any, match: Match) -> Any:
    """True when the rule's check accepts ``match``, else its reason (a string)."""
    try:
        verdict = rule.check(match)
    except Exception as err:  # noqa: BLE001
        raise RuleError(f"graph rule {rule.name!r}: its check raised {type(err).__name__}: "
                        f"{err}", where=rule.defined_at) from err
    if verdict is None or verdict is True:
        return True
    return verdict if isinstance(verdict, str) else "check returned False"


class _ExplainingMatcher(SubgraphMatcher):
    """The rewrite's matcher (same settings as ``replace_pattern_with_filters``), noting the
    first pattern node that failed to match while it backtracks."""

    def __init__(self, pattern: torch.fx.Graph, ignore_literals: bool):
        super().__init__(pattern, match_output=False, match_placeholder=False,
                         remove_overlapping_matches=True, ignore_literals=ignore_literals)
        self.failure: str | None = None
        self._visiting: list[tuple[torch.fx.Node, torch.fx.Node]] = []

    def why_not(self, anchor: torch.fx.Node, node: torch.fx.Node) -> str:
        """Why the pattern rooted at ``anchor`` does not match at ``node`` alone."""
        self.failure = None
        match = InternalMatch(anchors=self.pattern_anchors)
        if not self._match_nodes(anchor, node, match):
            return self.failure or f"{node.name} does not match the pattern's {_show_target(anchor)}"
        if not self._is_contained(match.nodes_map):
            return _external_use(match.nodes_map, self.pattern_returning_nodes)
        computed = [g for p, g in match.nodes_map.items() if p.op not in ("placeholder", "output")]
        if not validate_partition(computed):
            return "replacing the match would make the graph cyclic"
        if len(self.pattern_anchors) > 1:
            return "the pattern's other outputs do not match around it"
        return "overlaps another match of the pattern"

    def _match_nodes(self, pn, gn, match, node_name_match: str = "") -> bool:
        if self.failure is None:
            if pn in match.nodes_map and match.nodes_map[pn] != gn:
                self.failure = (f"pattern input {pn.name!r} would bind both "
                                f"{_show(match.nodes_map[pn])} and {_show(gn)}")
            elif pn not in match.nodes_map and gn in match.nodes_map.values():
                self.failure = f"{gn.name} is already matched to another node of the pattern"
            elif not self._nodes_are_equal(pn, gn, node_name_match):
                self.failure = f"{gn.name} is {_show_target(gn)}, the pattern expects {_show_target(pn)}"
        self._visiting.append((pn, gn))
        try:
            found = super()._match_nodes(pn, gn, match, node_name_match)
        finally:
            self._visiting.pop()
        if not found and self.failure is None:
            self.failure = _argument_mismatch(pn, gn)
        return found

    def _match_literals(self, pn, gn, match) -> bool:
        found = super()._match_literals(pn, gn, match)
        if not found and not self.ignore_literals and self.failure is None and self._visiting:
            p_parent, g_parent = self._visiting[-1]
            if isinstance(pn, torch.fx.Node) and pn.op == "placeholder":
                self.failure = (f"pattern input {pn.name!r} would bind both "
                                f"{_show(match.nodes_map.get(pn))} and {_show(gn)}")
            elif isinstance(pn, torch.fx.Node):
                self.failure = (f"expected {_show_target(pn)} where {g_parent.name} has the constant "
                                f"{gn!r}")
            elif isinstance(gn, torch.fx.Node):
                self.failure = (f"{gn.name} is an argument of {g_parent.name} where the pattern has "
                                f"the constant {pn!r}")
            else:
                index = _argument_index(p_parent, g_parent, pn, gn)
                self.failure = (f"argument {index} of {g_parent.name} is {_show(gn)}, the pattern has "
                                f"{pn!r}")
        return found


def explain_graph(rule: Any, pattern: torch.fx.Graph, graph: torch.fx.Graph, path: str) -> list[str]:
    matcher = _ExplainingMatcher(pattern, rule.ignore_literals)
    if not matcher.pattern_anchors:
        return ["the pattern has no output the matcher can anchor on"]
    anchor = matcher.pattern_anchors[0]
    matched = {m.nodes_map[anchor]: m for m in matcher.match(graph)}
    prefix = f"{path}/" if path else ""
    reasons = []
    for node in graph.nodes:
        if node.op in ("placeholder", "output") or not matcher._nodes_are_equal(anchor, node):
            continue
        if node in matched:
            accepted = verdict(rule, matched[node], pattern)
            why = None if accepted is True else f"check refused: {accepted}"
        else:
            why = matcher.why_not(anchor, node)
        reasons.append(f"{prefix}{node.name}: {why or 'matches'}")
    return reasons


def _argument_mismatch(pn: torch.fx.Node, gn: torch.fx.Node) -> str:
    if len(gn.args) != len(pn.args) or list(gn.kwargs) != list(pn.kwargs):
        return (f"{gn.name} has {len(gn.args)} argument(s) {_kwargs_text(gn)}, the pattern's "
                f"{_show_target(pn)} has {len(pn.args)} {_kwargs_text(pn)}")
    return f"{gn.name}'s arguments do not match the pattern's {_show_target(pn)}"


def _kwargs_text(node: torch.fx.Node) -> str:
    return f"and keywords {', '.join(node.kwargs)}" if node.kwargs else "and no keywords"


def _argument_index(p_parent: torch.fx.Node, g_parent: torch.fx.Node, p_value: Any, g_value: Any) -> int | str:
    p_args = [*p_parent.args, *p_parent.kwargs.values()]
    g_args = [*g_parent.args, *g_parent.kwargs.values()]
    for index, (p_arg, g_arg) in enumerate(zip(p_args, g_args)):
        if p_arg is p_value and g_arg is g_value:
            return index
    for index, (p_arg, g_arg) in enumerate(zip(p_args, g_args)):
        if p_arg == p_value and g_arg == g_value:
            return index
    return "?"


def _external_use(nodes_map: dict, returning: list[torch.fx.Node]) -> str:
    inside = {g for p, g in nodes_map.items() if p.op != "placeholder"}
    for p_node, g_node in nodes_map.items():
        if p_node.op == "placeholder" or p_node in returning:
            continue
        outside = [u for u in g_node.users if u not in inside]
        if outside:
            return (f"{g_node.name} is also used by {outside[0].name} outside the pattern, so "
                    f"it cannot be replaced")
    return "a node of the match is used outside the pattern"


def _show_target(node: torch.fx.Node) -> str:
    return str(node.target) if node.op == "call_function" else f"{node.op} {node.target}"


def _show(value: Any) -> str:
    return value.name if isinstance(value, torch.fx.Node) else repr(value)
