"""Graph rules: pattern → replacement on the exported aten FX graph.

Pattern and replacement are plain PyTorch functions. fxport captures both with
``torch.export.export`` — the same path that captures the model — so the pattern is spelled in
exactly the aten ops the model's graph contains. Matching uses ``torch.fx.subgraph_rewriter``,
in every graph of the program (cond branches and loop bodies too: :mod:`fxport.rules.walk`); an
optional ``check`` vets each match and may say why it refused; :meth:`GraphRule.explain` asks
the same matcher (``SubgraphMatcher``) why a candidate node did not match.

Example::

    >>> import torch, fxport
    >>> def x_sigmoid_x(x):
    ...     return x * torch.sigmoid(x)
    >>> @fxport.graph_rule(pattern=x_sigmoid_x, example_inputs=(torch.randn(2, 3),))
    ... def to_silu(x):
    ...     '''x * sigmoid(x) -> silu(x): one ONNX node instead of two.'''
    ...     return torch.nn.functional.silu(x)
    >>> class Net(torch.nn.Module):
    ...     def forward(self, x):
    ...         return x * torch.sigmoid(x) + 1
    >>> ep = torch.export.export(Net(), (torch.randn(4, 5),))
    >>> rule = fxport.rules.rules_of(to_silu)[0]
    >>> records = []
    >>> ep = fxport.rules.graph.apply_graph_rules(ep, [rule], records)
    >>> [r.rule for r in records]
    ['to_silu']
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from typing import Any, Callable, Sequence

import torch
import torch.fx
from torch.fx.subgraph_rewriter import replace_pattern_with_filters

from fxport.errors import RuleError, SourceLocation
from fxport.common.frames import user_location_in
from fxport.common.provenance import mark_made_by
from fxport.report.result import AppliedRewrite
from fxport.rules.base import Rule, Scope, attach, definition_site, first_doc_line, make_scope
from fxport.rules.matching import Match, explain_graph, verdict
from fxport.rules.walk import iter_graphs, sync_output_names


@dataclasses.dataclass
class GraphRule(Rule):
    """Rewrite every match of ``pattern`` into ``replacement``.

    Attributes:
        pattern / replacement: PyTorch functions with the same parameters.
        example_inputs: inputs used to capture both (shapes only need to be representative).
        check: optional ``check(match) -> True | None | str | False``; a string is the reason
            the match was refused (shown by :meth:`explain`).
        ignore_literals: match constants (e.g. the ``2`` in ``x * 2``) as wildcards.
    """

    tier: typing.ClassVar[str] = "graph"

    pattern: Callable | None = None
    replacement: Callable | None = None
    example_inputs: tuple = ()
    check: Callable[[Match], Any] | None = None
    ignore_literals: bool = False
    _captured: tuple | None = dataclasses.field(default=None, repr=False)

    def captured(self) -> tuple[torch.fx.GraphModule, torch.fx.GraphModule]:
        """(pattern, replacement) as exported aten graphs; captured once."""
        if self._captured is None:
            self._captured = (capture(self.pattern, self.example_inputs, self.name, "pattern"),
                              capture(self.replacement, self.example_inputs, self.name,
                                      "replacement"))
        return self._captured

    def explain(self, graph: torch.fx.Graph | torch.fx.GraphModule | Any) -> list[str]:
        """Why the pattern did or did not match: one line per candidate node.

        A candidate is a node the matcher tries the pattern's output against (same op). The
        verdict comes from the matcher the rewrite uses (``torch.fx``'s ``SubgraphMatcher``):
        ``"<node>: matches"``, or the first pattern node that failed and why, a node used
        outside the pattern, or the reason the rule's ``check`` gave. For a program or a
        GraphModule every graph is explained, subgraph candidates prefixed with their path
        (``"true_graph_0/log: matches"``). An empty list: no candidate at all.
        """
        pattern_gm, _ = self.captured()
        if isinstance(graph, torch.fx.Graph):
            return explain_graph(self, pattern_gm.graph, graph, "")
        reasons = []
        for where in iter_graphs(graph):
            reasons += explain_graph(self, pattern_gm.graph, where.graph, where.path)
        return reasons


def graph_rule(
    *,
    pattern: Callable,
    example_inputs: Sequence[Any],
    check: Callable[[Match], Any] | None = None,
    ignore_literals: bool = False,
    name: str | None = None,
    priority: int = 0,
    scope: Scope | None = None,
    opset: int | tuple[int | None, int | None] | None = None,
    devices: Sequence[str] | str | None = None,
    torch_version: str | None = None,
) -> Callable[[Callable], Callable]:
    """Decorator: the decorated function replaces every match of ``pattern``.

    Args:
        pattern: a PyTorch function; its parameters are the pattern's inputs (wildcards).
        example_inputs: arguments to capture pattern and replacement with.
        check: optional filter ``check(match)``: True/None accepts, a string (the reason) or
            False refuses.
        name: the rule's name; defaults to the replacement function's name.

    Example::

        @fxport.graph_rule(pattern=lambda x: x * torch.sigmoid(x),
                           example_inputs=(torch.randn(2, 3),))
        def to_silu(x):
            '''x * sigmoid(x) -> silu(x).'''
            return torch.nn.functional.silu(x)
    """

    def decorate(replacement: Callable) -> Callable:
        rule = GraphRule(
            name=name or replacement.__name__,
            target=f"pattern:{getattr(pattern, '__qualname__', repr(pattern))}",
            doc=first_doc_line(replacement),
            scope=make_scope(scope, opset=opset, devices=devices, torch=torch_version),
            priority=priority,
            defined_at=definition_site(replacement),
            pattern=pattern,
            replacement=replacement,
            example_inputs=tuple(example_inputs),
            check=check,
            ignore_literals=ignore_literals,
        )
        return attach(replacement, rule)

    return decorate


class _AsModule(torch.nn.Module):
    def __init__(self, function: Callable):
        super().__init__()
        self.function = function

    def forward(self, *args):
        return self.function(*args)


def capture(function: Callable, example_inputs: tuple, rule_name: str, role: str
            ) -> torch.fx.GraphModule:
    """``function`` as an exported aten graph, placeholders named after its parameters."""
    try:
        exported = torch.export.export(_AsModule(function), tuple(example_inputs))
    except Exception as err:  # noqa: BLE001 - any capture failure is the rule's fault
        raise RuleError(
            f"graph rule {rule_name!r}: could not capture its {role}: "
            f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
            where=definition_site(function),
            hint="make it a plain PyTorch function of its example_inputs",
        ) from err
    graph_module = exported.graph_module
    try:
        names = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        names = []
    placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
    for node, param in zip(placeholders, names):
        node.target = param
        node.name = param
    graph_module.recompile()
    return graph_module


def apply_graph_rules(exported: Any, rules: Sequence[GraphRule],
                      records: list[AppliedRewrite]) -> Any:
    """Rewrite ``exported`` (an ExportedProgram or a GraphModule) with each rule in turn, in
    every graph: the top-level one and each cond branch, loop body and scan body
    (:func:`fxport.rules.walk.iter_graphs`); returns it.

    One :class:`AppliedRewrite` per replaced match is appended to ``records`` (``data["graph"]``
    names the subgraph, ``""`` at the top level); replacement nodes carry
    ``node.meta["fxport_rule"]`` (the rule's name) for provenance.
    """
    top = exported if isinstance(exported, torch.fx.GraphModule) else exported.graph_module
    for rule in rules:
        pattern_gm, replacement_gm = rule.captured()
        for where in iter_graphs(top):
            replaced = replace_pattern_with_filters(
                where.module, pattern_gm, replacement_gm,
                match_filters=[_filter_for(rule)], ignore_literals=rule.ignore_literals,
            )
            for found in replaced:
                _record(rule, found, where.path, records)
            if replaced and where.is_subgraph:
                where.graph.eliminate_dead_code()
                where.module.recompile()
    top.graph.eliminate_dead_code()
    top.recompile()
    if not isinstance(exported, torch.fx.GraphModule):
        sync_output_names(exported)
    return exported


def _filter_for(rule: GraphRule) -> Callable:
    def accept(internal_match, original_graph, pattern_graph) -> bool:
        return verdict(rule, internal_match, pattern_graph) is True

    return accept


def _record(rule: GraphRule, found: Any, path: str, records: list[AppliedRewrite]) -> None:
    anchor = found.nodes_map.get(found.anchor, found.anchor)  # the model's node, not the pattern's
    stack = anchor.meta.get("stack_trace")
    new_nodes = [n for n in found.replacements if isinstance(n, torch.fx.Node)]
    mark_made_by(new_nodes, rule.name, anchor, inherit=("stack_trace", "nn_module_stack"))
    records.append(AppliedRewrite(
        rule=rule.name, tier="graph", location=location_from_stack_trace(stack),
        detail=f"replaced {anchor.name} ({anchor.target}) and its pattern with "
               f"{', '.join(str(n.target) for n in new_nodes if n.op == 'call_function')}",
        data={"anchor": anchor.name, "new_nodes": [n.name for n in new_nodes], **({"graph": path} if path else {})},
    ))


def location_from_stack_trace(stack_trace: str | None) -> SourceLocation | None:
    """The innermost user frame of an FX ``stack_trace`` string (:func:`fxport.common.frames.user_location_in`)."""
    return user_location_in(stack_trace)
