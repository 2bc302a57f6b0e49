"""The CLI side of rules: `fxport rules`, `fxport ops`, `convert --rules/--disable`, and models
using every missing op converting and verifying."""

from __future__ import annotations

import os
import re

import pytest
from typer.testing import CliRunner

from fxport.cli import app
from tests.rules.test_registry import REQUIRED_BUILTINS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
CUSTOM_OPS = os.path.join(EXAMPLES, "custom_ops")


def run(*args):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_rules_command_lists_builtins_with_tier_target_scope_doc():
    result = run("rules", "--json")
    assert result.exit_code == 0
    import json

    rows = {row["name"]: row for row in json.loads(result.stdout)["rules"]}
    assert REQUIRED_BUILTINS <= set(rows)
    assert rows["aten::erfinv"]["tier"] == "op" and rows["aten::erfinv"]["doc"]
    assert rows["aten::searchsorted"]["target"] == "aten::searchsorted.Tensor"


@pytest.mark.slow
def test_model_with_every_missing_op_converts_and_verifies_from_the_cli(tmp_path):
    out = tmp_path / "missing.onnx"
    result = run("convert", os.path.join(EXAMPLES, "missing_ops.py:MissingOps"),
                 "-i", "x=6x8", "-i", "y=6x8", "-o", str(out), "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    import json

    report = json.loads(result.stdout)
    assert report["verified"] is True
    fired = {r["rule"] for r in report["rewrites"]}
    assert REQUIRED_BUILTINS | {"aten::cumprod", "aten::nanmedian.dim", "aten::linalg_cholesky",
                                "aten::linalg_solve_triangular", "aten::histc"} <= fired
    assert out.exists()


def test_disable_makes_the_conversion_fail_with_the_op_named():
    result = run("convert", os.path.join(CUSTOM_OPS, "erfinv_model.py:Erfinv"), "-i", "x=8",
                 "--disable", "aten::erfinv")
    assert result.exit_code == 1
    assert "erf" in result.stderr and "no ONNX translation" in result.stderr


def test_rules_file_makes_a_failing_model_convert():
    target = os.path.join(CUSTOM_OPS, "my_add_model.py:MyAdd")
    inputs = ["-i", "a=1x3x10x10", "-i", "b=1x3x10x10"]
    assert run("convert", target, *inputs).exit_code == 1
    result = run("convert", target, *inputs, "--rules",
                 os.path.join(CUSTOM_OPS, "my_add_rules.py"))
    assert result.exit_code == 0, result.stderr
    assert "patch:my_lib.MyAddFunction.forward" in result.stdout and "verified" in result.stdout


def test_ops_lists_every_missing_op_with_a_loadable_skeleton(tmp_path):
    model = tmp_path / "two_missing.py"
    model.write_text("import torch\n\nclass Net(torch.nn.Module):\n"
                     "    def forward(self, x):\n"
                     "        return torch.special.i0(x) + torch.copysign(x, -x)\n")
    result = run("ops", f"{model}:Net", "-i", "x=3x4")
    assert result.exit_code == 1
    assert "aten::i0" in result.stdout and "aten::copysign" in result.stdout
    assert "two_missing.py:5" in result.stdout
    skeleton = result.stdout[result.stdout.index('"""fxport rules for ops'):]
    rules_file = tmp_path / "skeleton_rules.py"
    rules_file.write_text(skeleton)
    import fxport

    names = fxport.rules.resolve(str(rules_file)).names()
    assert {"aten::i0", "aten::copysign.Tensor"} <= set(names)
    assert re.search(r"def i0\(self\):", skeleton)


def test_ops_says_when_everything_translates():
    result = run("ops", os.path.join(CUSTOM_OPS, "erfinv_model.py:Erfinv"), "-i", "x=8")
    assert result.exit_code == 0 and "Every op has an ONNX translation" in result.stdout


def test_conversion_error_carries_the_rule_skeletons(tmp_path):
    model = tmp_path / "missing_i0.py"
    model.write_text("import torch\n\nclass Net(torch.nn.Module):\n"
                     "    def forward(self, x):\n        return torch.special.i0(x)\n")
    result = run("convert", f"{model}:Net", "-i", "x=3")
    assert result.exit_code == 1
    assert re.search(r"aten::i0 \(\S*missing_i0.py:5\)", result.stderr)
    assert '@fxport.onnx_op("aten::i0")' in result.stderr and "def i0(self):" in result.stderr
