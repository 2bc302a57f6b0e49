"""Models over 2 GB: fxport vs the stock exporter on an embedding table past protobuf's limit.

The model (:class:`BigEmbedding`) is a float32 embedding table of ``rows × dim`` (2.46 GB by
default) and a data-dependent ``if`` on the gathered rows, so fxport's control-flow conversion
runs on it. Each exporter runs in a fresh subprocess so its memory is its own: the process
builds the model (its weights W resident), then converts while a sampler thread reads the
resident set every 5 ms: total RSS (anonymous memory plus file pages mapped in, e.g. ONNX
Runtime's view of the data file) and anonymous RSS alone. Peak above the built model, divided
by W, says how many extra copies of the weights the conversion held.

fxport: ``fxport.convert(model, (ids,), output=...)`` *with* verification (ONNX Runtime runs
the written pair against eager); stock: ``torch.onnx.export(model, (ids,), path, dynamo=True)``
(no verification). After timing, each written file is run in ONNX Runtime on inputs taking
both branches and compared with eager.

Not part of the default ``python3 -m benchmarks.run`` (one run needs ~3 GB of memory, the
whole-proto comparison ~8 GB, and each writes 2.5 GB to disk): run it alone or by name::

    python3 -m benchmarks.large_model                  # prints the table, writes its docs section
    python3 -m benchmarks.large_model --rows 300000    # a smaller table (1.2 GB): single file
    python3 -m benchmarks.run --only large_model       # the same, through the suite
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile

import torch

from benchmarks.common import Section, machine_info, print_section

ROWS, DIM = 600_000, 1024  # 2.46 GB of float32

TITLE = "Models over 2 GB: external data, time and peak memory"


class BigEmbedding(torch.nn.Module):
    """An embedding table and a data-dependent ``if``: row 0 is all +1, row 1 all -1.

    ``ids`` all 0 takes the first branch, ``ids`` all 1 the second.
    """

    def __init__(self, rows: int = ROWS, dim: int = DIM):
        super().__init__()
        weight = torch.empty(rows, dim)
        torch.nn.init.uniform_(weight, -1.0, 1.0)
        weight[0] = 1.0
        weight[1] = -1.0
        self.table = torch.nn.Embedding(rows, dim, _weight=weight)
        self.scale = torch.nn.Parameter(torch.linspace(0.5, 1.5, dim))

    def forward(self, ids):
        h = self.table(ids)
        if h.sum() > 0:
            h = h * self.scale + 1.0
        else:
            h = torch.tanh(h) - 1.0
        return h


class BigEmbeddingCond(BigEmbedding):
    """:class:`BigEmbedding` with its ``if`` written by hand as ``torch.cond``: what the stock
    exporter needs (it refuses the plain ``if``)."""

    def forward(self, ids):
        h = self.table(ids)
        return torch.cond(h.sum() > 0, lambda h: h * self.scale + 1.0, lambda h: torch.tanh(h) - 1.0, (h,))


def branch_inputs() -> dict[str, torch.Tensor]:
    return {"then": torch.zeros(2, 5, dtype=torch.int64), "else": torch.ones(2, 5, dtype=torch.int64)}


_CHILD = r'''
import gc, json, os, sys, threading, time, warnings
warnings.filterwarnings("ignore")
import numpy as np, torch
from benchmarks.large_model import BigEmbedding, BigEmbeddingCond, branch_inputs


def rss():
    """(total, anonymous) resident bytes of this process."""
    fields = {}
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(("VmRSS:", "RssAnon:")):
                key, value = line.split(":")
                fields[key] = int(value.split()[0]) * 1024
    return fields["VmRSS"], fields["RssAnon"]


class Peak:
    def __enter__(self):
        self.total, self.anon = rss()
        self.running = True
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()
        return self

    def sample(self):
        while self.running:
            total, anon = rss()
            self.total, self.anon = max(self.total, total), max(self.anon, anon)
            time.sleep(0.005)

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()


mode, rows, dim, folder = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
torch.manual_seed(0)
model = (BigEmbeddingCond if mode in ("stock-cond", "proto") else BigEmbedding)(rows, dim).eval()
weights = sum(p.numel() * p.element_size() for p in model.parameters())
ids = torch.randint(0, rows, (2, 5))
path = os.path.join(folder, "model.onnx")
gc.collect()
before_total, before_anon = rss()
record = {"mode": mode, "weights": weights}
with Peak() as peak:
    start = time.perf_counter()
    try:
        if mode == "fxport":
            import fxport
            result = fxport.convert(model, (ids,), output=path)
            record["verify_s"] = result.timings.get("verify")
            record["verified"] = result.verified
            record["verified_sets"] = len(result.verification)
            record["stages"] = {stage: round(seconds, 1) for stage, seconds in result.timings.items()}
        elif mode == "proto":  # the alternative fxport avoids: a whole ModelProto in memory, then saved
            import onnx
            proto = torch.onnx.export(model, (ids,), dynamo=True, verbose=False).model_proto
            onnx.save_model(proto, path, save_as_external_data=True, location="model.onnx.data")
        else:
            torch.onnx.export(model, (ids,), path, dynamo=True, verbose=False)
        record["seconds"] = time.perf_counter() - start
    except Exception as exc:
        import re
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()
        record["error"] = f"{type(exc).__name__}: {text.splitlines()[0].split('. ')[0][:160] if text else ''}"
record.update(before_total=before_total, before_anon=before_anon, peak_total=peak.total, peak_anon=peak.anon)
record["files"] = {name: os.path.getsize(os.path.join(folder, name)) for name in sorted(os.listdir(folder))}
if "error" not in record:
    import onnxruntime as ort
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    errors = {}
    for label, x in branch_inputs().items():
        got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
        with torch.no_grad():
            expected = model(x).numpy()
        errors[label] = float(np.abs(got - expected).max()) if got.shape == expected.shape else float("inf")
    record["branch_error"] = errors
print(json.dumps(record))
'''


def measure(mode: str, rows: int, dim: int) -> dict:
    """One exporter on a fresh interpreter; writes into a temporary directory removed afterwards."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    with tempfile.TemporaryDirectory(prefix=f"fxport-large-{mode}-") as folder:
        done = subprocess.run([sys.executable, "-c", _CHILD, mode, str(rows), str(dim), folder],
                              capture_output=True, text=True, cwd=root, env=env, timeout=1800)
    if done.returncode != 0:
        tail = done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]
        return {"mode": mode, "error": tail[0][:200]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f}"


def row(record: dict) -> list[str]:
    name = {"fxport": "fxport, plain `if` (with verification)",
            "stock": "torch.onnx.export(dynamo=True), plain `if`",
            "stock-cond": "torch.onnx.export(dynamo=True), `if` rewritten by hand as torch.cond",
            "proto": "(for comparison) the same export held as a whole ModelProto, then onnx.save(external data)",
            }[record["mode"]]
    if "seconds" not in record:
        return [name, "—", "—", "—", "—", "—", "—", record.get("error", "failed")]
    weights = record["weights"]
    extra_total = record["peak_total"] - record["before_total"]
    extra_anon = record["peak_anon"] - record["before_anon"]
    files = " + ".join(f"{name} {_gb(size)} GB" if size > 1e8 else f"{name} {size / 1e3:.0f} kB"
                       for name, size in record["files"].items())
    branches = record.get("branch_error", {})
    verdict = ", ".join(f"{label}: {'ok' if err <= 1e-4 else f'differs ({err:.3g})'}"
                        for label, err in branches.items())
    seconds = f"{record['seconds']:.1f}" + (f" (median of {record['runs']})" if record.get("runs", 1) > 1 else "")
    if record.get("stages"):
        stages = ", ".join(f"{stage} {value:.1f}" for stage, value in record["stages"].items() if value >= 0.05)
        seconds += f"; first run: {stages}; {record['verified_sets']} input sets verified"
    return [name, seconds, _gb(record["peak_total"]), f"{extra_total / weights:.2f}×",
            f"{extra_anon / weights:.2f}×", files, verdict, ""]


def combine(runs: list[dict]) -> dict:
    """One record from repeated runs of a mode: median seconds, highest peaks (the first run's rest)."""
    good = [r for r in runs if "seconds" in r]
    if not good:
        return runs[0]
    record = dict(good[0])
    record["seconds"] = statistics.median(r["seconds"] for r in good)
    for key in ("peak_total", "peak_anon"):
        record[key] = max(r[key] - r[key.replace("peak", "before")] for r in good) + record[key.replace("peak", "before")]
    record["runs"] = len(good)
    return record


def run(repeats: int = 2, rows: int = ROWS, dim: int = DIM) -> Section:
    """The exporters alternately, ``repeats`` times (never two > 2 GB processes at once).

    The stock exporter on the plain ``if`` fails at capture every time, so it runs once, as does the
    whole-proto comparison.
    """
    runs: dict[str, list[dict]] = {"fxport": [], "stock-cond": []}
    for _ in range(repeats):
        for mode, records in runs.items():
            records.append(measure(mode, rows, dim))
    records = [combine(runs["fxport"]), combine(runs["stock-cond"]), measure("stock", rows, dim),
               measure("proto", rows, dim)]
    weights = next((r["weights"] for r in records if "weights" in r), rows * dim * 4)
    return Section(
        TITLE,
        f"`benchmarks/large_model.py`: a {rows:,} × {dim} float32 embedding table "
        f"({_gb(weights)} GB of weights W) with a data-dependent `if` on the gathered rows; each exporter "
        f"in a fresh subprocess, {repeats} runs each, alternating (`python3 -m benchmarks.large_model`, or "
        "`benchmarks.run --only large_model`; not in the default suite: a run needs ~3 GB of memory, the "
        "whole-proto row ~8 GB, each writes 2.5 GB, and times swing with the disk on a shared machine). Seconds include the data file's write (fxport's `lower` stage: "
        "export, then the weights streamed to the staged data file). Peak RSS (highest over the runs) is sampled every 5 ms during the conversion; *extra* = peak "
        "minus RSS of the built model (which holds W), divided by W: the extra copies of the weights "
        "the conversion held. *Anon* leaves out file pages mapped in (ONNX Runtime maps the data file). "
        "Branches: the written file run in ONNX Runtime vs eager on ids taking each branch. The last row is "
        "what fxport avoids by streaming the exporter's onnx_ir model to the data file: "
        "`ONNXProgram.model_proto` copies every weight into protobuf, and saving that proto copies them again "
        "(and a proto over 2 GiB cannot be serialised whole: fxport's error before external data).",
        ["exporter", "seconds", "peak RSS GB", "extra RSS / W", "extra anon / W", "files", "branches",
         "error"],
        [row(r) for r in records],
    )


def write_section(section: Section, path: str) -> None:
    """Replace (or append) this section in docs/benchmarks.md, leaving the other sections alone."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    document = open(path).read() if os.path.exists(path) else "# Benchmarks\n"
    head, *blocks = document.split("\n## ")
    by_title = {block.split("\n", 1)[0]: "## " + block for block in blocks}
    by_title[section.title] = section.markdown() + f"\nMeasured {stamp}; {machine_info()}.\n"
    with open(path, "w") as handle:
        handle.write("\n".join([head.rstrip("\n") + "\n", *by_title.values()]))


def main(argv: list[str] | None = None) -> None:
    from benchmarks.run import DOC

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--dim", type=int, default=DIM)
    parser.add_argument("--output", default=DOC, help="markdown file whose section is replaced")
    parser.add_argument("--repeats", type=int, default=2, help="runs per exporter (median time, highest peak)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    options = parser.parse_args(argv)
    section = run(repeats=options.repeats, rows=options.rows, dim=options.dim)
    print_section(section)
    if not options.no_write:
        write_section(section, options.output)
        print(f"wrote its section into {options.output}")


if __name__ == "__main__":
    main()
