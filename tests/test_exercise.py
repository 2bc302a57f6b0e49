"""Verification knows what it exercised: both sides of converted ifs, loops run 0 and 2+ times.

Differential: every input set the search finds is verified eager vs ONNX Runtime like the
generated ones, and the ONNX file is checked here again on inputs that take each side.
"""

import json
import os

import pytest
import torch

import fxport
from tests.conftest import MODELS, line_of, op_counts, run_cli, run_onnx
from tests.models.coverage_cases import CountedLoop, OneSided, ReachedOnlyByOverflow, Unreachable, WritesInUntakenBranch

CASES = os.path.join(MODELS, "coverage_cases.py")


def test_search_reaches_the_side_the_example_never_takes():
    result = fxport.convert(OneSided(), OneSided.example_args)
    (construct,) = result.coverage
    assert construct["outcomes"] == [False, True] and construct["missing"] == []
    searched = [row for row in result.verification if row.name.startswith("search: ")]
    assert searched and all(row.passed for row in searched)
    assert "reaches if at" in searched[0].name
    assert op_counts(result.model).get("If", 0) + op_counts(result.model).get("Where", 0) >= 1
    for x in (torch.rand(4, 3) + 1, torch.rand(4, 3) - 2):
        torch.testing.assert_close(torch.from_numpy(run_onnx(result.model, x)[0]), OneSided()(x))


def test_an_in_place_write_in_the_untaken_branch_is_never_written_silently(tmp_path):
    """Refused, or written and right on the side the example never took: never a wrong file."""
    out = tmp_path / "m.onnx"
    try:
        result = fxport.convert(WritesInUntakenBranch(), WritesInUntakenBranch.example_args, output=out)
    except fxport.VerificationError as exc:
        assert not out.exists() and "search: " in exc.message
        return
    x = torch.rand(4, 3) + 1
    torch.testing.assert_close(torch.from_numpy(run_onnx(result.model, x)[0]), x * 3)


def test_loops_report_their_trip_counts():
    result = fxport.convert(CountedLoop(), CountedLoop.example_args)
    (construct,) = result.coverage
    assert construct["kind"] == "while" and construct["missing"] == []
    trips = [o for o in construct["outcomes"] if isinstance(o, int)]
    assert 0 in trips and max(trips) >= 2 and "left by its test" in construct["outcomes"]
    assert op_counts(result.model).get("Loop", 0) == 1
    for n, want in ((-1.0, 0.0), (0.5, 1.5), (2.0, 3.0), (7.0, 7.5)):
        assert float(run_onnx(result.model, torch.tensor(n))[0]) == want


def test_an_unreached_side_is_a_warning_at_the_users_line():
    result = fxport.convert(Unreachable(), Unreachable.example_args)
    where = line_of(os.path.join(MODELS, "coverage_cases.py"), "if x.abs().sum() >= 0")
    (warning,) = [w for w in result.warnings if "never reached" in w]
    assert where.split(":")[1] in warning and "False side" in warning and "\n" not in warning
    assert result.coverage[0]["missing"] == ["False side"]


@pytest.mark.slow
def test_strict_coverage_turns_the_warning_into_an_error_through_the_cli(tmp_path):
    out = tmp_path / "m.onnx"
    done = run_cli("convert", f"{CASES}:Unreachable", "--strict-coverage", "-o", str(out), "--json")
    assert done.returncode == 1 and not out.exists()
    data = json.loads(done.stdout)
    assert data["error"] == "VerificationError" and "--strict-coverage" in data["message"]
    assert "coverage_cases.py:" in data["message"]
    relaxed = run_cli("convert", f"{CASES}:Unreachable", "--json")
    assert relaxed.returncode == 0
    assert any("never reached its False side" in w for w in json.loads(relaxed.stdout)["warnings"])


def test_models_without_converted_control_flow_pay_nothing():
    class Plain(torch.nn.Module):
        def forward(self, x):
            return x * 2

    result = fxport.convert(Plain(), (torch.randn(2, 3),))
    assert result.coverage == [] and "coverage" not in result.timings, "no coverage stage without converted code"
    assert not any(row.name.startswith("search: ") for row in result.verification)


def test_a_search_set_that_overflows_in_eager_is_not_used():
    """Values ×10 reach the true side but make exp overflow to inf in eager itself: float32
    overflow decides branches and loop exits by rounding order (a long-profile fuzz find), so
    such a set is outside the model's values; the side is a warning naming the variations."""
    result = fxport.convert(ReachedOnlyByOverflow(), ReachedOnlyByOverflow.example_args)
    assert not any(row.name.startswith("search: ") for row in result.verification)
    (warning,) = [w for w in result.warnings if "never reached" in w]
    assert "True side" in warning and "values ×10, values ×100 gave inf/NaN" in warning
    assert op_counts(result.model).get("Where", 0) + op_counts(result.model).get("If", 0) >= 1
    x = torch.full((4, 3), 7.0)  # exp(70) = 2.5e30: the true side, finite
    torch.testing.assert_close(torch.from_numpy(run_onnx(result.model, x)[0]), ReachedOnlyByOverflow()(x))


def test_a_loop_whose_zero_trips_need_a_size_eager_rejects_says_so():
    """GPT-J's generator (issue 50, item 6): its ``while`` runs 0 times only at batch 0, where
    eager itself raises; the warning says eager rejects that size rather than only "unverified"."""
    from fxport.controlflow.operators.loops.statements import LEFT_BY_TEST
    from fxport.errors import SourceLocation
    from fxport.verify.exercise import ConstructCoverage, ExerciseReport

    where = SourceLocation("greedy.py", 36, "search")
    loop = ConstructCoverage("while", where, {1, 3, LEFT_BY_TEST}, 0, False)
    (warning,) = ExerciseReport([loop], rejected=["size[batch=0]"]).warnings()
    assert "never reached its 0 iterations on any input set eager runs (eager itself raises on size[batch=0]" in warning
    (plain,) = ExerciseReport([ConstructCoverage("while", where, {1, 3, LEFT_BY_TEST}, 0, False)]).warnings()
    assert "eager itself raises" not in plain and "never reached its 0 iterations on any input set:" in plain
