"""Reduced precision of the lowered graph: float32 islands in a float16 graph, int8 quantisation.

``fp16`` exports a half-precision *copy* of the module (``fxport/capture/half_precision.py``:
``copy.deepcopy(model).half()``, float inputs cast to half) through the normal capture → lower
path, so inputs, outputs, initializers and constants all come out float16 from the exporter
itself; then the accuracy-sensitive ops in :data:`FLOAT32_OPS` (softmax, reductions,
exp/log/pow) run in float32 between Casts (:func:`keep_ops_in_float32`). The user's module is
never converted. (Measured alternative: ``onnxruntime.transformers.float16.convert_float_to_float16``
on the float32 ONNX produced graphs that fail the ONNX checker or that ONNX Runtime refuses on 2
of 3 models — ``python3 -m benchmarks.fp16_methods``, docs/precision.md.)

``int8`` quantises the float32 ONNX with ``onnxruntime.quantization``: dynamic quantisation by
default (weights int8, activations quantised at run time), static QDQ quantisation when
calibration inputs are given. Verification at the precision is ``fxport/verify/precision.py``.

Example::

    >>> sorted(FLOAT32_OPS)[:3]
    ['CumSum', 'Exp', 'Log']
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import Any, Iterator

import onnx

from fxport.engine import choices
from fxport.errors import ConversionError, UsageError
from fxport.errors import first_line as _first_line
from fxport.lower.external import Staging
from fxport.lower.lowered import LoweredModel
from fxport.eager.inputs import InputSet
from fxport.common.quiet import quiet_torch
from fxport.report.result import iter_nodes

#: The precisions ``fxport.convert(precision=...)`` and ``--precision`` accept (defined in fxport.engine.choices).
PRECISIONS = choices.PRECISIONS

#: Default acceptance threshold for int8: cosine similarity of ONNX vs eager float32 outputs.
DEFAULT_MIN_COSINE = 0.99


# --- fp16 -----------------------------------------------------------------------------------


# --- int8 -----------------------------------------------------------------------------------

def quantize_int8(model: onnx.ModelProto, calibration: list[InputSet] | None = None) -> onnx.ModelProto:
    """Quantise a float32 ONNX model to int8 with onnxruntime.quantization.

    Without ``calibration``: dynamic quantisation (MatMul/Gemm → MatMulInteger, Conv →
    ConvInteger; activation scales computed at run time). With it: static QDQ quantisation,
    activation ranges calibrated (MinMax) on those input sets. :func:`quantize_staged_int8` is
    the same for a model whose weights are staged as external data.

    Example::

        >>> int8_model = quantize_int8(result.model)                 # doctest: +SKIP
    """
    source, reader = _quantizer_source(model, calibration)
    with tempfile.TemporaryDirectory(prefix="fxport-int8-") as workdir, _quantizer_errors(reader):
        target = os.path.join(workdir, "model.int8.onnx")
        with quiet_torch():  # the quantiser logs advice through the root logger
            _run_quantizer(source, target, reader)
        return onnx.load(target)


def quantize_staged_int8(model: onnx.ModelProto, home: str, staging: Staging,
                         calibration: list[InputSet] | None = None) -> tuple[onnx.ModelProto, str]:
    """:func:`quantize_int8` of a model whose external data ``staging`` holds in ``home``: the
    quantiser reads the staged pair (it loads the weights itself, not a copy) and writes the int8
    pair into a new stage directory; returns its proto (references only) and that directory."""
    source, reader = _quantizer_source(model, calibration)
    target = os.path.join(staging.new_dir(), staging.model_name)
    with _quantizer_errors(reader):
        with quiet_torch():
            staged_source = os.path.join(home, ".fxport-int8-source.onnx")
            onnx.save(source, staged_source)
            _run_quantizer(staged_source, target, reader, external_data=True)
            os.unlink(staged_source)
        return onnx.load(target, load_external_data=False), os.path.dirname(target)


def _quantizer_source(model: onnx.ModelProto, calibration: list[InputSet] | None):
    """What the quantiser reads (fixed for its in-place Gemm rewrite) and the calibration reader."""
    source = unshare_transposed_gemm_weights(without_value_info(model))
    return source, CalibrationReader(source, calibration) if calibration else None


@contextlib.contextmanager
def _quantizer_errors(reader: "CalibrationReader | None") -> Iterator[None]:
    """The quantiser's failure as one ConversionError naming the mode."""
    try:
        yield
    except Exception as exc:
        kind = "static" if reader else "dynamic"
        raise ConversionError(
            f"onnxruntime {kind} int8 quantisation failed: {type(exc).__name__}: {_first_line(exc)}",
            hint="try --precision fp16, or the other quantisation mode (--calibrate for static)",
        ) from exc


def _run_quantizer(source: "onnx.ModelProto | str", target: str, reader: "CalibrationReader | None",
                   external_data: bool = False) -> None:
    from onnxruntime.quantization import QuantFormat, quantize_dynamic, quantize_static

    # 7-bit weights (reduce_range): x86 CPUs without VNNI (AVX2, plain AVX-512) multiply u8×s8
    # with a 16-bit intermediate that saturates on full-range weights; the file must be accurate
    # on whatever CPU runs it, not only where it was converted (a tiny MLP: cosine 0.967 without
    # it on an AVX2 CPU, 0.9997 with it; VNNI CPUs lose nothing measurable)
    if reader is None:
        quantize_dynamic(source, target, use_external_data_format=external_data, reduce_range=True)
    else:
        quantize_static(source, target, reader, quant_format=QuantFormat.QDQ, use_external_data_format=external_data,
                        reduce_range=True)


def without_value_info(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` without intermediate value_info.

    The exporter records the shape of every intermediate value; the quantiser rewrites Gemm
    weights (transposes them) and then trips over those stale shapes in its own shape inference.
    """
    stripped = onnx.ModelProto()
    stripped.CopyFrom(model)
    del stripped.graph.value_info[:]
    return stripped


class CalibrationReader:
    """onnxruntime ``CalibrationDataReader`` over fxport input sets (one feed per set)."""

    def __init__(self, model: onnx.ModelProto, input_sets: list[InputSet]):
        initializers = {init.name for init in model.graph.initializer}
        self.input_names = [i.name for i in model.graph.input if i.name not in initializers]
        self.feeds = [self._feed(s) for s in input_sets]
        self.position = 0

    def _feed(self, inputs: InputSet) -> dict[str, Any]:
        tensors = inputs.tensors()
        if len(tensors) != len(self.input_names):
            raise UsageError(
                f"calibration set {inputs.name!r} has {len(tensors)} tensors but the model takes "
                f"{len(self.input_names)} ({', '.join(self.input_names)})",
                hint="return input sets shaped like the example inputs from the --calibrate function",
            )
        return {name: t.detach().cpu().float().numpy() if t.is_floating_point() else t.detach().cpu().numpy()
                for name, t in zip(self.input_names, tensors)}

    def get_next(self) -> dict[str, Any] | None:
        if self.position >= len(self.feeds):
            return None
        self.position += 1
        return self.feeds[self.position - 1]

    def rewind(self) -> None:
        self.position = 0



# --- verification ---------------------------------------------------------------------------


def apply_precision(lowered: LoweredModel, precision: str, calibration: list[InputSet] | None = None,
                    *, staging: "Staging | None" = None, module: Any = None, block_size: int | None = None,
                    quant_format: str | None = None, quant_activations: str | None = None) -> LoweredModel:
    """The graph-level step of ``precision`` on a lowered float32 model, checked by the ONNX checker.

    fp16: float32 islands for :data:`FLOAT32_OPS`; int8: :func:`quantize_int8`; int4 /
    int8-weights: :func:`quantize_weights_only` of ``module``'s Linear weights (the record is the
    result's ``weight_quantization``); fp32: unchanged.
    A model whose weights are staged as external data (``lowered.home``, in ``staging``:
    fxport/lower/external.py) stays so: fp16 edits only the graph and shares the data file; int8
    writes its own pair into the stage. The result keeps ``lowered`` as its ``float32`` model and
    adds its node count.
    """
    model, home, record = lowered.proto, lowered.home, None
    if precision in choices.WEIGHT_ONLY:
        model, record = quantize_weights_only(lowered, module, precision, block_size, quant_format, quant_activations)
    elif precision == "fp16":
        model = keep_ops_in_float32(model)
    elif precision == "int8":
        model, home = (quantize_staged_int8(model, home, staging, calibration) if home is not None
                       else (quantize_int8(model, calibration), None))
    else:
        return lowered
    try:
        onnx.checker.check_model(staging.model_path(model, home) if home is not None else model)
    except onnx.checker.ValidationError as exc:
        raise ConversionError(f"the {precision} model is invalid: {str(exc).splitlines()[0]}",
                              hint="report this with --debug output; --precision fp32 works meanwhile") from exc
    return LoweredModel(model, home=home, translated_program=lowered.translated_program,
                        node_counts={**lowered.node_counts, precision: sum(1 for _ in iter_nodes(model.graph))},
                        fusions=lowered.fusions, float32=lowered, weight_quantization=record)


def quantize_weights_only(lowered: LoweredModel, module: Any, precision: str, block_size: int | None = None,
                          quant_format: str | None = None, quant_activations: str | None = None):
    """``(model, record)``: the lowered float32 model with ``module``'s Linear weights quantised in
    blocks (:mod:`fxport.lower.weight_quantization`), and the record verification's eager
    reference is made from (the same integers and scales).

    Example::

        >>> model, record = quantize_weights_only(lowered, module, "int4")   # doctest: +SKIP
        >>> record.describe()                                                 # doctest: +SKIP
        'Weights int4, blocks of 32, MatMulNBits: 15 Linear weights, 30 MatMuls (15 inside Loop/If bodies)'
    """
    from fxport.lower.quantized_matmuls import rewrite_quantized_matmuls
    from fxport.lower.weight_quantization import BlockwiseScheme, quantize_module_weights

    if lowered.home is not None:
        raise UsageError(f"--precision {precision} does not handle weights staged as external data yet",
                         hint="use --no-external-data (under 2 GB), or --precision fp32")
    scheme = BlockwiseScheme.of(precision, block_size, quant_format, quant_activations)
    record = quantize_module_weights(module, scheme)
    weights = {name: parameter for name, parameter in module.named_parameters(remove_duplicate=False)}
    model = rewrite_quantized_matmuls(lowered.proto, record, weights)
    if not record.applied:
        raise ConversionError(f"--precision {precision}: no MatMul of the file multiplies by a Linear weight "
                              f"({len(record.weights)} Linear weights in the model)",
                              hint="weight-only quantisation applies to nn.Linear layers; use --precision int8 or fp16")
    return model, record



# --- float32 islands in a float16 graph -------------------------------------------------------

#: Ops computed in float32 inside float16 models: long reductions and exponentials, where float16
#: loses accuracy or overflows (softmax sums, means, variances, norms). Consecutive ones stay in
#: float32 together; LayerNormalization needs no entry (its statistics are float32 already).
FLOAT32_OPS = frozenset({
    "Softmax", "LogSoftmax", "ReduceSum", "ReduceMean", "ReduceSumSquare", "ReduceLogSumExp",
    "ReduceL2", "ReduceProd", "Pow", "Exp", "Log", "CumSum",
})


def keep_ops_in_float32(model: onnx.ModelProto, op_types: frozenset[str] = FLOAT32_OPS) -> onnx.ModelProto:
    """Run ``op_types`` nodes of a float16 model in float32, with Casts at the region borders.

    A float16 input of such a node is cast to float32; its float16 outputs become float32 and are
    cast back for consumers outside the region (and for graph outputs, which keep their names
    and float16 type). Main graph only; If/Loop bodies are left as exported.

    Example::

        >>> fp16 = keep_ops_in_float32(fp16)                       # doctest: +SKIP
        >>> [n.op_type for n in fp16.graph.node]                   # doctest: +SKIP
        ['Cast', 'Softmax', 'Cast']
    """
    import onnx_ir as ir

    ir_model = ir.from_proto(model)
    graph = ir_model.graph
    for node in list(graph):
        if node.op_type in op_types and node.domain in ("", "ai.onnx") and _all_float16(node):
            _cast_inputs_to_float32(graph, node)
            _cast_outputs_back_to_float16(graph, node, op_types)
    return ir.to_proto(ir_model)


def _all_float16(node) -> bool:
    import onnx_ir as ir

    floats = [v for v in [*node.inputs, *node.outputs] if v is not None and v.dtype is not None and v.dtype.is_floating_point()]
    return bool(floats) and all(v.dtype == ir.DataType.FLOAT16 for v in node.outputs if v is not None) \
        and all(v.dtype in (ir.DataType.FLOAT16, ir.DataType.FLOAT) for v in floats)


def _cast_inputs_to_float32(graph, node) -> None:
    import onnx_ir as ir

    for index, value in enumerate(node.inputs):
        if value is not None and value.dtype == ir.DataType.FLOAT16:
            cast = ir.Node("", "Cast", [value], [ir.AttrInt64("to", ir.DataType.FLOAT)],
                           name=f"{node.name}_to_fp32_{index}")
            cast.outputs[0].name = f"{value.name}_fp32_for_{node.name}"
            cast.outputs[0].dtype = ir.DataType.FLOAT
            cast.outputs[0].shape = value.shape
            graph.insert_before(node, cast)
            node.replace_input_with(index, cast.outputs[0])


def _cast_outputs_back_to_float16(graph, node, op_types) -> None:
    import onnx_ir as ir

    for output in node.outputs:
        if output is None or output.dtype != ir.DataType.FLOAT16:
            continue
        output.dtype = ir.DataType.FLOAT
        outside = [(user, index) for user, index in output.uses() if user.op_type not in op_types]
        if not outside and not output.is_graph_output():
            continue
        back = ir.Node("", "Cast", [output], [ir.AttrInt64("to", ir.DataType.FLOAT16)], name=f"{node.name}_to_fp16")
        restored = back.outputs[0]
        restored.dtype, restored.shape = ir.DataType.FLOAT16, output.shape
        graph.insert_after(node, back)
        for user, index in outside:
            user.replace_input_with(index, restored)
        if output.is_graph_output():
            name = output.name
            output.name = f"{name}_fp32"
            restored.name = name
            graph.outputs[:] = [restored if v is output else v for v in graph.outputs]
        else:
            restored.name = f"{output.name}_fp16"


def unshare_transposed_gemm_weights(model: onnx.ModelProto) -> onnx.ModelProto:
    """Give every ``Gemm(transB=1)`` whose weight has other users its own copy of the weight.

    onnxruntime's dynamic quantiser rewrites ``Gemm(transB=1)`` as ``MatMul`` by transposing
    the weight initializer *in place*, "assuming B is not used by any other node": a weight
    shared by two Gemms (a Linear called twice, or in both branches of an If) is transposed twice
    and the model silently computes garbage; a weight tied to a Gather (embeddings) is corrupted
    for the Gather. Copies keep each use intact. Returns a new model.
    """
    fixed = onnx.ModelProto()
    fixed.CopyFrom(model)
    initializers = {init.name: init for init in fixed.graph.initializer}
    nodes = list(iter_nodes(fixed.graph))
    uses: dict[str, int] = {}
    for node in nodes:
        for name in node.input:
            uses[name] = uses.get(name, 0) + 1
    copies = 0
    for node in nodes:
        if node.op_type != "Gemm" or len(node.input) < 2 or not _transposes_b(node):
            continue
        weight = node.input[1]
        if weight in initializers and uses[weight] > 1:
            copies += 1
            own = onnx.TensorProto()
            own.CopyFrom(initializers[weight])
            own.name = f"{weight}__gemm{copies}"
            fixed.graph.initializer.append(own)
            node.input[1] = own.name
    return fixed


def _transposes_b(node: onnx.NodeProto) -> bool:
    return any(attr.name == "transB" and attr.i == 1 for attr in node.attribute)
