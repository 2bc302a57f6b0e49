"""Testing rules: convert a model with a rule set, assert the rules fired and ONNX Runtime
matches eager PyTorch on the inputs you give.

Example::

    >>> import torch, fxport.testing
    >>> class Net(torch.nn.Module):
    ...     def forward(self, x):
    ...         return torch.erfinv(x)
    >>> x = torch.linspace(-0.99, 0.99, 101)
    >>> check = fxport.testing.assert_rule_converts(
    ...     Net(), (x,), expect_fired=["aten::erfinv"], dynamic_shapes={"x": {0: "n"}},
    ...     inputs=[(torch.tensor([-1.0, 0.0, 1.0]),)])
    >>> check.fired["aten::erfinv"], check.max_abs_error < 1e-5
    (1, True)
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Sequence

import numpy as np
import onnx
import torch

from fxport.report.result import ConversionResult


@dataclasses.dataclass
class RuleCheck:
    """What :func:`assert_rule_converts` found.

    Attributes:
        result: the ConversionResult (``result.model`` is the ONNX model).
        fired: rule name → how many times it applied.
        max_abs_error / max_rel_error: over every compared output element (finite ones).
    """

    result: ConversionResult
    fired: dict[str, int]
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0


def assert_rule_converts(
    model: torch.nn.Module,
    args: Sequence[Any],
    *,
    rules: Any = None,
    expect_fired: Iterable[str] = (),
    inputs: Sequence[Sequence[Any]] = (),
    atol: float = 1e-5,
    rtol: float = 1e-4,
    run_onnx: bool = True,
    dynamic_shapes: Any = None,
    disable_rules: Iterable[str] = (),
    opset: int | None = None,
) -> RuleCheck:
    """Convert ``model`` with ``rules`` and check it.

    Fails (AssertionError) when a rule in ``expect_fired`` applied zero times, or when ONNX
    Runtime and eager differ beyond ``atol + rtol·|eager|`` on ``args`` or any of ``inputs``
    (NaN and ±inf must appear at the same places). ``run_onnx=False`` skips the comparison
    (for models with custom-domain nodes ONNX Runtime cannot run). Inputs of other sizes than
    ``args`` need ``dynamic_shapes`` (torch.export's format or ``{"x": {0: "n"}}``).
    """
    import fxport

    result = fxport.convert(model, tuple(args), rules=rules, verify=False,
                            dynamic_shapes=dynamic_shapes, disable_rules=tuple(disable_rules),
                            opset=opset)
    fired: dict[str, int] = {}
    for record in result.rewrites:
        fired[record.rule] = fired.get(record.rule, 0) + 1
    for name in expect_fired:
        if not fired.get(name):
            raise AssertionError(f"rule {name!r} applied 0 times; rules that fired: "
                                 f"{sorted(fired) or 'none'}")
    check = RuleCheck(result, fired)
    if run_onnx:
        for input_set in [tuple(args), *[tuple(i) for i in inputs]]:
            abs_err, rel_err = compare_with_eager(model, result.model, input_set, atol, rtol)
            check.max_abs_error = max(check.max_abs_error, abs_err)
            check.max_rel_error = max(check.max_rel_error, rel_err)
    return check


def run_onnx(model: onnx.ModelProto, args: Sequence[Any]) -> list[np.ndarray]:
    """Run ``model`` with ONNX Runtime (CPU) on tensor ``args``."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    feed = {i.name: t.detach().cpu().numpy() for i, t in zip(session.get_inputs(), tensors)}
    return session.run(None, feed)


def compare_with_eager(model: torch.nn.Module, onnx_model: onnx.ModelProto, args: Sequence[Any],
                       atol: float, rtol: float) -> tuple[float, float]:
    """Max (abs, rel) error of ONNX Runtime vs eager on ``args``, judged by fxport's one comparer
    (:func:`fxport.verify.compare.compare`, as the verify stage judges them).

    Raises AssertionError beyond ``atol + rtol·|eager|``, on NaN/inf at other places, unequal
    integer outputs, or other shapes or output counts.
    """
    from fxport.verify.compare import Acceptance, compare

    with torch.no_grad():  # a copy: a model that writes into its inputs must not change ONNX Runtime's
        expected = model(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    try:
        actual = run_onnx(onnx_model, args)
    except Exception as err:  # noqa: BLE001 - ONNX Runtime's own error types
        shapes = [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)]
        raise AssertionError(f"ONNX Runtime failed on inputs of shapes {shapes}: "
                             f"{str(err).splitlines()[0]} (other sizes than the example need "
                             f"dynamic_shapes=...)") from err
    result = compare(expected, actual, Acceptance(atol=atol, rtol=rtol))
    if not result.passed:
        raise AssertionError(result.failure())
    return result.max_abs, result.max_rel
