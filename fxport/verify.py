"""The verify stage: ONNX Runtime against eager PyTorch on inputs the export never saw.

Input sets checked: the example; fresh random values of the same shapes and dtypes (drawn from
the example's value range, never the example itself); for every dynamic dimension, a larger
and a smaller size (dimensions sharing a name change together); and any user-supplied sets.
Floating outputs are compared with dtype-aware tolerances, integer and bool outputs exactly,
NaN/inf positions must agree. A mismatch is a :class:`~fxport.errors.VerificationError`
carrying the table, never a warning.

Example::

    >>> rows = verify_model(module, onnx_model, [InputSet((x,))], dynamic_axes={0: {0: "batch"}})  # doctest: +SKIP
    >>> all(r.passed for r in rows)                                                             # doctest: +SKIP
    True
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import os
import shutil
import tempfile
from typing import Callable

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
)
from fxport.compare import to_numpy as _to_numpy
from fxport.domain import InputDomain, padding_mask
from fxport.errors import ConversionError, EagerRunError, VerificationError
from fxport.errors import first_line as _first_line
from fxport.load import InputSet, run_eager
from fxport.report import VerificationRow

class OnnxRunner:
    """An onnxruntime session fed with fxport input sets.

    Example::

        >>> runner = OnnxRunner(onnx_model, device="cpu")        # doctest: +SKIP
        >>> outputs = runner.run(InputSet((x,)))                 # doctest: +SKIP
    """

    def __init__(self, model: "onnx.ModelProto | str | os.PathLike", device: str = "cpu", *,
                 profile_placement: bool | None = None):
        """``model``: a proto, or the path of a model file (one with external data: ORT maps the data file)."""
        import onnxruntime as ort

        self.providers = select_providers(device)
        options = ort.SessionOptions()
        options.log_severity_level = 3
        #: Where each node ran, from a profile of the first run (on by default for CUDA, where ORT
        #: silently places nodes without a CUDA kernel on CPU): provider → ["OpType(name)", ...].
        self.placement: dict[str, list[str]] | None = None
        self._profiling = device == "cuda" if profile_placement is None else profile_placement
        if self._profiling:
            self._profile_dir = tempfile.mkdtemp(prefix="fxport-ort-profile-")
            options.enable_profiling = True
            options.profile_file_prefix = os.path.join(self._profile_dir, "run")
        try:
            source = os.fspath(model) if isinstance(model, (str, os.PathLike)) else model.SerializeToString()
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

    def run(self, inputs: InputSet) -> list[np.ndarray]:
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
        try:
            outputs = self.session.run(None, feed)
        except Exception as exc:
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


def node_placement(profile_events: list[dict]) -> dict[str, list[str]]:
    """Provider → nodes ("OpType(name)") from an onnxruntime profile (chrome-trace events).

    Example::

        >>> node_placement([{"cat": "Node", "name": "mm_kernel_time",
        ...                  "args": {"op_name": "MatMul", "provider": "CUDAExecutionProvider"}}])
        {'CUDAExecutionProvider': ['MatMul(mm)']}
    """
    placement: dict[str, list[str]] = {}
    for event in profile_events:
        name = event.get("name", "")
        args = event.get("args") or {}
        if event.get("cat") != "Node" or not name.endswith("_kernel_time") or "provider" not in args:
            continue
        node = f"{args.get('op_name', '?')}({name[:-len('_kernel_time')]})"
        nodes = placement.setdefault(args["provider"], [])
        if node not in nodes:
            nodes.append(node)
    return placement


def describe_placement(placement: dict[str, list[str]], requested: str) -> str:
    """The provider actually used, e.g. ``CUDAExecutionProvider (2 of 40 nodes on CPU: Erf, Shape)``.

    When nothing ran on ``requested``, the provider that did run everything is returned.
    """
    total = sum(len(nodes) for nodes in placement.values())
    if requested not in placement:
        return next(iter(placement), requested)
    elsewhere = {provider: nodes for provider, nodes in placement.items() if provider != requested}
    if not elsewhere:
        return requested
    notes = []
    for provider, nodes in elsewhere.items():
        ops = sorted({node.split("(")[0] for node in nodes})
        notes.append(f"{len(nodes)} of {total} nodes on {provider.replace('ExecutionProvider', '')}: {', '.join(ops)}")
    return f"{requested} ({'; '.join(notes)})"


def fallback_warning(placement: dict[str, list[str]] | None, requested: str) -> str | None:
    """A one-line warning when some nodes did not run on ``requested`` (None when all did)."""
    if not placement or set(placement) <= {requested}:
        return None
    description = describe_placement(placement, requested)
    if requested not in placement:
        return f"ONNX Runtime ran every node on {description}, not {requested}; the verification is a CPU result"
    return (f"ONNX Runtime fell back to CPU for some nodes: {description.split(' (', 1)[1][:-1]} "
            "(ops without a CUDA kernel, or shape arithmetic ORT keeps on CPU by design)")


def select_providers(device: str) -> list[str]:
    """ONNX Runtime providers for ``device`` ("cpu", "cuda"); cuda needs onnxruntime-gpu."""
    import onnxruntime as ort

    if device == "cuda":
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise ConversionError(
                "--device cuda needs onnxruntime's CUDAExecutionProvider, which is not installed",
                hint="pip install 'fxport[cuda]' (onnxruntime-gpu), or use --device cpu",
            )
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


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


# --- generating input sets ----------------------------------------------------------------

def generate_input_sets(
    example: InputSet,
    dynamic_axes: dict[int, dict[int, str]] | None = None,
    seed: int = 1234,
    bounds: dict[int, dict[int, tuple[int, int]]] | None = None,
    domains: dict[int, InputDomain] | None = None,
) -> list[InputSet]:
    """Fresh values of the example's shapes, padding variants of its masks, other dynamic sizes.

    ``bounds`` (tensor index → axis → (low, high), from the exported program) keeps the new
    sizes inside the range the export is valid for; ``domains`` (from
    :func:`fxport.domain.input_domains`) keeps the values inside the model's domain: ids below
    their table's size, padding-shaped masks, sorted sequences. Each set is named by what it
    exercises (``random``, ``left-padded mask``, ``larger[batch=3,seq=12], left-padded mask``).
    """
    domains = domains or {}
    generator = torch.Generator().manual_seed(seed)
    has_mask = any(domain.padding_mask for domain in domains.values())
    draw = functools.partial(_with_new_values, example, domains=domains, generator=generator)
    sets = [draw({}, name="random" + (", all-ones mask" if has_mask else ""), mask_side="none")]
    if has_mask:
        sets += [draw({}, name=f"{side}-padded mask", mask_side=side) for side in ("right", "left")]
    sizes = example_dim_sizes(example, dynamic_axes or {})
    if sizes:
        low, high = _size_limits(dynamic_axes, bounds or {})
        larger = {name: min(size + max(1, size // 2) if size >= 2 else 3, high.get(name, 2**62))
                  for name, size in sizes.items()}
        smaller = {name: min(max(2, low.get(name, 2), size // 2), size) for name, size in sizes.items()}
        for label, new_sizes, side in (("larger", larger, "left"), ("smaller", smaller, "right")):
            if new_sizes != sizes:
                desc = ",".join(f"{n}={s}" for n, s in new_sizes.items())
                name = f"{label}[{desc}]" + (f", {side}-padded mask" if has_mask else "")
                sets.append(draw(_axis_sizes(example, dynamic_axes, new_sizes), name=name, mask_side=side))
        covered = [sizes, larger, smaller]
        for new_sizes, why in edge_sizes(example, dynamic_axes, bounds or {}):
            if new_sizes in covered:
                continue
            covered.append(new_sizes)
            changed = ",".join(f"{n}={s}" for n, s in new_sizes.items() if s != sizes[n])
            name = f"size[{changed}]" + (f" {why}" if why else "") + (", right-padded mask" if has_mask else "")
            sets.append(draw(_axis_sizes(example, dynamic_axes, new_sizes), name=name, mask_side="right"))
    return sets


#: Inputs of a generated size set may hold at most this many elements (or 16x the example's)
#: when a declared maximum is tried.
MAX_GENERATED_ELEMENTS = 1 << 24


def edge_sizes(example: InputSet, dynamic_axes: dict[int, dict[int, str]] | None,
               bounds: dict[int, dict[int, tuple[int, int]]]) -> list[tuple[dict[str, int], str]]:
    """The sizes where a converted model differs from eager when it does: ``(sizes, why)``.

    For each dynamic dimension, the others kept at the example's size: sizes 1, 0 and 2 where
    the declared range allows them; the declared minimum and maximum (the maximum when the
    inputs stay affordable); and both sides of every bound the capture introduced (the valid
    range of a :class:`fxport.dynamic_dims.DimRange` narrower than the declared one), so a model
    exported for sizes ≥ 2 is also run at 1. With several dimensions, also all of them at 1.
    ``why`` says what is special about the size (``"min"``, ``"outside exported 2..inf"``).

    Example::

        >>> from fxport.dynamic_dims import DimRange, UNBOUNDED
        >>> ex = InputSet((torch.ones(4, 3),))
        >>> [(s, w) for s, w in edge_sizes(ex, {0: {0: "batch"}}, {0: {0: DimRange(2, UNBOUNDED)}})]
        [({'batch': 1}, 'outside exported 2..inf'), ({'batch': 0}, 'outside exported 2..inf'), ({'batch': 2}, '')]
    """
    sizes = example_dim_sizes(example, dynamic_axes or {})
    if not sizes:
        return []
    low, high = _size_limits(dynamic_axes, bounds)
    declared_low, declared_high = _declared_limits(dynamic_axes, bounds)
    budget = max(MAX_GENERATED_ELEMENTS, 16 * sum(t.numel() for t in example.tensors()))
    found: list[tuple[dict[str, int], str]] = []

    def add(name: str, size: int, why: str = "") -> None:
        lo, hi = declared_low.get(name, 0), declared_high.get(name, 2**62)
        if size < lo or size > hi or size == sizes[name]:
            return
        if size < low.get(name, 0) or size > high.get(name, 2**62):
            why = f"outside exported {_describe(low.get(name, 0), high.get(name, 2**62))}"
        new_sizes = {**sizes, name: size}
        if _element_count(example, dynamic_axes, new_sizes) > budget:
            return
        if all(s != new_sizes for s, _ in found):
            found.append((new_sizes, why))

    for name in sizes:
        lo, hi = low.get(name, 0), high.get(name, 2**62)
        d_lo, d_hi = declared_low.get(name, 0), declared_high.get(name, 2**62)
        add(name, 1)
        add(name, 0)
        add(name, 2)
        if d_lo > 1:
            add(name, d_lo, "min")
        if d_hi < 2**62:
            add(name, d_hi, "max")
        if lo > d_lo:  # a lower bound the export introduced: both sides
            add(name, lo - 1)
            add(name, lo, "min")
        if hi < d_hi:
            add(name, hi, "max")
            add(name, hi + 1)
    if len(sizes) > 1:
        ones = {name: 1 for name in sizes}
        if all(declared_low.get(n, 0) <= 1 for n in sizes) and ones != sizes:
            outside = [n for n in sizes if low.get(n, 0) > 1]
            why = f"outside exported {', '.join(outside)} range" if outside else ""
            if all(s != ones for s, _ in found):
                found.append((ones, why))
    return found


def _describe(low: int, high: int) -> str:
    return f"{low}..{'inf' if high >= 2**62 else high}"


def _declared_limits(dynamic_axes, bounds) -> tuple[dict[str, int], dict[str, int]]:
    """Per dimension name, the range the user declared (the valid range when none is known)."""
    low: dict[str, int] = {}
    high: dict[str, int] = {}
    for index, axes in (dynamic_axes or {}).items():
        for axis, name in axes.items():
            bound = bounds.get(index, {}).get(axis, (0, 2**62))
            lo, hi = getattr(bound, "declared", (0, 2**62))
            low[name] = max(low.get(name, 0), lo)
            high[name] = min(high.get(name, 2**62), hi)
    return low, high


def _element_count(example: InputSet, dynamic_axes, new_sizes: dict[str, int]) -> int:
    total = 0
    for index, tensor in enumerate(example.tensors()):
        count = 1
        for axis, size in enumerate(tensor.shape):
            name = (dynamic_axes or {}).get(index, {}).get(axis)
            count *= new_sizes[name] if name is not None else size
        total += count
    return total


def _size_limits(dynamic_axes, bounds) -> tuple[dict[str, int], dict[str, int]]:
    """Per dimension name, the tightest (low, high) over every axis that carries it."""
    low: dict[str, int] = {}
    high: dict[str, int] = {}
    for index, axes in dynamic_axes.items():
        for axis, name in axes.items():
            lo, hi = bounds.get(index, {}).get(axis, (0, 2**62))
            low[name] = max(low.get(name, 0), lo)
            high[name] = min(high.get(name, 2**62), hi)
    return low, high


def example_dim_sizes(example: InputSet, dynamic_axes: dict[int, dict[int, str]]) -> dict[str, int]:
    tensors = example.tensors()
    sizes: dict[str, int] = {}
    for index, axes in dynamic_axes.items():
        for axis, name in axes.items():
            sizes.setdefault(name, tensors[index].shape[axis])
    return sizes


def _axis_sizes(example, dynamic_axes, new_sizes) -> dict[int, dict[int, int]]:
    return {index: {axis: new_sizes[name] for axis, name in axes.items()}
            for index, axes in dynamic_axes.items()}


def _with_new_values(example: InputSet, axis_sizes: dict[int, dict[int, int]], *, name: str,
                     domains: dict[int, InputDomain], generator: torch.Generator, mask_side: str) -> InputSet:
    """The example with every tensor redrawn (``axis_sizes`` resizes axes) inside its domain."""
    def redraw(index: int, value: torch.Tensor) -> torch.Tensor:
        shape = list(value.shape)
        for axis, size in axis_sizes.get(index, {}).items():
            shape[axis] = size
        return draw_in_domain(value, tuple(shape), domains.get(index, InputDomain()), generator, mask_side)

    return example.map_tensors(redraw, name=name)


def draw_in_domain(example: torch.Tensor, shape: tuple[int, ...], domain: InputDomain,
                   generator: torch.Generator, mask_side: str = "none") -> torch.Tensor:
    """A fresh tensor of ``shape`` like ``example`` whose values lie in ``domain``.

    Example::

        >>> ids = draw_in_domain(torch.tensor([[3, 4]]), (2, 5), InputDomain(index_bound=7),
        ...                      torch.Generator().manual_seed(0))
        >>> bool((ids >= 0).all() and (ids < 7).all()), list(ids.shape)
        (True, [2, 5])
    """
    if domain.padding_mask:
        return padding_mask(shape, example.dtype, mask_side, generator).to(example.device)
    if domain.index_bound is not None:
        drawn = torch.randint(0, max(domain.index_bound, 1), shape, generator=generator)
        drawn = drawn.to(example.dtype).to(example.device)
    else:
        drawn = random_like(example, shape, generator)
    if domain.sorted_last_axis and drawn.dim() > 0:
        drawn = torch.sort(drawn, dim=-1).values
    return drawn


def random_like(example: torch.Tensor, shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    """Random values of ``example``'s dtype drawn from its value range (wider for scalars)."""
    dtype, device = example.dtype, example.device
    values = example.detach().cpu()
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool().to(device)
    if values.numel() == 0:
        return torch.zeros(shape, dtype=dtype, device=device)
    if dtype.is_floating_point:
        low, high = values.float().min().item(), values.float().max().item()
        if values.numel() == 1 or high - low < 1e-6:
            spread = max(abs(low), 1.0)
            low, high = low - 2 * spread, high + 2 * spread
        drawn = torch.rand(shape, generator=generator) * (high - low) + low
        return drawn.to(dtype).to(device)
    low, high = int(values.min()), int(values.max())
    if values.numel() == 1:
        low, high = min(0, low), max(2 * high, 2)
    return torch.randint(low, high + 1, shape, generator=generator).to(dtype).to(device)


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
    for the coverage pass); None draws them here.
    """
    acceptance = dataclasses.replace(acceptance, atol=atol, rtol=rtol)
    runner = OnnxRunner(model, device)
    candidates = list(input_sets)
    if generate:
        candidates[1:1] = (generated_sets if generated_sets is not None
                           else generate_input_sets(input_sets[0], dynamic_axes, seed, bounds, domains))
    module_on_device = copy.deepcopy(module).to(device) if device != "cpu" else module
    generated = {id(s) for s in candidates} - {id(s) for s in input_sets}
    rows = []
    for inputs in candidates:
        prepared = prepare_inputs(inputs) if prepare_inputs else inputs
        if label:
            prepared = dataclasses.replace(prepared, name=inputs.name + label)
        on_device = prepared.to(device) if device != "cpu" else prepared
        if on_input_set is not None:
            on_input_set(prepared.name)
        try:
            rows.append(verify_one(module_on_device, runner, on_device, acceptance))
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


def verify_one(module: torch.nn.Module, runner: OnnxRunner, inputs: InputSet,
               acceptance: Acceptance = Acceptance()) -> VerificationRow:
    shapes = inputs.shapes()
    expected = run_eager(module, inputs)  # run_eager runs on a copy of the inputs
    result = compare(expected, runner.run(inputs), acceptance)
    return VerificationRow(
        name=inputs.name,
        input_shapes=shapes,
        provider=runner.provider,
        max_abs_error=result.max_abs,
        max_rel_error=result.max_rel,
        cosine_similarity=result.cosine,
        passed=result.passed,
        mismatched_outputs=result.mismatched,
    )
