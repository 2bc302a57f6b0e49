"""The command line as a seasoned CLI user expects it: start-up, flags, files, JSON, failures."""

import json
import os
import stat
import subprocess
import sys

import pytest

from fxport.common.files import write_atomically, write_text_atomically
from tests.conftest import MODELS, REPO, run_cli

CASES = os.path.join(MODELS, "cli_cases.py")


def test_version_and_help_do_not_import_torch():
    code = ("import sys\nfrom fxport.cli import main\nsys.argv = ['fxport', '--version']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('heavy:', sorted(m for m in ('torch', 'onnx', 'onnxruntime') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.stdout.splitlines() == ["fxport 0.1.0", "heavy: []"], done.stdout + done.stderr


def test_help_shows_flags_without_a_type():
    done = run_cli("convert", "--help")
    assert done.returncode == 0
    assert "<bool>" not in done.stdout and "--no-verify" in done.stdout and "--atol" in done.stdout


def test_outputs_follow_the_umask_and_keep_an_overwritten_files_mode(tmp_path):
    previous = os.umask(0o022)
    try:
        fresh = tmp_path / "fresh.json"
        write_text_atomically("{}", fresh)
        assert stat.S_IMODE(os.stat(fresh).st_mode) == 0o644
        shared = tmp_path / "shared.json"
        shared.write_text("old")
        os.chmod(shared, 0o664)
        write_text_atomically("{}", shared)
        assert stat.S_IMODE(os.stat(shared).st_mode) == 0o664 and shared.read_text() == "{}"
    finally:
        os.umask(previous)


@pytest.mark.slow
def test_json_stdout_holds_only_json_when_the_model_prints(tmp_path):
    out, report = tmp_path / "m.onnx", tmp_path / "r.json"
    done = run_cli("convert", f"{CASES}:Chatty", "--json", "-o", str(out), "--report", str(report))
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["ok"] and data["verified"]
    assert "forward says hello" in done.stderr
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o666 & ~_umask()
    assert json.loads(report.read_text())["verified"]


@pytest.mark.slow
def test_failed_run_still_reports_every_stage_that_ran(tmp_path):
    out, report = tmp_path / "n.onnx", tmp_path / "r.json"
    done = run_cli("convert", f"{CASES}:Noisy", "--json", "-o", str(out), "--report", str(report))
    assert done.returncode == 1
    for data in (json.loads(done.stdout), json.loads(report.read_text())):
        assert not data["ok"] and data["error"] == "VerificationError" and data["stage"] == "verify"
        assert {"capture", "lower", "verify"} <= set(data["timings"])
        assert [row["name"] for row in data["verification"]][:2] == ["example", "random"]
        assert not all(row["passed"] for row in data["verification"])
    assert not out.exists(), "a failed run writes no model"


@pytest.mark.slow
def test_tolerances_are_the_users_to_set_and_recorded(tmp_path):
    report = tmp_path / "r.json"
    done = run_cli("convert", f"{CASES}:Noisy", "--atol", "1.0", "--rtol", "0", "--report", str(report))
    assert done.returncode == 0, done.stderr
    assert "Tolerances: atol 1, rtol 0" in done.stdout
    assert json.loads(report.read_text())["tolerances"] == {"atol": 1.0, "rtol": 0.0}
    strict = run_cli("convert", f"{CASES}:Noisy", "--atol", "0.001")
    assert strict.returncode == 1 and "differs from eager" in strict.stderr


@pytest.mark.parametrize("flag, value", [("--atol", "-1"), ("--rtol", "nan")])
@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_bad_tolerances_are_usage_errors(flag, value):
    done = run_cli("convert", f"{CASES}:Chatty", flag, value)
    assert done.returncode == 2 and flag in done.stderr and done.stderr.count("\n") == 1


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_rule_file_syntax_error_points_at_its_line(tmp_path):
    rules = tmp_path / "rules.py"
    rules.write_text("import fxport\n\n\ndef broken(:\n    pass\n")
    done = run_cli("convert", f"{CASES}:Chatty", "--rules", str(rules))
    assert done.returncode == 2
    assert f"{rules}:4" in done.stderr and "line 1" not in done.stderr


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


@pytest.mark.slow
def test_ops_scans_a_model_with_data_dependent_control_flow():
    """`fxport ops` captures like convert (control flow converted) instead of stopping at the if."""
    from fxport.engine.pipeline import scan_model

    assert scan_model(f"{CASES}:BranchyMissingOp") == [], "erfinv inside the branch is translated by a rule"
    missing = scan_model(f"{CASES}:BranchyMissingOp", disable=("aten::erfinv",))
    assert [entry.op for entry in missing] == ["aten::erfinv"]
    assert "cli_cases.py:" in str(missing[0].location)
    done = run_cli("ops", f"{CASES}:BranchyMissingOp")
    assert done.returncode == 0 and "Every op has an ONNX translation" in done.stdout, done.stderr


def test_an_input_given_twice_is_a_usage_error():
    done = run_cli("convert", "tests/models/basic.py:NoInputs", "-i", "x=2x3", "-i", "x=4x3", "-i", "y=2x3")
    assert done.returncode == 2 and "-i gives input x more than once" in done.stderr
    assert done.stderr.count("\n") == 1
