"""What verification exercised: the sides of converted ``if``s and the trip counts of loops.

A converted ``if`` becomes an ONNX ``If`` / ``Where`` holding both sides; verification only
proves the sides its input sets took. After the verify stage fxport runs the model's converted
code eagerly on the same input sets and records, per converted construct, the outcomes it saw
(``True`` / ``False`` for an ``if``, trip counts for a loop). For a construct missing an
outcome it searches a bounded set of variations of the example (negated, scaled, shifted,
zeroed values of the numeric inputs outside any special domain) for inputs that reach it; each
set found is verified like any other and named by what it reaches. A variation on which eager
PyTorch itself overflows (inf/NaN in a float output where every given and generated set gave
finite ones) has left the values the model handles and is not used: float32 overflow decides
branches and loop exits by rounding order, which no export reproduces. What is still unreached
is a one-line warning at the user's file:line (an error with ``strict_coverage``).

Example::

    >>> import torch
    >>> from examples.gated_mlp import GatedMLP
    >>> from fxport.engine.pipeline import run
    >>> job = run(GatedMLP(), (torch.full((3, 8), -2.0),), until="capture")
    >>> report = exercise_control_flow(job.model, job.rewrites, job.input_sets, job.example, domains={})
    >>> [c.describe() for c in report.constructs]
    ['if at ...gated_mlp.py:28: took False and True', 'ifexp at ...gated_mlp.py:32: took False and True']
    >>> [s.name for s in report.found_sets]
    ['search: negated values (reaches if at ...gated_mlp.py:28)', 'search: values ×0.1 (reaches ifexp at ...gated_mlp.py:32)']
"""

from __future__ import annotations

import contextlib
import dataclasses
import linecache
import re
from typing import Any, Callable

import torch

from fxport.controlflow.operators.loops.statements import EMPTIED, LEFT_AT_BOUND, LEFT_BY_BREAK, LEFT_BY_TEST, SHRANK
from fxport.controlflow.operators.rule_names import conversion_named
from fxport.verify.inputs.domains import InputDomain
from fxport.eager.limits import SEARCH_TRIPS, EagerRunStopped, time_limit
from fxport.errors import ConversionError, SourceLocation
from fxport.eager.calls import half_the_threads, run_eager
from fxport.eager.inputs import InputSet
from fxport.report.result import AppliedRewrite

#: Variations of a float input tried to reach an untaken side: name → transform.
_VARIATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "negated values": lambda t: -t,
    "values ×10": lambda t: t * 10,
    "values ×0.1": lambda t: t * 0.1,
    "values shifted up": lambda t: t + 3 * _spread(t),
    "values shifted down": lambda t: t - 3 * _spread(t),
    "zeros": torch.zeros_like,
    "absolute values": torch.abs,
    "negative absolute values": lambda t: -t.abs(),
    "values ×100": lambda t: t * 100,
    "values shifted far down": lambda t: t - 30 * _spread(t),
}

_IF_KINDS = ("if", "ifexp")
_LOOP_KINDS = ("for", "while")


@dataclasses.dataclass
class ConstructCoverage:
    """One converted construct and the outcomes the verified input sets gave it: ``True`` /
    ``False`` for an ``if``; for a loop its trip counts and how it ended (``loops.LEFT_BY_TEST``,
    ``LEFT_BY_BREAK``, ``LEFT_AT_BOUND``) and whether a carried tensor shrank or emptied."""

    kind: str
    location: SourceLocation
    outcomes: set = dataclasses.field(default_factory=set)
    least_trips: int = 0  #: a loop over a static non-empty range with a break runs at least once
    has_break: bool = False  #: the loop has a ``break`` (its flag is loop state)

    @property
    def is_loop(self) -> bool:
        return self.kind in _LOOP_KINDS

    @property
    def trips(self) -> set[int]:
        return {o for o in self.outcomes if isinstance(o, int) and not isinstance(o, bool)}

    def missing(self) -> list[str]:
        """What no input set reached: ``["False side"]``, ``["0 iterations", "2+ iterations"]``,
        an exit (``"exit by a break"``) or ``"emptied carried tensor"``."""
        if not self.is_loop:
            return [f"{side} side" for side in (True, False) if side not in self.outcomes]
        wanted = []
        if 0 not in self.trips and self.can_run_zero_times():
            wanted.append("0 iterations")
        if not any(trips >= 2 for trips in self.trips):
            wanted.append("2+ iterations")
        wanted += [f"exit {_EXIT_WORDS[exit]}" for exit in self.exits() if exit not in self.outcomes]
        if SHRANK in self.outcomes and EMPTIED not in self.outcomes:
            wanted.append("emptied carried tensor")
        return wanted

    def exits(self) -> list[str]:
        """The ways this loop can end that are sides to cover: its test turning false after a
        trip (not for ``while True``), its trip bound (a ``for`` with a ``break``), the break."""
        if self.kind == "while":
            exits = [LEFT_BY_TEST] if self.can_run_zero_times() else []
        else:
            exits = [LEFT_AT_BOUND] if self.has_break else []
        return exits + ([LEFT_BY_BREAK] if self.has_break else [])

    def can_run_zero_times(self) -> bool:
        """False for ``while True:`` (``while 1:``): it leaves only through a break, after its
        first iteration; and for ``for _ in range(6):`` with a break on a tensor condition."""
        if self.least_trips > 0:
            return False
        if self.kind != "while":
            return True
        line = linecache.getline(self.location.filename, self.location.lineno).strip()
        return not re.fullmatch(r"while\s*\(?\s*(True|1)\s*\)?\s*:.*", line)

    def reached_by(self, outcomes: set) -> bool:
        """True when ``outcomes`` holds something this construct still misses."""
        if not self.is_loop:
            return bool(outcomes - self.outcomes)
        missing_before = set(self.missing())
        trial = ConstructCoverage(self.kind, self.location, self.outcomes | outcomes, self.least_trips, self.has_break)
        return bool(missing_before - set(trial.missing()))

    def describe(self) -> str:
        if not self.is_loop:
            seen = sorted(self.outcomes, key=str)
            return f"{self.kind} at {self.location}: " + ("took " + " and ".join(map(str, seen)) if seen else "never ran")
        trips = sorted(self.trips)
        what = "ran " + ", ".join(map(str, trips)) + " times" if trips else "never ran"
        ended = [_EXIT_WORDS[e] for e in (LEFT_BY_TEST, LEFT_AT_BOUND, LEFT_BY_BREAK) if e in self.outcomes]
        if ended:
            what += "; ended " + ", ".join(ended)
        if EMPTIED in self.outcomes:
            what += "; a carried tensor emptied"
        return f"{self.kind} at {self.location}: {what}"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "location": str(self.location), "outcomes": sorted(self.outcomes, key=str),
                "missing": self.missing()}


#: exit → how a warning names it
_EXIT_WORDS = {LEFT_BY_TEST: "by its test turning false", LEFT_AT_BOUND: "at its trip bound", LEFT_BY_BREAK: "by a break"}


@dataclasses.dataclass
class ExerciseReport:
    """The converted constructs, the searched input sets that reached more of them, and warnings."""

    constructs: list[ConstructCoverage]
    found_sets: list[InputSet] = dataclasses.field(default_factory=list)
    overflowed: list[str] = dataclasses.field(default_factory=list)  # variations eager overflowed on
    stopped: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # bound hit → variations
    rejected: list[str] = dataclasses.field(default_factory=list)  # made-up sets eager itself raises on

    def warnings(self) -> list[str]:
        """One line per variation whose eager run was stopped, then per construct with an
        outcome no input set reached."""
        skipped = (f" ({', '.join(self.overflowed)} gave inf/NaN in eager PyTorch and were not used)"
                   if self.overflowed else "")
        stopped = [f"coverage: {bound} on {', '.join(names)} (the model may never finish on these "
                   "values); not used" for bound, names in self.stopped.items()]
        return stopped + [f"converted {c.kind} at {c.location} never reached its {' or '.join(c.missing())} on any "
                f"input set{skipped}{self._rejected_clause(c)}: that part of the ONNX model is unverified; add input "
                "sets that reach it with --inputs-fn (or verify_inputs=)" for c in self.constructs if c.missing()]

    def _rejected_clause(self, construct: ConstructCoverage) -> str:
        """Where a loop's 0 iterations may lie only at sizes eager itself raises on (a generator
        at batch 0), say so: those sizes are outside the model's range (verified_ranges.py)."""
        if not self.rejected or not construct.is_loop or not any(m.startswith("0 ") for m in construct.missing()):
            return ""
        return f" eager runs (eager itself raises on {', '.join(self.rejected)}, outside the model's range)"


def exercise_control_flow(
    model: torch.nn.Module,
    records: list[AppliedRewrite],
    input_sets: list[InputSet],
    example: InputSet,
    domains: dict[int, InputDomain],
    strategy: str = "auto",
    budget: int = len(_VARIATIONS),
    disabled: frozenset[str] = frozenset(),
    made_up: list[InputSet] = (),
) -> ExerciseReport:
    """Outcomes of every converted construct on ``input_sets`` and ``made_up`` (sets fxport
    generated: their runs are bounded like the search's, fxport/eager/limits.py), then a search
    for the missing ones.

    ``records`` are the control-flow rewrites of the conversion (which constructs were
    converted); ``budget`` bounds the number of variations tried; ``strategy`` and ``disabled``
    install the conversion exactly as the capture did.
    """
    from fxport.controlflow import convert_control_flow

    constructs = _converted_constructs(records)
    if not constructs:
        return ExerciseReport([])
    report = ExerciseReport(list(constructs.values()))
    always_finite = True
    with convert_control_flow(model, strategy=strategy, disabled=disabled), \
            fewer_threads_for_loops(any(c.is_loop for c in report.constructs)):  # once for every run below
        for input_set, bounded in [(s, False) for s in input_sets] + [(s, True) for s in made_up]:
            try:
                with _search_bounds() if bounded else contextlib.nullcontext():
                    outcomes, outputs = _observe_run(model, input_set)
            except ConversionError:  # a generated size eager rejects: verification left it out too
                if bounded:
                    report.rejected.append(input_set.name.split(" outside")[0])
                continue
            except EagerRunStopped as stop:  # a generated set the model may never finish on (batch 0)
                report.stopped.setdefault(stop.describe(), []).append(f"'{input_set.name}'")
                continue
            _merge(constructs, outcomes)
            always_finite = always_finite and all_finite(outputs)
        for name in list(_VARIATIONS)[:budget]:
            if not any(c.missing() for c in report.constructs):
                break
            candidate = searched_set(example, name, domains)
            if candidate is None:
                continue
            try:
                with _search_bounds():
                    outcomes, outputs = _observe_run(model, candidate)
            except ConversionError:  # eager rejects these values (out of the model's domain)
                continue
            except EagerRunStopped as stop:  # the model may never finish on these values
                report.stopped.setdefault(stop.describe(), []).append(f"'{candidate.name}'")
                continue
            if always_finite and not all_finite(outputs):  # overflowed: outside the values the model handles
                report.overflowed.append(name)
                continue
            reached = [c for key, c in constructs.items() if c.reached_by(outcomes.get(key, set()))]
            if reached:
                candidate.name += " (reaches " + ", ".join(f"{c.kind} at {c.location}" for c in reached) + ")"
                report.found_sets.append(candidate)
                _merge(constructs, outcomes)
    return report


#: Whether :func:`fewer_threads_for_loops` halves the threads (False: all of them, as before issue 50).
HALVE_THREADS_FOR_LOOPS = True


@contextlib.contextmanager
def fewer_threads_for_loops(loops: bool):
    """Half of torch's CPU threads while a model with converted loops runs (put back after), as
    verification's eager runs have (:func:`fxport.verify.verification.cores_shared_with_onnx_runtime`).

    A Python loop runs many small ops, each a parallel region that waits for every thread: on a
    busy machine one descheduled thread stalls each op. TutorialNms at 2048 boxes, 2 cores shared
    with other work: 1.84 s in this pass at 2 threads, 0.29 s at 1 (docs/reliability.md).
    """
    with half_the_threads(loops and HALVE_THREADS_FOR_LOOPS):
        yield


@contextlib.contextmanager
def _search_bounds():
    """Converted loops capped at :data:`SEARCH_TRIPS` iterations, the run at its time budget
    (proportional to the example's eager run: :func:`fxport.eager.limits.budgeted`)."""
    from fxport.controlflow.operators import trip_limit

    with trip_limit(SEARCH_TRIPS), time_limit():
        yield


def observe(model: torch.nn.Module, input_set: InputSet) -> dict[tuple, set]:
    """(kind, file, line) → outcomes of ``model`` run eagerly on ``input_set`` while its
    converted code is installed (inside ``convert_control_flow(model)``)."""
    return _observe_run(model, input_set)[0]


def _observe_run(model: torch.nn.Module, input_set: InputSet) -> tuple[dict[tuple, set], Any]:
    """:func:`observe`'s outcomes and the eager outputs of the same run."""
    from fxport.controlflow import operators as runtime

    outcomes: dict[tuple, set] = {}
    with runtime.coverage() as notes:
        outputs = run_eager(model, input_set)
    for kind, location, outcome in notes:
        outcomes.setdefault((kind, location.filename, location.lineno), set()).add(outcome)
    return outcomes, outputs


def all_finite(outputs: Any) -> bool:
    """True when every floating tensor in ``outputs`` is free of inf and NaN.

    >>> all_finite((torch.ones(2), {"n": 3})), all_finite([torch.tensor([1.0, float("inf")])])
    (True, False)
    """
    return all(bool(torch.isfinite(t).all()) for t in torch.utils._pytree.tree_leaves(outputs)
               if isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()))


def _converted_constructs(records: list[AppliedRewrite]) -> dict[tuple, ConstructCoverage]:
    constructs: dict[tuple, ConstructCoverage] = {}
    for record in records:
        kind = getattr(conversion_named(record.rule), "construct", None)
        if record.tier != "control-flow" or record.location is None or kind not in _IF_KINDS + _LOOP_KINDS:
            continue
        key = (kind, record.location.filename, record.location.lineno)
        construct = constructs.setdefault(key, ConstructCoverage(kind, record.location))
        construct.least_trips = max(construct.least_trips, int(record.data.get("least_trips", 0)))
        construct.has_break = construct.has_break or any(
            str(name).startswith("_fx_break_") for name in record.data.get("variables", ()))
    return constructs


def _merge(constructs: dict[tuple, ConstructCoverage], outcomes: dict[tuple, set]) -> None:
    for key, seen in outcomes.items():
        if key in constructs:
            constructs[key].outcomes |= seen


def searched_set(example: InputSet, name: str, domains: dict[int, InputDomain] | None = None) -> InputSet | None:
    """The input set the search names ``search: <name>`` (e.g. ``"values ×10"``), rebuilt from
    the example; None for an unknown name or an example without free numeric inputs.

    >>> searched_set(InputSet((torch.ones(2),), {}, "example"), "negated values").args
    (tensor([-1., -1.]),)
    """
    transform = _VARIATIONS.get(name)
    return None if transform is None else _vary(example, transform, domains or {}, f"search: {name}")


def _vary(example: InputSet, transform, domains: dict[int, InputDomain], name: str) -> InputSet | None:
    """The example with ``transform`` applied to its free numeric tensors (float, and integer
    ones such as trip counts, rounded back); None when there are none."""
    flat, spec = torch.utils._pytree.tree_flatten((example.args, example.kwargs))
    changed, index, new_flat = False, 0, []
    for value in flat:
        if isinstance(value, torch.Tensor):
            numeric = value.dtype != torch.bool and not value.is_complex()
            if numeric and domains.get(index, InputDomain()) == InputDomain():
                varied = transform(value.detach().to(torch.float64 if not value.is_floating_point() else value.dtype))
                value, changed = varied.round().to(value.dtype) if not value.is_floating_point() else varied, True
            index += 1
        new_flat.append(value)
    if not changed:
        return None
    args, kwargs = torch.utils._pytree.tree_unflatten(new_flat, spec)
    return InputSet(args, kwargs, name)


def _spread(tensor: torch.Tensor) -> Any:
    """A scale for shifting ``tensor``'s values: its standard deviation, or its magnitude, or 1."""
    if tensor.numel() > 1 and float(tensor.std()) > 0:
        return float(tensor.std())
    return max(float(tensor.abs().max()) if tensor.numel() else 1.0, 1.0)
