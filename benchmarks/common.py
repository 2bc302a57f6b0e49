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

    def markdown(self) -> str:
        lines = [f"## {self.title}", "", self.note, "",
                 "| " + " | ".join(self.header) + " |",
                 "| " + " | ".join("---" for _ in self.header) + " |"]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join(lines) + "\n"


def print_section(section: Section) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=section.title, title_justify="left")
    for column in section.header:
        table.add_column(column)
    for row in section.rows:
        table.add_row(*row)
    Console(width=160).print(table)


def ratio(numerator: float, denominator: float) -> str:
    return f"{numerator / denominator:.2f}×" if denominator > 0 else "n/a"
