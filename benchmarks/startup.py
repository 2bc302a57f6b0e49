"""CLI start-up: ``fxport --help`` / ``--version`` wall time, a fresh process each run.

Target: ≤ 0.3 s. Only the commands that convert import torch, onnx and onnxruntime; the
reference row (``python -c "import torch, onnx, onnxruntime"``) shows what an eager import costs.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time

from benchmarks.common import Section, ratio

TARGET_S = 0.3

COMMANDS = [
    ("fxport --help", [sys.executable, "-m", "fxport", "--help"]),
    ("fxport --version", [sys.executable, "-m", "fxport", "--version"]),
    ("fxport convert --help", [sys.executable, "-m", "fxport", "convert", "--help"]),
    ("reference: import torch, onnx, onnxruntime", [sys.executable, "-c", "import torch, onnx, onnxruntime"]),
]


def seconds(command: list[str], repeats: int) -> tuple[float, float]:
    """Median (wall, CPU) seconds of ``command`` over ``repeats`` fresh processes, after a warm-up.

    CPU time (user + system of the child) does not grow when other work loads the machine.
    """
    subprocess.run(command, capture_output=True, check=True)
    walls, cpus = [], []
    for _ in range(repeats):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def run(repeats: int = 3) -> Section:
    rows = []
    timings = [(name, *seconds(command, max(repeats, 5))) for name, command in COMMANDS]
    reference = timings[-1][1]
    for name, wall, cpu in timings:
        verdict = "" if name.startswith("reference") else ("meets" if wall <= TARGET_S else "misses")
        rows.append([name, f"{wall:.3f}", f"{cpu:.3f}", ratio(wall, reference), verdict])
    return Section(
        title="CLI start-up",
        note=(f"Median wall and CPU time of a fresh process ({max(repeats, 5)} runs after a warm-up). Target: "
              f"≤ {TARGET_S} s for `--help` and `--version`; the ratio is against importing torch, onnx "
              "and onnxruntime, which only converting commands do."),
        header=["command", "wall s", "CPU s", "vs eager import (wall)", f"≤ {TARGET_S} s (wall)"],
        rows=rows,
    )


if __name__ == "__main__":
    from benchmarks.common import print_section

    print_section(run())
