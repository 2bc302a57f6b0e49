"""Measure fxport on the loops ported from public code: ``python3 -m tests.wild_loops.measure``.

Prints ``group | name | origin | verdict | seconds | message`` per case, then the pass rate per
group and in all (docs/control-flow.md records it). Options: ``--group search|decoding``,
``--only NAME[,NAME]``, ``-v`` (the traceback of an exception that is not a
``ConversionError``: an internal error leaking out of ``fxport.convert``), ``--exits`` (run the
held-out sets in eager only and print how often each loop/exit line of the model's file ran, to
check that the sets take the exits their ``exits`` text claims), ``--save FILE`` (the verdicts as
JSON), ``--doc [FILE ...]`` (measure nothing: write docs/control-flow.md's corpus tables from
saved verdicts, later files overriding earlier ones for the same loop; with no file, from the
strict xfails of tests/wild_loops/test_*.py, which the tests hold equal to the verdicts: a loop
without one converts; a refusal's class is the text before the first ": " of its xfail's reason).

    python3 -m tests.wild_loops.measure --save /tmp/loops.json && python3 -m tests.wild_loops.measure --doc /tmp/loops.json
    python3 -m pytest -q tests/wild_loops && python3 -m tests.wild_loops.measure --doc
"""

from __future__ import annotations

import argparse
import collections
import inspect
import json
import os
import linecache
import sys
import time
import traceback

import torch

from tests.wild_loops import (decoding_models, fresh2_models, fresh3_models, fresh4_models, fresh_models,
                              search_models)
from tests.wild_loops.harness import _copy, judge

GROUPS = {"search": search_models.CASES, "decoding": decoding_models.CASES, "fresh": fresh_models.CASES,
          "fresh2": fresh2_models.CASES, "fresh3": fresh3_models.CASES, "fresh4": fresh4_models.CASES}
#: the columns of the class table: the loops ported first, and those ported out of sample
SAMPLES = {"original": ("search", "decoding"), "fresh": ("fresh",), "fresh2": ("fresh2",), "fresh3": ("fresh3",),
           "fresh4": ("fresh4",)}
DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs", "control-flow.md")
BEGIN = "<!-- wild loops: written by python3 -m tests.wild_loops.measure --doc -->"
END = "<!-- end of wild loops -->"
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


def refusal_classes() -> dict[str, str]:
    """Loop name → the class its strict xfail names (tests/wild_loops/test_*.py ``XFAIL``)."""
    import importlib

    reasons = {}
    for group in GROUPS:
        module = importlib.import_module(f"tests.wild_loops.test_{group}")
        reasons.update(getattr(module, "XFAIL", None) or module._XFAIL)
    return {name: _class_of(reason) for name, reason in reasons.items()}


def _class_of(reason: str) -> str:
    """The text of an xfail reason before its first ": " outside parentheses (then fxport's message).

    >>> _class_of("first trip unlike the rest (if t == 0: ...): for: loop variable 'h'")
    'first trip unlike the rest (if t == 0: ...)'
    """
    depth = 0
    for at, char in enumerate(reason):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0 and reason.startswith(": ", at):
            return reason[:at]
    return reason


def corpus_tables(results: list[dict], classes: dict[str, str]) -> str:
    """The generated part of docs/control-flow.md: totals, refusals by class and sample, one row per loop."""
    origins = {case.name: case.origin for cases in GROUPS.values() for case in cases}
    lines = []
    for sample, groups in {**SAMPLES, "all": tuple(GROUPS)}.items():
        rows = [r for r in results if r["group"] in groups]
        counts = collections.Counter(r["outcome"] for r in rows)
        lines.append(f"- {sample} ({', '.join(groups)}): **{counts['converted']}/{len(rows)}** converted and equal "
                     f"to eager on every held-out set; {counts['refused']} refused in one line, "
                     f"{counts['wrong']} wrong files, {counts['error']} exceptions other than fxport's one-line error")
    lines += ["", "| class of refusal | " + " | ".join(SAMPLES) + " | all |",
              "| --- | " + " | ".join("---" for _ in SAMPLES) + " | --- |"]
    by_class = collections.defaultdict(collections.Counter)
    for r in results:
        if r["outcome"] != "converted":
            sample = next(name for name, groups in SAMPLES.items() if r["group"] in groups)
            by_class[_without_detail(_verdict_text(r, classes))][sample] += 1
    for name, counts in sorted(by_class.items(), key=lambda item: (-sum(item[1].values()), item[0])):
        lines.append(f"| {name} | " + " | ".join(str(counts[s]) for s in SAMPLES) + f" | {sum(counts.values())} |")
    lines += ["", "| group | loop | origin | verdict |", "| --- | --- | --- | --- |"]
    for r in results:
        verdict = "converted" if r["outcome"] == "converted" else f"{r['outcome']} — {_verdict_text(r, classes)}"
        lines.append(f"| {r['group']} | `{r['name']}` | {origins.get(r['name'], '')} | {verdict} |")
    return "\n".join(lines)


def _without_detail(name: str) -> str:
    """A class without the loop's own detail in its closing parentheses, so loops of one class count together.

    >>> _without_detail("carried value changes rank (torch.Tensor([inf]) of shape (1,), then 0-d)")
    'carried value changes rank'
    """
    if not name.endswith(")"):
        return name
    depth = 0
    for at in range(len(name) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(name[at], 0)
        if depth == 0:
            return name[:at].rstrip() or name
    return name


def _verdict_text(result: dict, classes: dict[str, str]) -> str:
    if result["outcome"] == "refused" and result["name"] in classes:
        return classes[result["name"]]
    return result["message"][:160] or result["outcome"]


def write_doc(saved: list[str], doc: str = DOC) -> None:
    """Replace the generated block of ``doc`` with tables of the verdicts saved in ``saved``."""
    classes = refusal_classes()
    merged = {case.name: {"group": group, "name": case.name, "message": "",
                          "outcome": "refused" if case.name in classes else "converted"}
              for group, cases in GROUPS.items() for case in cases} if not saved else {}
    for path in saved:
        with open(path) as handle:
            merged.update({r["name"]: r for r in json.load(handle)})
    order = [case.name for cases in GROUPS.values() for case in cases]
    missing = [name for name in order if name not in merged]
    if missing:
        raise SystemExit(f"no saved verdict for {len(missing)} loops ({', '.join(missing[:5])}); measure them first")
    block = corpus_tables([merged[name] for name in order], classes)
    with open(doc) as handle:
        text = handle.read()
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{doc} has no {BEGIN} ... {END} block")
    head, rest = text.split(BEGIN, 1)
    with open(doc, "w") as handle:
        handle.write(head + BEGIN + "\n\n" + block + "\n\n" + END + rest.split(END, 1)[1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--group", choices=sorted(GROUPS))
    parser.add_argument("--only", default="")
    parser.add_argument("--exits", action="store_true")
    parser.add_argument("-v", action="store_true")
    parser.add_argument("--save")
    parser.add_argument("--doc", nargs="*")
    opts = parser.parse_args(argv)
    if opts.doc is not None:
        write_doc(opts.doc)
        return 0
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
    results, saved = [], []
    for group, case in chosen:
        outcome, message, seconds = measure(group, case)
        results.append((group, case.name, outcome))
        saved.append({"group": group, "name": case.name, "outcome": outcome, "message": message})
        print(f"{group} | {case.name} | {case.origin} | {outcome} | {seconds:.1f}s | {message[:300]}", flush=True)
        if opts.save:
            with open(opts.save, "w") as handle:
                json.dump(saved, handle, indent=1)
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
