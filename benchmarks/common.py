"""Shared benchmark plumbing: repeated timing, machine description, markdown tables."""

from __future__ import annotations

import dataclasses
import os
import platform
import statistics
import time
from typing import Callable

import torch


def median_seconds(fn: Callable[[], object], repeats: int, warmup: int = 1) -> float:
    """Median wall time of ``fn`` over ``repeats`` runs after ``warmup`` untimed runs."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def machine_info() -> str:
    import onnxruntime

    cpu = platform.processor() or platform.machine()
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    return (f"{platform.system()} {platform.machine()} ({cpu}), {os.cpu_count()} cores, GPU: {gpu}; "
            f"Python {platform.python_version()}, torch {torch.__version__}, "
            f"onnxruntime {onnxruntime.__version__}")


@dataclasses.dataclass
class Section:
    """One benchmark's results: a title, a note on method and target, and a table."""

    title: str
    note: str
    header: list[str]
    rows: list[list[str]]
    #: lines printed under the table (e.g. a linearity verdict).
    footer: list[str] = dataclasses.field(default_factory=list)

    def markdown(self) -> str:
        lines = [f"## {self.title}", "", self.note, "",
                 "| " + " | ".join(self.header) + " |",
                 "| " + " | ".join("---" for _ in self.header) + " |"]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        if self.footer:
            lines += [""] + self.footer
        return "\n".join(lines) + "\n"


def print_section(section: Section) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=section.title, title_justify="left")
    for column in section.header:
        table.add_column(column)
    for row in section.rows:
        table.add_row(*row)
    console = Console(width=160)
    console.print(table)
    for line in section.footer:
        console.print(line, highlight=False)


def ratio(numerator: float, denominator: float) -> str:
    return f"{numerator / denominator:.2f}×" if denominator > 0 else "n/a"


def paired_medians(fn_a: Callable[[], object], fn_b: Callable[[], object], rounds: int,
                   warmup: int = 3) -> tuple[float, float]:
    """Median wall times of ``fn_a`` and ``fn_b`` measured alternately, call by call.

    Alternating keeps a shared machine's load drift out of the ratio.
    """
    for _ in range(warmup):
        fn_a()
        fn_b()
    samples_a, samples_b = [], []
    for _ in range(rounds):
        for fn, samples in ((fn_a, samples_a), (fn_b, samples_b)):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
    return statistics.median(samples_a), statistics.median(samples_b)


def ort_session(model, device: str = "cpu", threads: int = 1):
    """An onnxruntime session for a ModelProto (single-threaded by default: stable timings)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    providers = ["CUDAExecutionProvider", "CPUExecutionProvider"] if device == "cuda" else ["CPUExecutionProvider"]
    return ort.InferenceSession(model.SerializeToString(), options, providers=providers)


def ort_runner(session, tensors) -> Callable[[], object]:
    """A no-argument callable running ``session`` on ``tensors`` (positional, CPU numpy feed)."""
    feed = {spec.name: t.detach().cpu().numpy() for spec, t in zip(session.get_inputs(), tensors)}
    return lambda: session.run(None, feed)


def eager_runner(module, args) -> Callable[[], object]:
    """A no-argument callable running ``module(*args)`` without autograd."""
    def run():
        with torch.no_grad():
            return module(*args)
    return run


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


def adaptive_rounds(fn: Callable[[], object], minimum: int = 30, budget_s: float = 2.0,
                    maximum: int = 2000) -> int:
    """How many timed calls of ``fn`` fit in about ``budget_s`` (at least ``minimum``)."""
    fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-6)
    return max(minimum, min(maximum, int(budget_s / once)))


def variant_arguments(description: str, defaults: dict, variants: tuple[str, ...]):
    """The command line of a benchmark that runs each variant in a subprocess of its own:
    ``--measure VARIANT --folder --batch --repeats --config JSON`` and one ``--KEY N`` per entry
    of ``defaults``. Returns ``(parser, config_of)``; ``config_of(options)`` is ``defaults``
    updated by ``--config`` and then by the ``--KEY`` flags given."""
    import argparse
    import json

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--measure", choices=list(variants))
    parser.add_argument("--folder")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--config", default="{}")
    for key in defaults:
        parser.add_argument(f"--{key}", type=int)

    def config_of(options) -> dict:
        config = dict(defaults, **json.loads(options.config))
        config.update({k: getattr(options, k) for k in defaults if getattr(options, k) is not None})
        return config

    return parser, config_of


def peak_rss_mb() -> float:
    """This process's peak RSS in MB (``VmHWM``: reset by exec, unlike ``ru_maxrss``, which a
    child started by ``subprocess`` inherits from the parent it was forked from)."""
    import resource

    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def splice_block(path: str, begin: str, end: str, body: str, before: str) -> None:
    """Write ``body`` between the markers ``begin`` and ``end`` of the document ``path``, or, the
    first time, insert the marked block before the line starting ``before``."""
    text = open(path, encoding="utf-8").read()
    block = f"{begin}\n\n{body}\n\n{end}"
    if begin in text:
        text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
    else:
        text = text.replace(before, block + "\n\n" + before, 1)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
