"""The one form every judge of verification has, and the chain that asks them in order.

A judge looks at one input set both sides ran (:class:`SetRun`) and the verdict so far (None
for the first judge), and returns a verdict (a :class:`~fxport.verify.compare.Comparison`). The
chain (:func:`verdict`) asks the judges of :data:`fxport.verify.judges.JUDGES` in order while the
set still fails: a later judge only ever sees a set the earlier ones refused, and returns either
a passing verdict or the failed one, with a note saying why it could not clear it.

A judge is opened once per verification pass (:class:`Bench`: the plan's acceptance, the module
on the device, the file), and says there whether it takes part: ``open(bench)`` returns None
when it does not (no float64 judge under fixed user tolerances, no decision replay without a
program).

Example::

    >>> import numpy as np, torch
    >>> from fxport.verify.compare import Acceptance
    >>> from fxport.verify.judges import open_judges
    >>> chain = open_judges(Bench(Acceptance()))
    >>> [judge.name for judge in chain]
    ['tolerance', 'tied rows']
    >>> run = SetRun(InputSet((torch.ones(2),)), torch.tensor([1.0, 2.0]), [np.array([1.0, 2.00001], np.float32)])
    >>> verdict(run, chain).passed
    True
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, ClassVar, Iterable, Protocol

import torch

from fxport.eager.inputs import InputSet
from fxport.verify.compare import Acceptance, Comparison


@dataclasses.dataclass(frozen=True)
class SetRun:
    """One input set both sides ran: what a judge reads.

    Attributes:
        inputs: the set as eager and ONNX Runtime ran it (on the device).
        expected: eager's outputs; ``actual``: ONNX Runtime's (flat, numpy).
        bounded: inputs fxport made up, whose further runs are limited in time.
        eager_seconds: how long eager ran the set (a judge's own runs are limited by it).
    """

    inputs: InputSet
    expected: Any
    actual: list
    bounded: bool = False
    eager_seconds: float = 0.0


@dataclasses.dataclass(frozen=True)
class Bench:
    """What the judges of one verification pass may use, given once when they are opened.

    Attributes:
        acceptance: the pass's criteria (tolerances, cosine, sort keys).
        module: the eager module on the device (the float64 judge copies it).
        model: the file verified (a proto, or a path for external data).
        candidates: every input set of the pass (the float64 judge repeats its run on the smallest).
        device: where both sides run.
        program: the program the exporter translated (the decision replay runs it); None: no replay.
        decisions: the decision rules replayed (None: the built-in ones).
        open_runner: ``open_runner(proto)``, an ONNX Runtime session on the device (the replay's).
    """

    acceptance: Acceptance
    module: torch.nn.Module | None = None
    model: Any = None
    candidates: tuple = ()
    device: str = "cpu"
    program: Any = None
    decisions: tuple | None = None
    open_runner: Callable[[Any], Any] | None = None


class Judge(Protocol):
    """One judge: a name, how it joins a verification (``open``), and its verdict on one set."""

    name: ClassVar[str]

    @classmethod
    def open(cls, bench: Bench) -> "Judge | None":
        """The judge for one verification pass, or None when it takes no part in it."""

    def judge(self, run: SetRun, failed: Comparison | None) -> Comparison:
        """The verdict on ``run``; ``failed``: what the earlier judges concluded (None: the first)."""


def verdict(run: SetRun, chain: Iterable[Judge]) -> Comparison:
    """The judges of ``chain`` asked in order while the set still fails; the last verdict."""
    result: Comparison | None = None
    for judge in chain:
        if result is not None and result.passed:
            break
        result = judge.judge(run, result)
    if result is None:
        raise ValueError("a verification needs at least one judge")
    return result
