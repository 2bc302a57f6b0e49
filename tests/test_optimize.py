"""Graph optimisation (onnxscript optimizer via ONNXProgram.optimize) on by default, counted."""

import pytest
import torch

import fxport
from fxport.report.result import iter_nodes
from tests.conftest import assert_matches_eager, run_cli


class Redundant(torch.nn.Module):
    """Foldable constants and a repeated subexpression the optimiser removes."""

    def forward(self, x):
        scale = torch.ones(4) * 3 + 1          # constant: folded
        a = torch.tanh(x * 2)
        b = torch.tanh(x * 2)                  # same as a: CSE
        return a + b * scale


def node_total(model):
    return sum(1 for _ in iter_nodes(model.graph))


def test_optimised_by_default_with_counts_before_and_after():
    model = Redundant()
    result = fxport.convert(model, (torch.randn(2, 4),), dynamic_shapes={"x": {0: "batch"}})
    counts = result.node_counts
    assert list(counts) == ["exported", "optimized"]
    assert counts["optimized"] < counts["exported"]
    assert counts["optimized"] == node_total(result.model)
    assert result.op_counts().get("Tanh") == 1
    assert result.verified
    assert_matches_eager(model, result.model, torch.randn(5, 4))
    assert result.to_dict()["node_counts"] == counts


def test_no_optimize_keeps_the_exported_graph():
    model = Redundant()
    optimised = fxport.convert(model, (torch.randn(2, 4),), verify=False)
    raw = fxport.convert(model, (torch.randn(2, 4),), optimize=False)
    assert list(raw.node_counts) == ["exported"]
    assert raw.node_counts["exported"] == node_total(raw.model) > node_total(optimised.model)
    assert raw.op_counts().get("Tanh") == 2
    assert raw.verified
    assert_matches_eager(model, raw.model, torch.randn(2, 4))


@pytest.mark.slow
def test_cli_summary_shows_node_counts():
    done = run_cli("convert", "tests/models/basic.py:Scale", "--no-verify")
    assert done.returncode == 0, done.stderr
    assert "Nodes (fp32):" in done.stdout and "optimized" in done.stdout
    done = run_cli("convert", "tests/models/basic.py:Scale", "--no-verify", "--no-optimize")
    assert done.returncode == 0, done.stderr
    assert "exported" in done.stdout and "optimized" not in done.stdout
