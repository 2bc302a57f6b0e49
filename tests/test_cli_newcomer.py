"""What a newcomer running the CLI found (issue 25 items 8-16): options honoured or refused,
files checked before converting, messages and reports that say what happened."""

import pytest
import torch

import fxport
from fxport.errors import UsageError
from tests.conftest import run_cli


@pytest.mark.parametrize("opset", ["13", "16"])
@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_an_opset_the_exporter_cannot_write_is_a_usage_error(opset):
    result = run_cli("convert", "tests/models/basic.py:Scale", "--opset", opset)
    assert result.returncode == 2, result.stderr
    assert f"--opset {opset} is below 17" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_opset_is_honoured_or_refused_by_the_api_too():
    with pytest.raises(UsageError, match="--opset 13 is below 17"):
        fxport.convert(torch.nn.ReLU(), (torch.randn(2, 3),), opset=13)
    result = fxport.convert(torch.nn.LayerNorm(3).eval(), (torch.randn(2, 3),), opset=17, verify=False)
    assert result.opset == 17
    assert {o.version for o in result.model.opset_import if o.domain == ""} == {17}


def test_an_unwritable_report_path_is_refused_before_converting(tmp_path):
    out = tmp_path / "net.onnx"
    out.write_bytes(b"a good model")
    result = run_cli("convert", "tests/models/basic.py:Scale", "-o", str(out), "--report", str(tmp_path / "no" / "r.json"))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"error: cannot write {tmp_path / 'no' / 'r.json'}: directory {tmp_path / 'no'} does not exist; "
        "create the directory or choose another path"]
    assert "capture" not in result.stdout and out.read_bytes() == b"a good model"


@pytest.mark.slow
def test_report_says_ok_and_skipped_rows_are_neither_failures_nor_nan_strings(tmp_path):
    import json

    from rich.console import Console

    from fxport.cli import verification_table
    from fxport.eager.inputs import InputSet
    from fxport.verify.verification import skipped_row

    report = tmp_path / "r.json"
    result = run_cli("convert", "tests/models/basic.py:Scale", "--report", str(report), "-q")
    assert result.returncode == 0, result.stderr
    data = json.loads(report.read_text())
    assert data["ok"] is True and data["verified"] is True
    row = skipped_row(InputSet((torch.zeros(0, 4),), {}, "size[batch=0]"), "CPU", "skipped: eager rejects these inputs")
    as_json = row.to_dict()
    assert as_json["skipped"] is True and as_json["max_abs_error"] is None and as_json["cosine_similarity"] is None
    assert "nan" not in json.dumps(as_json).lower()
    console = Console(width=200, record=True)
    console.print(verification_table([row]))
    line = next(text for text in console.export_text().splitlines() if "size[batch=0]" in text)
    assert "nan" not in line and "FAIL" not in line and "skipped: eager rejects" in line


class ReadsTraining(torch.nn.Module):
    def forward(self, x):
        return x * 2 if self.training else x


@pytest.mark.parametrize("make, warned", [
    (lambda: torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()), False),
    (lambda: torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.1)), True),
    (lambda: torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4)), True),
    (ReadsTraining, True),
])
def test_train_mode_warning_only_where_eval_mode_changes_something(make, warned):
    from fxport.engine.pipeline import module_left_as_it_was

    model, notes = make(), []
    with module_left_as_it_was(model, notes):
        assert not model.training
    assert model.training
    assert any("train mode" in note for note in notes) == warned, notes


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_ctrl_c_names_the_stage_it_interrupted():
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import REPO

    code = ("import signal, runpy, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "import torch, fxport.cli; print('imported', flush=True); "
            "sys.argv = ['fxport', 'convert', 'tests/models/basic.py:Scale']; runpy.run_module('fxport', run_name='__main__')")
    env = dict(os.environ, PYTHONPATH=REPO)
    process = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdout.readline().strip() == "imported"  # however loaded the machine is
    time.sleep(0.5)  # into loading or capture (the conversion takes seconds more)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    (line,) = err.strip().splitlines()
    assert line.startswith("interrupted during ") and "s into it)" in line and "Traceback" not in err


class PlainMax(torch.nn.Module):
    def forward(self, x):
        return x.max()


def test_a_built_in_op_rule_says_why_it_rewrote_the_op():
    """Issue 25 item 16: a plain ``.max()`` is rewritten (ONNX Runtime's ReduceMax drops NaN);
    the listing says so instead of 'translated max_1 (aten::max) with aten::max'."""
    result = fxport.convert(PlainMax().eval(), (torch.randn(3, 4),))
    (record,) = [r for r in result.rewrites if r.rule == "aten::max"]
    assert record.detail.endswith(": Maximum of all elements (0-d); any NaN → NaN; exact."), record.detail


def test_ctrl_c_inside_an_extension_import_is_still_an_interruption(capsys):
    """A Ctrl-C while a C extension initialises surfaces as ImportError("initialization
    failed") raised from the KeyboardInterrupt: reported as the interruption it is (exit 130)."""
    import typer

    from fxport.cli import OutputMode, run_guarded

    def action():
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as interrupt:
            raise ImportError("initialization failed") from interrupt

    with pytest.raises(typer.Exit) as info:
        run_guarded(OutputMode(quiet=False, as_json=False, debug=False), action)
    assert info.value.exit_code == 130
    assert "interrupted during loading" in capsys.readouterr().err
