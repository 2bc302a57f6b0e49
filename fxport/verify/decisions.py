"""Decisions ONNX Runtime took otherwise than eager on keys within float noise: replayed.

A top-k, a sort, an arg-max, a threshold or an NMS decides *which* values go on; on keys tied
within float32 noise the file may decide otherwise than eager, and everything downstream differs
by whole values. The replay (docs/getting-started.md, "Decisions taken otherwise on tied keys
are replayed"): the exported program's graph must equal eager on the set; ONNX Runtime runs the
file with every decision as an extra output; each decision must be *admissible*, one the op
takes on keys within the comparison's tolerance of the program's own (the rule set's decision
rules, :mod:`fxport.rules.decisions`: rewrites/decisions.py, NMS in rewrites/detection.py); the
program then runs with the file's decisions, and the file's outputs must equal it. Where float32
noise beyond the fixed tolerances stands in the way (of a decision's keys, or of the outputs after
the decisions), the program also runs in float64 with the file's decisions and judges both as the
float64 judge judges a set (docs/verification.md, "Decisions on weights nobody conditioned").
Each replayed decision is named with its margin (how far apart the keys it decided otherwise
were). Anything else keeps the set failed. The judge that asks for it is :mod:`fxport.verify.judges.decision_replay`.

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
from fxport.common.frames import frames_in
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
        replayer, replayed, result = self._replayed(inputs, onnx_outputs, taken, acceptance)
        if isinstance(result, Exception):
            return _noted(failed, first_line(result))
        if replayer.taken:
            result.notes.insert(0, f"{len(replayer.taken)} decision(s) ONNX Runtime took otherwise on keys "
                                   f"within tolerance ({'; '.join(replayer.taken)}): compared with the "
                                   "exported program replaying them")
        notes = [note for note in failed.notes if note not in result.notes] + result.notes
        return dataclasses.replace(result, notes=notes) if result.passed else dataclasses.replace(failed, notes=notes)

    def _replayed(self, inputs: Any, onnx_outputs: list[np.ndarray], taken: dict[str, torch.Tensor],
                  acceptance: Acceptance) -> tuple["_Replayer", Any, "Comparison | Exception"]:
        """``(replayer, its outputs, their comparison with the file's or why there is none)``.

        First with the comparison's fixed tolerances. Where they refuse (a decision's keys, or
        the outputs after the decisions) and float32 noise is judged against float64
        (:func:`~fxport.verify.judges.float64_noise.judged_by_noise`), the program also runs in
        float64 with the file's decisions (its truth): a decision is then admissible on keys
        within the fixed tolerance plus ``NOISE_FACTOR`` × their own float32 noise (the float32
        keys' largest distance to the float64 ones), and the outputs after the decisions are
        judged against the truth as the float64 judge judges a set (RetinaNet's boxes after 4
        replayed decisions: 0.0065 px from the truth, where float32 itself is 0.0045 px off)."""
        from fxport.verify.judges.float64_noise import judge_against_reference, judged_by_noise

        points = {p.node: p for p in self.points}
        replayer = _Replayer(self.module, points, taken, acceptance.limits)
        try:
            replayed = replayer.replay(inputs)
        except _Inadmissible as refusal:
            replayed, result = None, refusal
        except Exception as failure:  # noqa: BLE001 - the program fails on the file's decisions
            return replayer, None, failure
        else:
            result = compare(replayed, onnx_outputs, acceptance)  # the file as it runs, not the exposing copy
        if not isinstance(result, Exception) and result.passed or not judged_by_noise(acceptance):
            return replayer, replayed, result
        truth = self._float64_replay(inputs, points, taken, acceptance)
        if isinstance(truth, Exception):
            return replayer, replayed, _noted(result, f"the float64 replay fails ({first_line(truth)})") \
                if not isinstance(result, Exception) else result
        if isinstance(result, Exception):  # a key refused by the fixed tolerance: again, with its noise
            replayer = _Replayer(self.module, points, taken, acceptance.limits, reference=truth)
            try:
                replayed = replayer.replay(inputs)
            except Exception as refusal:  # noqa: BLE001 - inadmissible even so
                return replayer, None, refusal
            result = compare(replayed, onnx_outputs, acceptance)
            if result.passed:
                return replayer, replayed, result
        judged = judge_against_reference(replayed, onnx_outputs, truth.outputs, acceptance)
        if not judged.passed:
            return replayer, replayed, result
        if judged.noise is not None:
            judged.notes.append(f"after them, judged against the program replayed in float64: the file "
                                f"{judged.noise.onnx_error:.2g} from it, the program's float32 replay "
                                f"{judged.noise.eager_error:.2g}")
        return replayer, replayed, judged

    def _float64_replay(self, inputs: Any, points: dict, taken: dict[str, torch.Tensor],
                        acceptance: Acceptance) -> "_Replayer | Exception":
        """The program run in float64 with the file's decisions (admissible or not: what they lead
        to, computed exactly; where a rule cannot take one, the program's own, which only moves
        this truth away from the file), its outputs and its decisions' keys kept; or why it
        cannot run."""
        limits = lambda dtype: acceptance.limits(torch.float32 if dtype == torch.float64 else dtype)  # noqa: E731
        truth = _Replayer(self.module, points, taken, limits, widened=True)
        try:
            truth.outputs = truth.replay(inputs.map_tensors(lambda _, t: _widened(t)))
        except Exception as failure:  # noqa: BLE001 - no float64 truth: the fixed verdict stands
            return failure
        return truth

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

    def __init__(self, module: torch.fx.GraphModule, points: dict, values: dict, limits: Callable,
                 widened: bool = False, reference: "_Replayer | None" = None):
        """``widened``: the program computed in float64 (its float32 weights, constants and dtype
        arguments widened; the caller widens the inputs), the file's decisions taken whether
        admissible or not, its decision points' float arguments kept (``keys``); ``reference``:
        such a float64 run, whose keys' distance to this run's widens each decision's tolerance
        by ``NOISE_FACTOR`` × that float32 noise."""
        super().__init__(module)
        self.points, self.values, self.limits, self.widened = points, values, limits, widened
        self.reference = reference
        self.taken: list[str] = []
        self.keys: dict[str, list[torch.Tensor]] = {}
        self.outputs: Any = None

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
        if self.widened and node.op == "get_attr":
            own = torch.utils._pytree.tree_map(_widened, own)
        point = self.points.get(node.name)
        if point is None:
            return own
        taken = {index: self.values[name] for index, name in point.outputs.items()}
        args, kwargs = self.fetch_args_kwargs_from_env(node)
        if self.widened:
            self.keys[node.name] = _float_tensors(args)
        if all(_same_decision(_output(own, index), value) for index, value in taken.items()):
            return own
        noise = _keys_noise(_float_tensors(args), self.reference.keys.get(node.name)) if self.reference else 0.0
        limits = self.limits if not noise else _widened_limits(self.limits, noise)
        result, problem, *margin = point.rule.take(args, kwargs, own, taken, limits)
        apart = f", keys {margin[0]:.2g} apart" if margin and margin[0] is not None else ""
        apart += f" (their float32 noise: {noise:.2g})" if noise else ""
        if problem and not self.widened:  # the float64 truth follows the file wherever a rule can
            raise _Inadmissible(f"the file's {point.rule.label} at {point.where} is not one eager takes on "
                                f"keys within tolerance ({problem}{apart})")
        self.taken.append(f"{point.rule.label} at {point.where}{apart}")
        return result

    def call_function(self, target: Any, args: tuple, kwargs: dict) -> Any:
        if self.widened:  # a float32 the graph names (a cast, a constructor) is float64 here
            args, kwargs = torch.utils._pytree.tree_map(_float64_dtype, (args, kwargs))
        return super().call_function(target, args, kwargs)


def _float_tensors(args: Any) -> list[torch.Tensor]:
    return [a for a in torch.utils._pytree.tree_leaves(args) if isinstance(a, torch.Tensor) and a.dtype.is_floating_point]


def _keys_noise(keys: list[torch.Tensor], exact: list[torch.Tensor] | None) -> float:
    """The largest distance of a decision's float32 keys to the float64 run's (0.0 where they
    cannot be paired): their float32 noise."""
    if not exact or len(exact) != len(keys):
        return 0.0
    noise = 0.0
    for key, truth in zip(keys, exact):
        if key.shape != truth.shape or not key.numel():
            continue
        distance = (key.double() - truth.double()).abs()
        finite = torch.isfinite(distance)
        if bool(finite.any()):
            noise = max(noise, float(distance[finite].max()))
    return noise


def _widened_limits(limits: Callable, noise: float) -> Callable:
    """``limits`` with ``NOISE_FACTOR`` × ``noise`` added to the absolute tolerance (the float64
    judge's allowance for an output, :data:`~fxport.verify.judges.float64_noise.NOISE_FACTOR`)."""
    from fxport.verify.judges.float64_noise import NOISE_FACTOR

    def widened(dtype: torch.dtype) -> tuple[float, float]:
        atol, rtol = limits(dtype)
        return atol + NOISE_FACTOR * noise, rtol
    return widened


def _widened(value: Any) -> Any:
    return value.double() if isinstance(value, torch.Tensor) and value.dtype == torch.float32 else value


def _float64_dtype(value: Any) -> Any:
    return torch.float64 if value is torch.float32 else value


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
