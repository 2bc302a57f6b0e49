"""Graph passes: a function applied to every graph of the exported program.

Where a graph rule (:mod:`fxport.rules.graph`) replaces a fixed pattern, a pass is free-form
code ``function(graph_module, context) -> records`` that may look at and change anything in one
FX graph. fxport runs it on the top-level graph and on every subgraph (cond branches,
``while_loop`` cond and body, scan/map bodies, nested ones: :func:`fxport.rules.walk.iter_graphs`),
after capture and before the graph rules. The pass returns the :class:`~fxport.report.result.AppliedRewrite`
records of what it changed (``context.record`` builds one) or None; fxport recompiles each graph
after it. Dead nodes a pass leaves are its own to remove (``graph.eliminate_dead_code()``).

Example::

    >>> import torch, fxport
    >>> @fxport.rules.graph_pass(name="neg-neg")
    ... def drop_double_negation(graph_module, context):
    ...     '''-(-x) -> x.'''
    ...     records = []
    ...     for node in list(graph_module.graph.nodes):
    ...         inner = node.args[0] if node.target is torch.ops.aten.neg.default else None
    ...         if getattr(inner, "target", None) is torch.ops.aten.neg.default:
    ...             node.replace_all_uses_with(inner.args[0])
    ...             records.append(context.record(node, "dropped a double negation"))
    ...     graph_module.graph.eliminate_dead_code()
    ...     return records
    >>> class Net(torch.nn.Module):
    ...     def forward(self, x):
    ...         return torch.cond(x.sum() > 0, lambda x: -(-x) * 2, lambda x: x + 1, (x,))
    >>> program = torch.export.export(Net(), (torch.randn(3),))
    >>> records = []
    >>> apply_graph_passes(program, fxport.rules.rules_of(drop_double_negation), records)
    >>> [(r.rule, r.data["graph"]) for r in records]
    [('neg-neg', 'true_graph_0')]
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Callable, Iterable, Sequence

import torch
import torch.fx

from fxport.errors import ConversionError, RuleError, SourceLocation
from fxport.common.provenance import mark_made_by
from fxport.report.result import AppliedRewrite
from fxport.rules.base import Rule, Scope, attach, definition_site, first_doc_line, make_scope
from fxport.rules.walk import ProgramGraph, iter_graphs, sync_output_names



@dataclasses.dataclass
class GraphContext:
    """What a pass knows about the graph it is given.

    Attributes:
        rule: the pass being applied.
        program: the whole ExportedProgram (None when a bare GraphModule is rewritten).
        where: the graph's place in the program: ``path`` (``""`` at the top level), ``module``,
            ``caller`` (the cond/while_loop/scan node running it).
        control_flow: whether this conversion converts data-dependent control flow (False with
            ``control_flow=False`` / ``--no-control-flow``); passes that finish that conversion
            do nothing without it.
    """

    rule: "GraphPass"
    program: Any
    where: ProgramGraph
    control_flow: bool = True

    @property
    def path(self) -> str:
        return self.where.path

    @property
    def is_subgraph(self) -> bool:
        return self.where.is_subgraph

    def location(self, node: torch.fx.Node | None) -> SourceLocation | None:
        """The user's file:line that produced ``node`` (its innermost user frame), or None."""
        from fxport.rules.graph import location_from_stack_trace

        return location_from_stack_trace(node.meta.get("stack_trace")) if node is not None else None

    def record(self, node: torch.fx.Node | None, detail: str, *, new_nodes: Iterable[torch.fx.Node] = (),
               data: dict | None = None, tier: str | None = None) -> AppliedRewrite:
        """An AppliedRewrite of this pass at ``node``'s user line.

        ``new_nodes`` are the nodes the pass made: they are marked with the rule's name, which
        the ONNX nodes lowered from them carry (``fxport.rule`` metadata). ``data["graph"]``
        names the subgraph (absent at the top level). ``tier`` defaults to ``"pass"``.
        """
        made = [n for n in new_nodes if isinstance(n, torch.fx.Node)]
        mark_made_by(made, self.rule.name, node)
        payload = {**({"graph": self.path} if self.path else {}), **(data or {})}
        if made:
            payload["new_nodes"] = [n.name for n in made]
        return AppliedRewrite(rule=self.rule.name, tier=tier or self.rule.tier,
                              location=self.location(node), detail=detail, data=payload)


PassFunction = Callable[[torch.fx.GraphModule, GraphContext], "Iterable[AppliedRewrite] | None"]

#: Called as ``check(pass, graph_module)`` after each pass on each graph when set; the test suite
#: sets it to :func:`lint_after_pass` (tests/conftest.py), so a pass leaving a malformed graph fails
#: at that pass in every test that runs it, not later in the exporter.
after_each_pass: Callable[["GraphPass", torch.fx.GraphModule], None] | None = None


def lint_after_pass(rule: "GraphPass", graph_module: torch.fx.GraphModule) -> None:
    """``graph.lint()`` (well-formed nodes, every use defined before it); a RuleError naming the pass."""
    try:
        graph_module.graph.lint()
    except Exception as err:  # noqa: BLE001 - lint raises RuntimeError and others
        raise RuleError(f"graph pass {rule.name!r} left a malformed graph: {type(err).__name__}: {err}",
                        where=rule.defined_at, hint=f"fix the pass, or --disable {rule.name}") from err


@dataclasses.dataclass
class GraphPass(Rule):
    """Run ``function(graph_module, context)`` on every graph of the exported program.

    Attributes:
        function: the pass; returns the records of what it changed (or None).
        after: names of passes that run before this one when they run (whatever the priorities).
    """

    tier: typing.ClassVar[str] = "pass"

    function: PassFunction | None = None
    after: tuple[str, ...] = ()


def graph_pass(
    *,
    name: str | None = None,
    priority: int = 0,
    scope: Scope | None = None,
    opset: int | tuple[int | None, int | None] | None = None,
    devices: Sequence[str] | str | None = None,
    torch_version: str | None = None,
    after: Sequence[str] | str = (),
) -> Callable[[PassFunction], PassFunction]:
    """Decorator: the decorated ``function(graph_module, context)`` becomes a graph pass.

    Args:
        name: the rule's name (``fxport rules``, ``--disable``); defaults to the function's.
        priority: orders passes (higher runs first) and decides between two claiming one name.
        after: the names of passes this one needs to run after (when they run: a disabled one
            is not waited for); stronger than ``priority``.
        scope / opset / devices / torch_version: where the pass applies (see :class:`Scope`).
    """

    def decorate(function: PassFunction) -> PassFunction:
        rule_name = name or function.__name__
        rule = GraphPass(
            name=rule_name,
            target=f"pass:{rule_name}",
            doc=first_doc_line(function),
            scope=make_scope(scope, opset=opset, devices=devices, torch=torch_version),
            priority=priority,
            defined_at=definition_site(function),
            function=function,
            after=(after,) if isinstance(after, str) else tuple(after),
        )
        return attach(function, rule)

    return decorate


def pass_order(passes: Sequence[GraphPass]) -> list[GraphPass]:
    """The passes in the order they run: highest priority first, each after the passes it names
    in ``after`` (a cycle is a RuleError).

    Example::

        >>> first = GraphPass(name="first", target="pass:first", priority=0)
        >>> second = GraphPass(name="second", target="pass:second", priority=5, after=("first",))
        >>> [rule.name for rule in pass_order([second, first])]
        ['first', 'second']
    """
    waiting = sorted(passes, key=lambda r: -r.priority)
    present = {rule.name for rule in waiting}
    ordered: list[GraphPass] = []
    while waiting:
        done = {rule.name for rule in ordered}
        ready = next((rule for rule in waiting if all(name in done or name not in present for name in rule.after)),
                     None)
        if ready is None:
            raise RuleError(f"graph passes wait for each other in a circle: {', '.join(r.name for r in waiting)}",
                            where=waiting[0].defined_at, hint="drop one of their after= names")
        waiting.remove(ready)
        ordered.append(ready)
    return ordered


def apply_graph_passes(program: Any, passes: Sequence[GraphPass], records: list[AppliedRewrite],
                       *, control_flow: bool = True,
                       after_each: Callable[[GraphPass, torch.fx.GraphModule], None] | None = None) -> None:
    """Run each pass (in :func:`pass_order`) over every graph of ``program``, in place.

    ``program`` is an ExportedProgram or a GraphModule. The records the passes return are
    appended to ``records``. ``after_each(pass, graph_module)`` is called after each pass on
    each graph (the tests lint the graph there).
    """
    for rule in pass_order(passes):
        for where in iter_graphs(program):
            context = GraphContext(rule, program if not isinstance(program, torch.fx.GraphModule) else None,
                                   where, control_flow)
            try:
                returned = rule.function(where.module, context)
            except ConversionError:  # a refusal the pass raised on purpose (one line at the user's code)
                raise
            except Exception as err:  # noqa: BLE001 - a failing pass is the pass's fault
                raise RuleError(f"graph pass {rule.name!r} failed on graph {where.path or '<top level>'}: "
                                f"{type(err).__name__}: {err}", where=rule.defined_at,
                                hint=f"fix the pass, or --disable {rule.name}") from err
            where.module.recompile()
            for check in (after_each, after_each_pass):
                if check is not None:
                    check(rule, where.module)
            for record in returned or ():
                if not isinstance(record, AppliedRewrite):
                    raise RuleError(f"graph pass {rule.name!r} returned {record!r}, not an AppliedRewrite",
                                    where=rule.defined_at, hint="return context.record(...) values, or None")
                records.append(record)
    if passes and not isinstance(program, torch.fx.GraphModule):
        sync_output_names(program)
