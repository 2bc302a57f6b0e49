"""Verification at the precision the file was written at: the passes of a plan (fp32, fp16, int8).

A :class:`Pass` is one run of the verifier over every input set, with what differs from the
plan's other passes: the label on its rows, the criterion, the eager side, the file. fp32 is one
pass; :func:`precision_passes` gives the others:

- fp16: against eager float32 with float16 tolerances, then against an eager float16 copy
  (rows labelled ``vs eager fp16``; skipped where the device lacks a float16 kernel). The
  program is float16: no decision replay.
- int8: the float32 export (the plan's ``float_model``) with float32 tolerances first, so
  exporter and quantiser errors stay apart; then the int8 file against eager float32, passing on
  cosine similarity ≥ ``min_cosine`` (default 0.99).
- int4 / int8-weights: the file against eager running the *same* quantised weights (a copy of
  the module with its Linear weights dequantised from the file's integers and scales, ``weights``:
  the precision stage's record; with ``--quant-activations int8`` its quantised Linears also
  quantise their activations per block as ONNX Runtime's MatMulNBits at accuracy level 4 does),
  with the normal criteria: ids equal, floats within float32 tolerances. The agreement with
  float32 is reported apart (fxport/verify/weight_agreement.py).

Example::

    >>> [(p.label, p.min_cosine, p.float_model) for p in precision_passes("int8")]
    [(' fp32', None, True), (' int8', 0.99, False)]
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch

from fxport.capture.half_precision import half_copy, half_inputs
from fxport.eager.inputs import InputSet

#: Default acceptance threshold for int8: cosine similarity of ONNX vs eager float32 outputs.
DEFAULT_MIN_COSINE = 0.99


@dataclasses.dataclass(frozen=True)
class Pass:
    """One run of the verifier inside a plan.

    Attributes:
        label: appended to each row's name (``" vs eager fp16"``).
        tolerance_dtype: compare floats with this dtype's tolerances (a float16 file against float32 eager).
        min_cosine: pass on cosine similarity instead of element tolerances (int8).
        eager: the eager module this pass runs, from the caller's (a float16 copy); None: as given.
        inputs: each input set as this pass runs it (cast to float16); None: as given.
        optional_reference: an eager failure (an op without a float16 kernel) skips the row.
        float_model: verify the plan's ``float_model`` (the float32 export) instead of the file.
        replay: decisions may be replayed in the program (not in a float16 one).
    """

    label: str = ""
    tolerance_dtype: torch.dtype | None = None
    min_cosine: float | None = None
    eager: Callable[[torch.nn.Module], torch.nn.Module] | None = None
    inputs: Callable[[InputSet], InputSet] | None = None
    optional_reference: bool = False
    float_model: bool = False
    replay: bool = True


def precision_passes(precision: str = "fp32", min_cosine: float | None = None, weights=None) -> tuple[Pass, ...]:
    """The passes ``precision`` calls for (module docstring); ``weights``: a weight-only precision's
    record (:class:`~fxport.lower.weight_quantization.WeightQuantization`)."""
    if weights is not None:
        return (Pass(label=f" vs eager {precision}", eager=weights.fake_quantized),)
    if precision == "fp16":
        return (Pass(tolerance_dtype=torch.float16, replay=False),
                Pass(label=" vs eager fp16", eager=half_copy, inputs=half_inputs, optional_reference=True,
                     replay=False))
    if precision == "int8":
        return (Pass(label=" fp32", float_model=True),
                Pass(label=" int8", min_cosine=DEFAULT_MIN_COSINE if min_cosine is None else min_cosine))
    return (Pass(),)
