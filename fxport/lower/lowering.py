"""The lower stage: captured program → ONNX with the dynamo exporter.

``torch.onnx.export(exported_program, dynamo=True)`` does the translation (its op registry built
once per process: fxport/lower/exporter.py); fxport adds the translations contributed by rules
(``custom_translation_table``), optional optimisation
(``ONNXProgram.optimize()``: constant folding, dead code, common subexpressions), the ONNX
checker, and one-line errors. When an op has no translation, every missing op is listed at once.
Weights over protobuf's 2 GB limit go to external data (fxport/lower/external.py): streamed from the
module's tensors into a staged data file, never copied into the proto.

:func:`lower_model` is the lower stage's: it returns a :class:`~fxport.lower.lowered.LoweredModel`
(the proto, where its weights live, the translated program, the node counts); :func:`lower` is
the same for a caller outside the pipeline, returning the proto with its weights inside.

Example::

    >>> import torch
    >>> program = torch.export.export(torch.nn.ReLU(), (torch.randn(2, 3),))
    >>> onnx_model = lower(program, opset=18)
    >>> [node.op_type for node in onnx_model.graph.node]
    ['Relu']
"""

from __future__ import annotations

import builtins
import re
from typing import Any, Callable, Mapping

import onnx
import torch

from fxport.lower.dead_nodes import removed_dead_nodes
from fxport.lower.missing_ops import find_missing_ops
from fxport.errors import LoweringError, UnsupportedOpsError
from fxport.lower.exporter import export_program, exporter_summary
from fxport.lower.grown_loops import loop_translations
from fxport.lower.loop_attention import loop_attention_for_onnxruntime
from fxport.lower.loop_invariants import hoist_loop_invariants
from fxport.lower.ort_workarounds import apply_ort_workarounds
from fxport.lower.size_arithmetic import size_arithmetic_in_double
from fxport.lower.external import Staging, external_data_wanted, ir_initializer_bytes, load_weights_into
from fxport.lower.lowered import LoweredModel
from fxport.engine.choices import optimize_level
from fxport.common.quiet import quiet_torch
from fxport.report.result import iter_nodes


def lower_model(
    program: torch.export.ExportedProgram,
    *,
    staging: Staging,
    opset: int | None = None,
    translation_table: dict[Callable, Callable] | None = None,
    optimize: bool | str = True,
    external_data: bool | None = None,
    check: bool = True,
    grown_loops: Mapping[str, object] | None = None,
) -> LoweredModel:
    """Translate ``program`` to ONNX: a :class:`~fxport.lower.lowered.LoweredModel`; raise
    UnsupportedOpsError or LoweringError.

    Its ``node_counts`` hold the node count (subgraphs included) as exported and, with
    ``optimize``, after ``ONNXProgram.optimize()`` (onnxscript's optimizer: constant folding,
    dead-code elimination, common-subexpression elimination); its ``translated_program`` is the
    program the exporter translated (``program`` after its decompositions), whose node names the
    file's values carry.

    ``optimize``: ``"none"`` (or False), ``"generic"`` (or True: the optimizer above) or
    ``"ort"``: the optimizer, then onnxscript's ONNX Runtime fusions (fxport/lower/ort_fusions.py;
    ``node_counts["ort"]``, and ``fusions``: the counts of those that fired).

    ``external_data`` (None: when the weights exceed ``fxport.lower.external.THRESHOLD_BYTES``)
    streams the weights into a data file in ``staging`` and returns a model whose proto
    references it (its ``home`` names the directory); that pair is always checked here, as a file.

    ``check``: the ONNX checker on a self-contained proto (a caller that edits it further and
    checks its final bytes passes False).

    ``grown_loops``: the loops whose state grows that the capture made (``{key: loop}``, the
    conversion's ``grown_loops``); None looks them up in the ``fxport::grown_loop`` op's own
    registry (a program captured outside the pipeline).
    """
    level = optimize_level(optimize)
    translation_table = {**SYMBOLIC_TRANSLATIONS, **(translation_table or {})}
    # loops whose state grows: their bodies are exported first (fxport/lower/grown_loops.py)
    translation_table = {**translation_table, **loop_translations(program, _grown_loops(grown_loops), opset, translation_table)}
    onnx_program, counts = _exported(program, opset, translation_table, level)
    apply_ort_workarounds(onnx_program.model)  # shapes ONNX Runtime computes wrongly (fxport/lower/ort_workarounds.py)
    size_arithmetic_in_double(onnx_program.model)  # Python floats of sizes in double, as eager (size_arithmetic.py)
    fusions: dict[str, int] = {}
    if level == "ort":
        in_loops = loop_attention_for_onnxruntime(onnx_program.model)  # before the library's fusions (loop_attention.py)
        onnx_program.model, fusions = fuse_ort(onnx_program.model, translation_table)
        if in_loops:
            fusions["loop_group_query_attention"] = in_loops
        counts["ort"] = count_ir_nodes(onnx_program.model)
    found = {"translated_program": onnx_program.exported_program, "node_counts": counts, "fusions": fusions}
    if not external_data_wanted(external_data, ir_initializer_bytes(onnx_program.model)):
        model = onnx_program.model_proto
        if check:
            check_onnx(model, ort=level == "ort")
        return LoweredModel(model, **found)
    model, home = staging.externalize(onnx_program.model)
    check_onnx(staging.model_path(model, home), ort=level == "ort")
    return LoweredModel(model, home=home, **found)


def _exported(program, opset: int | None, translation_table: dict, level: str) -> tuple[Any, dict[str, int]]:
    """The exporter's ONNXProgram for ``program`` (optimised unless ``level`` is ``"none"``) and
    its node counts so far; failures explained in one line."""
    counts: dict[str, int] = {}
    try:  # no_grad: the exporter's re-runs of cond must not trace branches for autograd
        with quiet_torch(), torch.no_grad():
            onnx_program = export_program(program, opset=opset, translation_table=translation_table)
            counts["exported"] = count_ir_nodes(onnx_program.model)
            if level != "none":
                hoist_loop_invariants(onnx_program.model.graph)  # before CSE: a hoisted transpose meets its twin
                onnx_program.optimize()
                removed_dead_nodes(onnx_program.model)  # the optimiser's folded-away branches still "read" values
                counts["optimized"] = count_ir_nodes(onnx_program.model)
    except Exception as exc:
        raise explain_lowering_failure(exc, program, translation_table, opset) from exc
    written = onnx_program.model.opset_imports.get("")
    if opset is not None and written != opset:  # the exporter falls back to its own opset silently
        raise LoweringError(f"the exporter could not convert this model to opset {opset} (it wrote opset {written})",
                            hint=f"use --opset {written}, or leave --opset out")
    return onnx_program, counts


def lower(
    program: torch.export.ExportedProgram,
    *,
    opset: int | None = None,
    translation_table: dict[Callable, Callable] | None = None,
    optimize: bool | str = True,
    external_data: bool | None = None,
    grown_loops: Mapping[str, object] | None = None,
) -> onnx.ModelProto:
    """``program`` as a checked ONNX ModelProto with its weights inside (:func:`lower_model`
    outside a pipeline: weights that went to external data are checked as a temporary pair,
    then read back into the proto, which may then exceed 2 GB in memory).
    """
    staging = Staging()  # made only for weights over the threshold
    try:
        lowered = lower_model(program, staging=staging, opset=opset, translation_table=translation_table,
                              optimize=optimize, external_data=external_data, grown_loops=grown_loops)
        return load_weights_into(lowered.proto, lowered.home) if lowered.staged else lowered.proto
    finally:
        staging.cleanup()


def _round_symbolic(number, ndigits=None):
    """``round(n)`` of a symbolic size (ExportDB's dynamic_shape_round): ONNX ``Round`` rounds
    half to even, as Python does."""
    from onnxscript import opset18 as op

    if ndigits is not None:
        raise NotImplementedError("round(x, ndigits) of a symbolic number")
    return op.Cast(op.Round(op.Cast(number, to=onnx.TensorProto.DOUBLE)), to=onnx.TensorProto.INT64)


SYMBOLIC_TRANSLATIONS: dict[Callable, Callable] = {builtins.round: _round_symbolic}
"""Python builtins on symbolic numbers that the exporter (torch 2.13) has no translation for."""


def fuse_ort(model, translation_table: dict | None = None) -> tuple[Any, dict[str, int]]:
    """onnxscript's ONNX Runtime fusions on an onnx_ir model (fxport/lower/ort_fusions.py), one-line
    errors: the fused model and the counts of the fusions that fired.

    Fused nodes keep the FX origin of an op rule's translation (``translation_table``), so the
    rule is still reported as applied after its nodes were fused.
    """
    from fxport.lower.ort_fusions import fuse_for_onnxruntime

    keep = [f"[target=torch.ops.{op.namespace}.{op._opname}.{op._overloadname}]"
            for op in (translation_table or {}) if hasattr(op, "_overloadname")]
    try:
        with quiet_torch():
            model, fired = fuse_for_onnxruntime(model, keep_origins=keep)
    except Exception as exc:
        raise LoweringError(f"onnxscript's ONNX Runtime fusions failed: {exporter_summary(exc)}",
                            hint="use --optimize generic (the default) meanwhile; --debug shows the trace") from exc
    return model, dict(fired)


#: ONNX Runtime contrib ops that ORT registers in the *default* ONNX domain (the ONNX checker
#: does not know them; ops in ``com.microsoft`` it leaves alone).
ORT_DEFAULT_DOMAIN_OPS = frozenset({"SimplifiedLayerNormalization"})


def check_onnx(model: onnx.ModelProto | bytes | str, ort: bool = False) -> None:
    """The ONNX checker on a proto, its serialised bytes or, for external data, the staged model file.

    ``ort``: the model may hold ORT contrib ops of the default domain
    (:data:`ORT_DEFAULT_DOMAIN_OPS`); a proto is checked as a copy with those moved to
    ``com.microsoft``, a staged file with the checker's complaint about them tolerated.
    """
    if ort and isinstance(model, onnx.ModelProto) and any(
            n.op_type in ORT_DEFAULT_DOMAIN_OPS and n.domain in ("", "ai.onnx") for n in iter_nodes(model.graph)):
        model = _contrib_ops_moved(model)
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        if ort and any(f"No Op registered for {name} " in str(exc) for name in ORT_DEFAULT_DOMAIN_OPS):
            return
        raise LoweringError(f"the exported ONNX model is invalid: {str(exc).splitlines()[0]}",
                            hint="report this with --debug output") from exc


def _contrib_ops_moved(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` whose :data:`ORT_DEFAULT_DOMAIN_OPS` nodes are in ``com.microsoft`` (for the checker)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for node in iter_nodes(copy.graph):
        if node.op_type in ORT_DEFAULT_DOMAIN_OPS and node.domain in ("", "ai.onnx"):
            node.domain = "com.microsoft"
    if not any(o.domain == "com.microsoft" for o in copy.opset_import):
        copy.opset_import.add(domain="com.microsoft", version=1)
    return copy


def count_ir_nodes(model) -> int:
    """Nodes of an onnx_ir model's main graph and every nested subgraph (If/Loop/Scan bodies)."""
    import onnx_ir

    return sum(1 for _ in onnx_ir.traversal.RecursiveGraphIterator(model.graph))


def explain_lowering_failure(exc, program, translation_table, opset) -> Exception:
    """Turn an exporter failure into UnsupportedOpsError (listing all ops) or LoweringError."""
    try:
        with quiet_torch():
            missing = find_missing_ops(program, translation_table, opset)
    except Exception:  # the scan itself failed: report the exporter's error instead
        missing = []
    if missing:
        from fxport.lower.missing_ops import rule_skeleton

        return UnsupportedOpsError([(m.op, m.location) for m in missing],
                                   skeleton=rule_skeleton(missing))
    summary = exporter_summary(exc)
    failing = _failing_rule(exc, translation_table)
    if failing is not None:
        target, name, where = failing
        return LoweringError(f"the op rule {name!r} for {target} failed: {summary}", where=where,
                             hint="fix the rule (its ONNX op names and their inputs), or --disable it (`fxport rules` lists rule names)")
    return LoweringError(f"the ONNX exporter failed: {summary}", hint="run with --debug for the full trace")


def _failing_rule(exc: BaseException, translation_table) -> tuple[str, str, Any] | None:
    """(target, rule name, its file:line) of a user's op rule whose body raised during lowering."""
    import traceback

    from fxport.common.frames import SourceLocation, exception_chain

    codes = {}
    for op, translation in (translation_table or {}).items():
        for cell in getattr(translation, "__closure__", None) or ():
            inner = cell.cell_contents
            if callable(inner) and hasattr(inner, "__code__") and getattr(inner, "__name__", "") == translation.__name__:
                target = (f"{op.namespace}::{op._opname}" + ("" if op._overloadname == "default" else f".{op._overloadname}")
                          if hasattr(op, "_overloadname") else str(op))
                codes[inner.__code__] = (target, inner.__name__)
    found = None
    for error in exception_chain(exc):
        for frame, lineno in traceback.walk_tb(error.__traceback__):
            if frame.f_code in codes:
                target, name = codes[frame.f_code]
                found = (target, name, SourceLocation(frame.f_code.co_filename, lineno, name))
    return found


def name_dynamic_axes(model: onnx.ModelProto, axis_names: dict[int, dict[int, str]]) -> None:
    """Rename the exporter's symbolic dims (``s77``) to the user's names (``batch``), in place.

    ``axis_names`` maps graph-input index → axis → dimension name. Expressions such as
    ``s77 + 1`` in outputs and in If/Loop/Scan bodies are renamed too.
    """
    renames: dict[str, str] = {}
    for index, axes in axis_names.items():
        if index >= len(model.graph.input):
            continue
        dims = model.graph.input[index].type.tensor_type.shape.dim
        for axis, name in axes.items():
            if axis < len(dims) and dims[axis].dim_param and dims[axis].dim_param != name:
                renames.setdefault(dims[axis].dim_param, name)
    if not renames:
        return
    pattern = re.compile(r"\b(" + "|".join(map(re.escape, renames)) + r")\b")
    for value in _value_infos(model.graph):
        for dim in value.type.tensor_type.shape.dim:
            if dim.dim_param:
                dim.dim_param = pattern.sub(lambda m: renames[m.group(1)], dim.dim_param)


def _value_infos(graph: onnx.GraphProto):
    from fxport.report.result import iter_graphs

    for each in iter_graphs(graph):
        yield from each.input
        yield from each.output
        yield from each.value_info


def return_names(function) -> list[str] | None:
    """The names ``function`` returns, when every ``return`` gives the same plain names:
    ``return logits, hidden`` → ``["logits", "hidden"]``; None otherwise (an expression, a dict,
    no source).

    >>> def forward(self, x):
    ...     hidden = x * 2
    ...     return hidden, x
    >>> return_names(forward)
    ['hidden', 'x']
    """
    import ast
    import inspect
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return None
    definition = tree.body[0] if tree.body and isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    if definition is None:
        return None
    found = set()
    for node in _own_returns(definition):
        values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        if not all(isinstance(v, ast.Name) for v in values):
            return None
        found.add(tuple(v.id for v in values))
    return list(found.pop()) if len(found) == 1 else None


def _own_returns(node):
    """The ``return`` statements of a function definition, not of functions nested in it."""
    import ast

    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(child, ast.Return):
            yield child
        yield from _own_returns(child)


def name_outputs(model: onnx.ModelProto, module) -> None:
    """Name the graph's inputs and outputs, in place, where the names are free in the graph:
    the outputs after what ``forward`` returns where that is known (:func:`return_names`), not
    ``clone_2``; a module may name them itself with ``onnx_input_names`` / ``onnx_output_names``
    (lists, one name per flattened input or output: ``past_key_values.0.key``)."""
    inputs = [i for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    given_inputs = getattr(module, "onnx_input_names", None) if module is not None else None
    if given_inputs:
        _rename(model, inputs, list(given_inputs))
    names = getattr(module, "onnx_output_names", None) if module is not None else None
    if not names:
        names = return_names(type(module).forward) if module is not None else None
    if names:
        _rename(model, model.graph.output, list(names))


def _rename(model: onnx.ModelProto, values, names: list[str]) -> None:
    """Rename the graph inputs or outputs ``values`` to ``names`` everywhere they are used (the
    graph and its subgraphs); nothing when the counts differ or a new name is taken."""
    if len(names) != len(values) or len(set(names)) != len(names):
        return
    taken = {name for node in iter_nodes(model.graph) for name in (*node.input, *node.output)}
    taken |= {i.name for i in model.graph.input} | {i.name for i in model.graph.initializer}
    taken |= {o.name for o in model.graph.output}
    renames = {value.name: new for value, new in zip(values, names) if value.name != new}
    if any(new in taken for new in renames.values()) or len(renames) != len({v.name for v in values if v.name in renames}):
        return
    for node in iter_nodes(model.graph):
        for field in (node.input, node.output):
            for i, name in enumerate(field):
                if name in renames:
                    field[i] = renames[name]
    for value in (*model.graph.input, *model.graph.output, *model.graph.value_info):
        if value.name in renames:
            value.name = renames[value.name]


def _grown_loops(given: Mapping[str, object] | None) -> Mapping[str, object]:
    if given is not None:
        return given
    from fxport.controlflow.operators.loops.growing import LOOPS

    return LOOPS
