"""The second judge: rows of outputs a sort orders, paired where their sort keys tie.

Two detections whose scores are equal within tolerance may come out of ONNX Runtime in the other
order; compared position by position their boxes differ by a whole box. This judge pairs the
rows inside each run of tied keys (:mod:`fxport.verify.ties`: keys are sorted 1-D float outputs
a sort, top-k or NMS feeds in the program) and compares again; the row's note says what moved.
Rows never cross a key that differs, so a wrong order still fails. Not under a cosine criterion.

Example::

    >>> import numpy as np, torch
    >>> from fxport.eager.inputs import InputSet
    >>> from fxport.verify.compare import Acceptance
    >>> from fxport.verify.judges.base import Bench, SetRun, verdict
    >>> from fxport.verify.judges.tolerance import FixedTolerance
    >>> eager = ({"scores": torch.tensor([0.9, 0.50001, 0.5]), "labels": torch.tensor([1, 2, 3])},)
    >>> onnx = [np.array([0.9, 0.5, 0.50001], np.float32), np.array([1, 3, 2])]
    >>> chain = [FixedTolerance.open(Bench(Acceptance())), TiedRows.open(Bench(Acceptance()))]
    >>> verdict(SetRun(InputSet(()), eager, onnx), chain).passed
    True
"""

from __future__ import annotations

from fxport.verify.compare import Acceptance, Comparison, compare_tied
from fxport.verify.judges.base import Bench, SetRun


class TiedRows:
    """A failed set compared again with the rows of tied sort keys paired."""

    name = "tied rows"

    def __init__(self, acceptance: Acceptance):
        self.acceptance = acceptance

    @classmethod
    def open(cls, bench: Bench) -> "TiedRows | None":
        return cls(bench.acceptance) if bench.acceptance.min_cosine is None else None

    def judge(self, run: SetRun, failed: Comparison | None) -> Comparison:
        return compare_tied(run.expected, failed, self.acceptance)
