"""Checks the ONNX file leaves out: a marker node per ``assert`` / raising branch on a tensor's value.

ONNX has no operator that stops a run, so an ``assert`` on a tensor's value (or a branch that
only raises, :mod:`fxport.controlflow.converters.raising_branches`) cannot be in the file. The
conversion owes the user one warning at each such check, and a check can be traced where no
Python side effect is allowed (a ``torch.cond`` branch, a ``while_loop`` body dynamo traces). So
the operator leaves a marker in the graph instead: ``fxport::left_out_check(key)``, an op with
a side effect (never dead code) and no output. After each capture, :func:`take_markers` finds
the markers in the program and in every body graph, turns each key back into its statement and
erases the nodes: a warning exists exactly where the captured program held the check.

``key`` is given to a statement when it is converted (:func:`register`), so that tracing only
reads the table.

Example::

    >>> from fxport.controlflow.operators.info import StatementInfo
    >>> info = StatementInfo("assert", None, ())
    >>> register(info) == register(info)
    True
    >>> warning_for("assert-on-tensor", "model.py:12").startswith("assert at model.py:12 checks a tensor's value")
    True
"""

from __future__ import annotations

import torch
from torch.fx.node import has_side_effect

from fxport.report.result import AppliedRewrite

_KEYS: dict[int, int] = {}  # id(StatementInfo) → key
_INFOS: list = []  # key → StatementInfo (converted statements live as long as their code)

#: rule → the statement's word in the warning
CHECKS = {"assert-on-tensor": "assert", "raise-on-tensor": "raise"}


@torch.library.custom_op("fxport::left_out_check", mutates_args=())
def left_out_check(key: int) -> None:
    """Marks a check the file leaves out; runs as nothing."""
    return None


@left_out_check.register_fake
def _left_out_check_fake(key: int) -> None:
    return None


OP = torch.ops.fxport.left_out_check.default
has_side_effect(OP)


def register(info) -> int:
    """The key of ``info`` (a converted ``assert`` / raising branch), given once, at conversion."""
    key = _KEYS.get(id(info))
    if key is None:
        key = _KEYS[id(info)] = len(_INFOS)
        _INFOS.append(info)
    return key


def key_of(info) -> int | None:
    """The key :func:`register` gave ``info`` (None for a statement never registered)."""
    return _KEYS.get(id(info))


def mark(key: int) -> None:
    """Leave the marker of check ``key`` in the graph being traced."""
    torch.ops.fxport.left_out_check(key)


def take_markers(program: torch.export.ExportedProgram, rule_of) -> list[AppliedRewrite]:
    """Erase the markers from ``program`` (its graph and every body graph); one record per check
    (``rule_of(info)`` its rule), in the order the graph met them."""
    found: dict[int, AppliedRewrite] = {}
    for module in list(program.graph_module.modules()):
        if not isinstance(module, torch.fx.GraphModule):
            continue
        markers = [node for node in module.graph.nodes if node.op == "call_function" and node.target is OP]
        for node in markers:
            key = node.args[0]
            info = _INFOS[key]
            found.setdefault(key, AppliedRewrite(rule=rule_of(info), tier="control-flow", location=info.location,
                                                 detail="checked in PyTorch only: the ONNX file has no operator "
                                                        "that stops a run",
                                                 data={"construct": info.kind}))
            module.graph.erase_node(node)
        if markers:
            module.recompile()
    return list(found.values())


def warning_for(rule: str, location) -> str:
    """The one-line warning of a check left out of the file."""
    return (f"{CHECKS[rule]} at {location} checks a tensor's value: PyTorch runs it (verification too) but the "
            "ONNX file cannot (ONNX has no operator that stops a run), so on an input that fails it the file "
            "returns values where the model raises; check such inputs before calling the file, or "
            f"--disable {rule} to refuse the model instead")


def warnings_for(records: list[AppliedRewrite], already: list[str] = ()) -> list[str]:
    """The warnings of the left-out checks among ``records`` that ``already`` does not hold."""
    out = []
    for record in records:
        if record.rule in CHECKS:
            text = warning_for(record.rule, record.location)
            if text not in already and text not in out:
                out.append(text)
    return out
