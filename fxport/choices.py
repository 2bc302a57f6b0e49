"""The values fxport's options accept, defined once for the core and the command line.

The core validates against these (:class:`fxport.options.Options` through the checks below,
:mod:`fxport.verify.verification`, the control-flow converter) and the CLI builds its choices from them.
Imports nothing but :mod:`fxport.errors` (when a check fails), so ``fxport --help`` stays fast.

Example::

    >>> PRECISIONS, DEVICES
    (('fp32', 'fp16', 'int8'), ('auto', 'cpu', 'cuda'))
"""

from __future__ import annotations

from typing import Any

#: ``precision=`` / ``--precision``: float32, half model, or int8 quantised (docs/precision.md).
PRECISIONS = ("fp32", "fp16", "int8")
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


def check_precision(precision: str, calibration: Any = None, min_cosine: float | None = None) -> None:
    """Raise UsageError for an unknown precision or options that do not apply to it."""
    if precision not in PRECISIONS:
        raise _usage_error(f"unknown precision {precision!r}", f"use {listed(PRECISIONS)}")
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
