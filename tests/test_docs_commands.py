"""The README's and docs/getting-started.md's commands and Python snippets run as written.

The commands are read from the documents themselves (not copied here), so an edit to the docs
that breaks them breaks this test. Placeholders the docs use (``models.py:Net``,
``mypkg.models:make_net``, ``inputs.py:branch_covering_inputs``, ``my_rules.py``, ``model``,
``x``) are provided as small files in a temporary directory: a plain conv net, as a new user
would try. ``bash scripts/setup &&`` prefixes are dropped (the environment is set up).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil

import pytest
import torch
from typer.testing import CliRunner

from fxport.cli import app

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODELS = '''
import torch
from torch import nn


class Net(nn.Module):
    """A plain conv net: what a new user tries first."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(3, 4, 3, stride=4)
        self.head = nn.Linear(4, 5)

    def forward(self, x):
        h = torch.relu(self.conv(x))
        return self.head(h.mean((2, 3)))
'''

PACKAGE_MODELS = '''
import torch
from torch import nn


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = nn.Linear(3, 3), nn.Linear(3, 3)

    def forward(self, x):
        if x.mean() > 0:
            return self.a(x)
        return self.b(x)


def make_net():
    return Gate()
'''

INPUTS = '''
import torch


def branch_covering_inputs():
    return [(torch.ones(2, 3),), (-torch.ones(2, 3),)]
'''


def code_blocks(path: str, language: str) -> list[str]:
    text = open(os.path.join(ROOT, path), encoding="utf-8").read()
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def commands(path: str) -> list[str]:
    """Every ``fxport ...`` command of the document's bash blocks (continuations joined)."""
    found = []
    for block in code_blocks(path, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split("#", 1)[0].strip()
            if "fxport " not in line:
                continue
            line = line[line.index("fxport "):]
            if line.split()[1] in ("convert", "ops"):
                found.append(line)
    return found


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    (tmp_path / "models.py").write_text(MODELS)
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "models.py").write_text(PACKAGE_MODELS)
    (tmp_path / "inputs.py").write_text(INPUTS)
    (tmp_path / "my_rules.py").write_text('"""No rules yet."""\n')
    shutil.copytree(os.path.join(ROOT, "examples"), tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


README_COMMANDS = commands("README.md")
GETTING_STARTED_COMMANDS = commands("docs/getting-started.md")


def test_the_docs_have_the_commands_this_test_runs():
    assert any("--dynamic x:0=batch" in c and "x=1x3x224x224" in c for c in README_COMMANDS), README_COMMANDS
    assert any("examples/gated_mlp.py:GatedMLP" in c for c in README_COMMANDS)
    assert any("--task text-generation" in c for c in README_COMMANDS)
    assert "python3 examples/tiny_checkpoint.py tiny-llama" in open(os.path.join(ROOT, "README.md")).read()
    assert any("examples/srcnn.py:SuperResolutionNet" in c for c in GETTING_STARTED_COMMANDS)


@pytest.mark.parametrize("command", README_COMMANDS + GETTING_STARTED_COMMANDS)
@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_documented_command_runs_as_written(command, workdir):
    if "--device cuda" in command and not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    if "--task text-generation" in command:  # the README writes the checkpoint with the example script first
        from examples.tiny_checkpoint import write_checkpoint

        write_checkpoint(str(workdir / shlex.split(command)[2]))
    result = CliRunner().invoke(app, shlex.split(command)[1:])
    assert result.exit_code == 0, f"{command}\n{result.stdout}\n{result.stderr}"
    output = re.search(r"-o (\S+)", command)
    if output:
        assert (workdir / output.group(1)).is_file()


def test_readme_batch_one_example_verifies_at_batch_one_and_zero(workdir):
    """The README's -i x=1x3x224x224 --dynamic x:0=batch: captured at batch 1, verified around it."""
    command = next(c for c in README_COMMANDS if "--dynamic x:0=batch" in c)
    result = CliRunner().invoke(app, shlex.split(command)[1:] + ["--json"])
    assert result.exit_code == 0, result.stdout + result.stderr
    import json

    rows = {row["name"]: row for row in json.loads(result.stdout)["verification"]}
    batches = {row["input_shapes"][0][0] for row in rows.values() if row["passed"] and not row["note"]}
    assert {0, 1, 2} <= batches, rows.keys()


def test_readme_python_snippet_runs(workdir):
    (snippet,) = code_blocks("README.md", "python")
    from models import Net

    namespace = {"model": Net(), "x": torch.randn(1, 3, 224, 224)}
    exec(compile(snippet, "README.md", "exec"), namespace)
    result = namespace["result"]
    assert result.verified and (workdir / "net.onnx").is_file()
    assert any(row.name.startswith("size[batch=0]") for row in result.verification)


@pytest.mark.slow
def test_getting_started_python_snippet_runs(workdir):
    snippet = next(b for b in code_blocks("docs/getting-started.md", "python") if "fxport.convert(" in b)
    namespace: dict = {}
    exec(compile(snippet, "getting-started.md", "exec"), namespace)
    result = namespace["result"]
    assert result.verified and (workdir / "model.onnx").is_file()
    names = [row.name for row in result.verification]
    # batch 2 is checked by the larger set (an example over 65,536 elements grows by one: 1 -> 2)
    assert "user-1" in names and "size[batch=0]" in names, names
    assert any(name.startswith("larger[batch=2") for name in names), names
