"""Bounds on the eager runs fxport starts on inputs it made up itself.

Verification's generated input sets and the coverage search's variations are fxport's own
inputs: on them a model's loop may never end (a ``while err > 1e-6:`` Newton iteration on
negated values). Each such run is bounded in time (:func:`time_limit`, the main thread only:
it uses ``SIGALRM``) and, for converted loops run by the coverage search, in iterations
(:data:`SEARCH_TRIPS`, enforced by the loop operators). A run that hits a bound raises
:class:`EagerRunStopped` naming the user's file:line; the caller skips that input set with a
one-line warning. The user's own inputs are never bounded.

The time a run may take is proportional to the example's own eager run (:class:`ExampleCost`,
measured by the eager stage): :data:`BUDGET_MULTIPLE` × the example's seconds × how many times
the example's input elements the set holds, at least :data:`BUDGET_FLOOR`, at most
:data:`SECONDS`. A limit set without seconds (``time_limit()``) is narrowed to that budget when
the model the conversion measured runs (:func:`budgeted`, called by :func:`fxport.eager.calls.run_eager`).
ONNX Runtime's run of a made-up set is bounded by the same budget (:func:`onnx_runtime_limit`,
applied by :class:`fxport.verify.isolated.ChildSession`), and the float64 reference of one by a
multiple of the set's eager run (:mod:`fxport.verify.judges.float64_noise`).

Example::

    >>> import time
    >>> try:
    ...     with time_limit(0.05):
    ...         while True:
    ...             time.sleep(0.01)
    ... except EagerRunStopped as stop:
    ...     print(stop.what)
    eager PyTorch ran past 0.05 s
    >>> cost = ExampleCost(seconds=0.01, elements=100)   # the example: 100 elements, 10 ms
    >>> cost.budget(100), cost.budget(1_000), cost.budget(100_000)
    (2.0, 2.0, 60.0)
    >>> cost.budget(20_000), cost.describe(20_000)
    (40.0, "20× the example's 10 ms × 200 for its inputs' size")
    >>> cost.describe(500)
    "at least 2 s; 20× the example's 10 ms × 5 for its inputs' size is less"
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import threading
import time
import traceback
import weakref
from typing import Any, Callable

from fxport.common.frames import SourceLocation, user_location_from_stack

#: Seconds an eager run on a generated or searched input set may take, at most.
SECONDS = 60.0
#: Iterations a converted loop may run on an input set the coverage search made up.
SEARCH_TRIPS = 10_000
#: Budgets proportional to the example's run (False: the flat :data:`SECONDS` and the declared
#: maximum size, as before issue 50; benchmarks/verify_cost.py compares the two).
PROPORTIONAL = True
#: A made-up set's run may take this many times its estimated eager run (the example's seconds
#: × the set's size ratio): a loop's run grows faster than its inputs (NMS, 12 → 4092 boxes:
#: 550× the example for 341× the elements), converted code runs slower than the original, and
#: the machine's load changes between the example's run and the set's.
BUDGET_MULTIPLE = 20
#: No budget is shorter (a pause of the collector or the scheduler is no endless loop).
BUDGET_FLOOR = 2.0
#: A model with converted loops runs a made-up size whose estimated eager run is at most this
#: many seconds, or :data:`LARGE_SET_EXAMPLES` example runs when that is more
#: (:func:`fxport.verify.inputs.sizes.edge_sizes` halves a declared maximum until one is). A
#: set runs twice in eager (verification, coverage), and a long run slows far more than a short
#: one on a loaded machine (NMS at 4092 boxes, coverage: 1.2 s alone, 15 s beside two busy
#: processes, while the example's 1.5 ms run did not slow): docs/reliability.md.
LARGE_SET_SECONDS = 0.25
LARGE_SET_EXAMPLES = 4


class EagerRunStopped(BaseException):
    """An eager run on fxport's own inputs hit a bound (a BaseException, so neither the model's
    ``except Exception`` nor fxport's eager-failure handling swallows it)."""

    def __init__(self, what: str, where: SourceLocation | None):
        super().__init__(what)
        self.what, self.where = what, where

    def describe(self) -> str:
        """``"the while loop ran past 10000 iterations at net.py:6"``."""
        return f"{self.what}{f' at {self.where}' if self.where else ''}"


@dataclasses.dataclass
class ExampleCost:
    """The example's eager run (``seconds``, over ``elements`` input elements), which budgets and
    made-up sizes are measured against; ``model`` and ``example`` say whose (weakly held),
    ``rewrites`` are the conversion's records (which loops it converted), ``notes`` its warnings."""

    seconds: float
    elements: int
    model: Callable[[], Any] = lambda: None
    example: Callable[[], Any] = lambda: None
    rewrites: list = dataclasses.field(default_factory=list)
    notes: list | None = None

    @classmethod
    def of(cls, model, example, seconds: float, **fields) -> "ExampleCost":
        """The cost of ``model``'s run on ``example`` (an InputSet), holding neither alive."""
        elements = sum(t.numel() for t in example.tensors())
        return cls(seconds, elements, _weakly(model), _weakly(example), **fields)

    def ratio(self, elements: int) -> float:
        """How many times the example's input elements ``elements`` is (at least 1)."""
        return max(1.0, elements / max(self.elements, 1))

    def estimate(self, elements: int) -> float:
        """Seconds an eager run on ``elements`` input elements is expected to take."""
        return self.seconds * self.ratio(elements)

    def budget(self, elements: int) -> float:
        """Seconds a run on ``elements`` input elements may take: :data:`BUDGET_MULTIPLE` ×
        :meth:`estimate`, at least :data:`BUDGET_FLOOR`, at most :data:`SECONDS`."""
        return min(SECONDS, max(BUDGET_FLOOR, BUDGET_MULTIPLE * self.estimate(elements)))

    def describe(self, elements: int) -> str:
        """Why the budget is what it is: ``"20× the example's 1.0 ms × 341 for its inputs' size"``."""
        why = f"{BUDGET_MULTIPLE}× the example's {seconds_text(self.seconds)}"
        ratio = self.ratio(elements)
        why += f" × {ratio:.3g} for its inputs' size" if ratio > 1 else ""
        if BUDGET_MULTIPLE * self.estimate(elements) < BUDGET_FLOOR:
            why = f"at least {seconds_text(BUDGET_FLOOR)}; {why} is less"
        return why

    def affordable_seconds(self) -> float:
        """The estimated eager seconds a made-up large size of a model with loops may cost."""
        return max(LARGE_SET_SECONDS, LARGE_SET_EXAMPLES * self.seconds)


def _weakly(value: Any) -> Callable[[], Any]:
    try:
        return weakref.ref(value)
    except TypeError:  # not weakly referable: held
        return lambda: value


_measured: ExampleCost | None = None  # set only while a stage runs under measured()


@contextlib.contextmanager
def measured(cost: ExampleCost | None):
    """Budget eager runs from ``cost`` (the conversion's ``example_cost``, which the eager stage
    adds) while the body runs: the verify and coverage stages run under it; outside, nothing is
    budgeted."""
    global _measured
    previous, _measured = _measured, cost
    try:
        yield
    finally:
        _measured = previous


def example_cost(*, model: Any = None, example: Any = None) -> ExampleCost | None:
    """The recorded :class:`ExampleCost` when it is ``model``'s (and ``example``'s), else None
    (always None without :data:`PROPORTIONAL`)."""
    cost = _measured
    if cost is None or not PROPORTIONAL:
        return None
    if (model is not None and cost.model() is not model) or (example is not None and cost.example() is not example):
        return None
    return cost


def onnx_runtime_limit(limit: float | None, elements: int) -> float | None:
    """The seconds ONNX Runtime's run of a made-up set (``limit``: its caller's flat bound; None:
    the user's own set, never bounded) may take: ``limit`` narrowed to the run's budget
    (:meth:`ExampleCost.budget`) while a conversion's example cost is measured (:func:`measured`).

    >>> with measured(ExampleCost(seconds=0.01, elements=100)):
    ...     onnx_runtime_limit(60.0, 1_000), onnx_runtime_limit(None, 1_000)
    (2.0, None)
    >>> onnx_runtime_limit(60.0, 1_000)   # nothing measured: the caller's bound
    60.0
    """
    cost = example_cost()
    return limit if limit is None or cost is None else min(limit, cost.budget(elements))


def seconds_text(seconds: float) -> str:
    """``"2 s"``, ``"0.35 s"``, ``"1.2 ms"``."""
    return f"{seconds:.2g} s" if seconds >= 0.1 else f"{seconds * 1e3:.2g} ms"


@dataclasses.dataclass
class _Running:
    """A time limit running on the main thread: what its stop says, and whether it may be
    narrowed to a run's budget (set without seconds)."""

    seconds: float
    started: float
    what: str
    proportional: bool


_running: list[_Running] = []  # the main thread's limits, the innermost last


@contextlib.contextmanager
def time_limit(seconds: float | None = None):
    """Raise :class:`EagerRunStopped` in the body after ``seconds`` (default :data:`SECONDS`, read
    when called, and narrowed to a run's budget by :func:`budgeted`; no bound off the main thread)."""
    proportional = seconds is None and PROPORTIONAL
    seconds = SECONDS if seconds is None else seconds
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return
    running = _Running(seconds, time.monotonic(), f"eager PyTorch ran past {seconds:g} s", proportional)

    def stop(signum, frame):
        raise EagerRunStopped(running.what, user_location_from_stack(traceback.extract_stack(frame)))

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    _running.append(running)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        _running.remove(running)


@contextlib.contextmanager
def budgeted(model: Any, elements: int):
    """While the body runs ``model`` on ``elements`` input elements, a :func:`time_limit` set
    without seconds stops it at the run's budget (:meth:`ExampleCost.budget`, when the
    conversion measured ``model`` and that is sooner), its stop naming the budget and why.
    Nothing changes outside such a limit: the user's own inputs are never bounded.

    See the module's example for the budget's wording.
    """
    running = _running[-1] if _running and threading.current_thread() is threading.main_thread() else None
    cost = example_cost(model=model) if running is not None and running.proportional else None
    if cost is None:
        yield
        return
    left = running.seconds - (time.monotonic() - running.started)
    budget = cost.budget(elements)
    if budget >= left:
        yield
        return
    what, started = running.what, time.monotonic()
    running.what = f"eager PyTorch ran past {seconds_text(budget)} ({cost.describe(elements)})"
    signal.setitimer(signal.ITIMER_REAL, budget)
    finished = False
    try:
        yield
        finished = True
    finally:
        running.what = what
        # the rest of the enclosing limit, re-armed; a stopped run's caller leaves that limit
        signal.setitimer(signal.ITIMER_REAL, max(left - (time.monotonic() - started), 1e-3) if finished else 0)


@contextlib.contextmanager
def time_limit_unless_bounded(seconds: float | None = None):
    """:func:`time_limit` where no limit is running yet (the block gets True); under one already
    running, that one bounds the block and none is set (False): a second timer would cancel the
    first, and the caller tells whose stop it caught by the value."""
    running = (threading.current_thread() is threading.main_thread() and hasattr(signal, "getitimer")
               and signal.getitimer(signal.ITIMER_REAL)[0] > 0)
    if running:
        yield False
        return
    with time_limit(seconds):
        yield True


@contextlib.contextmanager
def terminated_after(run_options, seconds: float | None):
    """Set ONNX Runtime's ``run_options.terminate`` after ``seconds`` (None: never) while the
    body runs: the same bound for ONNX Runtime's run of those inputs (a signal cannot stop
    native code)."""
    if seconds is None:
        yield
        return
    timer = threading.Timer(seconds, setattr, (run_options, "terminate", True))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
