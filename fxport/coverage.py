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


def scan_model(target: str, *, inputs=(), dynamic=(), inputs_fn=None, opset=None, rules=None,
               disable=()) -> list[MissingOp]:
    """Load ``target`` like ``fxport convert`` does, capture it with the rules applied, and
    list every op still without a translation (``fxport ops``)."""
    from fxport.load import load_model
    from fxport.pipeline import capture_with_rewrites, eval_mode
    from fxport.quiet import quiet_torch
    from fxport.rules import resolve

    loaded = load_model(target, input_specs=list(inputs), dynamic_specs=list(dynamic),
                        inputs_fn=inputs_fn)
    ruleset = resolve(rules, disable=disable, opset=opset)
    example = loaded.input_sets[0]
    records: list = []
    with eval_mode(loaded.module, []):  # data-dependent control flow converted, as convert does
        program = capture_with_rewrites(loaded.module, example, loaded.dynamic_shapes, ruleset, records,
                                        "auto", [])
    program = ruleset.apply_graph_rules(program, records)
    with quiet_torch():
        return find_missing_ops(program, ruleset.translation_table(), opset)


def rule_skeleton(missing: list[MissingOp]) -> str:
    """A rule file with one ``@fxport.onnx_op`` stub per missing op, ready to fill in."""
    parts = ['"""fxport rules for ops without an ONNX translation (generated by `fxport ops`)."""',
             "", "from onnxscript import opset18 as op", "", "import fxport", ""]
    seen = set()
    for entry in missing:
        if entry.op in seen or not entry.schema:
            continue
        seen.add(entry.op)
        parts += ["", "", _one_skeleton(entry)]
    return "\n".join(parts) + "\n"


_PY_TYPES = {"int": "int", "SymInt": "int", "float": "float", "bool": "bool", "str": "str",
             "int[]": "list[int]", "SymInt[]": "list[int]", "float[]": "list[float]",
             "ScalarType": "int"}


def _one_skeleton(entry: MissingOp) -> str:
    schema = torch._C.parse_schema(entry.schema)
    target = schema.name if not schema.overload_name else f"{schema.name}.{schema.overload_name}"
    params = []
    for arg in schema.arguments:
        kind = str(arg.type).rstrip("?")
        annotation = _PY_TYPES.get(kind) or (_PY_TYPES.get(kind.split("[")[0] + "[]") if "[" in kind else None)
        text = arg.name + (f": {annotation}" if annotation else "")
        if arg.has_default_value():
            text += f" = {arg.default_value!r}"
        elif str(arg.type).endswith("?"):
            text += " = None"
        params.append(text)
    function = re.sub(r"\W", "_", target.split("::", 1)[1])
    outputs = len(schema.returns)
    where = f" (called at {entry.location})" if entry.location else ""
    return "\n".join([
        f'@fxport.onnx_op("{target}")',
        f"def {function}({', '.join(params)}):",
        f'    """TODO: one line saying what this computes{where}."""',
        f"    # schema: {entry.schema}",
        "    # tensors arrive as ONNX values (with .shape/.dtype), other arguments as Python values;",
        f"    # return {outputs} value(s) built from onnxscript ops, e.g. op.Abs(...)",
        f'    raise NotImplementedError("{target}")',
    ])
