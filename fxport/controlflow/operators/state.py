"""Session and recording state of the trace-time operators.

A *session* (opened by :func:`fxport.controlflow.convert_control_flow`) says which lowering
strategy applies, which conversions are disabled and where the
:class:`~fxport.report.result.AppliedRewrite` records go. :func:`coverage` collects what converted
statements did when they ran as plain Python, and :func:`probing` marks a loop body run once
outside its loop to learn its types.

Example::

    >>> from fxport.controlflow.operators import state as s
    >>> records = []
    >>> with s.session("cond", records, disabled={"if-to-where"}):
    ...     s.strategy(), s.is_disabled("if-to-where"), s.is_disabled("if-to-cond")
    ('cond', True, False)
    >>> s.strategy()
    'auto'
"""

from __future__ import annotations

import contextlib
import dataclasses

import torch

from fxport.controlflow.operators.rule_names import conversion_named, has_conversion, rule_name
from fxport.report.result import AppliedRewrite


@dataclasses.dataclass
class Session:
    """What one ``convert_control_flow`` block decided: strategy, disabled rules, records."""

    strategy: str = "auto"
    records: list = dataclasses.field(default_factory=list)
    disabled: frozenset = frozenset()
    seen: set = dataclasses.field(default_factory=set)


_SESSION: list[Session] = []


@contextlib.contextmanager
def session(strategy: str, records: list, disabled=frozenset()):
    """Make ``strategy``, ``disabled`` and ``records`` current while converted code runs."""
    _SESSION.append(Session(strategy, records, frozenset(disabled)))
    try:
        yield
    finally:
        _SESSION.pop()


@contextlib.contextmanager
def records_rolled_back_on_failure():
    """Drop the records made in the block when it raises (a capture attempt that is retried)."""
    if not _SESSION:
        yield
        return
    current = _SESSION[-1]
    count, seen = len(current.records), set(current.seen)
    try:
        yield
    except BaseException:
        del current.records[count:]
        current.seen = seen
        raise


def strategy() -> str:
    """The current session's strategy (``"auto"`` outside a session)."""
    return _SESSION[-1].strategy if _SESSION else "auto"


def disabled() -> frozenset:
    """The conversions the current session disabled."""
    return _SESSION[-1].disabled if _SESSION else frozenset()


def is_disabled(rule: str) -> bool:
    """True when the current session disabled the conversion named ``rule``."""
    return bool(_SESSION) and rule in _SESSION[-1].disabled


_COVERAGE: list[list] = []


@contextlib.contextmanager
def coverage():
    """Collect ``(kind, location, outcome)`` for statements run as plain Python (eager).

    Outcome is ``True``/``False`` for an ``if``; for a loop its trip count and how it ended
    (``loops.LEFT_BY_TEST``, ``LEFT_BY_BREAK``, ``LEFT_AT_BOUND``, ``SHRANK``, ``EMPTIED``).
    """
    seen: list = []
    _COVERAGE.append(seen)
    try:
        yield seen
    finally:
        _COVERAGE.pop()


def note(info, outcome) -> None:
    """Add one outcome of a statement run as plain Python to the innermost :func:`coverage`."""
    if _COVERAGE and info is not None:
        _COVERAGE[-1].append((info.kind, info.location, outcome))


_PROBING = [0]  # > 0 while a loop body runs once outside the loop to learn its types
_GROWING: list[frozenset] = []  # the names a grown loop's body, captured on its own, grows


@contextlib.contextmanager
def growing_body(names):
    """Capture the body of a loop whose state grows: ``names`` are the variables it grows."""
    _GROWING.append(frozenset(names))
    try:
        yield
    finally:
        _GROWING.pop()


def grows_in_body(names) -> bool:
    """True when a statement of the grown loop body being captured assigns a growing variable."""
    return bool(_GROWING) and not in_traced_body() and not _GROWING[-1].isdisjoint(names)


@contextlib.contextmanager
def probing():
    """Run a loop body as the loop will (nested ifs select with where), without recording."""
    if torch.compiler.is_dynamo_compiling():  # already in a traced body; no state to change
        yield
        return
    _PROBING[0] += 1
    try:
        with _no_shape_facts():
            yield
    finally:
        _PROBING[0] -= 1


@contextlib.contextmanager
def _no_shape_facts():
    """Keep what a probe's ops teach torch about existing sizes out of the capture.

    A probe is dead code, yet indexing ``order[0]`` in it makes torch assert, and then assume,
    that the unbacked length of ``order`` is at least 1; the loop's own test ``order.numel() >
    0``, asked afterwards on the same state, was then folded to True, and a file whose state
    starts empty (an NMS after a score threshold no box passes) ran its body on nothing in ONNX
    Runtime. The ranges, runtime asserts and axioms of the symbols that existed before the
    probe are put back after it (symbols the probe made keep theirs)."""
    from torch._guards import detect_fake_mode

    env = getattr(detect_fake_mode(), "shape_env", None)
    if env is None:
        yield
        return
    ranges, axioms = dict(env.var_to_range), dict(env.axioms)
    asserts = {key: list(found) for key, found in env.deferred_runtime_asserts.items()}
    try:
        yield
    finally:
        env.var_to_range.update(ranges)
        env.deferred_runtime_asserts.update(asserts)
        for key in [k for k in env.axioms if k not in axioms]:
            del env.axioms[key]
        env._update_version_counter()  # torch's caches of static answers hold the refined ranges


def is_probing() -> bool:
    """True while a loop body runs once outside the loop (:func:`probing`), not under dynamo."""
    return _PROBING[0] > 0 and not torch.compiler.is_dynamo_compiling()


def in_traced_body() -> bool:
    """True inside a body dynamo traces (cond branch, while_loop body) or a loop-body probe."""
    return torch.compiler.is_dynamo_compiling() or _PROBING[0] > 0


def record(info, rule: str, detail: str, **data) -> None:
    """Add one :class:`~fxport.report.result.AppliedRewrite` (once per statement, rule and detail),
    plus a ``<kind>-in-traced-body`` record for each statement nested in ``info``."""
    if not _SESSION or info is None or in_traced_body():
        return
    current = _SESSION[-1]
    key = (id(info), rule, detail)
    if key in current.seen:
        return
    current.seen.add(key)
    payload = {"construct": info.kind, "variables": list(info.names), **data}
    if info.function is not None:
        payload["source_before"] = info.function.before
        payload["source_after"] = info.function.after
    current.records.append(
        AppliedRewrite(rule=rule, tier="control-flow", location=info.location, detail=detail, data=payload)
    )
    outer = getattr(conversion_named(rule), "lowering", rule)  # where, cond, while_loop
    for child in getattr(info, "children", ()):
        if not has_conversion(child.kind, "in-traced-body"):  # a nested assert is no conversion
            continue
        record(child, rule_name(child.kind, "in-traced-body"), f"dispatched inside the {outer} body of line {info.location.lineno}",
               lowering=f"decided while {outer} traced its body (where/while_loop)", carried=list(child.names))
