"""``fxport diff``: what rewriting changed, from source to captured graph to ONNX.

:func:`diff_model` converts a model with fxport (keeping the intermediate aten programs) and
builds the same pictures for the stock path:

- **source**: per control-flow / patch rewrite, the user's function before and after;
- **captured graph**: stock ``torch.export`` vs fxport's capture (with rewrites installed), and
  fxport's capture before vs after graph rules. When stock capture fails, "before" is what the
  legacy TorchScript trace records for the example input: the branch and trip count it bakes in;
- **ONNX**: stock ``torch.onnx.export(dynamo=True)`` (or the TorchScript exporter when capture
  fails) vs fxport's model: op-count deltas and a node-level diff.

:func:`diff_onnx_files` is the same ONNX part for two files.

Example::

    >>> import torch
    >>> from fxport.diff import diff_model
    >>> class Net(torch.nn.Module):
    ...     def forward(self, x):
    ...         return torch.relu(x) * 2
    >>> d = diff_model(Net(), (torch.randn(2, 3),), verify=False)
    >>> d.onnx.identical, [stage.title for stage in d.graph_stages]
    (True, ['capture'])
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
import warnings
from typing import Any

import onnx
import torch

from fxport.capture.dynamic_dims import bound_parameter_names, dynamic_axes_by_input
from fxport.diff.graph_diff import CapturedGraphDiff, diff_captured, fx_nodes, iter_graph_changes
from fxport.diff.onnx_diff import OnnxGraphDiff, diff_onnx, iter_changes, with_untranslated_ops
from fxport.diff.source_diff import definition_at, function_first_line, source_diff_for
from fxport.errors import ConversionError, UsageError
from fxport.eager.inputs import InputSet
from fxport.engine.options import Options
from fxport.common.quiet import quiet_torch
from fxport.report.result import AppliedRewrite, ConversionResult

#: tiers whose effect shows in the user's source
SOURCE_TIERS = ("control-flow", "patch")


@dataclasses.dataclass
class Baseline:
    """What the stock exporters make of the model, without fxport's rewrites."""

    program: Any = None
    trace_graph: Any = None
    onnx_model: onnx.ModelProto | None = None
    capture_error: str | None = None
    onnx_error: str | None = None
    trace_error: str | None = None
    untranslated_stand_in: bool = False

    @property
    def onnx_label(self) -> str:
        if self.untranslated_stand_in:
            return "torch.onnx.export(dynamo=True), untranslated ops as aten:: nodes"
        if self.program is None:
            return "torch.onnx.export(dynamo=False) — TorchScript trace"
        return "torch.onnx.export(dynamo=True)"

    @property
    def graph_label(self) -> str:
        return "torch.jit.trace (legacy)" if self.program is None else "torch.export (stock)"


@dataclasses.dataclass
class RewriteView:
    """One applied rewrite with everything the diff attributes to it."""

    rewrite: AppliedRewrite
    source_diff: list[str]
    graph_nodes: list[str]
    onnx_nodes: list[str]
    #: index of the earlier rewrite that already shows the same source diff (same function)
    source_shown_by: int | None = None

    def to_dict(self) -> dict:
        return {**self.rewrite.to_dict(), "source_diff": self.source_diff,
                "source_shown_by": self.source_shown_by,
                "graph_nodes": self.graph_nodes, "onnx_nodes": self.onnx_nodes}


@dataclasses.dataclass
class GraphStage:
    """A before/after pair of captured graphs and their node diff."""

    title: str
    before_label: str
    after_label: str
    diff: CapturedGraphDiff
    note: str = ""

    def to_dict(self) -> dict:
        return {"title": self.title, "before": self.before_label, "after": self.after_label,
                "note": self.note, **self.diff.to_dict()}


@dataclasses.dataclass
class ModelDiff:
    """Everything ``fxport diff`` shows; ``to_dict()`` is the ``--json`` document."""

    target: str
    rewrites: list[RewriteView]
    graph_stages: list[GraphStage]
    onnx: OnnxGraphDiff
    onnx_before_label: str
    onnx_after_label: str
    notes: list[str] = dataclasses.field(default_factory=list)
    onnx_before: onnx.ModelProto | None = dataclasses.field(default=None, repr=False)
    onnx_after: onnx.ModelProto | None = dataclasses.field(default=None, repr=False)
    result: ConversionResult | None = dataclasses.field(default=None, repr=False)

    def to_dict(self) -> dict:
        return {
            "target": self.target,
            "notes": self.notes,
            "rewrites": [r.to_dict() for r in self.rewrites],
            "graph_stages": [s.to_dict() for s in self.graph_stages],
            "onnx": {"before": self.onnx_before_label, "after": self.onnx_after_label,
                     **self.onnx.to_dict()},
            "verified": self.result.verified if self.result else None,
        }


def diff_model(model: torch.nn.Module, args: Any = (), *, kwargs: dict | None = None,
               dynamic_shapes: Any = None, target: str = "", **convert_options: Any) -> ModelDiff:
    """Convert ``model`` with fxport and diff every stage against the stock exporters.

    ``convert_options`` go to :func:`fxport.convert` (``opset``, ``verify``, ``rules``...).
    """
    from fxport.engine.pipeline import convert, module_left_as_it_was

    example = InputSet.of(args, kwargs)
    with tempfile.TemporaryDirectory(prefix="fxport-diff-") as folder:
        # a model over 2 GB keeps its weights in a file the diff never reads, not in memory
        own_output = convert_options.get("output") is None
        if own_output:
            convert_options["output"] = os.path.join(folder, "model.onnx")
        result = convert(model, example.args, kwargs=example.kwargs, dynamic_shapes=dynamic_shapes,
                         keep_artifacts=True, **convert_options)
        if own_output:
            result.output_path = None
            del convert_options["output"]
    progress = convert_options.get("progress") or (lambda stage, state: None)
    progress("stock export", "start")
    with module_left_as_it_was(model, []):
        baseline = stock_baseline(model, example, dynamic_shapes, convert_options.get("opset"))
    progress("stock export", "done")
    return assemble(target or type(model).__name__, result, baseline)


def assemble(target: str, result: ConversionResult, baseline: Baseline) -> ModelDiff:
    """Build the ModelDiff from a conversion result (with artefacts) and the stock baseline."""
    before_rules = result.artifacts.get("exported_program_before")
    after_rules = result.artifacts.get("exported_program_after")
    stages = [capture_stage(baseline, before_rules)]
    graph_rules_diff = diff_captured(before_rules, after_rules)
    if any(r.tier == "graph" for r in result.rewrites) or not graph_rules_diff.identical:
        stages.append(GraphStage("graph rules", "fxport capture, before graph rules",
                                 "after graph rules", graph_rules_diff))
    fill_untranslated_stand_in(baseline, result)
    onnx_diff = diff_onnx(baseline.onnx_model, result.model)
    after_nodes = fx_nodes(after_rules) if after_rules is not None else []
    views = attribute_rewrites(result.rewrites, stages[0].diff, after_nodes, onnx_diff)
    return ModelDiff(
        target=target, rewrites=views, graph_stages=stages, onnx=onnx_diff,
        onnx_before_label=baseline.onnx_label, onnx_after_label="fxport", notes=baseline_notes(baseline),
        onnx_before=baseline.onnx_model, onnx_after=result.model, result=result,
    )


def fill_untranslated_stand_in(baseline: Baseline, result: ConversionResult) -> None:
    """When stock lowering failed on ops that op rules translate, compare with those ops folded back."""
    op_rules = {r.rule for r in result.rewrites if r.tier == "op"}
    if baseline.onnx_model is not None or baseline.program is None or not op_rules:
        return
    baseline.onnx_model = with_untranslated_ops(result.model, op_rules)
    baseline.untranslated_stand_in = baseline.onnx_model is not None


def capture_stage(baseline: Baseline, fxport_capture: Any) -> GraphStage:
    before = baseline.program if baseline.program is not None else baseline.trace_graph
    note = ""
    if baseline.program is None and baseline.trace_graph is None:
        note = f"neither torch.export nor torch.jit.trace could capture the model: {baseline.trace_error}"
    elif baseline.program is None:
        note = ("stock torch.export failed, so 'before' is the TorchScript trace of the example "
                "input: the branch it took and the trip counts it ran are baked in")
    return GraphStage("capture", baseline.graph_label, "fxport capture (rewrites installed)",
                      diff_captured(before, fxport_capture), note)


def baseline_notes(baseline: Baseline) -> list[str]:
    notes = []
    if baseline.capture_error:
        notes.append(f"stock torch.export failed: {baseline.capture_error}")
    if baseline.onnx_error:
        notes.append(f"stock ONNX export failed: {baseline.onnx_error}")
    if baseline.untranslated_stand_in:
        notes.append("'before' ONNX is fxport's graph with each op-rule translation folded back into "
                     "the aten op the stock exporter could not translate")
    return notes


def attribute_rewrites(rewrites: list[AppliedRewrite], capture_diff: CapturedGraphDiff,
                       after_nodes: list, onnx_diff: OnnxGraphDiff) -> list[RewriteView]:
    """The source diff, captured-graph nodes and ONNX nodes that belong to each rewrite.

    A node belongs to a rule when it carries the rule's name (``fxport.rule`` metadata on ONNX
    nodes, ``fxport_rule`` meta on FX nodes, the FX node an op rule translated). A node that the
    diff marks added or changed and that comes from the user's function a source-level rewrite
    changed belongs to the rewrite of that function at or above its line.
    """
    owner = _span_owner(rewrites)
    views = []
    for index, rewrite in enumerate(rewrites):
        named = {rewrite.data.get("fx_node"), *rewrite.data.get("new_nodes", ())} - {None}
        graph_nodes = [n.name for n in after_nodes if n.op not in ("input", "output")
                       and (n.name in named or n.rule == rewrite.rule or _translated_by(rewrite, n))]
        graph_nodes += [c.node.name for _, c in iter_graph_changes(capture_diff)
                        if c.status in ("added", "changed") and c.node.op not in ("input", "output")
                        and owner(c.node.location) == index and c.node.name not in graph_nodes]
        onnx_nodes = [c.node.name or c.node.op_type for _, c in iter_changes(onnx_diff) if c.after is not None
                      and (c.after.rule == rewrite.rule
                           or (c.status != "same" and owner(c.after.location) == index))]
        views.append(RewriteView(rewrite, source_diff_for(rewrite), graph_nodes, onnx_nodes))
    _share_identical_source_diffs(views)
    return views


def _translated_by(rewrite: AppliedRewrite, node) -> bool:
    """An op rule's captured node: same user line, and the op it translates in the node's op name
    (the exporter decomposes first, so ``aten::special_erfinv`` reaches the rule as ``erfinv``)."""
    op = str((rewrite.data or {}).get("op", "")).split("::")[-1]
    return (rewrite.tier == "op" and bool(op) and rewrite.location is not None
            and node.location == str(rewrite.location) and op in node.op.split("::")[-1])


def _share_identical_source_diffs(views: list[RewriteView]) -> None:
    """Rewrites in one function carry the same function diff: show it once, on the first."""
    first_with: dict[tuple, int] = {}
    for index, view in enumerate(views):
        key = tuple(view.source_diff)
        if not key:
            continue
        if key in first_with:
            view.source_shown_by = first_with[key]
            view.source_diff = []
        else:
            first_with[key] = index


def _span_owner(rewrites: list[AppliedRewrite]):
    """``owner(location)`` → index of the source-level rewrite whose function holds that line."""
    spans = []
    for index, rewrite in enumerate(rewrites):
        if rewrite.tier in SOURCE_TIERS and rewrite.location is not None:
            before = (rewrite.data or {}).get("source_before") or ""
            start = function_first_line(before, rewrite.location) if before else rewrite.location.lineno
            if not before and rewrite.tier == "patch":  # the replacement defined at the rule's line
                before, start = definition_at(rewrite.location) or ("", start)
            end = max(start + len(before.splitlines()) - 1, rewrite.location.lineno)
            spans.append((index, str(rewrite.location).rsplit(":", 1)[0], start, end, rewrite.location.lineno))

    def owner(location: str | None) -> int | None:
        if not location or ":" not in location:
            return None
        filename, _, line_text = location.rpartition(":")
        line = int(line_text)
        inside = [span for span in spans if span[1] == filename and span[2] <= line <= span[3]]
        above = [span for span in inside if span[4] <= line]
        chosen = max(above, key=lambda span: span[4]) if above else min(inside, key=lambda span: span[4], default=None)
        return chosen[0] if chosen else None

    return owner


# --- the stock path ---------------------------------------------------------------------------

def stock_baseline(model: torch.nn.Module, example: InputSet, dynamic_shapes: Any,
                   opset: int | None = None) -> Baseline:
    """Stock capture and ONNX export, no rewrites; a TorchScript trace when capture fails.

    The pipeline's stages through ``lower`` with ``rewrites=False``: no rules, control flow as
    written, the exporter's file as it wrote it.
    """
    from fxport.engine.pipeline import run

    baseline = Baseline()
    try:
        job = run(model, example.args, kwargs=example.kwargs, dynamic_shapes=dynamic_shapes, until="lower",
                  options=Options(opset=opset, rewrites=False, verify=False))
        baseline.program, baseline.onnx_model = job.program, job.onnx_model
    except ConversionError as exc:
        if exc.stage != "lower":
            baseline.capture_error = exc.message
        else:  # captured, and the stock exporter refused the program
            baseline.program, baseline.onnx_error = exc.conversion.program, exc.message
    if baseline.program is not None:
        return baseline
    try:
        baseline.trace_graph = legacy_trace_graph(model, example)
    except Exception as exc:  # noqa: BLE001 - no trace either: the diff says "before" is unavailable
        baseline.trace_error = f"{type(exc).__name__}: {_first_line(exc)}"
    try:
        baseline.onnx_model = legacy_onnx_export(model, example, dynamic_shapes, opset)
    except Exception as exc:  # noqa: BLE001 - the legacy exporter's own failure is the finding
        baseline.onnx_error = f"{type(exc).__name__}: {_first_line(exc)}"
    return baseline


def legacy_trace_graph(model: torch.nn.Module, example: InputSet) -> Any:
    """``torch.jit.trace(model, example).inlined_graph``: what the legacy exporter records."""
    with _quiet():
        traced = torch.jit.trace(model, example.args, example_kwarg_inputs=example.kwargs or None,
                                 check_trace=False, strict=False)
    return traced.inlined_graph


def legacy_onnx_export(model: torch.nn.Module, example: InputSet, dynamic_shapes: Any,
                       opset: int | None) -> onnx.ModelProto:
    """What ``torch.onnx.export(..., dynamo=False)`` (the TorchScript exporter) writes.

    Written to a file (a model over 2 GB gets external data) and read back without its weights.
    """
    names = bound_parameter_names(model, example)
    axes = dynamic_axes_by_input(model, example, dynamic_shapes)
    dynamic_axes = {names[index]: dims for index, dims in axes.items() if index < len(names)}
    with _quiet(), tempfile.TemporaryDirectory(prefix="fxport-legacy-") as folder:
        path = os.path.join(folder, "model.onnx")
        torch.onnx.export(model, example.args, path, kwargs=example.kwargs or None, dynamo=False,
                          input_names=names, dynamic_axes=dynamic_axes or None,
                          opset_version=opset or 18)
        return onnx.load(path, load_external_data=False)


@contextlib.contextmanager
def _quiet():
    with quiet_torch(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else ""


# --- two ONNX files ---------------------------------------------------------------------------

def diff_onnx_files(before_path: str, after_path: str) -> ModelDiff:
    """Structural diff of two ONNX files (no conversion involved).

    >>> d = diff_onnx_files("a.onnx", "b.onnx")      # doctest: +SKIP
    >>> [(c.op, c.delta) for c in d.onnx.op_deltas()]  # doctest: +SKIP
    """
    models = [load_onnx(path) for path in (before_path, after_path)]
    return ModelDiff(target=f"{before_path} → {after_path}", rewrites=[], graph_stages=[],
                     onnx=diff_onnx(*models), onnx_before_label=before_path,
                     onnx_after_label=after_path, onnx_before=models[0], onnx_after=models[1])


def load_onnx(path: str) -> onnx.ModelProto:
    if not os.path.isfile(path):
        raise UsageError(f"ONNX file {path} does not exist", hint="check the path")
    try:
        return onnx.load(path, load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - protobuf raises several types
        raise UsageError(f"{path} is not a readable ONNX model ({type(exc).__name__})",
                         hint="give two .onnx files, or one model target") from exc
