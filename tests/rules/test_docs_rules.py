"""docs/rules.md works as written: its rule file, model and test snippet are run as-is."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from fxport.cli import app

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(ROOT, "docs", "rules.md")


def docs_files() -> dict[str, str]:
    text = open(DOC, encoding="utf-8").read()
    blocks = re.findall(r"<!-- docs-test: (\S+) -->\n```python\n(.*?)```", text, re.S)
    return dict(blocks)


@pytest.mark.slow
def test_user_rule_file_from_the_docs_converts_a_model_that_fails_without_it(tmp_path):
    files = docs_files()
    assert {"net.py", "my_rules.py", "check_rule.py"} <= set(files)
    for name, code in files.items():
        (tmp_path / name).write_text(code)
    target = f"{tmp_path / 'net.py'}:Net"
    runner = CliRunner()
    without = runner.invoke(app, ["convert", target, "-i", "x=16", "-i", "y=16"])
    assert without.exit_code == 1 and "aten::copysign" in without.stderr
    with_rules = runner.invoke(app, ["convert", target, "-i", "x=16", "-i", "y=16",
                                     "--rules", str(tmp_path / "my_rules.py"), "--json"])
    assert with_rules.exit_code == 0, with_rules.stdout + with_rules.stderr
    assert '"verified": true' in with_rules.stdout


@pytest.mark.slow
def test_testing_snippet_from_the_docs_runs(tmp_path):
    for name, code in docs_files().items():
        (tmp_path / name).write_text(code)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, str(tmp_path)]))
    done = subprocess.run([sys.executable, "check_rule.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "'aten::copysign.Tensor': 1" in done.stdout


def test_graph_pass_from_the_docs_rewrites_both_branches_of_a_converted_if(tmp_path):
    code = docs_files()["square_pass.py"]
    (tmp_path / "square_pass.py").write_text(code)
    path = str(tmp_path / "square_pass.py")
    result = CliRunner().invoke(app, ["convert", f"{path}:Net", "-i", "x=4x3", "--rules", path,
                                      "--if-strategy", "cond", "--json"])
    assert result.exit_code == 0, result.stdout + result.stderr
    import json

    report = json.loads(result.stdout)
    assert report["verified"] is True
    fired = [r for r in report["rewrites"] if r["rule"] == "square_as_mul"]
    assert sorted(r["data"]["graph"] for r in fired) == ["false_graph_0", "true_graph_0"]
    assert "Pow" not in report["op_counts"]
