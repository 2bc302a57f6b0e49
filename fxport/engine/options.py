"""What a conversion is asked to do, as one value: :class:`Options`.

``fxport convert``'s flags, :func:`fxport.convert`'s keywords and the stages of
:mod:`fxport.engine.pipeline` all read the same frozen value; it is checked once, when it is built, so a
stage never meets a bad combination (a usage error names the flag).

Example::

    >>> from fxport.engine.options import Options
    >>> options = Options(verify=False, optimize="ort")
    >>> options.optimize, options.replace(atol=1e-3).atol
    ('ort', 0.001)
    >>> Options(atol=-1)
    Traceback (most recent call last):
    ...
    fxport.errors.UsageError: --atol -1 is not a finite non-negative number; ...
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fxport.engine.choices import check_opset, check_precision, check_tolerances, optimize_level


@dataclasses.dataclass(frozen=True)
class Options:
    """How to convert: every choice besides the model, its inputs and the output path.

    Attributes:
        opset: ONNX opset; None lets the exporter choose.
        verify: compare ONNX Runtime with eager PyTorch on the example, fresh values and other
            sizes along dynamic dimensions (plus the caller's ``verify_inputs``).
        device: ``"auto"``, ``"cpu"`` or ``"cuda"`` for verification.
        rules: extra rewrite rules (see docs/rules.md): decorated functions/classes, modules,
            rule-file paths, or a list of those; the built-ins always apply.
        disable_rules: names of rules to leave out (``fxport rules`` lists them, control-flow
            conversions included).
        if_strategy: how tensor-conditioned ``if`` statements are converted: ``"auto"`` (where
            for pure cheap branches, cond otherwise), ``"where"`` or ``"cond"``.
        control_flow: convert data-dependent Python control flow (docs/control-flow.md);
            ``False`` captures the model's code as it is.
        convert_libraries: with ``control_flow``, also convert the function of an installed
            package (transformers' modeling code) where capture stops on data-dependent control
            flow, for the capture only (docs/control-flow.md, "Library code"); ``False`` refuses.
        optimize: ``"generic"`` (``True``): the exporter's ONNX optimiser; ``"none"``
            (``False``): the raw export; ``"ort"``: the optimiser, then onnxscript's ONNX Runtime
            fusions (``com.microsoft`` ops), counted in ``result.fusions`` (docs/optimize.md).
        keep_artifacts: also return the captured program before and after graph rules in
            ``result.artifacts`` (``fxport diff`` uses them).
        precision: ``"fp32"``, ``"fp16"``, ``"int8"`` (onnxruntime's quantiser), or the weight-only
            ``"int4"`` / ``"int8-weights"`` (Linear weights in blocks, verified against eager with the
            same quantised weights; docs/precision.md).
        calibration: int8 only: ``"FILE.py:FUNC"`` or a list of input sets (static quantisation).
        min_cosine: int8 only: fail below this cosine similarity to eager float32 (default 0.99).
        block_size: int4 / int8-weights only: input features per scale (default 32).
        quant_format: int4 / int8-weights only: ``"matmulnbits"`` (com.microsoft.MatMulNBits, the
            default) or ``"qdq"`` (DequantizeLinear with ``block_size`` → MatMul, opset 21).
        quant_activations: int4 / int8-weights only: ``"float32"`` (MatMulNBits accuracy level 0, the
            default for matmulnbits) or ``"int8"`` (activations quantised per block at run time:
            accuracy level 4, the fast CPU path; verified against an eager reference that quantises
            them the same way; the only choice for qdq).
        external_data: weights in ``OUTPUT.data`` beside the output: None (when over 1.5 GiB),
            True (always), False (never; an error over 2 GiB).
        atol, rtol: element tolerances for float outputs, replacing the dtype's defaults;
            recorded in ``result.tolerances``.
        strict_coverage: refuse the model when some side of a converted ``if`` or some trip count
            of a converted loop was reached by no input set (by default a warning).
        rewrites: ``False`` runs the stock exporter's path: no rules of any tier (built-ins and
            ``rules`` left out), control flow as written, and the lowered file as the exporter
            wrote it (no dimension names or ranges added); ``fxport diff``'s baseline.
    """

    opset: int | None = None
    verify: bool = True
    device: str = "auto"
    rules: Any = None
    disable_rules: tuple[str, ...] = ()
    if_strategy: str = "auto"
    control_flow: bool = True
    convert_libraries: bool = True
    optimize: str = "generic"
    keep_artifacts: bool = False
    precision: str = "fp32"
    calibration: Any = None
    min_cosine: float | None = None
    block_size: int | None = None
    quant_format: str | None = None
    quant_activations: str | None = None
    external_data: bool | None = None
    atol: float | None = None
    rtol: float | None = None
    strict_coverage: bool = False
    rewrites: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "disable_rules", tuple(self.disable_rules or ()))
        object.__setattr__(self, "optimize", optimize_level(self.optimize))
        check_precision(self.precision, self.calibration, self.min_cosine, self.block_size, self.quant_format,
                        self.quant_activations)
        check_tolerances(self.atol, self.rtol)
        check_opset(self.opset)

    def replace(self, **changes: Any) -> "Options":
        """A copy with ``changes`` applied (checked like a new value)."""
        return dataclasses.replace(self, **changes)

    @property
    def converts_control_flow(self) -> str | None:
        """The ``if`` strategy when control flow is converted, None when it is left as written."""
        return self.if_strategy if self.control_flow and self.rewrites else None

    @classmethod
    def field_names(cls) -> frozenset[str]:
        return frozenset(field.name for field in dataclasses.fields(cls))


def options_from(options: Options | None, overrides: dict[str, Any]) -> Options:
    """``options`` (or the defaults) with keyword ``overrides``; an unknown keyword is a TypeError.

    Example::

        >>> options_from(None, {"verify": False}).verify
        False
    """
    unknown = set(overrides) - Options.field_names()
    if unknown:
        raise TypeError(f"unknown conversion option(s): {', '.join(sorted(unknown))} "
                        f"(known: {', '.join(sorted(Options.field_names()))})")
    base = options if options is not None else Options()
    return base.replace(**overrides) if overrides else base
