"""Differential fuzzing: generated programs are converted-and-equal or a clear error, never wrong.

The CI profile runs 200 programs with fixed seeds across two worker processes; the long profile
(`python -m benchmarks.fuzz --profile long`) is documented in docs/reliability.md. Programs the
fuzzer shrank from bugs are kept in tests/fuzz_regressions/ and re-checked here.
"""

import glob
import os

import pytest

from benchmarks.fuzz.campaign import PROFILES, campaign
from benchmarks.fuzz.runner import run_file

REGRESSIONS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "fuzz_regressions", "case_*.py")))


@pytest.mark.parametrize("path", REGRESSIONS, ids=[os.path.basename(p) for p in REGRESSIONS])
def test_kept_regression_programs(path):
    outcome = run_file(path)
    assert outcome.verdict in ("equal", "clear-error"), f"{outcome.kind}: {outcome.message}"


@pytest.mark.slow
def test_ci_fuzz_profile_finds_no_bugs():
    summary = campaign(PROFILES["ci"], seed_value=0, workers=2, shrink=False)
    bugs = "\n\n".join(f"{b.kind}: {b.message}\n{b.source}" for b in summary.bugs)
    assert summary.counts["bug"] == 0, bugs
    assert summary.tried >= PROFILES["ci"]
    assert summary.counts["equal"] >= summary.tried // 2, summary.counts
