"""FX helpers the built-in graph passes share (not rules themselves)."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx


class Caller:
    """Adds calls to a graph with their fake values in ``meta["val"]`` (the ONNX exporter reads
    shapes and dtypes there), computed in the graph's own fake mode; list arguments (``stack``'s
    tensors, a shape) may hold nodes too."""

    def __init__(self, graph: torch.fx.Graph):
        self.graph = graph
        values = [n.meta.get("val") for n in graph.nodes]
        self.mode = torch._guards.detect_fake_mode([v for v in values if isinstance(v, torch.Tensor)])

    def __call__(self, target, args: tuple, kwargs: dict | None = None) -> torch.fx.Node:
        node = self.graph.call_function(target, args, kwargs or {})
        values = tuple([_fake(a) for a in x] if isinstance(x, list) else _fake(x) for x in args)
        if self.mode is not None:
            with self.mode:
                node.meta["val"] = target(*values, **(kwargs or {}))
        return node


def _fake(value: Any) -> Any:
    return value.meta["val"] if isinstance(value, torch.fx.Node) else value
