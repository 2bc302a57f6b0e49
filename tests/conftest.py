"""Shared fixtures: every conversion test is differential (eager PyTorch vs ONNX Runtime)."""

from __future__ import annotations

import os
import subprocess
import sys

import onnxruntime as ort
import pytest
import torch

from fxport.report.result import count_ops

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(REPO, "tests", "models")


def run_onnx(model, *tensors):
    """Run an ONNX ModelProto on CPU with positional tensors; returns numpy outputs."""
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feed = {i.name: t.detach().numpy() for i, t in zip(session.get_inputs(), tensors)}
    return session.run(None, feed)


def assert_matches_eager(module, model, *tensors, atol=1e-5, rtol=1e-4):
    """Eager and ONNX Runtime agree on these inputs (ones the export did not see)."""
    from fxport.verify.compare import Acceptance, compare

    with torch.no_grad():
        expected = module(*tensors)
    result = compare(expected, run_onnx(model, *tensors), Acceptance(atol=atol, rtol=rtol))
    assert result.passed, result.failure()


def op_counts(model):
    return count_ops(model.graph)


def perturbed(model, value: str, delta):
    """A copy of ONNX ``model`` with ``delta`` (an array) added to ``value`` where every node reads
    it: a file that decides otherwise than eager, as float noise or a wrong conversion makes it."""
    import numpy as np
    import onnx

    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    for node in graph.node:
        node.input[:] = [f"{value}_perturbed" if name == value else name for name in node.input]
    graph.initializer.append(onnx.numpy_helper.from_array(np.asarray(delta, np.float32), f"{value}_delta"))
    position = next(i for i, node in enumerate(graph.node) if value in node.output) + 1
    graph.node.insert(position, onnx.helper.make_node("Add", [value, f"{value}_delta"], [f"{value}_perturbed"]))
    return model


def run_cli(*args, cwd=None, timeout=300):
    """Run ``python -m fxport ARGS`` in a subprocess, like a user in a shell."""
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "fxport", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, env=env, timeout=timeout)


@pytest.fixture
def models_dir():
    return MODELS


def line_of(path, fragment):
    """``path:line`` of the first line of ``path`` containing ``fragment`` (for location asserts)."""
    with open(path) as handle:
        for number, line in enumerate(handle, start=1):
            if fragment in line:
                return f"{os.path.basename(path)}:{number}"
    raise AssertionError(f"{fragment!r} not in {path}")


def pytest_collection_modifyitems(session, config, items):
    """Start the longest tests (the four quarters of the fuzz CI profile, ~2.5 min each) first:
    with ``-n 2`` each worker takes two of them and the short tests fill in behind, instead of
    a long test finishing alone at the end."""
    items.sort(key=lambda item: 0 if item.nodeid.startswith("tests/test_fuzz.py::test_ci_fuzz_profile") else 1)


@pytest.fixture(autouse=True, scope="session")
def lint_graphs_after_each_pass():
    """Every graph pass any test runs leaves a graph that passes ``graph.lint()``."""
    from fxport.rules import passes

    passes.after_each_pass = passes.lint_after_pass
    yield
    passes.after_each_pass = None
