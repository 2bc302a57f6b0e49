"""The first judge: every output position by position under fixed tolerances.

Float outputs pass when ``|onnx - eager| ≤ atol + rtol·|eager|`` with the tolerances of their
dtype (:data:`fxport.verify.compare.TOLERANCES`, the float16 ones for a float16 file, the user's
``--atol``/``--rtol``), NaN/inf at the same positions; integer and bool outputs must be equal;
shapes and the output count must agree. Under a cosine criterion (int8) the outputs pass
together on cosine similarity instead (:func:`fxport.verify.compare.compare_fixed`).

Example::

    >>> import numpy as np, torch
    >>> from fxport.eager.inputs import InputSet
    >>> from fxport.verify.compare import Acceptance
    >>> from fxport.verify.judges.base import Bench, SetRun
    >>> judge = FixedTolerance.open(Bench(Acceptance()))
    >>> run = SetRun(InputSet((torch.ones(1),)), torch.tensor([1.0]), [np.array([1.1], np.float32)])
    >>> judge.judge(run, None).failure()
    'output[0]: |onnx - eager| = 0.1 > 0.0011 at (0,) (eager value 1)'
"""

from __future__ import annotations

from fxport.verify.compare import Acceptance, Comparison, compare_fixed
from fxport.verify.judges.base import Bench, SetRun


class FixedTolerance:
    """Fixed tolerances (or the cosine criterion), nothing paired: the verdict every set gets first."""

    name = "tolerance"

    def __init__(self, acceptance: Acceptance):
        self.acceptance = acceptance

    @classmethod
    def open(cls, bench: Bench) -> "FixedTolerance":
        return cls(bench.acceptance)

    def judge(self, run: SetRun, failed: Comparison | None) -> Comparison:
        return compare_fixed(run.expected, run.actual, self.acceptance)
