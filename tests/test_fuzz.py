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
    """A kept program whose fix made it convert says ``# expect: equal``: a clear error is then a regression too."""
    with open(path) as handle:
        allowed = ("equal",) if "# expect: equal" in handle.read() else ("equal", "clear-error")
    outcome = run_file(path)
    assert outcome.verdict in allowed, f"{outcome.verdict} ({outcome.kind}): {outcome.message}"


def test_ill_conditioned_program_is_not_counted_as_a_bug():
    """The long profile's one 'mismatch': (h + g).sum(-1) with g = e - e.mean(-1) and e up to
    exp(80) is zero up to rounding of 1e28-sized terms; float32 eager itself is noise there."""
    outcome = run_file(os.path.join(os.path.dirname(__file__), "fuzz_regressions", "ill_conditioned_cancellation.py"))
    assert (outcome.verdict, outcome.kind) == ("invalid", "ill-conditioned"), outcome.message
    assert "float32 eager differs from float64 eager" in outcome.message


@pytest.mark.slow
def test_ci_fuzz_profile_has_no_bugs():
    """200 generated programs (fixed seeds): each converts and equals eager, or fails clearly."""
    summary = campaign(PROFILES["ci"], seed_value=0, workers=2, shrink=False, keep=False)
    assert summary.counts["bug"] == 0, report(summary, 0.0)
    assert summary.tried == PROFILES["ci"]
    assert summary.counts["equal"] >= PROFILES["ci"] * 0.8, report(summary, 0.0)
    covered = summary.coverage  # the input sets exercise the control flow (long profile: 54%, 44%, 79%)
    assert covered.ifs_both >= 0.4 * covered.ifs, report(summary, 0.0)
    assert covered.loops_zero >= 0.3 * covered.loops, report(summary, 0.0)
    assert covered.loops_varied >= 0.6 * covered.loops, report(summary, 0.0)
