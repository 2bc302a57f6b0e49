"""What verification spends on sets fxport made up, for models with Python-level loops: a flat
60 s eager limit and the declared maximum (before) against a budget proportional to the
example's eager run and sizes chosen by cost (after, issue 50 item 8).

Two loop models with a small example and a declared maximum of 4096: the detection tutorials'
Python NMS (``TutorialNms``, ``tests/controlflow/loop_class_models.py``: 12 boxes, ``n ≤ 4096``)
and pytorch-crf's forward algorithm (``CRFNormalizer``, ``tests/wild_loops/decoding_models.py``:
4 steps × batch 2, ``time ≤ 4096``). Each conversion runs in a child process of its own (a cold
start, as the CLI's), alone and with the machine loaded by two busy Python processes
(``while True: pass``, ended after). ``flat`` sets ``fxport.eager.limits.PROPORTIONAL = False`` and
``fxport.verify.exercise.HALVE_THREADS_FOR_LOOPS = False``: the behaviour before; ``threads``
only halves the coverage pass's threads; ``proportional`` is the default (both).

    python3 -m benchmarks.verify_cost                  # writes its table into docs/reliability.md
    python3 -m benchmarks.verify_cost --repeats 1 --no-write
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(REPO, "docs", "reliability.md")
BEGIN = "<!-- verify cost: written by python3 -m benchmarks.verify_cost -->"
END = "<!-- end of verify cost -->"
TITLE = "Verification's eager runs on made-up sets of loop models: flat limit vs proportional budget"
MODELS = ("nms", "crf")
#: flat: before issue 50 item 8; threads: only the coverage pass's threads halved for loop models;
#: proportional: that and the budgets and sizes chosen by cost (the default)
MODES = ("flat", "threads", "proportional")
LOADS = (0, 2)


def build(name: str):
    """``(model, example args, dynamic_shapes)`` of a benchmark model."""
    import torch

    if name == "nms":
        from tests.controlflow.loop_class_models import TutorialNms

        g = torch.Generator().manual_seed(0)
        corner = torch.rand(12, 2, generator=g) * 50
        boxes = torch.cat([corner, corner + 5 + torch.rand(12, 2, generator=g) * 10], 1)
        n = torch.export.Dim("n", max=4096)
        return TutorialNms().eval(), (boxes, torch.rand(12, generator=g)), {"boxes": {0: n}, "scores": {0: n}}
    from tests.wild_loops.decoding_models import CRFNormalizer, _crf_mask, _emis

    steps, batch = torch.export.Dim("time", max=4096), torch.export.Dim("batch")
    axes = {0: steps, 1: batch}
    return CRFNormalizer().eval(), (_emis(0, 4, 2), _crf_mask([4, 3], 4)), {"emissions": axes, "mask": axes}


def measure(name: str, mode: str) -> dict:
    """One conversion (in this process): seconds in all, per stage, the largest set, what was skipped."""
    import warnings

    import fxport
    import fxport.eager.limits as limits
    import fxport.verify.exercise as exercise

    switch = hasattr(limits, "PROPORTIONAL")
    if switch:
        limits.PROPORTIONAL = mode == "proportional"
        exercise.HALVE_THREADS_FOR_LOOPS = mode != "flat"
    model, args, dynamic = build(name)
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = fxport.convert(model, args, dynamic_shapes=dynamic)
    total = time.perf_counter() - started
    sized = [row for row in result.verification if row.name.startswith("size[") and "=0]" not in row.name]
    largest = max(sized, key=lambda row: max(max(shape, default=0) for shape in row.input_shapes), default=None)
    return {"total": total, "timings": dict(result.timings), "switch": switch,
            "largest": largest.name if largest else "", "largest_note": largest.note if largest else "",
            "stopped": [w for w in result.warnings if "ran past" in w],
            "capped": [w for w in result.warnings if "not at its declared max" in w]}


def child(name: str, mode: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "benchmarks.verify_cost", "--measure", name, "--mode", mode],
                          capture_output=True, text=True, cwd=REPO, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def burners(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def stop(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        process.terminate()
        process.wait()


def run(repeats: int, models=MODELS, modes=MODES, loads=LOADS) -> list[dict]:
    """One record per (model, load, mode): median seconds over ``repeats`` children."""
    records = []
    for load in loads:
        busy = burners(load)
        try:
            for name in models:
                for mode in modes:
                    runs = [child(name, mode) for _ in range(repeats)]
                    records.append(summary(name, load, mode, runs))
                    print(json.dumps(records[-1]), flush=True)
        finally:
            stop(busy)
    return records


def summary(name: str, load: int, mode: str, runs: list[dict]) -> dict:
    def median(key):
        return statistics.median(run["timings"].get(key, 0.0) for run in runs)

    return {"model": name, "load": load, "mode": mode, "total": statistics.median(r["total"] for r in runs),
            "totals": [round(r["total"], 1) for r in runs], "eager": median("eager"),
            "capture_lower": median("capture") + median("rewrite") + median("lower"),
            "verify": median("verify"), "coverage": median("coverage"), "largest": runs[0]["largest"],
            "stopped": sum(bool(r["stopped"]) for r in runs), "runs": len(runs),
            "stops": sorted({line for r in runs for line in r["stopped"]})}


def table(records: list[dict], repeats: int) -> str:
    header = ["model", "machine", "mode", "conversion s (runs)", "verify + coverage s", "capture + lower s",
              "largest made-up set", "runs stopped"]
    rows = []
    for r in records:
        rows.append([r["model"], "loaded (2 busy processes)" if r["load"] else "alone", r["mode"],
                     f"{r['total']:.1f} ({', '.join(map(str, r['totals']))})", f"{r['verify'] + r['coverage']:.1f}",
                     f"{r['capture_lower']:.1f}", f"`{r['largest']}`", f"{r['stopped']} of {r['runs']}"])
    saved = []
    for name in dict.fromkeys(r["model"] for r in records):
        for load in dict.fromkeys(r["load"] for r in records):
            pair = {r["mode"]: r for r in records if r["model"] == name and r["load"] == load}
            if {"flat", "proportional"} <= set(pair):
                spent = {mode: r["verify"] + r["coverage"] for mode, r in pair.items()}
                threads = f"; {spent['threads']:.1f} s with only the threads halved" if "threads" in spent else ""
                share = spent["proportional"] / pair["proportional"]["capture_lower"]
                saved.append(f"{name} {'loaded' if load else 'alone'}: verify + coverage {spent['flat']:.1f} → "
                             f"{spent['proportional']:.1f} s ({spent['flat'] - spent['proportional']:.1f} s saved"
                             f"{threads}), {share:.2f}× capture + lower")
    stops = [f"{r['model']}, {'loaded' if r['load'] else 'alone'}, {r['mode']}: {line}"
             for r in records for line in r.get("stops", [])]
    lines = [f"### {TITLE}", "",
             f"Median of {repeats} conversions per row, each in a child process; `python3 -m benchmarks.verify_cost`. "
             "`flat` is the behaviour before (60 s per eager run, the declared maximum always tried, the coverage "
             "pass at all of torch's threads); `threads` halves only the coverage pass's threads for loop models; "
             "`proportional` (the default) adds the budgets and the sizes chosen by cost. The machine is shared "
             "with other work, so 'alone' is only as alone as it was.", "",
             "| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    from benchmarks.common import machine_info

    stopped = ["", "Runs stopped at their budget:", ""] + [f"- {line}" for line in stops] if stops else []
    return "\n".join(lines + [""] + [f"- {line}" for line in saved] + stopped
                     + ["", f"Measured on {machine_info()}.", ""])


def write_doc(text: str) -> None:
    """Replace the block between :data:`BEGIN` and :data:`END` in docs/reliability.md (appended when absent)."""
    document = open(DOC, encoding="utf-8").read()
    block = f"{BEGIN}\n\n{text}\n{END}"
    if BEGIN in document:
        document = document[:document.index(BEGIN)] + block + document[document.index(END) + len(END):]
    else:
        document = document.rstrip("\n") + "\n\n" + block + "\n"
    with open(DOC, "w", encoding="utf-8") as handle:
        handle.write(document)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", choices=MODELS, help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=MODES, default="proportional")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--loads", default=",".join(map(str, LOADS)), help="busy processes beside the conversion")
    parser.add_argument("--no-write", action="store_true", help="print only")
    options = parser.parse_args(argv)
    if options.measure:
        print(json.dumps(measure(options.measure, options.mode)))
        return
    records = run(options.repeats, options.models.split(","), options.modes.split(","),
                  [int(x) for x in options.loads.split(",")])
    text = table(records, options.repeats)
    print(text)
    if not options.no_write:
        write_doc(text)


if __name__ == "__main__":
    main()
