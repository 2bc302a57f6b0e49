"""Decisions ONNX Runtime took otherwise than eager on keys within float noise: replayed.

A top-k, a sort, an arg-max, a threshold or an NMS decides *which* values go on; on keys tied
within float32 noise the file may decide otherwise than eager, and everything downstream differs
by whole values. The replay (docs/getting-started.md, "Decisions taken otherwise on tied keys
are replayed"): the exported program's graph must equal eager on the set; ONNX Runtime runs the
file with every decision as an extra output; each decision must be *admissible*, one the op
takes on keys within the comparison's tolerance of the program's own (the rule set's decision
rules, :mod:`fxport.rules.decisions`: rewrites/decisions.py, NMS in rewrites/detection.py); the
program then runs with the file's decisions, and the file's outputs must equal it. Anything else
keeps the set failed. The judge that asks for it is :mod:`fxport.verify.judges.decision_replay`.

Example::

    >>> class Top(torch.nn.Module):
    ...     def forward(self, x):
    ...         return x.topk(2).indices
    >>> program = torch.export.export(Top(), (torch.randn(4),))
    >>> [(p.node, p.rule.label, p.outputs) for p in decision_points(program)]
    [('topk', 'top-k', {1: 'getitem_1'})]
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable, Sequence

import numpy as np
import onnx
import torch

from fxport.errors import first_line
from fxport.frames import frames_in
from fxport.rules.decisions import DecisionRule
from fxport.verify.compare import Acceptance, Comparison, compare


@dataclasses.dataclass(frozen=True)
class DecisionPoint:
    """A node of the exported program that decides, and the ONNX value names of its decision."""

    node: str
    rule: DecisionRule
    outputs: dict                 #: output index (None: single) → ONNX value name
    where: str                    #: the innermost frame of the node's stack trace, or its name


def decision_points(program: Any, rules: Sequence[DecisionRule] | None = None) -> list[DecisionPoint]:
    """The deciding nodes of ``program``'s top-level graph: ops a decision rule of ``rules`` covers
    (None: the built-in ones, :func:`builtin_decision_rules`)."""
    by_op = {rule.op: rule for rule in (builtin_decision_rules() if rules is None else rules)}
    points = []
    for node in program.graph_module.graph.nodes:
        rule = _rule_of(node, by_op)
        if rule is None:
            continue
        getters = {user.args[1]: user.name for user in node.users if _is_getitem(user)}
        names = {index: (node.name if index is None else getters.get(index)) for index in rule.outputs}
        if all(name is not None for name in names.values()):
            frames = frames_in(node.meta.get("stack_trace"))
            where = f"{frames[-1]}" if frames else node.name
            points.append(DecisionPoint(node.name, rule, names, where))
    return points


def builtin_decision_rules() -> list[DecisionRule]:
    """The decision rules of the built-in rule set (what a verification without a conversion's
    rule set replays): ``rewrites/decisions.py``, NMS when torchvision is loaded."""
    from fxport.rules.registry import resolve

    return resolve(entry_points=False).of_tier("decision")


def _rule_of(node: torch.fx.Node, by_op: dict[str, DecisionRule]) -> DecisionRule | None:
    if node.op != "call_function":
        return None
    schema = getattr(getattr(node.target, "_schema", None), "name", None)
    rule = by_op.get(schema) if schema else None
    if rule is None or (rule.floats_only and not _compares_floats(node)):
        return None
    return rule


def _is_getitem(node: torch.fx.Node) -> bool:
    import operator

    return node.op == "call_function" and node.target is operator.getitem


def _compares_floats(node: torch.fx.Node) -> bool:
    values = [arg.meta.get("val") for arg in node.args if isinstance(arg, torch.fx.Node)]
    return any(isinstance(v, torch.Tensor) and v.dtype.is_floating_point for v in values)


class DecisionReplay:
    """The replay of one program against one ONNX file (module docstring).

    Built once per verification; the decision points are found and the session that exposes
    them is opened on the first set that needs them.
    """

    def __init__(self, program: Any, model: onnx.ModelProto, open_runner: Callable[[Any], Any],
                 rules: Sequence[DecisionRule] | None = None):
        """``open_runner(proto or path)``: an :class:`~fxport.verify.onnx_runner.OnnxRunner` on the
        device verified; ``rules``: the decision rules replayed (None: the built-in ones)."""
        self.program, self.model, self.open_runner, self.rules = program, model, open_runner, rules
        self.points: list[DecisionPoint] | None = None  # found on the first set that fails
        self.module: torch.fx.GraphModule | None = None
        self._runner = None

    def _prepare(self) -> None:
        if self.points is None:
            produced = _produced_values(self.model)
            self.points = [p for p in decision_points(self.program, self.rules)
                           if set(p.outputs.values()) <= produced]
            self.module = self.program.module() if self.points else None

    def judge(self, inputs: Any, eager_outputs: Any, onnx_outputs: list[np.ndarray],
              acceptance: Acceptance, failed: Comparison) -> Comparison:
        """The set judged with the file's decisions replayed: the replay's comparison (the set's
        notes first), or ``failed`` (the set's own comparison) with a note saying why the replay
        could not clear it."""
        self._prepare()
        if not self.points:
            return failed
        # the program's graph without its guards: torch.onnx's decompositions record guards on the
        # example's side of symbolic min/max the graph still computes symbolically; what the graph
        # computes on these inputs is then compared with eager, guards or not
        try:
            program_outputs = _Replayer(self.module, {}, {}, acceptance.limits).replay(inputs)
        except Exception as failure:  # noqa: BLE001 - any failure keeps the set failed
            return _noted(failed, f"the exported program fails on these inputs ({first_line(failure)}): "
                                  "decisions not replayed")
        if not compare(eager_outputs, _flat_numpy(program_outputs), acceptance).passed:
            return _noted(failed, "the exported program itself differs from eager on these inputs: "
                                  "decisions not replayed")
        outputs, taken = self._run_exposed(inputs, len(onnx_outputs))
        if not compare([torch.from_numpy(np.array(v)) for v in onnx_outputs], outputs, acceptance).passed:
            return _noted(failed, "the file's run with its decisions exposed differs from its own run")
        replayer = _Replayer(self.module, {p.node: p for p in self.points}, taken, acceptance.limits)
        try:
            replayed = replayer.replay(inputs)
        except Exception as refusal:  # noqa: BLE001 - inadmissible, or the program fails on the file's decisions
            return _noted(failed, first_line(refusal))
        result = compare(replayed, onnx_outputs, acceptance)  # the file as it runs, not the exposing copy
        if replayer.taken:
            result.notes.insert(0, f"{len(replayer.taken)} decision(s) ONNX Runtime took otherwise on keys "
                                   f"within tolerance ({'; '.join(replayer.taken)}): compared with the "
                                   "exported program replaying them")
        notes = [note for note in failed.notes if note not in result.notes] + result.notes
        return dataclasses.replace(result, notes=notes) if result.passed else dataclasses.replace(failed, notes=notes)

    def _run_exposed(self, inputs: Any, count: int) -> tuple[list[np.ndarray], dict[str, torch.Tensor]]:
        if self._runner is None:
            self._runner = _exposing_runner(self.model, self.open_runner,
                                            sorted({n for p in self.points for n in p.outputs.values()}))
        values = self._runner.run(inputs)
        names = [o.name for o in self._runner.session.get_outputs()]
        exposed = {name: torch.from_numpy(np.asarray(v)) for name, v in zip(names[count:], values[count:])}
        return values[:count], exposed


class _Inadmissible(Exception):
    """A decision no key within tolerance of the program's would take."""


class _Replayer(torch.fx.Interpreter):
    """The program's module run with each decision point's result taken from ONNX Runtime."""

    def __init__(self, module: torch.fx.GraphModule, points: dict, values: dict, limits: Callable):
        super().__init__(module)
        self.points, self.values, self.limits = points, values, limits
        self.taken: list[str] = []

    def replay(self, inputs: Any) -> Any:
        module = self.module
        copied = inputs.copy()  # the graph may write into its inputs; the caller's stay as they were
        flat = torch.fx._pytree.tree_flatten_spec((copied.args, copied.kwargs), module._in_spec)
        with torch.no_grad():
            outputs = self.run(*flat, enable_io_processing=False)
        return torch.utils._pytree.tree_unflatten(list(outputs), module._out_spec)

    def run_node(self, node: torch.fx.Node) -> Any:
        if node.op == "call_module" and node.target == "_guards_fn":
            return None  # judged by comparing with eager instead (DecisionReplay.judge)
        own = super().run_node(node)
        point = self.points.get(node.name)
        if point is None:
            return own
        taken = {index: self.values[name] for index, name in point.outputs.items()}
        if all(_same_decision(_output(own, index), value) for index, value in taken.items()):
            return own
        args, kwargs = self.fetch_args_kwargs_from_env(node)
        result, problem = point.rule.take(args, kwargs, own, taken, self.limits)
        if problem:
            raise _Inadmissible(f"the file's {point.rule.label} at {point.where} is not one eager takes on "
                                f"keys within tolerance ({problem})")
        self.taken.append(f"{point.rule.label} at {point.where}")
        return result


def _output(result: Any, index: int | None) -> torch.Tensor:
    return result if index is None else result[index]


def _same_decision(own: torch.Tensor, taken: torch.Tensor) -> bool:
    return own.shape == taken.shape and torch.equal(own, taken.to(own.dtype))


def _produced_values(model: onnx.ModelProto) -> set[str]:
    return {name for node in model.graph.node for name in node.output if name}


def _exposing_runner(model: onnx.ModelProto, open_runner: Callable, names: list[str]):
    """A runner on a copy of the file with ``names`` as extra outputs."""
    exposed = copy.deepcopy(model)
    _add_outputs(exposed, names)
    return open_runner(exposed)


def _add_outputs(model: onnx.ModelProto, names: list[str]) -> None:
    present = {o.name for o in model.graph.output}
    for name in names:
        if name not in present:
            model.graph.output.append(onnx.ValueInfoProto(name=name))


def _flat_numpy(outputs: Any) -> list[np.ndarray]:
    from fxport.verify.compare import flatten_outputs, to_numpy

    return [to_numpy(t) for t in flatten_outputs(outputs)]


def _noted(comparison: Comparison, why: str) -> Comparison:
    return dataclasses.replace(comparison, notes=[*comparison.notes, why])
