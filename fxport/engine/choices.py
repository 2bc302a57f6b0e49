"""The values fxport's options accept, defined once for the core and the command line.

The core validates against these (:class:`fxport.engine.options.Options` through the checks below,
:mod:`fxport.verify.verification`, the control-flow converter) and the CLI builds its choices from them.
Imports nothing but :mod:`fxport.errors` (when a check fails), so ``fxport --help`` stays fast.

Example::

    >>> PRECISIONS, DEVICES
    (('fp32', 'fp16', 'int8', 'int4', 'int8-weights'), ('auto', 'cpu', 'cuda'))
"""

from __future__ import annotations

from typing import Any

#: ``precision=`` / ``--precision``: float32, half model, int8 quantised (weights and activations,
#: onnxruntime's quantiser), or weight-only blockwise int4 / int8 of the Linear weights (docs/precision.md).
PRECISIONS = ("fp32", "fp16", "int8", "int4", "int8-weights")
#: The weight-only precisions: Linear weights quantised in blocks, activations float32.
WEIGHT_ONLY = ("int4", "int8-weights")
#: ``quant_format=`` / ``--quant-format``: how a weight-only file holds a quantised MatMul:
#: com.microsoft.MatMulNBits, or the standard DequantizeLinear(block_size) → MatMul (opset 21).
QUANT_FORMATS = ("matmulnbits", "qdq")
#: ``quant_activations=`` / ``--quant-activations``: what a weight-only file's quantised MatMuls
#: multiply the weights with: float32 activations (MatMulNBits accuracy_level 0), or int8 ones
#: quantised per block at run time (accuracy_level 4; ONNX Runtime's default for the standard form).
QUANT_ACTIVATIONS = ("float32", "int8")
#: ``block_size=`` / ``--block-size``: input features per scale of a weight-only precision.
BLOCK_SIZES = (16, 32, 64, 128, 256)
#: ``device=`` / ``--device``: where to verify; ``auto`` is CUDA when torch and ONNX Runtime have it.
DEVICES = ("auto", "cpu", "cuda")
#: ``optimize=`` / ``--optimize``: the ONNX graph optimisation level (docs/optimize.md).
OPTIMIZE_LEVELS = ("none", "generic", "ort")
#: The level when none is given (``optimize=True``).
DEFAULT_OPTIMIZE = "generic"
#: ``if_strategy=`` / ``--if-strategy``: how a tensor-conditioned ``if`` is lowered.
IF_STRATEGIES = ("auto", "where", "cond")


def listed(values: tuple[str, ...]) -> str:
    """``"fp32, fp16 or int8"``: the choices as a hint says them.

    >>> listed(OPTIMIZE_LEVELS)
    'none, generic or ort'
    """
    return ", ".join(values[:-1]) + " or " + values[-1] if len(values) > 1 else "".join(values)

# --- the checks Options runs when it is built ----------------------------------------------

def _usage_error(what: str, hint: str) -> Exception:
    from fxport.errors import UsageError

    return UsageError(what, hint=hint)


def optimize_level(optimize: Any) -> str:
    """``optimize`` as one of :data:`OPTIMIZE_LEVELS` (``True`` → generic, ``False`` → none).

    Example::

        >>> optimize_level(True), optimize_level(False), optimize_level("ort")
        ('generic', 'none', 'ort')
    """
    if optimize is True or optimize is None:
        return DEFAULT_OPTIMIZE
    if optimize is False:
        return "none"
    if isinstance(optimize, str) and optimize in OPTIMIZE_LEVELS:
        return optimize
    raise _usage_error(f"unknown optimize level {optimize!r}", f"use {listed(OPTIMIZE_LEVELS)}")


def check_precision(precision: str, calibration: Any = None, min_cosine: float | None = None,
                    block_size: int | None = None, quant_format: str | None = None,
                    quant_activations: str | None = None) -> None:
    """Raise UsageError for an unknown precision or options that do not apply to it.

    >>> check_precision("int8", block_size=32)
    Traceback (most recent call last):
    fxport.errors.UsageError: --block-size only applies to the weight-only precisions int4 and int8-weights; use --precision int4, or drop --block-size
    """
    if precision not in PRECISIONS:
        raise _usage_error(f"unknown precision {precision!r}", f"use {listed(PRECISIONS)}")
    for flag, value in (("--block-size", block_size), ("--quant-format", quant_format),
                        ("--quant-activations", quant_activations)):
        if value is not None and precision not in WEIGHT_ONLY:
            raise _usage_error(f"{flag} only applies to the weight-only precisions {' and '.join(WEIGHT_ONLY)}",
                               f"use --precision int4, or drop {flag}")
    if block_size is not None and block_size not in BLOCK_SIZES:
        raise _usage_error(f"--block-size {block_size} is not one MatMulNBits takes",
                           f"use {listed(tuple(str(size) for size in BLOCK_SIZES))}")
    if quant_format is not None and quant_format not in QUANT_FORMATS:
        raise _usage_error(f"unknown --quant-format {quant_format!r}", f"use {listed(QUANT_FORMATS)}")
    if quant_activations is not None and quant_activations not in QUANT_ACTIVATIONS:
        raise _usage_error(f"unknown --quant-activations {quant_activations!r}", f"use {listed(QUANT_ACTIVATIONS)}")
    if quant_format == "qdq" and quant_activations == "float32":
        raise _usage_error("--quant-format qdq computes with int8 activations: ONNX Runtime fuses DequantizeLinear → "
                           "MatMul into MatMulNBits at accuracy level 4 by default",
                           "use --quant-format matmulnbits for float32 activations, or drop --quant-activations")
    if calibration is not None and precision != "int8":
        raise _usage_error("calibration inputs only apply to --precision int8",
                           "add --precision int8 or drop --calibrate")
    if min_cosine is not None and precision != "int8":
        raise _usage_error("--min-cosine only applies to --precision int8",
                           "fp32 and fp16 are checked with element tolerances; drop --min-cosine")
    if min_cosine is not None and not 0.0 <= min_cosine <= 1.0:
        raise _usage_error(f"--min-cosine {min_cosine} is outside [0, 1]", "use e.g. 0.99")


#: The lowest opset fxport writes: torch's dynamo exporter translates at opset 18 and converts
#: down to 17; asked for less, it wrote opset 18 without a word (torch 2.13).
MIN_OPSET, MAX_OPSET = 17, 30


def check_opset(opset: int | None) -> None:
    """An opset fxport can write (a usage error naming the range otherwise).

    >>> check_opset(13)
    Traceback (most recent call last):
    fxport.errors.UsageError: --opset 13 is below 17, the lowest opset the dynamo exporter writes; use --opset 17 or later, or leave it out (opset 18)
    """
    if opset is None:
        return
    if opset < MIN_OPSET:
        raise _usage_error(f"--opset {opset} is below {MIN_OPSET}, the lowest opset the dynamo exporter writes",
                           f"use --opset {MIN_OPSET} or later, or leave it out (opset 18)")
    if opset > MAX_OPSET:
        raise _usage_error(f"--opset {opset} is out of range", f"use an opset between {MIN_OPSET} and {MAX_OPSET}, e.g. 18")


def check_tolerances(atol: float | None, rtol: float | None) -> None:
    """Tolerances are finite non-negative numbers (a usage error naming the flag otherwise)."""
    for flag, value in (("--atol", atol), ("--rtol", rtol)):
        if value is not None and not (value >= 0 and value != float("inf")):
            raise _usage_error(f"{flag} {value} is not a finite non-negative number",
                               f"pass e.g. {flag} 1e-3, or leave it out for the dtype's default")
