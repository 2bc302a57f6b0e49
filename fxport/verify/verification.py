"""The verify stage: ONNX Runtime against eager PyTorch on inputs the export never saw.

Input sets checked: the example; fresh random values of the same shapes and dtypes (drawn from
the example's value range, never the example itself); for every dynamic dimension, a larger
and a smaller size (dimensions sharing a name change together); and any user-supplied sets.
Floating outputs are compared with dtype-aware tolerances, integer and bool outputs exactly,
NaN/inf positions must agree. A mismatch is a :class:`~fxport.errors.VerificationError`
carrying the table, never a warning.

Example::

    >>> import torch
    >>> from fxport.inputs import InputSet
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

from fxport import choices
from fxport.verify.compare import Acceptance, compare, judge_against_reference
from fxport.verify.inputs.domains import InputDomain
from fxport.verify.onnx_runner import OnnxRunner  # noqa: F401 - re-exported (the tests patch verify.OnnxRunner)
from fxport.verify.providers import fallback_warning
from fxport.verify import decision_rules  # noqa: F401 - registers the built-in decisions the replay judges
from fxport.verify.decisions import DecisionReplay
from fxport.verify.reference import Float64Reference
from fxport.verify.verified_ranges import ORT_FAILED, exclude_failed_edges
from fxport.lower.serialized import ModelBytes
from fxport.eager_limits import SECONDS, EagerRunStopped, time_limit
from fxport.errors import EagerRunError, VerificationError
from fxport.verify.inputs.generated import generate_input_sets
from fxport.eager import run_eager
from fxport.inputs import InputSet
from fxport.report import VerificationRow


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


def verify_model(
    module: torch.nn.Module,
    model: onnx.ModelProto,
    input_sets: list[InputSet],
    *,
    device: str = "cpu",
    dynamic_axes: dict[int, dict[int, str]] | None = None,
    generate: bool = True,
    seed: int = 1234,
    bounds: dict[int, dict[int, tuple[int, int]]] | None = None,
    domains: dict[int, InputDomain] | None = None,
    acceptance: Acceptance = Acceptance(),
    prepare_inputs: Callable[[InputSet], InputSet] | None = None,
    label: str = "",
    optional_reference: bool = False,
    notes: list[str] | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    on_input_set: Callable[[str], None] | None = None,
    generated_sets: list[InputSet] | None = None,
    sort_keys: frozenset[int] | None = None,
    program: Any = None,
    known_outputs: dict[int, Any] | None = None,
    model_bytes: ModelBytes | None = None,
) -> list[VerificationRow]:
    """Run eager and ONNX Runtime on every input set; raise VerificationError on any mismatch.

    ``module`` is copied, never moved, when ``device`` is not the CPU. ``prepare_inputs``
    transforms each input set before both runs (e.g. cast to float16 for an eager float16
    reference); ``domains`` keep generated values inside the model's domain (see
    :func:`generate_input_sets`); ``label`` is appended to row names; with ``optional_reference`` an eager failure
    (e.g. an op without a float16 CPU kernel) skips the row instead of raising. ``notes``
    receives one-line warnings (nodes ONNX Runtime placed on CPU instead of CUDA). ``atol`` /
    ``rtol`` replace the dtype tolerances of float outputs; ``on_input_set(name)`` is called
    before each input set runs (the CLI's live status line). ``generated_sets``: the
    :func:`generate_input_sets` result when the caller already drew it (the pipeline reuses it
    for the coverage pass); None draws them here. ``sort_keys``: flat indices of the outputs a
    sort orders (:func:`fxport.verify.ties.sorted_output_indices`), whose tied rows may be paired.
    ``program``: the program the exporter translated into the file (after its decompositions:
    its node names are the file's value names); a set that still fails is judged once more with the decisions (top-k, NMS, thresholds) the file took otherwise on
    keys within tolerance replayed in it (:mod:`fxport.verify.decisions`). ``known_outputs``: eager's
    outputs already computed on the CPU, by ``id`` of the input set (the pipeline's eager stage
    ran the example); used when the sets run as given on the CPU. ``model_bytes``: ``model``'s
    graph serialised once (:mod:`fxport.lower.serialized`).
    """
    acceptance = dataclasses.replace(acceptance, atol=atol, rtol=rtol, sort_keys=sort_keys)
    candidates = list(input_sets)
    if generate:
        candidates[1:1] = (generated_sets if generated_sets is not None
                           else generate_input_sets(input_sets[0], dynamic_axes, seed, bounds, domains))
    module_on_device = copy.deepcopy(module).to(device) if device != "cpu" else module
    reference = (Float64Reference(module_on_device, probe=_repeat_probe(candidates, device))
                 if _judged_by_noise(acceptance) else None)
    # a second session is a second copy of the weights: files with external data are not replayed
    replay = (DecisionReplay(program, model, lambda source: OnnxRunner(source, device))
              if program is not None and acceptance.min_cosine is None and isinstance(model, onnx.ModelProto)
              else None)
    generated = {id(s) for s in candidates} - {id(s) for s in input_sets}
    known = known_outputs if known_outputs and prepare_inputs is None and device == "cpu" else {}
    rows: dict[int, VerificationRow] = {}
    # ONNX Runtime works on its own thread behind eager: the session loads while eager runs the
    # first sets, and eager runs the next sets while ONNX Runtime runs the earlier ones; a set is
    # judged once both sides ran it (the float64 judge, on this thread, overlaps ONNX Runtime too)
    with contextlib.ExitStack() as stack, \
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="fxport-onnxruntime") as onnx_runtime, \
            _cancelled_on_error(onnx_runtime), cores_shared_with_onnx_runtime(device):
        # the session lives in a child process: a crash in ONNX Runtime is the set's failure
        session = onnx_runtime.submit(OnnxRunner, model, device, model_bytes=model_bytes, isolated=True)
        stack.callback(_closed, session)

        def guarded(prepared: InputSet, bounded: bool, step: Callable[[], Any]) -> Any:
            """``step()``, or the row of a set it may leave out: one eager (or the replay) cannot
            finish or rejects, one ONNX Runtime cannot run (a generated size eager runs)."""
            try:
                return step()
            except EagerRunStopped as stop:  # a generated set the model may never finish on
                if notes is not None:
                    notes.append(f"verification: {stop.describe()} on the generated input set '{prepared.name}' "
                                 "(the model may never finish on these values); not used")
                return skipped_row(prepared, session.result().provider, f"skipped: {stop.describe()}")
            except EagerRunError as exc:
                if not bounded and not optional_reference:
                    raise
                return skipped_row(prepared, session.result().provider,
                                   f"skipped: eager rejects these inputs ({exc.what})")
            except VerificationError as exc:
                if not bounded or exc.report:
                    raise
                said = exc.what if exc.what.startswith("ONNX Runtime") else f"ONNX Runtime failed: {exc.what}"
                return dataclasses.replace(skipped_row(prepared, session.result().provider, said),
                                           passed=False, mismatched_outputs=[ORT_FAILED])

        def judged(waiting: _Waiting) -> VerificationRow:
            runner = session.result()  # a model ONNX Runtime cannot load fails here, whichever set
            return guarded(waiting.inputs, waiting.bounded, lambda: judge_one(
                waiting.inputs, waiting.expected, waiting.run.result(), runner.provider, acceptance, reference,
                waiting.bounded, replay, waiting.eager_seconds))

        waiting: collections.deque[_Waiting] = collections.deque()  # eager ran them; oldest first
        for index, inputs in enumerate(candidates):
            prepared = prepare_inputs(inputs) if prepare_inputs else inputs
            if label:
                prepared = dataclasses.replace(prepared, name=inputs.name + label)
            on_device = prepared.to(device) if device != "cpu" else prepared
            if on_input_set is not None:
                on_input_set(prepared.name)
            bounded = id(inputs) in generated
            reference_run = guarded(prepared, bounded, lambda: eager_reference(
                module_on_device, on_device, bounded, known.get(id(inputs))))
            if isinstance(reference_run, VerificationRow):  # left out: eager cannot run it
                rows[index] = reference_run
                continue
            expected, eager_seconds = reference_run
            run = onnx_runtime.submit(lambda on_device=on_device, bounded=bounded:
                                      session.result().run(on_device, limit=SECONDS if bounded else None))
            waiting.append(_Waiting(index, on_device, expected, eager_seconds, bounded, run))
            while waiting and waiting[0].run.done():  # eager goes on while ONNX Runtime is busy
                done = waiting.popleft()
                rows[done.index] = judged(done)
        while waiting:
            done = waiting.popleft()
            rows[done.index] = judged(done)
    runner = session.result()
    rows = [rows[index] for index in sorted(rows)]
    warning = fallback_warning(runner.placement, runner.providers[0])
    if warning and notes is not None and warning not in notes:
        notes.append(warning)
    # ONNX Runtime failing only at edge sizes fxport made up narrows the range past them
    rows = exclude_failed_edges(rows, candidates, input_sets, dynamic_axes, bounds) or rows
    failed = [row for row in rows if not row.passed]
    if failed:
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
            hint=_narrowing_hint(worst.name, bounds) or _failure_hint(acceptance),
        )
    return rows


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


def _repeat_probe(candidates: list[InputSet], device: str) -> InputSet | None:
    """The input set with the fewest elements and none empty: the float64 reference repeats its
    run there to tell a model that draws random numbers (:class:`Float64Reference`)."""
    filled = [s for s in candidates if all(t.numel() for t in s.tensors())]
    if not filled:
        return None
    probe = min(filled, key=lambda s: sum(t.numel() for t in s.tensors()))
    return probe.to(device) if device != "cpu" else probe


def _judged_by_noise(acceptance: Acceptance) -> bool:
    """Fixed user tolerances (--atol/--rtol), float16 and cosine criteria keep their bounds."""
    return (acceptance.atol is None and acceptance.rtol is None
            and acceptance.min_cosine is None and acceptance.tolerance_dtype is None)


#: The float64 reference (up to four runs, two of them with every result perturbed) may take this
#: many times the eager run of the set before it is stopped.
REFERENCE_SLOWDOWN = 100


def _float64_truth(reference: Float64Reference, inputs: InputSet, bounded: bool,
                   eager_seconds: float, earlier: Any = None) -> tuple[Any, str]:
    """``(the float64 run or None, why it was stopped or "")``: the exact run alone (eager's own
    distance to it is the noise: a file that passes there passes with any perturbed run, which
    only widens it), or ``earlier``'s with one more perturbed run. A reference that runs past its
    limit does not skip the set, whose fixed tolerances failed: the set stays failed."""
    limit = max(SECONDS, REFERENCE_SLOWDOWN * eager_seconds)
    try:
        with time_limit(limit) if bounded else contextlib.nullcontext():
            return (reference.run(inputs, trials=0) if earlier is None else reference.perturbed_again(earlier)), ""
    except EagerRunStopped as stop:
        return None, stop.describe()


@contextlib.contextmanager
def cores_shared_with_onnx_runtime(device: str):
    """Eager runs on half of torch's CPU threads while ONNX Runtime works beside it (``device``
    ``cpu``; the count is put back after).

    Both libraries size their thread pools to the whole machine: running at once, each waits on
    threads the other keeps busy (r3d_18's verification on 2 cores: 1.7–2.1 s with both at 2
    threads, 1.5–1.8 s with eager at 1). ONNX Runtime keeps all of its threads: it runs the
    example besides every set eager runs, so it finishes last, and alone.
    """
    threads = torch.get_num_threads()
    if device != "cpu" or threads < 2:
        yield
        return
    torch.set_num_threads(threads // 2)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


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
    run: Future


def eager_reference(module: torch.nn.Module, inputs: InputSet, bounded: bool = False,
                    expected: Any = None) -> tuple[Any, float]:
    """``(eager's outputs, seconds it ran)``; ``expected``: the outputs when already known (not
    run again); ``bounded``: inputs fxport made up, the run limited in time (fxport/eager_limits.py)."""
    if expected is not None:
        return expected, 0.0
    started = time.perf_counter()
    with time_limit() if bounded else contextlib.nullcontext():
        outputs = run_eager(module, inputs)  # run_eager runs on a copy of the inputs
    return outputs, time.perf_counter() - started


def judge_one(inputs: InputSet, expected: Any, actual: list, provider: str, acceptance: Acceptance = Acceptance(),
              reference: Float64Reference | None = None, bounded: bool = False,
              replay: DecisionReplay | None = None, eager_seconds: float = 0.0) -> VerificationRow:
    """Eager's ``expected`` against ONNX Runtime's ``actual`` on one input set; when fixed
    tolerances fail and ``reference`` is given, the float64 run judges whether the difference is
    float32 noise, and then ``replay`` whether it is decisions taken otherwise on keys within
    tolerance (:mod:`fxport.verify.decisions`). ``bounded``: inputs fxport made up, the float64 run
    limited to :data:`REFERENCE_SLOWDOWN` × ``eager_seconds``."""
    result = compare(expected, actual, acceptance)
    if not result.passed and reference is not None:
        truth, stopped = _float64_truth(reference, inputs, bounded, eager_seconds)
        while truth is not None:
            result = judge_against_reference(expected, actual, truth.outputs, acceptance, truth.noise)
            if result.passed or truth.trials >= reference.TRIALS:  # a pass stands: more trials only widen
                break
            truth, stopped = _float64_truth(reference, inputs, bounded, eager_seconds, earlier=truth)
        if truth is None and stopped:
            result.notes.append(f"the float64 reference was stopped ({stopped}): judged by the "
                                "fixed tolerances")
    if not result.passed and replay is not None:
        result = replay.judge(inputs, expected, actual, acceptance, failed=result)
    noise = result.noise
    return VerificationRow(
        name=inputs.name,
        input_shapes=inputs.shapes(),
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
