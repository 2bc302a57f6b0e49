"""The lower and precision stages: the dynamo exporter with the rules' op translations, then
fp16 islands or int8 quantisation of the lowered float model."""

from __future__ import annotations

from typing import Any

from fxport.capture.dynamic_dims import dynamic_axes_by_input, record_dynamic_ranges
from fxport.conversion import Conversion
from fxport.lower.dead_initializers import unused_initializers_removed
from fxport.lower.lowering import check_onnx, lower, name_dynamic_axes, name_outputs
from fxport.lower.precision import apply_precision
from fxport.lower.serialized import ModelBytes
from fxport.report import iter_nodes


def lower_to_onnx(job: Conversion) -> None:
    """The dynamo exporter with the rules' op translations; dynamic axes named and bounded."""
    options = job.options
    programs: dict[str, Any] = {}
    job.onnx_model = job.float_model = lower(
        job.program, opset=options.opset, optimize=options.optimize,
        translation_table=job.ruleset.translation_table(), node_counts=job.node_counts,
        external_data=options.external_data, stage=job.staging, fusions=job.fusions, programs=programs,
        grown_loops=job.grown_loops, check=False)  # checked below, once the axes and outputs carry their names
    job.translated_program = programs.get("translated")
    if options.keep_artifacts:
        job.artifacts["translated_program"] = job.translated_program
    job.ruleset.record_op_rules_fired(job.onnx_model, job.rewrites)
    job.axis_names = dynamic_axes_by_input(job.signature, job.example, job.dynamic_shapes)
    if options.rewrites:  # without rewrites (fxport diff's stock baseline) the file stays as the exporter wrote it
        name_dynamic_axes(job.onnx_model, job.axis_names)
        name_outputs(job.onnx_model, job.model)  # after forward's return where known, not clone_2
        record_dynamic_ranges(job.onnx_model, job.program)  # the sizes the file is valid for
    if not job.staging.home(job.onnx_model):  # a staged pair was checked as a file by lower
        unused_initializers_removed(job.onnx_model)  # ONNX Runtime warned at every load of such a file
        job.model_bytes = ModelBytes(job.onnx_model)  # the graph is final: serialised once from here
        if options.precision == "fp32":  # written while the checker and verification run; committed if they pass
            job.staging.begin_file(job.model_bytes.pieces(job.onnx_model))
            job.model_bytes.head_file = job.staging.early_head  # ONNX Runtime maps the weights from it
        fused = options.optimize == "ort"  # ORT's default-domain contrib ops: the checker sees a copy
        check_onnx(job.onnx_model if fused else job.model_bytes(job.onnx_model), ort=fused)


def convert_precision(job: Conversion) -> None:
    """fp16 islands or int8 quantisation of the lowered float model."""
    precision = job.options.precision
    job.onnx_model = apply_precision(job.float_model, precision, job.calibration_sets, stage=job.staging)
    job.node_counts[precision] = sum(1 for _ in iter_nodes(job.onnx_model.graph))
