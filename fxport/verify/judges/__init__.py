"""The judges of verification, in the order they are asked while a set still fails.

Each judge is one file with one form (:class:`~fxport.verify.judges.base.Judge`: a ``name``,
``open(bench)`` saying whether it takes part in a verification pass, ``judge(run, failed)``
giving its verdict on one set). :data:`JUDGES` is their order, as ``CONVERTERS`` orders the
control-flow converters and ``STAGES`` the pipeline: fixed tolerances first, then tied rows
paired, then float32 noise judged against a float64 run, then decisions replayed. Fixing a
verification false refusal is one judge file and its test; a new clause of the verdict is one
file and one entry here (docs/verification.md).

Example::

    >>> [judge.name for judge in JUDGES]
    ['tolerance', 'tied rows', 'float64 noise', 'decision replay']
"""

from __future__ import annotations

from fxport.verify.judges.base import Bench, Judge, SetRun, verdict
from fxport.verify.judges.decision_replay import DecisionReplayJudge
from fxport.verify.judges.float64_noise import Float64Noise
from fxport.verify.judges.tied_rows import TiedRows
from fxport.verify.judges.tolerance import FixedTolerance

#: The judges, asked in this order while a set still fails.
JUDGES: tuple[type[Judge], ...] = (FixedTolerance, TiedRows, Float64Noise, DecisionReplayJudge)


def open_judges(bench: Bench, judges: tuple[type[Judge], ...] = JUDGES) -> list[Judge]:
    """The judges of one verification pass: those of ``judges`` that take part in it, in order."""
    opened = (judge.open(bench) for judge in judges)
    return [judge for judge in opened if judge is not None]


__all__ = ["JUDGES", "Bench", "Judge", "SetRun", "open_judges", "verdict"]
