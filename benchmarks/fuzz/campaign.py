"""A fuzz campaign: many generated programs, their verdicts counted, bugs shrunk and kept.

Hypothesis drives the generation: a program whose verdict is ``bug`` fails the property, so
hypothesis shrinks it to a minimal program, which is written to ``tests/fuzz_regressions/``
and becomes a regression test.

Example::

    >>> summary = run_campaign(programs=20, seed=0)     # doctest: +SKIP
    >>> summary.counts["bug"]                           # doctest: +SKIP
    0
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import multiprocessing
import os
import tempfile
from typing import Callable

from hypothesis import HealthCheck, Phase, given, seed, settings

from benchmarks.fuzz.generator import Program, programs
from benchmarks.fuzz.runner import Coverage, Outcome, run_program

REGRESSIONS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           "tests", "fuzz_regressions")

#: ``ci``: what the test suite runs (100 programs: 200 took 34 of CI's 90 minutes on 2 cores by
#: 2026-12-03; the long profile is the campaign run by hand, docs/reliability.md)
PROFILES = {"ci": 100, "long": 2000}


@dataclasses.dataclass
class Summary:
    counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    error_kinds: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    bugs: list[Outcome] = dataclasses.field(default_factory=list)
    #: the shortest program seen for each clear-error kind (``--show-errors``)
    error_examples: dict[str, Outcome] = dataclasses.field(default_factory=dict)
    coverage: Coverage = dataclasses.field(default_factory=Coverage)

    def merge(self, other: "Summary") -> None:
        self.counts.update(other.counts)
        self.error_kinds.update(other.error_kinds)
        self.bugs.extend(other.bugs)
        self.coverage.add(other.coverage)
        for outcome in other.error_examples.values():
            self.note_error(outcome)

    def note_error(self, outcome: Outcome) -> None:
        known = self.error_examples.get(outcome.kind)
        if known is None or len(outcome.source) < len(known.source):
            self.error_examples[outcome.kind] = outcome

    @property
    def tried(self) -> int:
        return sum(self.counts.values())


class BugFound(AssertionError):
    pass


def run_campaign(programs_to_run: int, seed_value: int, shrink: bool = True, keep: bool = True) -> Summary:
    """Run ``programs_to_run`` generated programs; on a bug, shrink it and stop."""
    summary = Summary()
    workdir = tempfile.mkdtemp(prefix="fxport-fuzz-")
    last_bug: list[Outcome] = []

    @seed(seed_value)
    @settings(max_examples=programs_to_run, deadline=None, database=None, print_blob=False,
              phases=[Phase.generate, Phase.shrink] if shrink else [Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(programs())
    def property_holds(program: Program) -> None:
        shrinking = bool(last_bug)  # after the first bug hypothesis only runs shrink candidates
        outcome = run_program(program, workdir)
        if outcome.verdict == "bug":
            last_bug[:] = [outcome]
            raise BugFound(outcome.message)
        if shrinking:
            return
        summary.counts[outcome.verdict] += 1
        summary.coverage.add(outcome.coverage)
        if outcome.verdict in ("clear-error", "invalid"):
            summary.error_kinds[f"{outcome.verdict}: {outcome.kind}"] += 1
            summary.note_error(outcome)

    try:
        property_holds()
    except BugFound:
        minimal = last_bug[0]  # the last failing example hypothesis ran is the shrunk one
        summary.counts["bug"] += 1
        summary.bugs.append(minimal)
        if keep:
            save_regression(minimal)
    return summary


def _worker(job: tuple[int, int, bool, bool]) -> Summary:
    count, seed_value, shrink, keep = job
    return run_campaign(count, seed_value, shrink=shrink, keep=keep)


#: Programs per hypothesis run: a bug stops (and shrinks) only its own chunk.
CHUNK = 25


def campaign(programs_to_run: int, seed_value: int, workers: int, shrink: bool = True, keep: bool = True,
             progress: Callable[[str], None] | None = None) -> Summary:
    """Run chunks of programs (distinct seeds) over ``workers`` processes and merge the summaries.

    ``shrink=False`` reports a bug's program as found (CI: bounded time); shrinking re-runs the
    conversion many times to reach a minimal program. ``keep=False`` does not write bugs to
    tests/fuzz_regressions/ (the test suite's own run). ``progress`` is called with a line after
    each chunk.
    """
    shares = [CHUNK] * (programs_to_run // CHUNK) + ([programs_to_run % CHUNK] if programs_to_run % CHUNK else [])
    jobs = [(share, seed_value * 1000 + i, shrink, keep) for i, share in enumerate(shares)]
    total = Summary()
    if workers == 1:
        for result in map(_worker, jobs):
            _note_progress(total, result, programs_to_run, progress)
        return total
    with multiprocessing.get_context("spawn").Pool(min(workers, len(jobs))) as pool:
        for result in pool.imap_unordered(_worker, jobs, chunksize=1):
            _note_progress(total, result, programs_to_run, progress)
    return total


def _note_progress(total: Summary, result: Summary, wanted: int, progress: Callable[[str], None] | None) -> None:
    """Merge a finished chunk and say how far the campaign is (a long run takes an hour)."""
    total.merge(result)
    if progress is not None:
        progress(f"{total.tried}/{wanted} programs: {total.counts['equal']} equal, "
                 f"{total.counts['clear-error']} clear errors, {total.counts['bug']} bugs")


def save_regression(outcome: Outcome) -> str:
    """Keep a shrunk bug as a regression case (tests/fuzz_regressions/<hash>.py)."""
    os.makedirs(REGRESSIONS, exist_ok=True)
    digest = hashlib.sha1(outcome.source.encode()).hexdigest()[:12]
    path = os.path.join(REGRESSIONS, f"case_{digest}.py")
    header = f'"""Fuzz regression ({outcome.kind}): {outcome.message[:200]}"""\n\n'
    with open(path, "w") as handle:
        handle.write(header + outcome.source)
    return path


def coverage_line(covered: Coverage) -> str:
    """How much of the programs' control flow the input sets exercised (eager, converted code)."""
    def share(part: int, whole: int) -> str:
        return f"{100 * part / whole:.0f}%" if whole else "-"

    return (f"coverage:              {share(covered.ifs_both, covered.ifs)} of {covered.ifs} tensor-conditioned ifs "
            f"took both branches; of {covered.loops} loops {share(covered.loops_zero, covered.loops)} ran 0 times on "
            f"some input, {share(covered.loops_varied, covered.loops)} ran with 2+ trip counts")


def report(summary: Summary, seconds: float, show_errors: bool = False) -> str:
    """The campaign's figures as printed by ``python -m benchmarks.fuzz`` (bugs with their programs)."""
    def kinds(verdict: str) -> list[str]:
        prefix = f"{verdict}: "
        return [f"    {count:5d}  {kind[len(prefix):]}" for kind, count in summary.error_kinds.most_common()
                if kind.startswith(prefix)]

    lines = [
        f"programs tried:        {summary.tried}",
        f"converted and equal:   {summary.counts['equal']}",
        f"clear errors:          {summary.counts['clear-error']}",
        *kinds("clear-error"),
        f"invalid programs:      {summary.counts['invalid']}  (fail eagerly, or float32 eager is rounding noise; not bugs)",
        *kinds("invalid"),
        f"bugs:                  {summary.counts['bug']}",
        coverage_line(summary.coverage),
    ]
    for bug in summary.bugs:
        lines += [f"  bug ({bug.kind}): {bug.message}", bug.source]
    if show_errors:
        for kind, example in sorted(summary.error_examples.items()):
            lines += [f"  shortest program with {kind}: {example.message}", example.source]
    lines.append(f"time: {seconds:.0f}s")
    return "\n".join(lines)
