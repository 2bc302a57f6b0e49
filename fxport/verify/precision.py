"""Verification at the precision the file was written at (fp32, fp16, int8)."""

from __future__ import annotations

from typing import Any

import onnx
import torch

from fxport.capture.half_precision import half_copy, half_inputs
from fxport.inputs import InputSet

#: Default acceptance threshold for int8: cosine similarity of ONNX vs eager float32 outputs.
DEFAULT_MIN_COSINE = 0.99


def verify_at_precision(
    module: torch.nn.Module,
    onnx_model: onnx.ModelProto,
    input_sets: list[InputSet],
    *,
    precision: str = "fp32",
    float_model: onnx.ModelProto | None = None,
    min_cosine: float | None = None,
    **verify_options: Any,
) -> list:
    """Verify ``onnx_model`` against eager ``module`` the way ``precision`` calls for.

    - fp32: element tolerances of each output's dtype.
    - fp16: against eager float32 with float16 tolerances, then against an eager float16 copy
      (rows labelled ``vs eager fp16``; skipped where the device lacks a float16 kernel).
    - int8: ``float_model`` (the float32 export) with float32 tolerances first, so exporter and
      quantiser errors stay apart; then the int8 model against eager float32, reporting max abs
      error and cosine similarity and failing only below ``min_cosine`` (default 0.99).

    ``verify_options`` go to :func:`fxport.verify.verification.verify_model` (device, dynamic_axes, bounds, notes).

    Example::

        >>> rows = verify_at_precision(net, fp16_model, [InputSet((x,))], precision="fp16")  # doctest: +SKIP
    """
    from fxport.verify.verification import Acceptance, verify_model

    if precision == "fp16":
        verify_options = {**verify_options, "program": None}  # the program is float16: no decision replay
        rows = verify_model(module, onnx_model, input_sets,
                            acceptance=Acceptance(tolerance_dtype=torch.float16), **verify_options)
        rows += verify_model(half_copy(module), onnx_model, input_sets, prepare_inputs=half_inputs,
                             label=" vs eager fp16", optional_reference=True, **verify_options)
        return rows
    if precision == "int8":
        rows = verify_model(module, float_model if float_model is not None else onnx_model, input_sets,
                            label=" fp32", **verify_options)
        threshold = DEFAULT_MIN_COSINE if min_cosine is None else min_cosine
        rows += verify_model(module, onnx_model, input_sets, acceptance=Acceptance(min_cosine=threshold),
                             label=" int8", **verify_options)
        return rows
    return verify_model(module, onnx_model, input_sets, **verify_options)
