"""``python -m benchmarks.fuzz``: run a fuzz campaign and print its figures.

    python -m benchmarks.fuzz --profile ci          # 100 programs, fixed seeds (what CI runs)
    python -m benchmarks.fuzz --profile long        # 2000 programs
    python -m benchmarks.fuzz --programs 50 --seed 7 --workers 2
    python -m benchmarks.fuzz --loops 300 --seed 0         # decoding/search loops (benchmarks/fuzz/loops.py)
"""

from __future__ import annotations

import argparse
import sys
import time

from benchmarks.fuzz.campaign import PROFILES, campaign, report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Differential fuzzing of fxport's converter.")
    parser.add_argument("--profile", choices=sorted(PROFILES), default="ci")
    parser.add_argument("--programs", type=int, help="override the profile's program count")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-shrink", action="store_true", help="report bugs unshrunk (faster)")
    parser.add_argument("--show-errors", action="store_true",
                        help="print the shortest program and message for each clear-error kind")
    parser.add_argument("--loops", type=int, metavar="N",
                        help="run N programs of the decoding/search loop fuzzer instead (benchmarks/fuzz/loops.py)")
    options = parser.parse_args(argv)
    if options.loops is not None:
        from benchmarks.fuzz import loops
        return loops.main(["--programs", str(options.loops), "--seed", str(options.seed)])
    count = options.programs or PROFILES[options.profile]
    start = time.perf_counter()
    summary = campaign(count, options.seed, max(1, options.workers), shrink=not options.no_shrink,
                       progress=lambda line: print(f"[{time.perf_counter() - start:5.0f}s] {line}", file=sys.stderr, flush=True))
    print(report(summary, time.perf_counter() - start, show_errors=options.show_errors))
    return 1 if summary.counts["bug"] else 0


if __name__ == "__main__":
    sys.exit(main())
