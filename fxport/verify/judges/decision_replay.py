"""The last judge: decisions the file took otherwise on keys within tolerance, replayed.

A top-k, a sort, a threshold or an NMS whose keys tie within float32 noise may decide otherwise
in the file than in eager, and everything after it differs by whole values. This judge runs the
exported program with the file's decisions in place of its own, where each is one the op takes
on keys within tolerance (:mod:`fxport.verify.decisions`; the ops are the rule set's decision
rules, ``fxport rules`` lists them and ``--disable`` leaves one out), and the file must equal
that run. It takes part when the exporter's program is at hand, the criterion is no cosine one,
and the file is a proto (a second session of a file with external data is a second copy of its
weights).

Example::

    >>> from fxport.verify.compare import Acceptance
    >>> from fxport.verify.judges.base import Bench
    >>> DecisionReplayJudge.open(Bench(Acceptance())) is None    # no program: nothing to replay
    True
"""

from __future__ import annotations

import onnx

from fxport.verify.compare import Acceptance, Comparison
from fxport.verify.decisions import DecisionReplay
from fxport.verify.judges.base import Bench, SetRun


class DecisionReplayJudge:
    """A failed set judged with the file's decisions replayed in the exported program."""

    name = "decision replay"

    def __init__(self, acceptance: Acceptance, replay: DecisionReplay):
        self.acceptance, self.replay = acceptance, replay

    @classmethod
    def open(cls, bench: Bench) -> "DecisionReplayJudge | None":
        if (bench.program is None or bench.acceptance.min_cosine is not None
                or not isinstance(bench.model, onnx.ModelProto) or bench.open_runner is None):
            return None
        return cls(bench.acceptance, DecisionReplay(bench.program, bench.model, bench.open_runner, bench.decisions))

    def judge(self, run: SetRun, failed: Comparison | None) -> Comparison:
        return self.replay.judge(run.inputs, run.expected, run.actual, self.acceptance, failed=failed)
