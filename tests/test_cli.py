"""The fxport command line, run in a subprocess the way a user runs it."""

import json
import os

import onnx
import pytest

from tests.conftest import MODELS, line_of, run_cli

BASIC = os.path.join(MODELS, "basic.py")


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_convert_bundled_example_writes_verified_model(tmp_path):
    out = tmp_path / "srcnn.onnx"
    result = run_cli("convert", "examples/srcnn.py:SuperResolutionNet", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert "verified" in result.stdout and "larger[" in result.stdout
    assert "Conv×3" in result.stdout
    onnx.checker.check_model(onnx.load(out))


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_readme_main_job_converts_data_dependent_control_flow(tmp_path):
    """The README's first command: an if on a submodule call → If, a cheap ifexp → Where."""
    out = tmp_path / "gated.onnx"
    result = run_cli("convert", "examples/gated_mlp.py:GatedMLP", "-o", str(out), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    control_flow = [r for r in data["rewrites"] if r["tier"] == "control-flow"]
    assert {r["rule"] for r in control_flow} == {"if-to-cond", "ifexp-to-where"}
    assert all(r["location"].startswith("examples/gated_mlp.py:") for r in data["rewrites"])
    assert "aten::max" in {r["rule"] for r in data["rewrites"]}, "x.abs().max() keeps torch's NaN semantics"
    assert data["op_counts"]["If"] == 1 and data["op_counts"]["Where"] >= 1  # + the NaN-propagating max
    assert [row["name"] for row in data["verification"]][-3:] == ["user-1", "user-2", "user-3"]
    stock = run_cli("convert", "examples/gated_mlp.py:GatedMLP", "--no-control-flow")
    assert stock.returncode == 1 and "data-dependent control flow" in stock.stderr
    assert line_of("examples/gated_mlp.py", "if h.mean() > 0") in stock.stderr


@pytest.mark.slow
def test_convert_with_input_specs_dynamic_and_report(tmp_path):
    report = tmp_path / "report.json"
    result = run_cli("convert", "tests/models/basic.py:TwoInputs", "-i", "x=3x4", "-i", "ids=3:int64",
                     "--dynamic", "x:0=n", "--dynamic", "ids:0=n", "--report", str(report), "-q")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    data = json.loads(report.read_text())
    assert data["verified"] is True
    shapes = [row["input_shapes"] for row in data["verification"]]
    assert [[4, 4], [4]] in shapes and [[2, 4], [2]] in shapes, "dims named alike vary together"


@pytest.mark.slow
def test_json_output_and_inputs_fn():
    static = run_cli("convert", "tests/models/basic.py:TwoInputs", "--inputs-fn",
                     "tests/models/basic.py:inputs_for_two")
    assert static.returncode == 1
    assert "the user-1 inputs give x shape [5, 3] but the model was exported with [2, 3]" in static.stderr
    result = run_cli("convert", "tests/models/basic.py:TwoInputs", "--inputs-fn",
                     "tests/models/basic.py:inputs_for_two", "--dynamic", "x:0=n", "--dynamic", "ids:0=n", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["ok"] and data["verified"]
    assert data["verification"][-1]["name"] == "user-1"
    assert data["verification"][-1]["input_shapes"] == [[5, 3], [5]]


@pytest.mark.parametrize(
    "args, code, fragment",
    [
        (["convert", "tests/models/basic.py:Nope"], 2, "has no attribute 'Nope'"),
        (["convert", "tests/models/missing.py:Net"], 2, "does not exist"),
        (["convert", "tests/models/basic.py:NeedsArgs"], 2, "needs constructor arguments"),
        (["convert", "tests/models/basic.py:NoInputs"], 2, "no example inputs"),
        (["convert", "tests/models/basic.py:TwoInputs", "-i", "x=3xq"], 2, "bad shape"),
        (["convert", "tests/models/basic.py:Scale", "--opset", "99"], 2, "out of range"),
        (["convert", "tests/models/basic.py:Scale", "--device", "tpu"], 2, "Invalid value"),
        pytest.param(["convert", "tests/models/basic.py:MissingOp"], 1, "aten::i0", marks=pytest.mark.slow),
        pytest.param(["convert", "tests/models/basic.py:RaisesInForward"], 1, "the model raised RuntimeError", marks=pytest.mark.slow),
        # without verification the eager stage is skipped; the failed capture then runs eager once
        pytest.param(["convert", "tests/models/basic.py:RaisesInForward", "--no-verify"], 1,
                     "the model raised RuntimeError", marks=pytest.mark.slow),
    ],
)
@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_errors_are_one_line_with_exit_codes(args, code, fragment):
    result = run_cli(*args)
    assert result.returncode == code, result.stderr
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr
    if code == 1:
        assert len([l for l in result.stderr.splitlines() if l.startswith("error:")]) == 1


@pytest.mark.slow
def test_error_names_user_file_line_and_debug_shows_traceback():
    result = run_cli("convert", "tests/models/basic.py:RaisesInForward")
    assert line_of(BASIC, "x @ torch.randn(4, 4)") in result.stderr
    debug = run_cli("convert", "tests/models/basic.py:RaisesInForward", "--debug")
    assert "Traceback" in debug.stderr


@pytest.mark.slow
def test_json_error_and_no_output_file_left(tmp_path):
    out = tmp_path / "m.onnx"
    result = run_cli("convert", "tests/models/basic.py:MissingOp", "-o", str(out), "--json")
    assert result.returncode == 1
    data = json.loads(result.stdout)
    assert data["ok"] is False and data["error"] == "UnsupportedOpsError" and data["stage"] == "lower"
    assert not out.exists() and os.listdir(tmp_path) == []


def test_python_dash_m_help():
    result = run_cli("--help")
    assert result.returncode == 0 and "convert" in result.stdout
