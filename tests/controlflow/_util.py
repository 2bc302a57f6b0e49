"""Differential-test helper: convert → export → ONNX → onnxruntime, compared with eager.

Export once per pattern (:func:`export_to_ort`), then compare on many inputs
(:func:`assert_matches_eager`). :func:`coverage` tells which branch each eager input took, so a
test can assert that its inputs cover every branch and trip count it claims to.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import torch

from fxport.verify.compare import Acceptance, compare
from fxport.controlflow import convert_control_flow
from fxport.controlflow import operators as runtime
from fxport.engine.pipeline import run
from fxport.report.result import AppliedRewrite, count_ops

logging.getLogger("torch.onnx").setLevel(logging.ERROR)
logging.getLogger("onnxscript").setLevel(logging.ERROR)


@dataclasses.dataclass
class Exported:
    session: ort.InferenceSession
    model: onnx.ModelProto
    records: list[AppliedRewrite]
    ops: dict[str, int]
    input_names: list[str]


def export_to_ort(model: torch.nn.Module, args: tuple, dynamic_shapes=None, strategy: str = "auto") -> Exported:
    """The product's stages through ``lower`` (capture with control flow converted, graph passes,
    the exporter), opened in ONNX Runtime; ``records`` are the control-flow rewrites."""
    model.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        job = run(model, args, dynamic_shapes=dynamic_shapes, until="lower", if_strategy=strategy, verify=False)
    proto = job.onnx_model
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    names = list(inspect.signature(model.forward).parameters)[: len(args)]
    records = [record for record in job.rewrites if record.tier == "control-flow"]
    return Exported(session, proto, records, count_ops(proto.graph), names)


def run_ort(exported: Exported, args: tuple) -> list[np.ndarray]:
    wanted = {i.name for i in exported.session.get_inputs()}
    feed = {name: _numpy(a) for name, a in zip(exported.input_names, args) if name in wanted}
    return exported.session.run(None, feed)


def _numpy(value) -> np.ndarray:
    return value.detach().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def assert_matches_eager(model, exported: Exported, inputs: list[tuple], atol=1e-5, rtol=1e-4) -> None:
    """Eager PyTorch (the user's unconverted module) vs ONNX Runtime on every input set, judged
    by fxport's one comparer (fxport.verify.compare) with these element tolerances."""
    assert "forward" not in model.__dict__, "module still patched after the with block"
    for args in inputs:
        with torch.no_grad():  # the model may change its inputs in place: give it copies
            expected = model(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
        result = compare(expected, run_ort(exported, args), Acceptance(atol=atol, rtol=rtol))
        shapes = [tuple(a.shape) if isinstance(a, torch.Tensor) else a for a in args]
        assert result.passed, f"{result.failure()} for inputs {shapes}"


def coverage(model, inputs: list[tuple]) -> dict[tuple[str, int], set]:
    """``{(kind, line): outcomes}`` of converted statements run eagerly: branch taken / trip count."""
    seen: dict[tuple[str, int], set] = {}
    with convert_control_flow(model), runtime.coverage() as notes, torch.no_grad():
        for args in inputs:
            model(*args)
    for kind, location, outcome in notes:
        seen.setdefault((kind, location.lineno), set()).add(outcome)
    return seen


def assert_every_branch_taken(model, inputs: list[tuple]) -> None:
    """Every ``if``/``a if c else b`` that ran saw both outcomes across ``inputs``."""
    for (kind, line), outcomes in coverage(model, inputs).items():
        if kind in ("if", "ifexp"):
            missing = {True, False} - outcomes
            assert not missing, f"inputs never take the {missing.pop()} branch of the {kind} at line {line}"


def trip_counts(model, inputs: list[tuple]) -> dict[int, set]:
    """``{line: trip counts}`` of the loops run eagerly over ``inputs``."""
    return {line: {t for t in o if isinstance(t, int) and not isinstance(t, bool)}
            for (kind, line), o in coverage(model, inputs).items() if kind in ("while", "for")}


def loop_exits(model, inputs: list[tuple]) -> dict[int, set]:
    """``{line: how the loop ended}`` (its test, a break, its trip bound; a carried tensor emptied)."""
    return {line: {t for t in o if isinstance(t, str)}
            for (kind, line), o in coverage(model, inputs).items() if kind in ("while", "for")}


def ops(exported: Exported) -> dict[str, int]:
    return exported.ops


def line_in_source(fn, text: str) -> int:
    """The line number of the first line of ``fn``'s source that contains ``text``."""
    lines, first = inspect.getsourcelines(fn)
    for offset, line in enumerate(lines):
        if text in line:
            return first + offset
    raise AssertionError(f"{text!r} not in {fn.__qualname__}")
