"""The verify stage: ONNX Runtime against eager PyTorch on inputs the export never saw.

Input sets checked: the example; fresh random values of the same shapes and dtypes (drawn from
the example's value range, never the example itself); for every dynamic dimension, a larger
and a smaller size (dimensions sharing a name change together); and any user-supplied sets.
What to check and how is one frozen :class:`~fxport.verify.plan.VerificationPlan`, run pass by
pass (the file's precision, :mod:`fxport.verify.precision`); each set is judged by the chain of
:mod:`fxport.verify.judges` (fixed tolerances, tied rows, float64 noise, decision replay),
asked in order while it still fails (docs/verification.md). A mismatch is a
:class:`~fxport.errors.VerificationError` carrying the table, never a warning.

Example::

    >>> import torch
    >>> from fxport.eager.inputs import InputSet
    >>> from fxport.lower.lowering import lower
    >>> module, x = torch.nn.Tanh(), torch.randn(2, 3)
    >>> program = torch.export.export(module, (x,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    >>> rows = verify_model(module, lower(program), [InputSet((x,))], dynamic_axes={0: {0: "batch"}})
    >>> all(r.passed for r in rows), rows[0].name
    (True, 'example')
"""

from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

import onnx
import torch

from fxport.engine import choices
from fxport.eager.calls import half_the_threads, run_eager
from fxport.eager.limits import SECONDS, EagerRunStopped, time_limit
from fxport.errors import EagerRunError, VerificationError
from fxport.eager.inputs import InputSet
from fxport.report.result import VerificationRow
from fxport.verify.compare import Acceptance
from fxport.verify.inputs.generated import generate_input_sets
from fxport.verify.judges import Bench, SetRun, open_judges, verdict
from fxport.verify.onnx_runner import OnnxRunner  # the tests patch verification.OnnxRunner
from fxport.verify.plan import VerificationPlan
from fxport.verify.precision import Pass
from fxport.verify.providers import fallback_warning
from fxport.verify.verified_ranges import ORT_FAILED, exclude_failed_edges


def resolve_device(device: str) -> str:
    """``auto`` → ``cuda`` when torch sees a GPU and onnxruntime has the CUDA provider, else ``cpu``."""
    if device not in choices.DEVICES:
        from fxport.errors import UsageError

        raise UsageError(f"unknown device {device!r}", hint=f"use {choices.listed(choices.DEVICES)}")
    if device == "auto":
        import onnxruntime as ort

        has_cuda = torch.cuda.is_available() and "CUDAExecutionProvider" in ort.get_available_providers()
        return "cuda" if has_cuda else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        from fxport.errors import UsageError

        raise UsageError("--device cuda was asked for but torch sees no CUDA device",
                         hint="use --device cpu or auto")
    return device


def verify_model(module: torch.nn.Module, model: onnx.ModelProto | str, input_sets: list[InputSet],
                 plan: VerificationPlan | None = None, **settings: Any) -> list[VerificationRow]:
    """Run eager and ONNX Runtime on every input set, pass by pass of ``plan``; raise
    VerificationError on any mismatch.

    ``plan`` says everything else (:class:`~fxport.verify.plan.VerificationPlan`: device,
    dynamic axes and bounds, generated sets, criteria, the passes of the file's precision);
    without one, ``settings`` build it (:meth:`VerificationPlan.build`: ``dynamic_axes=``,
    ``generate=``, ``atol=``, ``program=``, ``notes=``, ``precision=``, ...). Each set is judged
    by the chain of :mod:`fxport.verify.judges`. ``module`` is copied, never moved, when the
    device is not the CPU. Example: the module docstring.
    """
    if plan is None:
        plan = VerificationPlan.build(**settings)
    elif settings:
        raise TypeError(f"verify_model takes a plan or its settings, not both ({', '.join(settings)})")
    rows: list[VerificationRow] = []
    for step in plan.passes:
        rows += verify_pass(module, model, input_sets, plan, step)
    return rows


def verify_pass(module: torch.nn.Module, model: onnx.ModelProto | str, input_sets: list[InputSet],
                plan: VerificationPlan, step: Pass) -> list[VerificationRow]:
    """One pass of ``plan``: the sets run on both sides, judged, the range narrowed past edge
    sizes only ONNX Runtime fails at (:mod:`fxport.verify.verified_ranges`), a failure raised."""
    acceptance = plan.acceptance_of(step)
    if step.float_model and plan.float_model is not None:
        model = plan.float_model
    eager_module = step.eager(module) if step.eager is not None else module
    candidates = list(input_sets)
    if plan.generate:
        candidates[1:1] = (plan.generated_sets if plan.generated_sets is not None else generate_input_sets(
            input_sets[0], plan.dynamic_axes, plan.seed, plan.bounds, plan.domains))
    device = plan.device
    module_on_device = copy.deepcopy(eager_module).to(device) if device != "cpu" else eager_module
    chain = open_judges(Bench(acceptance, module_on_device, model, tuple(candidates), device,
                              plan.program if step.replay else None, plan.decisions,
                              lambda source: OnnxRunner(source, device)))
    made_up = {id(s) for s in candidates} - {id(s) for s in input_sets}
    rows, runner = _Sets(plan, step, chain, made_up).run(module_on_device, model, candidates)
    warning = fallback_warning(runner.placement, runner.providers[0])
    if warning and plan.notes is not None and warning not in plan.notes:
        plan.notes.append(warning)
    # ONNX Runtime failing only at edge sizes fxport made up narrows the range past them
    rows = exclude_failed_edges(rows, candidates, input_sets, plan.dynamic_axes, plan.bounds) or rows
    _refuse_failed(rows, acceptance, plan.bounds)
    return rows


class _Sets:
    """The sets of one pass on both sides. ONNX Runtime works on its own thread behind eager: the
    session loads while eager runs the first sets, and eager runs the next sets while ONNX
    Runtime runs the earlier ones; a set is judged once both sides ran it (the float64 judge, on
    this thread, overlaps ONNX Runtime too). The session lives in a child process: a crash in
    ONNX Runtime is the set's failure."""

    def __init__(self, plan: VerificationPlan, step: Pass, chain: list, made_up: set[int]):
        self.plan, self.step, self.chain, self.made_up = plan, step, chain, made_up
        self.module: torch.nn.Module | None = None
        as_given = step.inputs is None and step.eager is None and plan.device == "cpu"
        self.known = plan.known_outputs if plan.known_outputs and as_given else {}
        self.session: Future | None = None

    def run(self, module: torch.nn.Module, model: Any, candidates: list[InputSet]) -> tuple[list[VerificationRow], Any]:
        """The rows of ``candidates`` in their order, and the ONNX Runtime session that ran them."""
        device, rows, self.module = self.plan.device, {}, module
        with contextlib.ExitStack() as stack, \
                ThreadPoolExecutor(max_workers=1, thread_name_prefix="fxport-onnxruntime") as onnx_runtime, \
                _cancelled_on_error(onnx_runtime), cores_shared_with_onnx_runtime(device):
            self.session = onnx_runtime.submit(OnnxRunner, model, device, model_bytes=self.plan.model_bytes,
                                               isolated=True)
            stack.callback(_closed, self.session)
            waiting: collections.deque[_Waiting] = collections.deque()  # eager ran them; oldest first
            for index, inputs in enumerate(candidates):
                ran = self._eager(index, inputs)
                if isinstance(ran, VerificationRow):  # left out: eager cannot run it
                    rows[index] = ran
                    continue
                ran.run = onnx_runtime.submit(lambda ran=ran: self.session.result().run(
                    ran.inputs, limit=SECONDS if ran.bounded else None))
                waiting.append(ran)
                while waiting and waiting[0].run.done():  # eager goes on while ONNX Runtime is busy
                    done = waiting.popleft()
                    rows[done.index] = self._judged(done)
            while waiting:
                done = waiting.popleft()
                rows[done.index] = self._judged(done)
        return [rows[index] for index in sorted(rows)], self.session.result()

    def _eager(self, index: int, inputs: InputSet) -> "_Waiting | VerificationRow":
        """Eager's run of one set (as the pass prepares it, on the device), or its row when left out."""
        plan, step = self.plan, self.step
        prepared = step.inputs(inputs) if step.inputs is not None else inputs
        if step.label:
            prepared = dataclasses.replace(prepared, name=inputs.name + step.label)
        on_device = prepared.to(plan.device) if plan.device != "cpu" else prepared
        if plan.on_input_set is not None:
            plan.on_input_set(prepared.name)
        bounded = id(inputs) in self.made_up
        ran = self._guarded(prepared, bounded, lambda: eager_reference(
            self.module, on_device, bounded, self.known.get(id(inputs))))
        if isinstance(ran, VerificationRow):
            return ran
        expected, eager_seconds = ran
        return _Waiting(index, on_device, expected, eager_seconds, bounded)

    def _judged(self, waiting: "_Waiting") -> VerificationRow:
        runner = self.session.result()  # a model ONNX Runtime cannot load fails here, whichever set
        return self._guarded(waiting.inputs, waiting.bounded, lambda: judged_row(
            SetRun(waiting.inputs, waiting.expected, waiting.run.result(), waiting.bounded, waiting.eager_seconds),
            runner.provider, self.chain))

    def _guarded(self, prepared: InputSet, bounded: bool, step: Callable[[], Any]) -> Any:
        """``step()``, or the row of a set it may leave out: one eager (or a judge) cannot finish or
        rejects, one ONNX Runtime cannot run (a generated size eager runs)."""
        try:
            return step()
        except EagerRunStopped as stop:  # a generated set the model may never finish on
            if self.plan.notes is not None:
                self.plan.notes.append(f"verification: {stop.describe()} on the generated input set "
                                       f"'{prepared.name}' (the model may never finish on these values); not used")
            return skipped_row(prepared, self.session.result().provider, f"skipped: {stop.describe()}")
        except EagerRunError as exc:
            if not bounded and not self.step.optional_reference:
                raise
            return skipped_row(prepared, self.session.result().provider,
                               f"skipped: eager rejects these inputs ({exc.what})")
        except VerificationError as exc:
            if not bounded or exc.report:
                raise
            said = exc.what if exc.what.startswith("ONNX Runtime") else f"ONNX Runtime failed: {exc.what}"
            return dataclasses.replace(skipped_row(prepared, self.session.result().provider, said),
                                       passed=False, mismatched_outputs=[ORT_FAILED])


def _refuse_failed(rows: list[VerificationRow], acceptance: Acceptance, bounds) -> None:
    """A VerificationError with the table when a row failed: the first one's outputs and criterion."""
    failed = [row for row in rows if not row.passed]
    if not failed:
        return
    worst = failed[0]
    criterion = (f"cosine {worst.cosine_similarity:.4f} < {acceptance.min_cosine}"
                 if acceptance.min_cosine is not None else f"max abs error {worst.max_abs_error:.3g}")
    if worst.onnx_error is not None:
        criterion += (f"; vs a float64 run: onnx {worst.onnx_error:.3g}, eager float32 "
                      f"{worst.eager_error:.3g}, beyond float32 noise")
    raise VerificationError(
        f"ONNX Runtime differs from eager PyTorch on {len(failed)} of {len(rows)} input sets "
        f"(first: {worst.name}, {', '.join(worst.mismatched_outputs) or 'outputs'}, {criterion})",
        report=rows,
        hint=_narrowing_hint(worst.name, bounds) or _below_a_zero_side(worst, bounds) or _failure_hint(acceptance),
    )


def _below_a_zero_side(row: VerificationRow, bounds) -> str | None:
    """For a failure of a set the user gave at size 0 of a dimension the capture exported from 1
    (fxport/capture/size_zero_branches.py): which ``if`` left size 0 out of the file."""
    from fxport.capture.size_zero_branches import narrowed_by_a_zero_side

    for index, axes in (bounds or {}).items():
        for axis, dim in axes.items():
            shape = row.input_shapes[index] if index < len(row.input_shapes) else []
            if narrowed_by_a_zero_side(dim) and axis < len(shape) and shape[axis] == 0:
                return (f"{dim.name!r} is {dim.reason} (exported for {dim.describe()}, declared "
                        f"{dim.describe(dim.declared)}): size 0 is outside the file's range; run the model's "
                        "size-0 path outside the file, or give both sides of that if values of one structure and rank")
    return None


def _narrowing_hint(row_name: str, bounds) -> str | None:
    """For a failure at a size outside the range torch.export narrowed a dimension to: where and why."""
    if "outside exported" not in row_name:
        return None
    for axes in (bounds or {}).values():
        for dim in axes.values():
            if getattr(dim, "narrowed", False) and f"{dim.name}=" in row_name:
                what = (f"{dim.name!r} is {dim.reason or 'narrowed by torch.export'} (exported for "
                        f"{dim.describe()}, declared {dim.describe(dim.declared)})")
                fix = ("keep control-flow conversion on for size conditions in your code, or declare"
                       if "narrowed by the model at" in (dim.reason or "") else "declare")
                return (f"{what}; {fix} the range the model is used at "
                        f"(torch.export.Dim({dim.name!r}, min=..., max=...))")
    return None


def _failure_hint(acceptance: Acceptance) -> str:
    if acceptance.min_cosine is not None:
        return ("the quantised model is less accurate than --min-cosine allows; calibrate with "
                "representative inputs (--calibrate), lower --min-cosine, or use --precision fp16")
    if acceptance.tolerance_dtype == torch.float16:
        return "float16 loses too much accuracy for this model; use --precision fp32, or report the model"
    return "run with --debug, or report the model; fxport never ships a mismatching model"


def skipped_row(inputs: InputSet, provider: str, note: str) -> VerificationRow:
    """A generated input set the model itself cannot run (e.g. a size it does not support)."""
    return VerificationRow(inputs.name, inputs.shapes(), provider,
                           float("nan"), float("nan"), float("nan"), True, [], note)


@contextlib.contextmanager
def cores_shared_with_onnx_runtime(device: str):
    """Eager runs on half of torch's CPU threads while ONNX Runtime works beside it (``device``
    ``cpu``; the count is put back after).

    Both libraries size their thread pools to the whole machine: running at once, each waits on
    threads the other keeps busy (r3d_18's verification on 2 cores: 1.7–2.1 s with both at 2
    threads, 1.5–1.8 s with eager at 1). ONNX Runtime keeps all of its threads: it runs the
    example besides every set eager runs, so it finishes last, and alone.
    """
    with half_the_threads(device == "cpu"):
        yield


def _closed(session: Future) -> None:
    """The session's child process ended once verification is done with it (or stopped)."""
    if session.done() and session.exception() is None and hasattr(session.result(), "close"):
        session.result().close()


@contextlib.contextmanager
def _cancelled_on_error(executor: ThreadPoolExecutor):
    """ONNX Runtime runs still queued are dropped when verification stops with an error."""
    try:
        yield
    except BaseException:
        executor.shutdown(wait=False, cancel_futures=True)
        raise


@dataclasses.dataclass
class _Waiting:
    """A set eager has run, waiting for its ONNX Runtime run (``run``) to be judged."""

    index: int
    inputs: InputSet
    expected: Any
    eager_seconds: float
    bounded: bool
    run: Future | None = None


def eager_reference(module: torch.nn.Module, inputs: InputSet, bounded: bool = False,
                    expected: Any = None) -> tuple[Any, float]:
    """``(eager's outputs, seconds it ran)``; ``expected``: the outputs when already known (not
    run again); ``bounded``: inputs fxport made up, the run limited in time (fxport/eager/limits.py)."""
    if expected is not None:
        return expected, 0.0
    started = time.perf_counter()
    with time_limit() if bounded else contextlib.nullcontext():
        outputs = run_eager(module, inputs)  # run_eager runs on a copy of the inputs
    return outputs, time.perf_counter() - started


def judged_row(run: SetRun, provider: str, chain: list) -> VerificationRow:
    """The table's row for one set: the verdict of the judges of ``chain`` (:mod:`fxport.verify.judges`)."""
    result = verdict(run, chain)
    noise = result.noise
    return VerificationRow(
        name=run.inputs.name,
        input_shapes=run.inputs.shapes(),
        provider=provider,
        max_abs_error=result.max_abs,
        max_rel_error=result.max_rel,
        cosine_similarity=result.cosine,
        passed=result.passed,
        mismatched_outputs=result.mismatched,
        eager_error=noise.eager_error if noise else None,
        onnx_error=noise.onnx_error if noise else None,
        note="; ".join(result.notes),
    )
