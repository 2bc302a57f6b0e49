"""Control-flow conversions are rules: `fxport rules` lists them under the names their records
carry, `--disable NAME` accepts them, and the rule set says which are disabled."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

import fxport
from fxport.cli import app
from fxport.controlflow import convert_control_flow
from fxport.rules.controlflow import control_flow_names

NAMES = {"if-to-where", "if-to-cond", "while-to-while_loop", "for-to-while_loop"}


class TensorIf(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            y = x * 2
        else:
            y = x - 1
        return y


def test_rules_lists_the_control_flow_conversions_and_the_item_pass():
    result = CliRunner().invoke(app, ["rules", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    tiers = {row["name"]: row["tier"] for row in json.loads(result.stdout)["rules"]}
    assert all(tiers[name] == "control-flow" for name in NAMES)
    assert any(name.endswith("-in-traced-body") and tier == "control-flow" for name, tier in tiers.items())
    assert tiers["item-predicate-to-tensor"] == "pass"


def test_every_name_the_conversion_records_is_a_rule():
    ruleset = fxport.rules.resolve()
    model = TensorIf()
    with convert_control_flow(model, strategy="auto") as records:
        torch.export.export(model, (torch.randn(3),), strict=False)
    assert records
    names = set(ruleset.names())
    assert {r.rule for r in records} <= names
    assert set(control_flow_names()) - {"item-predicate-to-tensor"} <= names


def test_disable_accepts_control_flow_names_and_the_rule_set_reports_them():
    ruleset = fxport.rules.resolve(disable=["if-to-where", "while-to-while_loop", "aten::erfinv"])
    assert ruleset.disabled_control_flow == {"if-to-where", "while-to-while_loop"}
    assert "if-to-where" not in ruleset.names() and "if-to-cond" in ruleset.names()
    with pytest.raises(fxport.RuleError, match="cannot disable unknown rule"):
        fxport.rules.resolve(disable=["if-to-nowhere"])


def test_a_disabled_conversion_is_switched_off_from_the_cli(tmp_path):
    model = tmp_path / "tensor_if.py"
    model.write_text("import torch\n\n\nclass TensorIf(torch.nn.Module):\n    def forward(self, x):\n"
                     "        if x.sum() > 0:\n            y = x * 2\n        else:\n            y = x - 1\n"
                     "        return y\n")
    runner = CliRunner()
    default = runner.invoke(app, ["convert", f"{model}:TensorIf", "-i", "x=4x3", "--json"])
    assert default.exit_code == 0, default.stderr
    assert {r["rule"] for r in json.loads(default.stdout)["rewrites"]} >= {"if-to-where"}
    disabled = runner.invoke(app, ["convert", f"{model}:TensorIf", "-i", "x=4x3", "--json", "--disable", "if-to-where"])
    assert disabled.exit_code == 0, disabled.stderr
    report = json.loads(disabled.stdout)
    rules = {r["rule"] for r in report["rewrites"]}
    assert "if-to-where" not in rules and "if-to-cond" in rules and report["verified"] is True
    assert "If" in report["op_counts"]
