"""The lower and precision stages: the dynamo exporter with the rules' op translations, then
fp16 islands or int8 quantisation of the lowered float model. Each adds the
:class:`~fxport.lower.lowered.LoweredModel` later stages read (``job.lowered``)."""

from __future__ import annotations

import dataclasses

from fxport.capture.dynamic_dims import dynamic_axes_by_input, record_dynamic_ranges
from fxport.engine.conversion import Conversion
from fxport.lower.dead_initializers import unused_initializers_removed
from fxport.lower.lowered import LoweredModel
from fxport.lower.lowering import check_onnx, lower_model, name_dynamic_axes, name_outputs
from fxport.lower.precision import apply_precision
from fxport.lower.serialized import ModelBytes


def lower_to_onnx(job: Conversion) -> None:
    """The dynamo exporter with the rules' op translations; dynamic axes named and bounded."""
    options = job.options
    lowered = lower_model(
        job.program, staging=job.staging, opset=options.opset, optimize=options.optimize,
        translation_table=job.ruleset.translation_table(), external_data=options.external_data,
        grown_loops=job.grown_loops, check=False)  # checked below, once the axes and outputs carry their names
    if options.keep_artifacts:
        job.artifacts["translated_program"] = lowered.translated_program
    job.ruleset.record_op_rules_fired(lowered.proto, job.rewrites)
    job.axis_names = dynamic_axes_by_input(job.signature, job.example, job.dynamic_shapes)
    if options.rewrites:  # without rewrites (fxport diff's stock baseline) the file stays as the exporter wrote it
        name_dynamic_axes(lowered.proto, job.axis_names)
        name_outputs(lowered.proto, job.model)  # after forward's return where known, not clone_2
        record_dynamic_ranges(lowered.proto, job.program)  # the sizes the file is valid for
    job.lowered = lowered if lowered.staged else serialized_once(lowered, job)  # a staged pair was checked by lower


def serialized_once(lowered: LoweredModel, job: Conversion) -> LoweredModel:
    """A self-contained model whose graph is final: serialised once from here (``model_bytes``),
    begun as the output file while verification runs (fp32), and checked."""
    unused_initializers_removed(lowered.proto)  # ONNX Runtime warned at every load of such a file
    model_bytes = ModelBytes(lowered.proto)
    if job.options.precision == "fp32":  # written while the checker and verification run; committed if they pass
        job.staging.begin_file(model_bytes.pieces(lowered.proto))
        model_bytes.head_file = job.staging.early_head  # ONNX Runtime maps the weights from it
    fused = job.options.optimize == "ort"  # ORT's default-domain contrib ops: the checker sees a copy
    check_onnx(lowered.proto if fused else model_bytes(lowered.proto), ort=fused)
    return dataclasses.replace(lowered, model_bytes=model_bytes)


def convert_precision(job: Conversion) -> None:
    """fp16 islands, int8 quantisation, or weight-only int4/int8 of the lowered float model (the
    verify stage measures a weight-only file's agreement with the float32 model)."""
    options = job.options
    job.lowered = apply_precision(job.lowered, options.precision, job.calibration_sets, staging=job.staging,
                                  module=job.model, block_size=options.block_size, quant_format=options.quant_format,
                                  quant_activations=options.quant_activations)
