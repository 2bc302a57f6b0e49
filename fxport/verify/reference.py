"""The float64 reference run: the truth both eager float32 and the ONNX file are judged by when
fixed tolerances fail (docs/getting-started.md, "Float32 noise is judged against float64").

:class:`Float64Reference` runs a float64 copy of the model exactly, and a few times with every
floating result perturbed by float32's unit roundoff (:class:`RoundingNoise`, Monte Carlo
arithmetic). The perturbed runs say how far float32 arithmetic may carry an output from the exact
result: a scale that does not depend on how lucky eager's own summation order was on one element.

Example::

    >>> import torch
    >>> from fxport.eager.inputs import InputSet
    >>> ref = Float64Reference(torch.nn.Linear(2, 1))
    >>> run = ref.run(InputSet((torch.ones(1, 2),)))
    >>> run.outputs.dtype, len(run.noise)
    (torch.float64, 1)
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import torch
import torch.utils._pytree as pytree

from fxport.verify.compare import flatten_outputs
from fxport.eager.inputs import InputSet
from fxport.eager.calls import run_eager
from fxport.eager.limits import EagerRunStopped, time_limit_unless_bounded


@dataclasses.dataclass
class ReferenceRun:
    """``outputs``: the model's outputs in float64; ``noise``: per flattened output, the largest
    distance of a float32-rounding-perturbed run to them (0.0 for non-float outputs), over
    ``trials`` perturbed runs on ``inputs`` (widened to float64)."""

    outputs: Any
    noise: list[float]
    trials: int = 0
    inputs: InputSet | None = None


class Float64Reference:
    """A float64 copy of ``module``, made on first use; a model that cannot run in float64 (a
    dtype check, an op without a float64 kernel) gives no reference (``run`` returns None), and
    neither does a model whose float64 output changes from run to run (it draws random numbers:
    a spread of draws is no rounding noise). The caller's random state is left as it was."""

    #: Perturbed runs per input set, at most: more trials only widen the noise, so a verdict
    #: that passes after fewer stands (:meth:`perturbed_again`).
    TRIALS = 2

    def __init__(self, module: torch.nn.Module, probe: InputSet | None = None):
        """``probe``: a small input set whose float64 run is repeated to tell whether the model
        draws random numbers, before its first truth is trusted (an image set at a fraction of
        the example's cost); None, or a probe the model cannot run or that gives no values,
        repeats the first set asked instead."""
        self._module = module
        self._probe = probe
        self._double: torch.nn.Module | None = None
        self._broken = False
        self._repeatable = False  # two runs on one set gave the same outputs

    def prepare(self) -> None:
        """Make the float64 copy now (a caller's time limit then bounds the runs alone); a model
        that cannot become float64 gives no reference."""
        if self._double is None and not self._broken:
            try:
                self._double = copy.deepcopy(self._module).double()
            except Exception:  # noqa: BLE001 - as in run(): no reference, fixed verdict
                self._broken = True

    def run(self, inputs: InputSet, trials: int = TRIALS) -> ReferenceRun | None:
        """The exact float64 run on ``inputs`` (float32 tensors cast up) and ``trials`` perturbed
        ones, or None."""
        if self._broken:
            return None
        try:
            if self._double is None:
                self._double = copy.deepcopy(self._module).double()
            widened = _widened(inputs)
            with torch.random.fork_rng():
                exact = run_eager(self._double, widened)
                if not self._repeatable:  # asked once: a model that draws random numbers draws them on every set
                    if not self._repeats(exact, widened):  # no truth for this model
                        self._broken = True
                        return None
                    self._repeatable = True
        except Exception:  # noqa: BLE001 - any failure only means: no reference, fixed verdict
            self._broken = True
            return None
        run: ReferenceRun | None = ReferenceRun(exact, [0.0] * len(flatten_outputs(exact)), 0, widened)
        while run is not None and run.trials < trials:
            run = self.perturbed_again(run)
        return run

    def _repeats(self, exact: Any, widened: InputSet) -> bool:
        """A second float64 run gives the same outputs: on the probe (run twice) when it runs and
        gives values, else on ``widened`` (run once more, against ``exact``)."""
        probed = self._probe_runs() if self._probe is not None else None
        if probed is not None:
            return _identical(*probed)
        return _identical(exact, run_eager(self._double, widened))

    def _probe_runs(self) -> tuple[Any, Any] | None:
        """The probe's two float64 runs; None when the model rejects the probe, gives no values
        there, or runs past the eager time limit on it (its values are made up). Under a limit
        already set (a generated set's), that limit bounds both runs and ends the reference."""
        probe = _widened(self._probe)
        own_limit = False
        try:
            with time_limit_unless_bounded() as own_limit:
                first = run_eager(self._double, probe)
                if not any(t.numel() for t in flatten_outputs(first)):
                    return None
                return first, run_eager(self._double, probe)
        except EagerRunStopped:
            if not own_limit:
                raise
            return None
        except Exception:  # noqa: BLE001 - a size the model rejects: the set asked is repeated instead
            return None

    def perturbed_again(self, run: ReferenceRun) -> ReferenceRun | None:
        """``run`` with one more perturbed run in its noise; None (and no reference from here on)
        when the perturbed run fails: the perturbation took the model down a path that raises."""
        try:
            with torch.random.fork_rng(), RoundingNoise(seed=run.trials):
                perturbed = run_eager(self._double, run.inputs)
        except Exception:  # noqa: BLE001 - as in run(): no reference, fixed verdict
            self._broken = True
            return None
        noise = [max(level, _distance(a, b)) for level, a, b in
                 zip(run.noise, flatten_outputs(perturbed), flatten_outputs(run.outputs))]
        return dataclasses.replace(run, noise=noise, trials=run.trials + 1)


def _widened(inputs: InputSet) -> InputSet:
    return inputs.map_tensors(lambda _, t: t.double() if t.dtype == torch.float32 else t)


def _identical(a: Any, b: Any) -> bool:
    """Two runs gave the same outputs, bit for bit (NaN equal to NaN)."""
    left, right = flatten_outputs(a), flatten_outputs(b)
    return len(left) == len(right) and all(
        x.shape == y.shape and bool(torch.equal(x, y) or (x.dtype.is_floating_point and torch.allclose(x, y, 0, 0, equal_nan=True)))
        for x, y in zip(left, right))


def _distance(a: torch.Tensor, b: torch.Tensor) -> float:
    if not (a.dtype.is_floating_point and b.dtype.is_floating_point) or a.shape != b.shape or not a.numel():
        return 0.0
    finite = torch.isfinite(a) & torch.isfinite(b)
    return float((a.double() - b.double()).abs()[finite].max()) if bool(finite.any()) else 0.0


class RoundingNoise(torch.overrides.TorchFunctionMode):
    """Multiply every new floating result by ``1 + u·r`` (u = 2^-24, r uniform in [-1, 1]).

    In float64 this imitates the rounding of float32 arithmetic at every operation, so the
    spread of perturbed runs shows how much of an output is rounding. Results that share storage
    with an argument (views, in-place writes) are left exact, so aliasing stays as written.

    Example::

        >>> with RoundingNoise(seed=0):
        ...     y = torch.ones(3, dtype=torch.float64) * 3
        >>> bool((y - 3).abs().max() < 1e-6)
        True
    """

    UNIT_ROUNDOFF = 2.0 ** -24

    def __init__(self, seed: int):
        super().__init__()
        self.generator = torch.Generator().manual_seed(seed)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if not isinstance(result, torch.Tensor) or not result.dtype.is_floating_point or result.numel() == 0:
            return result
        if any(_shares_storage(result, a) for a in pytree.tree_leaves((args, kwargs))):
            return result
        with torch._C.DisableTorchFunction():
            noise = torch.rand(result.shape, generator=self.generator, dtype=result.dtype) * 2 - 1
            return result * (1 + self.UNIT_ROUNDOFF * noise)


def _shares_storage(result: torch.Tensor, value) -> bool:
    return isinstance(value, torch.Tensor) and value.untyped_storage().data_ptr() == result.untyped_storage().data_ptr()
