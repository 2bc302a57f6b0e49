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
    >>> from fxport.lower import lower
    >>> module, x = torch.nn.Tanh(), torch.randn(2, 3)
    >>> program = torch.export.export(module, (x,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    >>> rows = verify_model(module, lower(program), [InputSet((x,))], dynamic_axes={0: {0: "batch"}})
    >>> all(r.passed for r in rows), rows[0].name
    (True, 'example')
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import os
import shutil
import tempfile
import time
from typing import Any, Callable

import numpy as np
import onnx
import torch

from fxport import choices
# The comparison lives in fxport.compare (one comparer for verify, fxport.testing and the tests);
# these names stay importable from here.
from fxport.compare import (  # noqa: F401 - re-exported
    TOLERANCES,
    Acceptance,
    Comparison,
    OutputComparison,
    compare,
    compare_outputs,
    flatten_outputs,
    judge_against_reference,
)
from fxport.compare import to_numpy as _to_numpy
from fxport.domain import InputDomain
from fxport.providers import describe_placement, fallback_warning, node_placement, select_providers  # noqa: F401
from fxport import decision_rules  # noqa: F401 - registers the built-in decisions the replay judges
from fxport.decisions import DecisionReplay
from fxport.reference import Float64Reference
from fxport.serialized import ModelBytes, serialize
from fxport.eager_limits import SECONDS, EagerRunStopped, terminated_after, time_limit
from fxport.errors import ConversionError, EagerRunError, VerificationError
from fxport.errors import first_line as _first_line
# Generating input sets lives in fxport.input_sets; these names stay importable from here.
from fxport.input_sets import (  # noqa: F401 - re-exported
    MAX_GENERATED_ELEMENTS,
    draw_in_domain,
    edge_sizes,
    example_dim_sizes,
    generate_input_sets,
    random_like,
)
from fxport.eager import run_eager
from fxport.inputs import InputSet
from fxport.report import VerificationRow

class OnnxRunner:
    """An onnxruntime session fed with fxport input sets.

    Example::

        >>> runner = OnnxRunner(onnx_model, device="cpu")        # doctest: +SKIP
        >>> outputs = runner.run(InputSet((x,)))                 # doctest: +SKIP
    """

    def __init__(self, model: "onnx.ModelProto | str | os.PathLike", device: str = "cpu", *,
                 profile_placement: bool | None = None, model_bytes: ModelBytes | None = None):
        """``model``: a proto (serialised by ``model_bytes``, if given), or a model file's path (external data)."""
        import onnxruntime as ort

        self.providers = select_providers(device)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        # Verification runs each set once: threads that spin between runs only take CPU from
        # the eager reference (and from other processes) without making a run faster.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        #: Where each node ran, from a profile of the first run (on by default for CUDA, where ORT
        #: silently places nodes without a CUDA kernel on CPU): provider → ["OpType(name)", ...].
        self.placement: dict[str, list[str]] | None = None
        self._profiling = device == "cuda" if profile_placement is None else profile_placement
        if self._profiling:
            self._profile_dir = tempfile.mkdtemp(prefix="fxport-ort-profile-")
            options.enable_profiling = True
            options.profile_file_prefix = os.path.join(self._profile_dir, "run")
        try:
            source = os.fspath(model) if isinstance(model, (str, os.PathLike)) else serialize(model, model_bytes)
            self.session = ort.InferenceSession(source, options, providers=self.providers)
        except Exception as exc:
            raise VerificationError(
                f"ONNX Runtime cannot load the model: {_first_line(exc)}",
                hint="the model uses an op or domain ONNX Runtime lacks; register its custom-op "
                "library or convert with --no-verify",
            ) from exc
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.input_dtypes = [_ORT_FLOAT_TYPES.get(i.type) for i in self.session.get_inputs()]
        self.provider = self.session.get_providers()[0]

    def run(self, inputs: InputSet, limit: float | None = None) -> list[np.ndarray]:
        """ONNX Runtime's outputs; ``limit``: seconds after which the run is stopped (an error)."""
        tensors = [t.detach().cpu() for t in inputs.tensors()]
        if len(tensors) != len(self.input_names):
            raise VerificationError(
                f"the ONNX model takes {len(self.input_names)} inputs but {len(tensors)} tensors were given",
                hint="non-tensor inputs are baked into the model as constants; pass tensors for values that vary",
            )
        for spec, tensor in zip(self.session.get_inputs(), tensors):
            fixed = [(axis, size) for axis, size in enumerate(spec.shape) if isinstance(size, int)]
            if len(spec.shape) != tensor.dim() or any(tensor.shape[axis] != size for axis, size in fixed):
                raise VerificationError(
                    f"the {inputs.name} inputs give {spec.name} shape {list(tensor.shape)} but the model "
                    f"was exported with {list(spec.shape)}",
                    hint="declare the varying axes dynamic (--dynamic NAME:AXIS=DIM or dynamic_shapes)",
                )
        feed = {name: _to_numpy(_as_input_dtype(t, dtype))
                for name, t, dtype in zip(self.input_names, tensors, self.input_dtypes)}
        import onnxruntime as ort

        options = ort.RunOptions()
        if limit is not None:
            options.log_severity_level = 4  # a stopped run's "Exiting due to terminate flag" is ours to report
        try:
            with terminated_after(options, limit):
                outputs = self.session.run(None, feed, options)
        except Exception as exc:
            if options.terminate:
                raise VerificationError(f"ONNX Runtime ran past {limit:g} s on the {inputs.name} inputs, "
                                        "where eager PyTorch finished",
                                        hint="check the model's loops on these values") from exc
            raise VerificationError(
                f"ONNX Runtime failed on the {inputs.name} inputs: {_first_line(exc)}",
                hint="run with --debug; the exported graph may not support these sizes",
            ) from exc
        if self._profiling and self.placement is None:
            self._read_placement()
        return outputs

    def _read_placement(self) -> None:
        """End profiling after the first run and record where its nodes ran."""
        path = self.session.end_profiling()
        try:
            with open(path) as handle:
                self.placement = node_placement(json.load(handle))
        finally:
            shutil.rmtree(self._profile_dir, ignore_errors=True)
        self.provider = describe_placement(self.placement, self.providers[0])


#: onnxruntime input type strings → the torch dtype to feed.
_ORT_FLOAT_TYPES = {
    "tensor(float16)": torch.float16,
    "tensor(float)": torch.float32,
    "tensor(double)": torch.float64,
    "tensor(bfloat16)": torch.bfloat16,
}


def _as_input_dtype(tensor: torch.Tensor, dtype: torch.dtype | None) -> torch.Tensor:
    """Cast a float tensor to the float type the session declares (e.g. fp32 → fp16 models)."""
    if dtype is not None and tensor.is_floating_point() and tensor.dtype != dtype:
        return tensor.to(dtype)
    return tensor


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
    sort orders (:func:`fxport.ties.sorted_output_indices`), whose tied rows may be paired.
    ``program``: the program the exporter translated into the file (after its decompositions:
    its node names are the file's value names); a set that still fails is judged once more with the decisions (top-k, NMS, thresholds) the file took otherwise on
    keys within tolerance replayed in it (:mod:`fxport.decisions`). ``known_outputs``: eager's
    outputs already computed on the CPU, by ``id`` of the input set (the pipeline's eager stage
    ran the example); used when the sets run as given on the CPU. ``model_bytes``: ``model``'s
    graph serialised once (:mod:`fxport.serialized`).
    """
    acceptance = dataclasses.replace(acceptance, atol=atol, rtol=rtol, sort_keys=sort_keys)
    runner = OnnxRunner(model, device, model_bytes=model_bytes)
    candidates = list(input_sets)
    if generate:
        candidates[1:1] = (generated_sets if generated_sets is not None
                           else generate_input_sets(input_sets[0], dynamic_axes, seed, bounds, domains))
    module_on_device = copy.deepcopy(module).to(device) if device != "cpu" else module
    reference = Float64Reference(module_on_device) if _judged_by_noise(acceptance) else None
    # a second session is a second copy of the weights: files with external data are not replayed
    replay = (DecisionReplay(program, model, lambda source: OnnxRunner(source, device))
              if program is not None and acceptance.min_cosine is None and isinstance(model, onnx.ModelProto)
              else None)
    generated = {id(s) for s in candidates} - {id(s) for s in input_sets}
    rows = []
    known = known_outputs if known_outputs and prepare_inputs is None and device == "cpu" else {}
    for inputs in candidates:
        prepared = prepare_inputs(inputs) if prepare_inputs else inputs
        if label:
            prepared = dataclasses.replace(prepared, name=inputs.name + label)
        on_device = prepared.to(device) if device != "cpu" else prepared
        if on_input_set is not None:
            on_input_set(prepared.name)
        try:
            rows.append(verify_one(module_on_device, runner, on_device, acceptance, reference,
                                   bounded=id(inputs) in generated, replay=replay, expected=known.get(id(inputs))))
        except EagerRunStopped as stop:  # a generated set the model may never finish on
            rows.append(skipped_row(prepared, runner.provider, f"skipped: {stop.describe()}"))
            if notes is not None:
                notes.append(f"verification: {stop.describe()} on the generated input set '{prepared.name}' "
                             "(the model may never finish on these values); not used")
        except EagerRunError as exc:
            if id(inputs) not in generated and not optional_reference:
                raise
            rows.append(skipped_row(prepared, runner.provider, f"skipped: eager rejects these inputs ({exc.what})"))
        except VerificationError as exc:  # ONNX Runtime cannot run a generated size eager runs
            if id(inputs) not in generated or exc.report:
                raise
            rows.append(dataclasses.replace(skipped_row(prepared, runner.provider, f"ONNX Runtime failed: {exc.what}"),
                                            passed=False, mismatched_outputs=["ONNX Runtime failed"]))
    warning = fallback_warning(runner.placement, runner.providers[0])
    if warning and notes is not None and warning not in notes:
        notes.append(warning)
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


def _judged_by_noise(acceptance: Acceptance) -> bool:
    """Fixed user tolerances (--atol/--rtol), float16 and cosine criteria keep their bounds."""
    return (acceptance.atol is None and acceptance.rtol is None
            and acceptance.min_cosine is None and acceptance.tolerance_dtype is None)


#: The float64 reference (four runs, two of them with every result perturbed) may take this many
#: times the eager run of the set before it is stopped.
REFERENCE_SLOWDOWN = 100


def _float64_truth(reference: Float64Reference, inputs: InputSet, bounded: bool,
                   eager_seconds: float, earlier: Any = None) -> tuple[Any, str]:
    """``(the float64 run or None, why it was stopped or "")``: with one perturbed run, or
    ``earlier``'s with one more. A reference that runs past its limit does not skip the set,
    whose fixed tolerances failed: the set stays failed."""
    limit = max(SECONDS, REFERENCE_SLOWDOWN * eager_seconds)
    try:
        with time_limit(limit) if bounded else contextlib.nullcontext():
            return (reference.run(inputs, trials=1) if earlier is None else reference.perturbed_again(earlier)), ""
    except EagerRunStopped as stop:
        return None, stop.describe()


def verify_one(module: torch.nn.Module, runner: OnnxRunner, inputs: InputSet,
               acceptance: Acceptance = Acceptance(), reference: Float64Reference | None = None,
               bounded: bool = False, replay: DecisionReplay | None = None, expected: Any = None) -> VerificationRow:
    """Eager against ONNX Runtime on one input set; when fixed tolerances fail and ``reference``
    is given, the float64 run judges whether the difference is float32 noise, and then
    ``replay`` whether it is decisions taken otherwise on keys within tolerance
    (:mod:`fxport.decisions`). ``bounded``: inputs fxport made up, both runs limited in time
    (fxport/eager_limits.py). ``expected``: eager's outputs when already known (not run again)."""
    shapes = inputs.shapes()
    started = time.perf_counter()
    if expected is None:
        with time_limit() if bounded else contextlib.nullcontext():
            expected = run_eager(module, inputs)  # run_eager runs on a copy of the inputs
    eager_seconds = time.perf_counter() - started
    actual = runner.run(inputs, limit=SECONDS if bounded else None)
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
        input_shapes=shapes,
        provider=runner.provider,
        max_abs_error=result.max_abs,
        max_rel_error=result.max_rel,
        cosine_similarity=result.cosine,
        passed=result.passed,
        mismatched_outputs=result.mismatched,
        eager_error=noise.eager_error if noise else None,
        onnx_error=noise.onnx_error if noise else None,
        note="; ".join(result.notes),
    )
