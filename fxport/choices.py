"""The values fxport's options accept, defined once for the core and the command line.

The core validates against these (:mod:`fxport.precision`, :mod:`fxport.verify`,
:mod:`fxport.ort_optimize`, the control-flow converter) and the CLI builds its choices from them.
Imports nothing, so ``fxport --help`` stays fast.

Example::

    >>> PRECISIONS, DEVICES
    (('fp32', 'fp16', 'int8'), ('auto', 'cpu', 'cuda'))
"""

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
