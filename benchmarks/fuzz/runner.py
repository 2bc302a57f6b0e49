"""Run one generated program through fxport and classify the outcome.

The verdict is exactly one of:

- ``equal``: converted, and ONNX Runtime equals eager on every input set;
- ``clear-error``: a documented :class:`fxport.ConversionError` whose one-line message names
  the user's file:line;
- ``invalid``: the program fails eagerly by itself, or its float32 output is rounding noise
  (float32 eager, or float64 eager with float32-sized rounding noise, disagrees with exact
  float64 eager) on the runner's input sets, or on an input set fxport made that verification
  failed on: a generator defect, not fxport's;
- ``bug``: anything else — a mismatch (VerificationError), an exception that is not a
  ConversionError (a crash inside fxport), an error without a location, or a hang.

Example::

    >>> outcome = run_program(program)           # doctest: +SKIP
    >>> outcome.verdict                          # doctest: +SKIP
    'equal'
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import importlib.util
import os
import re
import signal
import sys
import tempfile
import traceback

import torch
import torch.utils._pytree as pytree

import fxport
from benchmarks.fuzz.generator import FEATURES, Program
from fxport.controlflow import convert_control_flow, operators as runtime
from fxport.verify.exercise import searched_set
from fxport.verify.inputs.generated import generate_input_sets
from fxport.eager.inputs import InputSet
from fxport.verify.reference import RoundingNoise
from fxport.verify.compare import TOLERANCES

#: Seconds one program may take before it counts as a hang. Not less: with four conversions
#: sharing two cores, lowering one 40-line program of the CI profile took over 120 s.
TIMEOUT_S = 300

#: (batch, n, scale, shift) for the verification input sets: trip counts 0, 1, 2 and larger,
#: batch sizes around the example's, values small and large, mostly positive or negative.
INPUT_PLAN = [(3, 2, 1.0, 0.0), (2, 0, 0.5, 0.0), (5, 1, 3.0, 0.0), (4, 4, 0.5, -2.0),
              (3, 3, 0.1, 1.0), (6, 2, 2.0, 3.0), (4, 1, 1.0, -0.5)]


@dataclasses.dataclass
class Coverage:
    """What the input sets exercised, measured on the converted code run eagerly.

    Counted per statement (file line) that ran on at least one input set.
    """

    ifs: int = 0          # tensor-conditioned if / if-expressions that ran
    ifs_both: int = 0     # ... and took both outcomes across the input sets
    loops: int = 0        # loops that ran
    loops_zero: int = 0   # ... with zero trips on some input set
    loops_varied: int = 0  # ... with at least two different trip counts

    def add(self, other: "Coverage") -> None:
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))


@dataclasses.dataclass
class Outcome:
    verdict: str
    kind: str = ""
    message: str = ""
    source: str = ""
    coverage: Coverage = dataclasses.field(default_factory=Coverage)


def input_sets(seed: int = 0) -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    sets = []
    for batch, trips, scale, shift in INPUT_PLAN:
        x = torch.randn(batch, FEATURES, generator=generator) * scale + shift
        sets.append((x, torch.tensor(trips, dtype=torch.int64)))
    return sets


def write_program(program: Program, directory: str) -> str:
    """Write the program's source to a file (the converter reads the model's own source)."""
    digest = hashlib.sha1(program.source.encode()).hexdigest()[:12]
    path = os.path.join(directory, f"fuzzed_{digest}.py")
    with open(path, "w") as handle:
        handle.write(program.source)
    return path


def load_module(path: str):
    """Import the file at ``path`` and build its ``Fuzzed`` module in eval mode."""
    name = "fuzzed_" + hashlib.sha1(path.encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.Fuzzed().eval()


@contextlib.contextmanager
def time_limit(seconds: int):
    def on_alarm(signum, frame):
        raise TimeoutError(f"program ran longer than {seconds}s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_program(program: Program, directory: str | None = None) -> Outcome:
    """Convert ``program`` with fxport and verify it on every planned input set."""
    directory = directory or tempfile.mkdtemp(prefix="fxport-fuzz-")
    return run_file(write_program(program, directory))


def run_file(path: str) -> Outcome:
    """The verdict for the program in ``path`` (a generated or a kept regression program)."""
    with open(path) as handle:
        source = handle.read()
    module = load_module(path)
    example, *others = input_sets()
    try:
        with torch.no_grad(), time_limit(TIMEOUT_S):
            for inputs in (example, *others):
                module(*inputs)
    except Exception as exc:  # the generator wrote a program that fails (or never ends) by itself
        return Outcome("invalid", type(exc).__name__, str(exc).splitlines()[0], source)
    problem = conditioning_problem(module, [example, *others])
    if problem is not None:  # its float32 output is rounding noise: no converter can match it
        return Outcome("invalid", "ill-conditioned", problem, source)
    try:
        covered = measure_coverage(module, [example, *others])
    except Exception as exc:  # converted code must run eagerly wherever the original does
        return Outcome("bug", "converted-eager-crash", f"{type(exc).__name__}: {exc}".splitlines()[0], source)
    outcome = _convert_and_verify(module, example, others, path, source)
    outcome.coverage = covered
    return outcome


def conditioning_problem(module, input_sets) -> str | None:
    """Why the program's float32 eager output is rounding noise, or None when it is not.

    Runs a float64 copy on the same inputs, once exactly and a few times with every floating
    result perturbed by float32's unit roundoff (:class:`RoundingNoise`, Monte Carlo
    arithmetic). Where float32 eager, or a perturbed run, differs from the exact float64 result
    by more than half of fxport's float32 tolerance, the output is dominated by rounding (a
    cancellation of huge values, a branch on a sum that is zero up to rounding): ONNX Runtime,
    rounding differently, cannot be expected to match eager, and the program says nothing about
    the converter. The perturbed runs catch outputs whose float32 eager value agrees with float64
    by luck (a zero-sum of terms near 1e36 that eager's order cancels exactly). Elements that are
    inf/NaN in either run are left to the verification, which requires them in the same places.
    """
    try:
        wide = copy.deepcopy(module).double()
        with torch.no_grad(), time_limit(TIMEOUT_S):
            for index, (x, n) in enumerate(input_sets):
                exact_out = pytree.tree_leaves(wide(x.double(), n))
                runs = [("float32 eager", pytree.tree_leaves(module(x, n)))]
                for trial in range(NOISE_TRIALS):
                    with RoundingNoise(seed=trial):
                        runs.append(("float64 eager with float32 rounding noise", pytree.tree_leaves(wide(x.double(), n))))
                for label, outs in runs:
                    error = _rounding_error(outs, exact_out)
                    if error is not None:
                        return (f"{label} differs from float64 eager by {error:.3g} on input set {index}: "
                                "the result is dominated by rounding")
    except Exception:  # a program that cannot run in float64 is simply not checked
        return None
    return None


#: Perturbed float64 runs per input set in :func:`conditioning_problem`.
NOISE_TRIALS = 3


def _rounding_error(outs, exact_out) -> float | None:
    """The largest error of ``outs`` past half of the float32 tolerance, or None."""
    atol, rtol = TOLERANCES[torch.float32]
    for value, exact in zip(outs, exact_out):
        value, exact = value.double(), exact.double()
        finite = torch.isfinite(value) & torch.isfinite(exact)
        error = (value - exact).abs()[finite]
        if bool((error > 0.5 * (atol + rtol * exact.abs()[finite])).any()):
            return float(error.max())
    return None


def measure_coverage(module, input_sets) -> Coverage:
    """Branch outcomes and trip counts of the converted code run eagerly on ``input_sets``."""
    with convert_control_flow(module), runtime.coverage() as notes, torch.no_grad(), time_limit(TIMEOUT_S):
        for inputs in input_sets:
            module(*inputs)
    seen: dict[tuple[str, int], set] = {}
    for kind, location, result in notes:
        seen.setdefault((kind, location.lineno), set()).add(result)
    covered = Coverage()
    for (kind, _), results in seen.items():
        if kind in ("if", "ifexp"):
            covered.ifs += 1
            covered.ifs_both += results >= {True, False}
        elif kind in ("for", "while"):
            covered.loops += 1
            covered.loops_zero += 0 in results
            covered.loops_varied += len({r for r in results if isinstance(r, int)}) >= 2  # trip counts, not exits
    return covered


def _convert_and_verify(module, example, others, path: str, source: str) -> Outcome:
    try:
        with time_limit(TIMEOUT_S):
            fxport.convert(module, example, dynamic_shapes={"x": {0: "batch"}},
                           verify_inputs=others, device="cpu")
    except fxport.VerificationError as exc:
        problem = conditioning_problem(module, failed_input_sets(exc, example))
        if problem is not None:  # fxport's own generated or searched set is where the output is noise
            return Outcome("invalid", "ill-conditioned", f"on an input set fxport made: {problem}", source)
        return Outcome("bug", "mismatch", exc.message, source)
    except fxport.ConversionError as exc:
        if exc.where is None or os.path.basename(exc.where.filename) != os.path.basename(path):
            return Outcome("bug", "error-without-user-location", exc.message, source)
        return Outcome("clear-error", type(exc).__name__ + ": " + error_kind(exc.what), exc.message, source)
    except TimeoutError as exc:
        return Outcome("bug", "hang", str(exc), source)
    except Exception as exc:  # a crash inside fxport: always a bug
        summary = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[0]
        return Outcome("bug", "crash", summary, source)
    return Outcome("equal", source=source)


def failed_input_sets(exc: fxport.VerificationError, example: tuple) -> list[tuple]:
    """The input sets fxport made (generated, or searched from the example) that failed, rebuilt
    from their names, so the conditioning check can look at them too: a program may be rounding
    noise only on values fxport drew. Sets whose values cannot be rebuilt are left out."""
    # a searched set's name ends with what it reached: " (reaches if at m.py:3)"
    failed = {row.name.split(" (reaches ")[0] for row in exc.report if not row.passed}
    example_set = InputSet(example, {}, "example")
    candidates = generate_input_sets(example_set, {0: {0: "batch"}})
    candidates += [searched_set(example_set, name[len("search: "):]) for name in failed if name.startswith("search: ")]
    return [c.args for c in candidates if c is not None and c.name in failed]


def error_kind(what: str) -> str:
    """What an error says, without names, shapes and numbers, for grouping in the summary.

    >>> error_kind("for: list 'outs' is appended to in a data-dependent loop nested in another traced body")
    "for: list '…' is appended to in a data-dependent loop nested in another traced body"
    """
    text = re.sub(r"'[^']*'", "'…'", what.split(" at /")[0])
    text = re.sub(r"\([^()]*\)", "(…)", text)
    return re.sub(r"\d+", "N", text)[:100]
