"""Every graph of an exported program: the top-level graph and, recursively, the subgraphs its
higher-order ops call (``torch.cond`` branches, ``while_loop`` cond/body, ``scan``/``map``
bodies).

A subgraph is a ``torch.fx.GraphModule`` attribute of the module whose graph reads it with a
``get_attr`` node; the higher-order op that takes that node is its *caller*. Graph rules and
graph passes (:mod:`fxport.rules.passes`) use this one walk, so whatever they rewrite, they
rewrite in loop bodies and branches too.

Example::

    >>> import torch
    >>> class Net(torch.nn.Module):
    ...     def forward(self, x):
    ...         return torch.cond(x.sum() > 0, lambda x: x + 1, lambda x: x - 1, (x,))
    >>> program = torch.export.export(Net(), (torch.randn(3),))
    >>> [(g.path, g.caller.name if g.caller else None) for g in iter_graphs(program)]
    [('', None), ('true_graph_0', 'cond'), ('false_graph_0', 'cond')]
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator

import torch
import torch.fx


@dataclasses.dataclass(frozen=True)
class ProgramGraph:
    """One graph of a program, where it sits in it.

    Attributes:
        path: ``""`` for the top-level graph; the attribute names leading to a subgraph,
            dotted when nested (``"while_loop_body_graph_0.true_graph_0"``).
        module: the GraphModule owning the graph (``get_attr`` targets inside it resolve on it).
        caller: the higher-order op node (``cond``, ``while_loop``, ``scan``, ``map_impl``) in
            the enclosing graph that runs this graph; None for the top-level graph.
    """

    path: str
    module: torch.fx.GraphModule
    caller: torch.fx.Node | None = None

    @property
    def graph(self) -> torch.fx.Graph:
        return self.module.graph

    @property
    def is_subgraph(self) -> bool:
        return bool(self.path)


def iter_graphs(root: Any) -> Iterator[ProgramGraph]:
    """The graphs of ``root`` (an ExportedProgram or a GraphModule), enclosing graph first.

    The walk is lazy: a graph's subgraphs are found after the consumer has handled the graph
    itself, so a rewrite that adds or drops a higher-order op is seen by the rest of the walk.
    Each subgraph module is visited once even when several ``get_attr`` nodes read it.
    """
    top = root if isinstance(root, torch.fx.GraphModule) else root.graph_module
    seen: set[int] = set()
    yield from _walk(ProgramGraph("", top), seen)


def subgraphs_of(graph: ProgramGraph) -> list[ProgramGraph]:
    """The subgraphs ``graph`` reads directly (not those nested in them)."""
    found = []
    for node in graph.graph.nodes:
        if node.op != "get_attr":
            continue
        module = _attribute(graph.module, node.target)
        if not isinstance(module, torch.fx.GraphModule):
            continue
        caller = next((user for user in node.users if user.op == "call_function"), None)
        path = f"{graph.path}.{node.target}" if graph.path else str(node.target)
        found.append(ProgramGraph(path, module, caller))
    return found


def _walk(graph: ProgramGraph, seen: set[int]) -> Iterator[ProgramGraph]:
    if id(graph.module) in seen:
        return
    seen.add(id(graph.module))
    yield graph
    for child in subgraphs_of(graph):
        yield from _walk(child, seen)


def _attribute(module: torch.nn.Module, target: Any) -> Any:
    value: Any = module
    for part in str(target).split("."):
        value = getattr(value, part, None)
        if value is None:
            return None
    return value


def sync_output_names(exported: Any) -> None:
    """Point the graph signature's outputs at the (possibly replaced) output nodes."""
    output = next(n for n in exported.graph_module.graph.nodes if n.op == "output")
    values = output.args[0] if isinstance(output.args[0], (tuple, list)) else (output.args[0],)
    for spec, value in zip(exported.graph_signature.output_specs, values):
        if isinstance(value, torch.fx.Node) and hasattr(spec.arg, "name"):
            spec.arg.name = value.name
