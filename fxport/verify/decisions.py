"""Decisions ONNX Runtime took otherwise than eager on keys within float noise: replayed.

A top-k, a sort, an arg-max, a threshold or an NMS decides *which* values go on; on keys tied
within float32 noise the file may decide otherwise than eager, and everything downstream differs
by whole values. The replay (docs/getting-started.md, "Decisions taken otherwise on tied keys
are replayed"): the exported program's graph must equal eager on the set; ONNX Runtime runs the
file with every decision as an extra output; each decision must be *admissible*, one the op
takes on keys within the comparison's tolerance of the program's own (rules registered with
:func:`decision`, e.g. NMS in rewrites/detection.py); the program then runs with the file's
decisions, and the file's outputs must equal it. Anything else keeps the set failed.

Example::

    >>> import fxport.verify.decision_rules  # the built-in decisions (verify imports them)
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
from typing import Any, Callable

import numpy as np
import onnx
import torch

from fxport.verify.compare import Acceptance, Comparison, compare
from fxport.errors import first_line
from fxport.frames import frames_in

#: ``take(args, kwargs, own, taken, limits) -> (result, problem)``: the node's result with the
#: decision ``taken`` (ONNX Runtime's values, by output index; None: the node's only output)
#: put in place of ``own`` (the program's), and why it is not admissible (None when it is).
Take = Callable[[tuple, dict, Any, dict, Callable], "tuple[Any, str | None]"]


@dataclasses.dataclass(frozen=True)
class DecisionRule:
    """How one op's decision is taken from ONNX Runtime: which outputs hold it, how to judge it."""

    op: str                       #: schema name, e.g. ``aten::topk``
    label: str                    #: for people: ``top-k``
    outputs: tuple                #: the output indices (None: single output) that hold the decision
    take: Take
    floats_only: bool = False     #: a decision only where an argument is a float tensor (comparisons)


_RULES: dict[str, DecisionRule] = {}


def decision(op: str, *, label: str, outputs: tuple = (None,), floats_only: bool = False) -> Callable[[Take], Take]:
    """Register how verification replays ``op``'s decision (module docstring; docs/rules.md,
    "Decisions verification may replay", has an example)."""
    def register(take: Take) -> Take:
        _RULES[op] = DecisionRule(op, label, tuple(outputs), take, floats_only)
        return take
    return register


@dataclasses.dataclass(frozen=True)
class DecisionPoint:
    """A node of the exported program that decides, and the ONNX value names of its decision."""

    node: str
    rule: DecisionRule
    outputs: dict                 #: output index (None: single) → ONNX value name
    where: str                    #: the innermost frame of the node's stack trace, or its name


def decision_points(program: Any) -> list[DecisionPoint]:
    """The deciding nodes of ``program``'s top-level graph (ops registered with :func:`decision`)."""
    points = []
    for node in program.graph_module.graph.nodes:
        rule = _rule_of(node)
        if rule is None:
            continue
        getters = {user.args[1]: user.name for user in node.users if _is_getitem(user)}
        names = {index: (node.name if index is None else getters.get(index)) for index in rule.outputs}
        if all(name is not None for name in names.values()):
            frames = frames_in(node.meta.get("stack_trace"))
            where = f"{frames[-1]}" if frames else node.name
            points.append(DecisionPoint(node.name, rule, names, where))
    return points


def _rule_of(node: torch.fx.Node) -> DecisionRule | None:
    if node.op != "call_function":
        return None
    schema = getattr(getattr(node.target, "_schema", None), "name", None)
    rule = _RULES.get(schema) if schema else None
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

    def __init__(self, program: Any, model: onnx.ModelProto, open_runner: Callable[[Any], Any]):
        """``open_runner(proto or path)``: an :class:`~fxport.verify.verification.OnnxRunner` on the device verified."""
        self.program, self.model, self.open_runner = program, model, open_runner
        self.points: list[DecisionPoint] | None = None  # found on the first set that fails
        self.module: torch.fx.GraphModule | None = None
        self._runner = None

    def _prepare(self) -> None:
        if self.points is None:
            produced = _produced_values(self.model)
            self.points = [p for p in decision_points(self.program) if set(p.outputs.values()) <= produced]
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


# --- helpers for rules that judge a decision --------------------------------------------------

def keys_within(picked: torch.Tensor, own: torch.Tensor, limits: Callable, what: str) -> str | None:
    """Why ``picked`` keys are not ``own`` within the comparison's tolerance (None when they are).

    >>> keys_within(torch.tensor([2.0, 1.0]), torch.tensor([2.0, 1.00001]), lambda d: (1e-4, 1e-3), "top-k keys")
    >>> keys_within(torch.tensor([2.0, 0.5]), torch.tensor([2.0, 1.0]), lambda d: (1e-4, 1e-3), "top-k keys")
    'top-k keys 0.5 where eager has 1 (beyond tolerance)'
    """
    if picked.shape != own.shape:
        return f"{what} have shape {list(picked.shape)} where eager has {list(own.shape)}"
    atol, rtol = limits(own.dtype) if own.dtype.is_floating_point else (0.0, 0.0)
    a, b = picked.double(), own.double()
    outside = (a - b).abs() > atol + rtol * b.abs()
    outside &= ~(torch.isinf(a) & (a == b))
    if not bool(outside.any()):
        return None
    at = outside.nonzero()[0].tolist()
    return f"{what} {a[tuple(at)].item():.6g} where eager has {b[tuple(at)].item():.6g} (beyond tolerance)"


def valid_indices(indices: torch.Tensor, size: int, dim: int) -> str | None:
    """Why ``indices`` are not distinct positions along ``dim`` of a ``size``-long axis."""
    if indices.numel() and (int(indices.min()) < 0 or int(indices.max()) >= size):
        return f"index out of range 0..{size - 1}"
    ordered = indices.sort(dim=dim).values
    if ordered.shape[dim] > 1 and bool((ordered.diff(dim=dim) == 0).any()):
        return "an index picked twice"
    return None
