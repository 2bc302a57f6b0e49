"""The dynamo exporter with its op registry built once per process (fxport/lower/exporter.py): the same
translation as ``torch.onnx.export``, one registry build for many exports, the conversion's own
translations on a copy only, a failed background build retried."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch
from onnxscript import opset18 as op
from torch.onnx import _constants as onnx_constants
from torch.onnx._internal.exporter import _constants, _registration

import fxport
import fxport.lower.exporter as exporter
from fxport.common.quiet import quiet_torch


class Net(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x).cumsum(1) * torch.tanh(x.clamp(-0.9, 0.9))


def _program(module=None, x=None):
    x = torch.randn(3, 5) if x is None else x
    return torch.export.export(module or Net(), (x,), dynamic_shapes=({0: torch.export.Dim("batch")},)), x


@pytest.fixture
def fresh_registry(monkeypatch):
    """No registry built yet in this process; counts the builds."""
    builds = []
    build = _registration.ONNXRegistry.from_torchlib.__func__

    def counted(cls, *args, **kwargs):
        builds.append(kwargs.get("opset_version"))
        return build(cls, *args, **kwargs)

    monkeypatch.setattr(exporter, "_built", {})
    monkeypatch.setattr(_registration.ONNXRegistry, "from_torchlib", classmethod(counted))
    return builds


def _ops(onnx_program) -> list[str]:
    return [node.op_type for node in onnx_program.model.graph]


def _run(onnx_program, x) -> np.ndarray:
    session = ort.InferenceSession(onnx_program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_the_translation_is_torch_onnx_exports_and_the_registry_is_built_once(fresh_registry):
    program, x = _program()
    with quiet_torch():
        stock = torch.onnx.export(program, dynamo=True, optimize=False)  # builds its own registry
        fresh_registry.clear()
        first, second = exporter.export_program(program), exporter.export_program(program, opset=None)
    assert fresh_registry == [exporter.registry_opset(None)]
    assert _ops(first) == _ops(stock) == _ops(second)
    assert first.model.opset_imports[""] == stock.model.opset_imports[""]
    wider = torch.randn(7, 5) * 0.5
    np.testing.assert_allclose(_run(first, wider), Net()(wider).numpy(), rtol=1e-5, atol=1e-5)


def test_the_registry_opset_is_torch_onnx_exports():
    assert exporter.registry_opset(None) == max(onnx_constants.ONNX_DEFAULT_OPSET, _constants.TORCHLIB_OPSET)
    assert exporter.registry_opset(_constants.TORCHLIB_OPSET - 1) == _constants.TORCHLIB_OPSET
    assert exporter.registry_opset(_constants.TORCHLIB_OPSET + 3) == _constants.TORCHLIB_OPSET + 3


def _abs_as_neg_neg(x):
    return op.Neg(op.Neg(op.Abs(x)))


class Abs(torch.nn.Module):
    def forward(self, x):
        return torch.abs(x)


def test_a_conversions_translations_stay_on_its_copy(fresh_registry):
    program, x = _program(Abs())
    table = {torch.ops.aten.abs.default: _abs_as_neg_neg}
    with quiet_torch():
        custom = exporter.export_program(program, opset=18, translation_table=table)
        plain = exporter.export_program(program, opset=18)
    assert _ops(custom).count("Neg") == 2 and "Neg" not in _ops(plain)
    assert exporter.registry_with(table, 18).get_decomps(torch.ops.aten.abs.default)[0].is_custom
    assert not exporter.registry_with({}, 18).get_decomps(torch.ops.aten.abs.default)[0].is_custom
    assert fresh_registry == [18]


def test_prepare_builds_in_the_background_and_a_failed_build_is_retried(fresh_registry, monkeypatch):
    build = _registration.ONNXRegistry.from_torchlib.__func__
    failures = []

    def fails_once(cls, *args, **kwargs):
        if not failures:
            failures.append("once")
            raise ImportError("a module was half imported")
        return build(cls, *args, **kwargs)

    monkeypatch.setattr(_registration.ONNXRegistry, "from_torchlib", classmethod(fails_once))
    assert isinstance(exporter.prepare(18).exception(timeout=60), ImportError)  # built in the background, failed
    program, x = _program()
    with quiet_torch():
        onnx_program = exporter.export_program(program, opset=18)
    assert failures == ["once"]
    wider = torch.randn(6, 5) * 0.5
    np.testing.assert_allclose(_run(onnx_program, wider), Net()(wider).numpy(), rtol=1e-5, atol=1e-5)
    assert exporter._built[18].result().registry.functions  # the retried build is the one kept


def test_a_conversion_starts_the_build_before_it_captures(fresh_registry, monkeypatch):
    captured_with = []
    import fxport.engine.stages as stages

    capture = stages.capture_program

    def watched(job):
        captured_with.append(dict(exporter._built))
        capture(job)

    monkeypatch.setattr(stages, "STAGES", tuple(
        stage if stage.name != "capture" else type(stage)(**{**stage.__dict__, "run": watched})
        for stage in stages.STAGES))
    x = torch.randn(3, 5)
    result = fxport.convert(Net(), (x,), dynamic_shapes={"x": {0: "batch"}})
    assert all(row.passed for row in result.verification)
    assert list(captured_with[0]) == [exporter.registry_opset(None)]
    assert fresh_registry == [exporter.registry_opset(None)]


def test_an_op_namespace_loaded_after_the_build_builds_the_registry_again(fresh_registry, monkeypatch):
    """torchvision imported after a first conversion: a registry built before it has no
    translation for torchvision::nms, so the next export builds it again (once)."""
    loaded = {"aten", "prims"}
    monkeypatch.setattr(exporter, "_loaded_namespaces", lambda wanted: frozenset(wanted & loaded))
    exporter.registry_with({}, 18)
    exporter.registry_with({}, 18)
    assert fresh_registry == [18]
    loaded.add("torchvision")
    exporter.registry_with({}, 18)
    exporter.registry_with({}, 18)
    assert fresh_registry == [18, 18]


def test_a_registry_built_with_torchvision_loaded_translates_its_ops(monkeypatch):
    torchvision = pytest.importorskip("torchvision")
    monkeypatch.setattr(exporter, "_built", {})
    registry = exporter.registry_with({}, 18)
    nms = torch.ops.torchvision.nms.default
    assert registry.is_registered(nms)  # imported above, before this build
    built = exporter._built[18].result()
    assert "torchvision" in built.namespaces and torchvision
