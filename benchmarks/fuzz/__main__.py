"""``python -m benchmarks.fuzz``: run a fuzz campaign and print its figures.

    python -m benchmarks.fuzz --profile ci          # 200 programs, fixed seeds (what CI runs)
    python -m benchmarks.fuzz --profile long        # 1000 programs
    python -m benchmarks.fuzz --programs 50 --seed 7 --workers 2
"""

from __future__ import annotations

import argparse
import sys
import time

from benchmarks.fuzz.campaign import PROFILES, Summary, campaign


def report(summary: Summary, seconds: float) -> str:
    lines = [
        f"programs tried:        {summary.tried}",
        f"converted and equal:   {summary.counts['equal']}",
        f"clear errors:          {summary.counts['clear-error']}",
    ]
    lines += [f"    {count:5d}  {kind}" for kind, count in summary.error_kinds.most_common()]
    lines += [
        f"invalid programs:      {summary.counts['invalid']}  (fail eagerly by themselves; not counted as bugs)",
        f"bugs:                  {summary.counts['bug']}",
    ]
    for bug in summary.bugs:
        lines += [f"  bug ({bug.kind}): {bug.message}", bug.source]
    lines.append(f"time: {seconds:.0f}s")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Differential fuzzing of fxport's converter.")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="ci")
    parser.add_argument("--programs", type=int, help="override the profile's program count")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-shrink", action="store_true", help="report bugs unshrunk (faster)")
    options = parser.parse_args(argv)
    count = options.programs or PROFILES[options.profile]
    start = time.perf_counter()
    summary = campaign(count, options.seed, max(1, options.workers), shrink=not options.no_shrink)
    print(report(summary, time.perf_counter() - start))
    return 1 if summary.counts["bug"] else 0


if __name__ == "__main__":
    sys.exit(main())
