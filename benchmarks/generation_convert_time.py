"""Where ``fxport convert CKPT --task text-generation --no-verify`` spends its time (issue 49,
item 4): the phases before the pipeline (checkpoint load, building the generator, the input
sets and the search for prompts that stop early, the check against ``generate()``), the
pipeline's stages (``--json`` timings) and the parts of capture and lowering (the exports of
the generator and of the loop bodies, the loop translations, the optimiser, the checker), for
Llama-shaped random-weight checkpoints of several depths and several ``--max-new-tokens``.

Each conversion runs in a process of its own (one thread for torch, as the machine has two
cores shared with others), the CLI called in that process with wall-clock timers wrapped around
the named functions (no profiler: its overhead would land on the Python-heavy phases).

    python3 -m benchmarks.generation_convert_time                     # layers 2, 6, 12 at 64 new tokens; 12 at 256
    python3 -m benchmarks.generation_convert_time --layers 2 --new 8  # one quick row
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

TITLE = "Conversion time of --task text-generation --no-verify, by phase"
#: (label, module, attribute): functions timed (wall clock, outermost call only, every call summed)
PHASES = [
    ("imports", None, None),
    ("load checkpoint", "fxport.load.tasks", "_generation_lm"),
    ("build generator", "fxport.generation.architectures", "task_generator"),
    ("input sets", "fxport.load.tasks", "generation_inputs"),
    ("  of which: search for stopping prompts", "fxport.load.tasks", "_stopping_sets"),
    ("check against generate()", "fxport.load.tasks", "check_against_generate"),
    ("  of which: generate()", "fxport.generation.generator", "Generator.reference"),
    ("torch.export.export (all calls, in capture and lower)", "torch.export", "export"),
    ("  loop translations (grown loops' bodies exported)", "fxport.lower.lowering", "loop_translations"),
    ("  exporter (translation + optimize)", "fxport.lower.lowering", "_exported"),
    ("  ONNXProgram.optimize", "torch.onnx", "ONNXProgram.optimize"),
    ("  loop-invariant hoisting", "fxport.lower.lowering", "hoist_loop_invariants"),
    ("  onnx checker", "fxport.lower.stage", "check_onnx"),
]
#: the phases before the pipeline runs (top-level rows)
BEFORE = ("load checkpoint", "build generator", "input sets", "check against generate()")
#: rows shown under the lower stage
LOWER_PARTS = ("loop translations (grown loops' bodies exported)", "exporter (translation + optimize)",
               "ONNXProgram.optimize", "loop-invariant hoisting", "onnx checker")


def _timed(table: dict, label: str, function):
    depth = [0]

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        depth[0] += 1
        start, start_cpu = time.perf_counter(), time.process_time()
        try:
            return function(*args, **kwargs)
        except Exception as exc:
            if label.startswith("torch.export"):  # a capture attempt that failed (and is retried)
                table.setdefault("failures", []).append(f"{type(exc).__name__}: {str(exc).strip()[:400]}")
            raise
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                if label.startswith("torch.export"):  # who called it: fxport's frames, innermost last
                    import traceback

                    table.setdefault("callers", []).append(
                        " < ".join(f"{os.path.basename(frame.filename)}:{frame.lineno} {frame.name}"
                                   for frame in reversed(traceback.extract_stack()[:-1])
                                   if "fxport" in frame.filename and "benchmarks" not in frame.filename)[:600])
                seconds, calls, cpu = table.get(label, (0.0, 0, 0.0))
                table[label] = (seconds + time.perf_counter() - start, calls + 1,
                                cpu + time.process_time() - start_cpu)

    return wrapper


def install_timers(table: dict) -> None:
    for label, module_name, attribute in PHASES:
        if module_name is None:
            continue
        owner = importlib.import_module(module_name)
        *path, name = attribute.split(".")
        for part in path:
            owner = getattr(owner, part)
        setattr(owner, name, _timed(table, label, getattr(owner, name)))
    from fxport.engine import stages

    for stage in stages.STAGES:  # CPU seconds per stage (the --json timings are wall seconds)
        object.__setattr__(stage, "run", _timed(table, f"stage `{stage.name}`", stage.run))


def without_verification_work() -> None:
    """The change proposed for ``fxport/load/tasks.py`` (issue 49, item 4), simulated: with
    ``--no-verify`` the task builds only the example input set (no search for stopping
    prompts) and does not check the generator against ``generate()`` — both serve only
    verification."""
    import fxport.load.tasks

    fxport.load.tasks._stopping_sets = lambda *args, **kwargs: []
    fxport.load.tasks.check_against_generate = lambda *args, **kwargs: None


def convert_once(checkpoint: str, new: int, output: str, proposed: bool = False) -> dict:
    """In this process: ``fxport convert`` with the timers; phase seconds, stage seconds, wall
    seconds and peak RSS. ``proposed``: with :func:`without_verification_work`."""
    from benchmarks.common import peak_rss_mb

    start = time.perf_counter()
    import torch

    torch.set_num_threads(1)
    import fxport.cli
    import fxport.engine.pipeline  # noqa: F401
    import fxport.load.tasks  # noqa: F401

    table: dict = {"imports": (time.perf_counter() - start, 1, time.process_time())}
    if proposed:
        without_verification_work()
    install_timers(table)
    report = output + ".json"
    vocab = json.load(open(os.path.join(checkpoint, "config.json")))["vocab_size"]
    args = ["convert", checkpoint, "--task", "text-generation", "--no-verify", "--max-new-tokens", str(new),
            "--eos-token-id", str(vocab), "-o", output, "--report", report, "--quiet"]
    try:
        fxport.cli.app(args, standalone_mode=False)
    except SystemExit as exc:
        if exc.code:
            raise
    wall = time.perf_counter() - start
    stages = json.load(open(report))["timings"]
    callers, failures = table.pop("callers", []), table.pop("failures", [])
    return {"wall": wall, "cpu": time.process_time(), "phases": {k: v[0] for k, v in table.items()},
            "cpu_phases": {k: v[2] for k, v in table.items()}, "calls": {k: v[1] for k, v in table.items()},
            "export_callers": callers, "export_failures": failures,
            "stages": stages, "peak_rss_mb": peak_rss_mb(), "file_mb": os.path.getsize(output) / 2 ** 20}


def run(configs=((2, 64), (6, 64), (12, 64), (12, 256)), log=print, proposed: bool = False):
    """Each configuration ``(layers, new tokens)`` converted in a process of its own; the
    section and the raw results."""
    from benchmarks.generation_speed import CONFIG, machine_load, write_checkpoint

    results = {}
    load_before = machine_load()
    folder = tempfile.mkdtemp(prefix="fxport-convert-time-")
    try:
        for layers in sorted({layers for layers, _ in configs}):
            checkpoint = write_checkpoint(os.path.join(folder, f"ckpt-{layers}"), dict(CONFIG, layers=layers))
            weights = os.path.getsize(os.path.join(checkpoint, "model.safetensors")) / 2 ** 20
            for new in [new for depth, new in configs if depth == layers]:
                args = [sys.executable, "-m", "benchmarks.generation_convert_time", "--one", checkpoint, str(new),
                        os.path.join(folder, f"out-{layers}-{new}.onnx")] + (["--proposed"] if proposed else [])
                start = time.perf_counter()
                done = subprocess.run(args, capture_output=True, text=True,
                                      cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
                if done.returncode:
                    raise RuntimeError(done.stderr[-3000:])
                result = json.loads(done.stdout.strip().splitlines()[-1])
                result["process"] = time.perf_counter() - start
                result["weights_mb"] = weights
                result["load"] = machine_load()
                result["proposed"] = proposed
                results[(layers, new)] = result
                log(f"{layers} layers, {new} new: {result['wall']:.1f} s ({json.dumps(result['stages'])})")
            shutil.rmtree(checkpoint, ignore_errors=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    load_after = machine_load()
    return render(results, f"{load_before} before, {load_after} after"), results


def render(results: dict, load: str = ""):
    """The section: one column per (layers, new tokens); phases before the pipeline, the
    pipeline's stages with their parts, and what no timer covers. A cell is wall seconds, with
    the process's CPU seconds in brackets where they were recorded (on a machine shared with
    other jobs CPU seconds are the steadier measure of the work)."""
    from benchmarks.common import Section, machine_info
    from benchmarks.generation_speed import CONFIG

    columns = list(results)
    header = ["phase"] + [f"{column[0]} layers, {column[1]} new" + (", tasks.py change" if results[column].get("proposed") else "")
                          for column in columns]

    def cell(column, wall: float, cpu: float | None) -> str:
        return f"{wall:.1f}" + (f" ({cpu:.1f})" if cpu is not None else "")

    def phase(label):
        return [label] + [cell(c, results[c]["phases"].get(label, 0.0),
                               results[c]["cpu_phases"].get(label, 0.0) if "cpu_phases" in results[c] else None)
                          for c in columns]

    def stage_cpu(column, stage):
        return results[column]["cpu_phases"].get(f"stage `{stage}`", 0.0) if "cpu_phases" in results[column] else None

    def other(column):
        result = results[column]
        wall = result["wall"] - sum(result["phases"].get(label, 0.0) for label in BEFORE) - sum(result["stages"].values())
        if "cpu_phases" not in result:
            return cell(column, wall, None)
        cpu = result["cpu"] - sum(result["cpu_phases"].get(label, 0.0) for label in BEFORE) \
            - sum(result["cpu_phases"].get(f"stage `{stage}`", 0.0) for stage in result["stages"])
        return cell(column, wall, cpu)

    rows = [phase(label) for label, *_ in PHASES if label != "imports" and not label.startswith("torch.export")
            and (label in BEFORE or label.startswith("  ") and _parent(label) in BEFORE)]
    for stage in ("eager", "capture", "rewrite", "lower", "write"):
        rows.append([f"stage `{stage}`"] + [cell(c, results[c]["stages"].get(stage, 0.0), stage_cpu(c, stage))
                                            for c in columns])
        if stage == "lower":
            rows += [phase("  " + label) for label in LOWER_PARTS]
    rows.append(phase("torch.export.export (all calls, in capture and lower)"))
    rows.append(["calls of torch.export.export"] + [str(results[c]["calls"].get(
        "torch.export.export (all calls, in capture and lower)", 0)) for c in columns])
    rows.append(["other: imports, the exporter's registry, the CLI"] + [other(c) for c in columns])
    rows.append(["**total in the process**"] + [
        f"**{cell(c, results[c]['wall'], results[c].get('cpu'))}**" for c in columns])
    rows.append(["process, with Python start (wall)"] + [f"{results[c].get('process', 0.0):.1f}" for c in columns])
    rows.append(["peak RSS MB (÷ weights)"] + [f"{results[c]['peak_rss_mb']:.0f} ({results[c]['peak_rss_mb'] / results[c]['weights_mb']:.1f}×)"
                                              for c in columns])
    note = (f"`fxport convert CKPT --task text-generation --no-verify --max-new-tokens N --eos-token-id VOCAB` "
            f"(an end token outside the vocabulary: no row stops), Llama-shaped random checkpoints (width "
            f"{CONFIG['width']}, {CONFIG['heads']} heads / {CONFIG['kv_heads']} key-value heads, vocabulary "
            f"{CONFIG['vocab']}); seconds: wall clock, and in brackets the process's CPU time where recorded, "
            f"from timers around the named functions (nested rows are part of the row "
            f"above; a function called inside another timed one counts in both); one torch thread. "
            f"{machine_info()}; {load}.")
    return Section(TITLE, note, header, rows)


def saved_load(results: dict) -> str:
    return "after each column: " + "; ".join(f"{layers} layers, {new} new: {result.get('load', '?')}"
                                             for (layers, new, *_), result in results.items())


def _parent(label: str) -> str:
    """The row a nested row ("  of which: ...") belongs to: the nearest top-level row above it."""
    labels = [entry[0] for entry in PHASES]
    for candidate in reversed(labels[:labels.index(label)]):
        if not candidate.startswith("  "):
            return candidate
    return ""


BEGIN = "<!-- generation convert time: written by python3 -m benchmarks.generation_convert_time -->"
END = "<!-- end of generation convert time -->"


def write_doc(section, command: str) -> None:
    """Splice the section into docs/generation.md (before the generation sweep's block)."""
    from benchmarks.generation_speed import DOC

    from benchmarks.common import splice_block

    splice_block(DOC, BEGIN, END, f"{section.markdown()}\nCommand: `{command}`.", "<!-- generation sweep")


def main(argv=None) -> None:
    import argparse

    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--one":
        checkpoint, new, output = argv[1], int(argv[2]), argv[3]
        print(json.dumps(convert_once(checkpoint, new, output, proposed="--proposed" in argv)))
        sys.stdout.flush()
        os._exit(0)
    parser = argparse.ArgumentParser(description=TITLE)
    parser.add_argument("--layers", type=int, nargs="*")
    parser.add_argument("--new", type=int, nargs="*")
    parser.add_argument("--save", help="also write the raw results here (JSON)")
    parser.add_argument("--proposed", action="store_true",
                        help="with the change proposed for fxport/load/tasks.py simulated (without_verification_work)")
    parser.add_argument("--render", nargs="+", help="print the table of results saved by --save (one or more "
                                                     "files, their columns side by side), and run nothing")
    parser.add_argument("--doc", action="store_true", help="write the table into docs/generation.md")
    options = parser.parse_args(argv)
    if options.render:
        results = {}
        for path in options.render:  # columns in the order given; the same model with and without the change apart
            for key, value in json.load(open(path)).items():
                layers, new = (int(part) for part in key.split(","))
                results[(layers, new, bool(value.get("proposed")))] = value
        section = render(results, saved_load(results))
        print(section.markdown())
        if options.doc:
            write_doc(section, "python3 -m benchmarks.generation_convert_time --save FILE; ... --render FILE --doc")
        return
    if options.layers or options.new:
        configs = [(layers, new) for layers in options.layers or [12] for new in options.new or [64]]
    else:
        configs = [(2, 64), (6, 64), (12, 64), (12, 256)]
    from benchmarks.common import print_section

    section, results = run(configs, proposed=options.proposed)
    if options.save:
        with open(options.save, "w") as handle:
            json.dump({f"{layers},{new}": result for (layers, new), result in results.items()}, handle)
    print_section(section)
    print(section.markdown())
    if options.doc:
        write_doc(section, "python3 -m benchmarks.generation_convert_time " + " ".join(argv))


if __name__ == "__main__":
    main()
