"""Coverage scan: every op in a captured program that has no ONNX translation, all at once.

The dynamo exporter stops at the first op it cannot translate. fxport decomposes the program
the way the exporter does, dispatches every node against the exporter's registry (plus the
translations contributed by rules) and reports each missing op once, with the user's source
line where it was called.

Example::

    >>> missing = find_missing_ops(exported_program)          # doctest: +SKIP
    >>> [(m.op, str(m.location)) for m in missing]             # doctest: +SKIP
    [('aten::erfinv', 'net.py:12')]
"""

from __future__ import annotations

import dataclasses
import re
import traceback
from typing import Callable

import torch

from fxport.errors import SourceLocation, user_location_from_stack

_STACK_LINE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>\S+)')


@dataclasses.dataclass(frozen=True)
class MissingOp:
    """An op without an ONNX translation and where the user's code calls it."""

    op: str
    location: SourceLocation | None
    schema: str = ""

    def __str__(self) -> str:
        return f"{self.op} ({self.location})" if self.location else self.op


def op_name(target) -> str:
    """``torch.ops.aten.erfinv.default`` → ``aten::erfinv``."""
    if isinstance(target, torch._ops.OpOverload):
        return target._schema.name
    return getattr(target, "__name__", str(target))


def location_of(node: torch.fx.Node) -> SourceLocation | None:
    """The user's file:line that produced ``node``, from its recorded stack trace."""
    stack = node.meta.get("stack_trace") or ""
    frames = [
        traceback.FrameSummary(m["file"], int(m["line"]), m["name"])
        for m in _STACK_LINE.finditer(stack)
    ]
    return user_location_from_stack(frames)


def build_registry(translation_table: dict[Callable, Callable] | None = None, opset: int | None = None):
    """The exporter's ONNX registry with the given custom translations registered on top."""
    from torch.onnx._internal.exporter import _registration

    registry = (
        _registration.ONNXRegistry.from_torchlib(opset)
        if opset is not None
        else _registration.ONNXRegistry.from_torchlib()
    )
    for target, function in (translation_table or {}).items():
        functions = function if isinstance(function, (list, tuple)) else [function]
        for fn in functions:
            registry.register_op(target, fn)
    return registry


def find_missing_ops(
    program: torch.export.ExportedProgram,
    translation_table: dict[Callable, Callable] | None = None,
    opset: int | None = None,
) -> list[MissingOp]:
    """Every distinct (op, user line) in ``program`` that the exporter cannot translate."""
    from torch.onnx._internal.exporter import _core, _dispatching

    registry = build_registry(translation_table, opset)
    decomposed = _core._prepare_exported_program_for_export(program, registry=registry)
    missing: dict[tuple[str, str], MissingOp] = {}
    for graph_module in decomposed.graph_module.modules():
        if not isinstance(graph_module, torch.fx.GraphModule):
            continue
        for node in graph_module.graph.nodes:
            if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
                continue
            function, _ = _dispatching.dispatch(node, registry)
            if function is not None:
                continue
            original = node.meta.get("original_aten") or node.target
            entry = MissingOp(op_name(original), location_of(node), str(getattr(original, "_schema", "")))
            missing.setdefault((entry.op, str(entry.location)), entry)
    return list(missing.values())
