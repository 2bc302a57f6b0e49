"""Measure fxport on the loops ported from public code: ``python3 -m tests.wild_loops.measure``.

Prints ``group | name | origin | verdict | seconds | message`` per case, then the pass rate per
group and in all (docs/control-flow.md records it). Options: ``--group search|decoding``,
``--only NAME[,NAME]``, ``-v`` (the traceback of an exception that is not a
``ConversionError``: an internal error leaking out of ``fxport.convert``), ``--exits`` (run the
held-out sets in eager only and print how often each loop/exit line of the model's file ran, to
check that the sets take the exits their ``exits`` text claims).
"""

from __future__ import annotations

import argparse
import inspect
import linecache
import sys
import time
import traceback

import torch

from tests.wild_loops import decoding_models, fresh_models, search_models
from tests.wild_loops.harness import _copy, judge

GROUPS = {"search": search_models.CASES, "decoding": decoding_models.CASES, "fresh": fresh_models.CASES}
_EXIT_WORDS = ("while ", "for ", "break", "continue", "return", "raise")


def exit_lines(case, args) -> tuple[list[str], str | None]:
    """``line:text xN`` for each loop/exit line of the model's file that ran in eager on ``args``."""
    model = case.make().eval()
    path = inspect.getsourcefile(type(model))
    hits: dict[int, int] = {}

    def tracer(frame, event, arg):
        if frame.f_code.co_filename == path and event == "line":
            hits[frame.f_lineno] = hits.get(frame.f_lineno, 0) + 1
        return tracer

    sys.settrace(tracer)
    try:
        with torch.no_grad():
            model(*_copy(args))
        error = None
    except Exception as exc:  # noqa: BLE001 - eager itself fails on these inputs: say so
        error = f"{type(exc).__name__}: {exc}"
    finally:
        sys.settrace(None)
    rows = [f"{line}:{linecache.getline(path, line).strip()[:40]} x{hits[line]}" for line in sorted(hits)
            if linecache.getline(path, line).strip().startswith(_EXIT_WORDS)]
    return rows, error


def measure(group: str, case) -> tuple[str, str, float]:
    """(verdict, message, seconds) of one case; ``error`` for an exception fxport let out."""
    start = time.perf_counter()
    try:
        verdict = judge(case)
        outcome, message = verdict.outcome, verdict.message
    except Exception as exc:  # noqa: BLE001 - an internal error leaking out of fxport.convert
        outcome, message = "error", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if "-v" in sys.argv:
            traceback.print_exc()
    return outcome, message, time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--group", choices=sorted(GROUPS))
    parser.add_argument("--only", default="")
    parser.add_argument("--exits", action="store_true")
    parser.add_argument("-v", action="store_true")
    opts = parser.parse_args(argv)
    wanted = set(filter(None, opts.only.split(",")))
    chosen = [(g, c) for g, cases in GROUPS.items() if opts.group in (None, g) for c in cases
              if not wanted or c.name in wanted]
    if opts.exits:
        for _, case in chosen:
            print(f"== {case.name}")
            for args, text in zip([case.example] + case.held_out, ["(example)"] + case.exits):
                rows, error = exit_lines(case, args)
                print(f"  {text}\n     {error or 'ok'}  " + "  ".join(rows))
        return 0
    results = []
    for group, case in chosen:
        outcome, message, seconds = measure(group, case)
        results.append((group, case.name, outcome))
        print(f"{group} | {case.name} | {case.origin} | {outcome} | {seconds:.1f}s | {message[:300]}", flush=True)
    print()
    for group in [*GROUPS, "all"]:
        rows = [r for r in results if group in ("all", r[0])]
        if rows:
            counts = {k: sum(1 for r in rows if r[2] == k) for k in ("converted", "refused", "wrong", "error")}
            print(f"{group}: {counts['converted']}/{len(rows)} converted; {counts['refused']} refused, "
                  f"{counts['wrong']} wrong, {counts['error']} internal errors")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
