"""Differential fuzzing: the CI profile finds no bugs, and the programs it once found stay fixed.

The fuzzer (``python -m benchmarks.fuzz``, docs/reliability.md) generates random models with
data-dependent control flow, converts them and compares ONNX Runtime with eager on inputs that
take different branches and trip counts. Programs it shrank from bugs are kept in
tests/fuzz_regressions/ and must convert and match eager, or fail with a clear error.
"""

import glob
import os

import pytest

from benchmarks.fuzz.campaign import PROFILES, campaign, report
from benchmarks.fuzz.runner import run_file

REGRESSIONS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "fuzz_regressions", "case_*.py")))


@pytest.mark.parametrize("path", REGRESSIONS, ids=[os.path.basename(p) for p in REGRESSIONS])
def test_kept_regression_programs(path):
    outcome = run_file(path)
    assert outcome.verdict in ("equal", "clear-error"), f"{outcome.kind}: {outcome.message}"


@pytest.mark.slow
def test_ci_fuzz_profile_has_no_bugs():
    """200 generated programs (fixed seeds): each converts and equals eager, or fails clearly."""
    summary = campaign(PROFILES["ci"], seed_value=0, workers=2, shrink=False, keep=False)
    assert summary.counts["bug"] == 0, report(summary, 0.0)
    assert summary.tried == PROFILES["ci"]
    assert summary.counts["equal"] >= PROFILES["ci"] * 0.8, report(summary, 0.0)
