"""A branch that faults on the side not taken converts with cond (issue #50, item 3).

``if d != 0: return x // d`` lowered with ``where`` computes ``x // d`` on both paths, and an
integer division by zero raises in ONNX Runtime; verification used to refuse it with a message
about sizes. The converter now sees the division and picks ``cond``; the report says why.
"""

from __future__ import annotations

import json

import pytest
import torch

import fxport
from tests.conftest import assert_matches_eager, run_cli


class GuardedDivision(torch.nn.Module):
    def forward(self, x, d):
        if d != 0:
            return x // d
        return x


class GuardedModulo(torch.nn.Module):
    def forward(self, x, d):
        y = x
        if d > 0:
            y = x % d
        return y


def test_a_guarded_integer_division_converts_with_cond_and_says_why():
    model = GuardedDivision()
    result = fxport.convert(model, (torch.arange(6), torch.tensor(2)), dynamic_shapes={"x": {0: "n"}, "d": None})
    assert result.verified and result.op_counts().get("If") == 1 and not result.op_counts().get("Where")
    details = [r.detail for r in result.rewrites if r.tier == "control-flow"]
    assert any(d.startswith("cond:") and "may divide by zero on the other path" in d for d in details), details
    for d in (0, 3, -2):
        assert_matches_eager(model, result.model, torch.arange(7), torch.tensor(d))


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_a_guarded_modulo_converts_from_the_cli(tmp_path):
    (tmp_path / "mod.py").write_text(
        "import torch\n\n\nclass GuardedModulo(torch.nn.Module):\n    def forward(self, x, d):\n"
        "        y = x\n        if d > 0:\n            y = x % d\n        return y\n")
    done = run_cli("convert", f"{tmp_path}/mod.py:GuardedModulo", "-i", "x=5:int64", "-i", "d=scalar:int64",
                   "--dynamic", "x:0=n", "-o", str(tmp_path / "m.onnx"), "--json")
    assert done.returncode == 0, done.stderr + done.stdout
    report = json.loads(done.stdout)
    assert any("may divide by zero" in r["detail"] for r in report["rewrites"])
    import onnx

    model = onnx.load(tmp_path / "m.onnx")
    for d in (0, 4, -3):
        assert_matches_eager(GuardedModulo(), model, torch.arange(9), torch.tensor(d))
