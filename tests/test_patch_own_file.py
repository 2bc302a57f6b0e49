"""Patch rules reach functions of the model's own file (issue 50, item 4): docs/rules.md names
them ``STEM.function`` (``mymodel.scale`` for ``mymodel.py``), and the module patched is the one
the model runs in — also when ``PYTHONPATH=.`` lets a rule file ``import mymodel`` itself."""

import json
import sys
import textwrap

import pytest
import torch

import fxport
from fxport.errors import RuleError
from fxport.load.targets import load_model
from fxport.rules.patching import locate
from tests.conftest import run_cli

MODEL = '''
import torch


def scale(x):
    """Opaque to torch.export: a NumPy round trip."""
    return torch.from_numpy(x.numpy() * 3)


class Net(torch.nn.Module):
    def forward(self, x):
        return scale(x) + 1


def inputs():
    return (torch.randn(2, 3),)
'''

BY_NAME = '''
import fxport


@fxport.patch("{stem}.scale")
def traceable_scale(x):
    """scale without NumPy."""
    return x * 3
'''

BY_OBJECT = '''
import fxport
import {stem}


@fxport.patch({stem}.scale)
def traceable_scale(x):
    """scale without NumPy, named by the object a rule file imports."""
    return x * 3
'''


@pytest.fixture
def fresh_modules(tmp_path):
    """The test's own modules (files in tmp_path) are forgotten after it."""
    yield
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


def write_files(directory, stem, rules=BY_NAME):
    (directory / f"{stem}.py").write_text(textwrap.dedent(MODEL))
    (directory / "my_rules.py").write_text(rules.format(stem=stem))
    return directory / f"{stem}.py", directory / "my_rules.py"


def patches_fired(stdout: str) -> list[str]:
    data = json.loads(stdout)
    assert data["ok"], data
    return [rewrite["rule"] for rewrite in data["rewrites"] if rewrite["tier"] == "patch"]


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_cli_rule_file_patches_a_function_of_the_model_file(tmp_path):
    write_files(tmp_path, "mymodel")
    result = run_cli("convert", "mymodel.py:Net", "-i", "x=2x3", "--rules", "my_rules.py", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert patches_fired(result.stdout) == ["patch:mymodel.scale"]


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_cli_with_pythonpath_a_rule_file_importing_the_model_patches_the_model_run(tmp_path, monkeypatch):
    """``import mymodel`` in the rule file is the module the model runs in, not a second copy."""
    write_files(tmp_path, "mymodel", rules=BY_OBJECT)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    result = run_cli("convert", "mymodel.py:Net", "-i", "x=2x3", "--rules", "my_rules.py", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(patches_fired(result.stdout)) == 1


def test_api_patch_by_the_file_stem_reaches_the_loaded_model(tmp_path, fresh_modules):
    model_file, rules = write_files(tmp_path, "own_file_api")
    loaded = load_model(f"{model_file}:Net", inputs_fn=f"{model_file}:inputs")
    assert sys.modules["own_file_api"].Net is type(loaded.module), "target and --inputs-fn share one module"
    with pytest.raises(fxport.CaptureError):
        fxport.convert(loaded.module, loaded.input_sets[0].args, verify=False)
    result = fxport.convert(loaded.module, loaded.input_sets[0].args, rules=str(rules))
    assert result.verified
    assert [r.rule for r in result.rewrites if r.tier == "patch"] == ["patch:own_file_api.scale"]


def test_a_file_the_user_imported_already_is_the_module_loaded(tmp_path, fresh_modules, monkeypatch):
    write_files(tmp_path, "own_file_imported")
    monkeypatch.syspath_prepend(str(tmp_path))
    import own_file_imported

    loaded = load_model(f"{tmp_path}/own_file_imported.py:Net", input_specs=["x=2x3"])
    assert type(loaded.module) is own_file_imported.Net
    assert fxport.convert(loaded.module, loaded.input_sets[0].args,
                          rules=str(tmp_path / "my_rules.py")).rewrites[0].rule == "patch:own_file_imported.scale"


def test_a_model_file_named_like_an_imported_module_is_refused_with_a_rename_hint(tmp_path, fresh_modules):
    model_file, _ = write_files(tmp_path, "json")
    load_model(f"{model_file}:Net", input_specs=["x=2x3"])
    assert sys.modules["json"] is json, "the standard library's json stays what `import json` gives"
    with pytest.raises(RuleError) as info:
        locate("json.scale")
    assert "json.py is not reachable as 'json'" in str(info.value) and "rename the file" in str(info.value)


def test_each_load_executes_the_file_afresh_and_the_stem_names_the_latest(tmp_path, fresh_modules):
    model_file, _ = write_files(tmp_path, "own_file_reloaded")
    first = load_model(f"{model_file}:Net", input_specs=["x=2x3"]).module
    model_file.write_text(model_file.read_text() + "\n\nclass Other(Net):\n    pass\n")
    second = load_model(f"{model_file}:Other", input_specs=["x=2x3"]).module
    assert type(second).__name__ == "Other" and sys.modules["own_file_reloaded"].Other is type(second)
    assert torch.equal(first(torch.ones(1, 3)), torch.full((1, 3), 4.0))
