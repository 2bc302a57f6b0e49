"""The third judge: is a set the fixed tolerances refused as close to a float64 run as eager is?

Eager float32 is not the truth either. When fixed tolerances fail (and the user set none of
their own, and the criterion is no float16 or cosine one), the model runs in float64
(:class:`~fxport.verify.reference.Float64Reference`: exactly, then perturbed by float32 rounding)
and an element of a float32 output passes when the file's distance to that run is within the
fixed tolerance plus :data:`NOISE_FACTOR` × the output's float32 noise
(:func:`judge_against_reference`). A wrong conversion moves the file away from the float64 run,
not only from eager, so it still fails. The row keeps the distances
(:class:`NoiseJudgement`) only where the float64 run judged a float output: a set refused on an
integer output says nothing about float32 noise (no "vs a float64 run" clause there).

Example::

    >>> import numpy as np, torch
    >>> from fxport.eager.inputs import InputSet
    >>> from fxport.verify.compare import Acceptance
    >>> from fxport.verify.judges.base import Bench, SetRun, verdict
    >>> from fxport.verify.judges.tolerance import FixedTolerance
    >>> module, x = torch.nn.Linear(1000, 1), torch.randn(4, 1000)
    >>> onnx = module(x).detach().numpy() + 1e-2      # 1e-2 off: far beyond float32's noise here
    >>> bench = Bench(Acceptance(), module=module, candidates=(InputSet((x,)),))
    >>> chain = [FixedTolerance.open(bench), Float64Noise.open(bench)]
    >>> judged = verdict(SetRun(InputSet((x,)), module(x).detach(), [onnx]), chain)
    >>> judged.passed, round(judged.noise.onnx_error, 3), judged.noise.eager_error < 1e-5
    (False, 0.01, True)
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Sequence

import numpy as np
import torch

from fxport.eager.limits import SECONDS, EagerRunStopped, example_cost, time_limit
from fxport.eager.inputs import InputSet
from fxport.verify.compare import Acceptance, Comparison, compare, flatten_outputs, same_specials
from fxport.verify.judges.base import Bench, SetRun
from fxport.verify.reference import Float64Reference, ReferenceRun

#: The float64 reference of a made-up set (up to four runs of a float64 copy, two of them with
#: every result perturbed in Python) may take this many times the set's eager run before it is
#: stopped ...
REFERENCE_SLOWDOWN = 100
#: ... and at least this many seconds while the conversion measured its example's run
#: (:func:`reference_limit`); without one, at least :data:`~fxport.eager.limits.SECONDS`.
REFERENCE_FLOOR = 10.0


class Float64Noise:
    """A failed set judged against float64 runs of the model (module docstring)."""

    name = "float64 noise"

    def __init__(self, acceptance: Acceptance, reference: Float64Reference):
        self.acceptance, self.reference = acceptance, reference

    @classmethod
    def open(cls, bench: Bench) -> "Float64Noise | None":
        if not judged_by_noise(bench.acceptance) or bench.module is None:
            return None
        return cls(bench.acceptance, Float64Reference(bench.module, probe=repeat_probe(bench.candidates, bench.device)))

    def judge(self, run: SetRun, failed: Comparison | None) -> Comparison:
        result = failed
        truth, stopped = self._truth(run)
        while truth is not None:
            result = judge_against_reference(run.expected, run.actual, truth.outputs, self.acceptance, truth.noise)
            if result.passed or truth.trials >= self.reference.TRIALS:  # a pass stands: more trials only widen
                break
            truth, stopped = self._truth(run, earlier=truth)
        if truth is None and stopped:
            result.notes.append(f"the float64 reference was stopped ({stopped}): judged by the fixed tolerances")
        return result

    def _truth(self, run: SetRun, earlier: ReferenceRun | None = None) -> tuple[ReferenceRun | None, str]:
        """``(the float64 run or None, why it was stopped or "")``: the exact run alone (eager's own
        distance to it is the noise: a file that passes there passes with any perturbed run, which
        only widens it), or ``earlier``'s with one more perturbed run. A reference that runs past its
        limit does not skip the set, whose fixed tolerances failed: the set stays failed."""
        limit = reference_limit(run) if run.bounded else None
        self.reference.prepare()  # the float64 copy is made outside the limit
        try:
            with time_limit(limit) if run.bounded else contextlib.nullcontext():
                if earlier is None:
                    return self.reference.run(run.inputs, trials=0), ""
                return self.reference.perturbed_again(earlier), ""
        except EagerRunStopped as stop:
            return None, stop.describe()


def reference_limit(run: SetRun) -> float:
    """Seconds the float64 reference of the made-up set ``run`` may take: proportional to its
    eager run, as eager's own budget is to the example's (:mod:`fxport.eager.limits`):
    :data:`REFERENCE_SLOWDOWN` × the set's eager seconds (or their estimate from the example's
    run), at least :data:`REFERENCE_FLOOR`. No upper bound: a stopped reference leaves its set
    failed, so a short one would refuse a correct file. Without a measured example (a direct
    ``verify_model``), :data:`~fxport.eager.limits.SECONDS` or the multiple, whichever is longer.

    >>> from fxport.eager.limits import ExampleCost, measured
    >>> run = SetRun(InputSet((torch.ones(10),)), None, [], bounded=True, eager_seconds=0.5)
    >>> with measured(ExampleCost(seconds=0.01, elements=10)):
    ...     reference_limit(run), reference_limit(dataclasses.replace(run, eager_seconds=0.001))
    (50.0, 10.0)
    >>> reference_limit(run)
    60.0
    """
    cost = example_cost()
    if cost is None:
        return max(SECONDS, REFERENCE_SLOWDOWN * run.eager_seconds)
    elements = sum(t.numel() for t in run.inputs.tensors())
    return max(REFERENCE_FLOOR, REFERENCE_SLOWDOWN * (run.eager_seconds or cost.estimate(elements)))


def judged_by_noise(acceptance: Acceptance) -> bool:
    """Fixed user tolerances (--atol/--rtol), float16 and cosine criteria keep their bounds."""
    return (acceptance.atol is None and acceptance.rtol is None
            and acceptance.min_cosine is None and acceptance.tolerance_dtype is None)


def repeat_probe(candidates: Sequence[InputSet], device: str) -> InputSet | None:
    """The input set with the fewest elements and none empty: the float64 reference repeats its
    run there to tell a model that draws random numbers (:class:`Float64Reference`)."""
    filled = [s for s in candidates if all(t.numel() for t in s.tensors())]
    if not filled:
        return None
    probe = min(filled, key=lambda s: sum(t.numel() for t in s.tensors()))
    return probe.to(device) if device != "cpu" else probe


#: A float output whose fixed tolerances fail still passes when its distance to the float64
#: reference is within the fixed tolerance plus this many times the output's float32 noise: the
#: file then computes the model about as well as float32 can (docs/getting-started.md, "Float32 noise is judged against float64").
NOISE_FACTOR = 8.0


@dataclasses.dataclass(frozen=True)
class NoiseJudgement:
    """Distances to a float64 reference run of the model, max over the judged float outputs.

    ``eager_error``: eager float32's own max abs distance to float64; ``onnx_error``: the ONNX
    file's. What passes is decided element by element (:func:`judge_against_reference`). None on a
    verdict where the float64 run judged no output, or none of those that still fail.
    """

    eager_error: float
    onnx_error: float


def judge_against_reference(expected: Any, onnx_outputs: Sequence[Any], reference: Any,
                            acceptance: Acceptance = Acceptance(),
                            noise: Sequence[float] | None = None) -> Comparison:
    """The verdict when fixed tolerances fail: is the ONNX file as close to the truth as eager?

    ``reference`` is the model's output in float64 (same structure as ``expected``). An element
    of a float32 output that the fixed tolerances refuse passes when the file's distance to the
    reference is at most the fixed tolerance plus :data:`NOISE_FACTOR` × the output's float32
    noise: eager float32's own worst distance over that output, or ``noise[i]`` when larger (how far
    float64 runs perturbed by float32 rounding strayed, :mod:`fxport.verify.reference`; eager's single
    summation order may be lucky). The file then computes the model about as well as float32 can
    (ONNX Runtime's kernels sum in other orders, some less accurately). NaN/inf positions must agree with eager or with the reference;
    shapes, counts and integer outputs are judged as before. A wrong conversion moves the file away
    from the reference, not only from eager, so it still fails.

    Example::

        >>> import numpy as np, torch
        >>> truth = torch.linspace(-1000, 1000, 101, dtype=torch.float64)
        >>> noise = torch.randn(101, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
        >>> eager = (truth + 2 * noise).float()             # float32 accumulation error ~2
        >>> onnx = (truth - 2 * noise).float().numpy()      # as far from the truth, the other way
        >>> compare(eager, [onnx]).passed, judge_against_reference(eager, [onnx], truth).passed
        (False, True)
        >>> wrong = onnx.copy(); wrong[50] += 60.0           # one element off by 10x eager's worst error
        >>> judge_against_reference(eager, [wrong], truth).failure().split(" > ")[0]
        'output[0]: |onnx - float64| = 56.6'
    """
    fixed = compare(expected, onnx_outputs, acceptance)
    expected_flat, reference_flat = flatten_outputs(expected), flatten_outputs(reference)
    actual = fixed.compared if fixed.compared is not None else [np.asarray(value) for value in onnx_outputs]
    if len(expected_flat) != len(reference_flat) or len(actual) != len(expected_flat):
        return fixed
    outputs, eager_errors, onnx_errors, judged_failing = [], [0.0], [0.0], False
    for index, (row, ref, want, got) in enumerate(zip(fixed.outputs, reference_flat, expected_flat, actual)):
        level = noise[index] if noise is not None and index < len(noise) else 0.0
        judged = None if row.passed else _judge_one(f"output[{index}]", want, got, ref, acceptance, level)
        if judged is None:
            outputs.append(row)
            continue
        detail, eager_error, onnx_error = judged
        eager_errors.append(eager_error)
        onnx_errors.append(onnx_error)
        judged_failing |= detail != ""
        outputs.append(dataclasses.replace(row, passed=detail == "", structural_ok=True, detail=detail))
    result = Comparison(outputs, fixed.cosine, NoiseJudgement(max(eager_errors), max(onnx_errors)),
                        notes=fixed.notes, compared=actual)
    # the distances speak of float32 noise only where the float64 run judged what still fails (or
    # cleared the set): an integer output refused is no noise, and the row says nothing of float64
    if len(eager_errors) == 1 or not (result.passed or judged_failing):
        result.noise = None
    return result


def _judge_one(name: str, want: torch.Tensor, got: np.ndarray, reference: torch.Tensor,
               acceptance: Acceptance, noise: float = 0.0) -> tuple[str, float, float] | None:
    """``(failure detail or "", eager distance, onnx distance)`` of one float32 output; None when
    the reference cannot judge it (not float32, another shape)."""
    ref = reference.detach().cpu()
    if (want.dtype != torch.float32 or not ref.dtype.is_floating_point
            or tuple(ref.shape) != got.shape or tuple(want.shape) != got.shape):
        return None
    r, e, g = ref.double().numpy(), want.detach().cpu().double().numpy(), got.astype(np.float64)
    if not (same_specials(g, e) or same_specials(g, r)):
        return f"{name}: nan/inf positions differ from eager and from the float64 reference", 0.0, float("inf")
    finite = np.isfinite(r) & np.isfinite(e) & np.isfinite(g)
    r, e, g = r[finite], e[finite], g[finite]
    eager_distance, onnx_distance = np.abs(e - r), np.abs(g - r)
    if not onnx_distance.size:
        return "", 0.0, 0.0
    atol, rtol = acceptance.limits(torch.float32)
    eager_error, onnx_error = float(eager_distance.max()), float(onnx_distance.max())
    scale = max(eager_error, noise)
    limit = atol + rtol * np.abs(r) + NOISE_FACTOR * scale
    if np.all(onnx_distance <= limit):
        return "", eager_error, onnx_error
    worst = int(np.argmax(onnx_distance - limit))
    at = tuple(int(i) for i in np.argwhere(finite)[worst])
    return (f"{name}: |onnx - float64| = {onnx_distance[worst]:.3g} > {atol + rtol * abs(r[worst]):.3g} + "
            f"{NOISE_FACTOR:g} × float32 noise {scale:.3g} at {at} (eager value {e[worst]:.6g}); "
            "rounding noise this large means the output is ill-conditioned in float32, or the file is wrong"), \
        eager_error, onnx_error
