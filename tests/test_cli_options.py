"""Options and messages a newcomer trips on (issue 50, items 5 and 6): out-of-range generation
settings are usage errors, transformers is an optional extra whose absence is one line, the help
keeps option names whole at 80 columns, every error starts with ``error:``, and the generation
files carry no initializer that no node reads."""

import json
import os
import subprocess
import sys

import onnx
import pytest
import typer

from fxport.cli import app
from fxport.errors import UsageError
from fxport.generation.settings import check_setting_ranges
from fxport.lower.dead_initializers import unused_initializers_removed
from tests.conftest import REPO, run_cli

#: runs ``python -m MODULE ARGS`` or ``python FILE.py ARGS`` where importing transformers fails,
#: as it does where it is not installed
WITHOUT_TRANSFORMERS = '''
import runpy, sys

class NoTransformers:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "transformers":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoTransformers())
if sys.argv[1] == "-m":
    sys.argv = sys.argv[2:]
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
else:
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
'''


def run_without_transformers(*args, cwd=REPO):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", WITHOUT_TRANSFORMERS, *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


def one_error_line(result, fragment):
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr


@pytest.fixture
def checkpoint_config(tmp_path):
    """A directory that looks like a checkpoint (config.json), written without transformers."""
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    return str(tmp_path / "ckpt")


@pytest.mark.parametrize("flag, value, fragment", [
    ("--num-beams", "0", "--num-beams 0 is out of range; pass a value ≥ 1"),
    ("--top-p", "7", "--top-p 7 is out of range; pass a value in [0, 1]"),
])
@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_out_of_range_generation_settings_are_usage_errors(checkpoint_config, tmp_path, flag, value, fragment):
    out = tmp_path / "gen.onnx"
    result = run_cli("convert", checkpoint_config, "--task", "text-generation", flag, value, "-o", str(out))
    assert result.returncode == 2
    one_error_line(result, fragment)
    assert not out.exists()


@pytest.mark.parametrize("setting, value", [
    ("temperature", 0.0), ("top_k", -1), ("min_p", 1.5), ("typical_p", 0.0), ("num_return_sequences", 0),
    ("min_new_tokens", -2), ("max_new_tokens", 0), ("repetition_penalty", -1.0), ("length_penalty", float("nan")),
])
def test_each_range_is_checked_as_a_keyword_and_as_a_flag(setting, value):
    with pytest.raises(UsageError, match=f"^{setting}=.* is out of range"):
        check_setting_ranges({setting: value})
    with pytest.raises(UsageError, match=f"^--{setting.replace('_', '-')} .* is out of range"):
        check_setting_ranges({setting: value}, as_flags=True)
    check_setting_ranges({setting: None, "top_p": 1.0, "top_k": 0, "num_beams": 1})  # unset and edge values pass


def test_generate_settings_out_of_range_are_refused_given_or_from_the_checkpoint():
    transformers = pytest.importorskip("transformers")
    from fxport.generation.resolve import generation_settings

    config = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=1)
    lm = transformers.LlamaForCausalLM(config)
    with pytest.raises(UsageError, match="num_beams=0 is out of range"):
        generation_settings(lm, max_new_tokens=4, num_beams=0)
    with pytest.raises(UsageError, match="top_p=7 is out of range"):
        generation_settings(lm, max_new_tokens=4, top_p=7)
    assert generation_settings(lm, max_new_tokens=4, do_sample=True, top_p=1.0, top_k=0).do_sample
    lm.generation_config.do_sample, lm.generation_config.temperature = True, 0.0  # the checkpoint's own
    with pytest.raises(UsageError, match="temperature=0.0 is out of range"):
        generation_settings(lm, max_new_tokens=4)


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_task_without_transformers_says_what_to_install(checkpoint_config):
    result = run_without_transformers("-m", "fxport", "convert", checkpoint_config, "--task", "text-generation")
    assert result.returncode == 2
    one_error_line(result, "--task text-generation needs transformers, which is not installed; "
                           "pip install 'fxport[transformers]'")


def test_tiny_checkpoint_example_without_transformers_is_one_line(tmp_path):
    result = run_without_transformers("examples/tiny_checkpoint.py", str(tmp_path / "tiny"))
    assert result.returncode == 1 and not (tmp_path / "tiny").exists()
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs transformers" in lines[0] and "pip install 'fxport[transformers]'" in lines[0]


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_a_model_conversion_needs_no_transformers(tmp_path):
    result = run_without_transformers("-m", "fxport", "convert", "examples/gated_mlp.py:GatedMLP", "-q",
                                      "-o", str(tmp_path / "g.onnx"))
    assert result.returncode == 0, result.stderr
    assert "transformers" not in result.stderr


def test_the_setup_command_and_the_extras_install_transformers():
    with open(os.path.join(REPO, "pyproject.toml")) as handle:
        pyproject = handle.read()
    assert '\ntransformers = ["transformers' in pyproject
    with open(os.path.join(REPO, "scripts", "setup")) as handle:
        setup = handle.read()
    assert '-e ".[transformers]"' in setup and '-e ".[test]"' in setup


def every_option(command) -> list[str]:
    names = []
    for parameter in command.params:
        names += [name for name in (*parameter.opts, *parameter.secondary_opts) if name.startswith("--")]
    return names


@pytest.mark.parametrize("name", ["convert", "ops", "diff", "rules"])
def test_help_at_80_columns_shows_every_option_name_whole(name):
    command = typer.main.get_command(app).commands[name]
    env = dict(os.environ, COLUMNS="80", PYTHONPATH=REPO)
    result = subprocess.run([sys.executable, "-m", "fxport", name, "--help"], capture_output=True, text=True,
                            cwd=REPO, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert max(len(line) for line in result.stdout.splitlines()) <= 80
    words = set(result.stdout.replace("│", " ").split())
    missing = [option for option in every_option(command) if option not in words]
    assert not missing, f"cut or missing at 80 columns: {missing}"
    assert "…" not in result.stdout


@pytest.mark.parametrize("args, fragment", [
    (["convert", "x.py:Net", "--bogus"], "No such option: --bogus; see fxport convert --help"),
    (["convert"], "Missing argument 'TARGET'; see fxport convert --help"),
    (["convert", "x.py:Net", "--device", "gpu"], "Invalid value for '--device': 'gpu' is not one of"),
    (["nosuch"], "No such command 'nosuch'; see fxport --help"),
    (["convert", "x.py:Net", "--do-sample", "--no-do-sample", "--task", "text-generation"],
     "--do-sample conflicts with --no-do-sample"),
    (["convert", "tests/models/basic.py:Nope"], "has no attribute 'Nope'"),
])
def test_usage_errors_are_one_line_starting_with_error(args, fragment):
    result = run_cli(*args)
    assert result.returncode == 2
    one_error_line(result, fragment)
    assert "Error" not in result.stderr and "╭" not in result.stderr and result.stdout == ""


def test_a_click_usage_error_with_json_is_one_json_document():
    result = run_cli("convert", "x.py:Net", "--bogus", "--json")
    assert result.returncode == 2
    data = json.loads(result.stdout)
    assert data["ok"] is False and data["error"] == "UsageError" and "--bogus" in data["message"]


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_generation_file_has_no_unused_initializer_and_json_shows_no_loading_bar(tmp_path):
    """An encoder-decoder generator: lowering its grown loop leaves a weight no node reads."""
    transformers = pytest.importorskip("transformers")
    import torch

    torch.manual_seed(0)
    config = transformers.T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                                   decoder_start_token_id=0, eos_token_id=1, pad_token_id=0)
    transformers.T5ForConditionalGeneration(config).save_pretrained(tmp_path / "t5")
    out = tmp_path / "gen.onnx"
    result = run_cli("convert", str(tmp_path / "t5"), "--task", "text-generation", "--max-new-tokens", "4",
                     "-o", str(out), "--json", timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout)["verified"]
    assert "Loading weights" not in result.stderr and "it/s" not in result.stderr
    model = onnx.load(out)
    assert unused_initializers_removed(model) == []
