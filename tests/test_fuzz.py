"""Differential fuzzing: programs the fuzzer found bugs with stay fixed.

Programs the fuzzer (``python -m benchmarks.fuzz``, docs/reliability.md) shrank from bugs are
kept in tests/fuzz_regressions/ and must convert and match eager, or fail with a clear error.
"""

import glob
import os

import pytest

from benchmarks.fuzz.runner import run_file

REGRESSIONS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "fuzz_regressions", "case_*.py")))


@pytest.mark.parametrize("path", REGRESSIONS, ids=[os.path.basename(p) for p in REGRESSIONS])
def test_kept_regression_programs(path):
    outcome = run_file(path)
    assert outcome.verdict in ("equal", "clear-error"), f"{outcome.kind}: {outcome.message}"
