"""torchvision sweep: classification, segmentation, video and optical-flow models converted by
fxport, by ``torch.onnx.export(dynamo=True)`` and by the TorchScript trace, in one table.

Each model is built with ``weights=None`` from a seeded random init (nothing is downloaded); its
batch-norm statistics are calibrated on a few random batches so outputs are not constant. Batch,
height and width (clip length for video) are declared dynamic wherever eager accepts other sizes.
Every written file is then checked by this script, not by the converter: ONNX Runtime against
eager on the example, on fresh values and on other sizes, a dense output passing when
``max |onnx - eager| ≤ 1e-3 × max |eager|`` (its scale). Each model runs in its own subprocess.

Usage::

    python3 -m benchmarks.vision_models                       # every model, writes docs/vision-models.md
    python3 -m benchmarks.vision_models --only resnet18,squeezenet1_0   # prints the table only

The tests (tests/test_vision_models.py) use :func:`build` and :func:`check_file` from here.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import os
import sys
import tempfile
import time
import warnings
from typing import Any, Callable

import numpy as np
import torch

from benchmarks.real_models import REPO, _is_fxport_error, _warm_up, first_line, run_in_subprocess

DOC = os.path.join(REPO, "docs", "vision-models.md")
#: A dense output passes the sweep's own check when max |onnx - eager| ≤ SCALE_TOLERANCE × max |eager|.
SCALE_TOLERANCE = 1e-3


@dataclasses.dataclass(frozen=True)
class VisionModel:
    """One model of the sweep: how to build it and the example it is exported with.

    ``example``: the input shape; ``dynamic``: axis → dimension name; ``other_sizes``: shapes the
    check runs besides the example's (eager must accept them).
    """

    name: str
    family: str
    make: Callable[[], torch.nn.Module]
    example: tuple[int, ...] = (1, 3, 224, 224)
    dynamic: dict[int, str] = dataclasses.field(default_factory=lambda: {0: "batch", 2: "height", 3: "width"})
    other_sizes: tuple[tuple[int, ...], ...] = ((2, 3, 160, 192), (1, 3, 256, 320))


def _classifier(name: str, **kwargs) -> Callable[[], torch.nn.Module]:
    def make():
        import torchvision

        return getattr(torchvision.models, name)(weights=None, **kwargs)
    return make


def _segmenter(name: str) -> Callable[[], torch.nn.Module]:
    def make():
        import torchvision

        return _OutputOf(getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None))
    return make


def _video(name: str) -> Callable[[], torch.nn.Module]:
    def make():
        import torchvision

        return getattr(torchvision.models.video, name)(weights=None)
    return make


class _OutputOf(torch.nn.Module):
    """Segmentation models return ``{"out": ..., "aux": ...}``; the sweep exports ``out``."""

    def __init__(self, model: torch.nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


_BATCH_ONLY = {0: "batch"}
_FIXED_224 = ((2, 3, 224, 224),)

MODELS: dict[str, VisionModel] = {m.name: m for m in [
    VisionModel("resnet18", "classification", _classifier("resnet18")),
    VisionModel("mobilenet_v3_small", "classification", _classifier("mobilenet_v3_small")),
    VisionModel("efficientnet_b0", "classification", _classifier("efficientnet_b0")),
    VisionModel("regnet_y_400mf", "classification", _classifier("regnet_y_400mf")),
    VisionModel("convnext_tiny", "classification", _classifier("convnext_tiny")),
    VisionModel("squeezenet1_0", "classification", _classifier("squeezenet1_0")),
    VisionModel("densenet121", "classification", _classifier("densenet121")),
    VisionModel("mnasnet0_5", "classification", _classifier("mnasnet0_5")),
    VisionModel("shufflenet_v2_x0_5", "classification", _classifier("shufflenet_v2_x0_5")),
    VisionModel("googlenet", "classification", _classifier("googlenet", aux_logits=False, init_weights=True)),
    VisionModel("inception_v3", "classification", _classifier("inception_v3", aux_logits=False, init_weights=True),
                example=(1, 3, 299, 299), other_sizes=((2, 3, 160, 192), (1, 3, 320, 352))),
    VisionModel("alexnet", "classification", _classifier("alexnet")),
    VisionModel("vgg11_bn", "classification", _classifier("vgg11_bn")),
    VisionModel("mobilenet_v2", "classification", _classifier("mobilenet_v2")),
    VisionModel("resnext50_32x4d", "classification", _classifier("resnext50_32x4d")),
    VisionModel("vit_b_16", "classification", _classifier("vit_b_16"), dynamic=_BATCH_ONLY, other_sizes=_FIXED_224),
    VisionModel("swin_t", "classification", _classifier("swin_t")),
    VisionModel("maxvit_t", "classification", _classifier("maxvit_t"), dynamic=_BATCH_ONLY, other_sizes=_FIXED_224),
    VisionModel("fcn_resnet50", "segmentation", _segmenter("fcn_resnet50"), example=(1, 3, 160, 160),
                other_sizes=((2, 3, 128, 192),)),
    VisionModel("deeplabv3_mobilenet_v3_large", "segmentation", _segmenter("deeplabv3_mobilenet_v3_large"),
                example=(1, 3, 160, 160), other_sizes=((2, 3, 128, 192),)),
    VisionModel("lraspp_mobilenet_v3_large", "segmentation", _segmenter("lraspp_mobilenet_v3_large"),
                example=(1, 3, 160, 160), other_sizes=((2, 3, 128, 192),)),
    VisionModel("r3d_18", "video", _video("r3d_18"), example=(1, 3, 8, 112, 112), dynamic={0: "batch", 2: "frames"},
                other_sizes=((2, 3, 4, 112, 112), (1, 3, 16, 112, 112))),
]}


def calibrate(model: torch.nn.Module, shape: tuple[int, ...], batches: int = 3, seed: int = 0) -> torch.nn.Module:
    """Batch-norm running statistics from a few random batches (cumulative average), then eval.

    Example::

        >>> net = calibrate(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)), (1, 3, 8, 8))
        >>> net.training, bool(net[1].running_var.ne(1).all())
        (False, True)
    """
    generator = torch.Generator().manual_seed(seed)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None
    if norms:
        model.train()
        with torch.no_grad():
            for _ in range(batches):
                model(torch.randn((2, *shape[1:]), generator=generator))
    return model.eval()


@dataclasses.dataclass
class Built:
    spec: VisionModel
    module: torch.nn.Module
    example: torch.Tensor

    @property
    def dynamic_shapes(self) -> tuple[dict[int, str]]:
        return (dict(self.spec.dynamic),)


def build(name: str, seed: int = 0) -> Built:
    """The calibrated model ``name`` and its example (a normal image batch)."""
    spec = MODELS[name]
    torch.manual_seed(seed)
    module = calibrate(spec.make(), spec.example, seed=seed)
    example = torch.randn(spec.example, generator=torch.Generator().manual_seed(seed + 1))
    return Built(spec, module, example)


def check_sets(built: Built, seed: int = 7) -> list[tuple[str, torch.Tensor]]:
    """The sweep's own inputs: the example, fresh values, and every other size of the spec."""
    generator = torch.Generator().manual_seed(seed)
    sets = [("example", built.example), ("fresh values", torch.randn(built.spec.example, generator=generator))]
    sets += [("x".join(map(str, shape)), torch.randn(shape, generator=generator)) for shape in built.spec.other_sizes]
    return sets


@dataclasses.dataclass
class Check:
    failures: list[str]
    max_abs: float
    worst_scale_ratio: float

    @property
    def passed(self) -> bool:
        return not self.failures


def check_file(built: Built, path: str, sets: list[tuple[str, torch.Tensor]] | None = None) -> Check:
    """ONNX Runtime against eager on ``sets``; dense outputs within SCALE_TOLERANCE of their scale."""
    import onnxruntime as ort

    from fxport.verify.compare import flatten_outputs

    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    failures, max_abs, worst = [], 0.0, 0.0
    for label, x in sets or check_sets(built):
        with torch.no_grad():
            expected = [t.numpy() for t in flatten_outputs(built.module(x.clone()))]
        try:
            actual = session.run(None, {session.get_inputs()[0].name: x.numpy()})
        except Exception as exc:  # noqa: BLE001 - a file that cannot run a size is wrong there
            failures.append(f"{label}: ONNX Runtime failed ({first_line(exc)[:120]})")
            continue
        for index, (want, got) in enumerate(zip(expected, actual)):
            if want.shape != got.shape:
                failures.append(f"{label}: output[{index}] shape {list(got.shape)} != {list(want.shape)}")
                continue
            error = float(np.abs(want.astype(np.float64) - got).max()) if want.size else 0.0
            scale = max(float(np.abs(want).max()) if want.size else 0.0, 1e-30)
            max_abs, worst = max(max_abs, error), max(worst, error / scale)
            if error > SCALE_TOLERANCE * scale:
                failures.append(f"{label}: output[{index}] max abs {error:.3g} > {SCALE_TOLERANCE:g} × scale {scale:.3g}")
    return Check(failures, max_abs, worst)


# --- one model, three exporters -----------------------------------------------------------------

def convert_fxport(built: Built, path: str, verify: bool = True):
    import fxport

    start = time.perf_counter()
    result = fxport.convert(built.module, (built.example,), dynamic_shapes=built.dynamic_shapes, output=path,
                            verify=verify)
    return result, time.perf_counter() - start


def convert_dynamo(built: Built, path: str) -> float:
    from fxport.common.quiet import quiet_torch

    start = time.perf_counter()
    with quiet_torch():
        torch.onnx.export(built.module, (built.example,), path, dynamic_shapes=built.dynamic_shapes, dynamo=True)
    return time.perf_counter() - start


def convert_trace(built: Built, path: str) -> float:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(built.module, (built.example,), path, dynamo=False, input_names=["x"],
                          dynamic_axes={"x": dict(built.spec.dynamic)})
    return time.perf_counter() - start


def _stock_record(convert: Callable[[Built, str], float], built: Built, path: str, sets) -> dict:
    cpu = time.process_time()
    try:
        seconds = convert(built, path)
    except Exception as exc:  # noqa: BLE001 - a refusal is a verdict
        return {"verdict": "refused", "message": first_line(exc)}
    cpu = time.process_time() - cpu
    check = check_file(built, path, sets)
    return {"verdict": "ok" if check.passed else "wrong", "message": "; ".join(check.failures[:2]),
            "max_abs": check.max_abs, "seconds": seconds, "cpu_seconds": cpu}


def run_model(name: str) -> dict:
    """Convert ``name`` three ways, check every file, return the record (JSON-ready)."""
    warnings.filterwarnings("ignore")
    built = build(name)
    sets = check_sets(built)
    record: dict[str, Any] = {"name": name, "family": built.spec.family, "check_sets": [label for label, _ in sets]}
    _warm_up()
    with tempfile.TemporaryDirectory() as tmp:
        record["dynamo"] = _stock_record(convert_dynamo, built, os.path.join(tmp, "dynamo.onnx"), sets)
        record["trace"] = _stock_record(convert_trace, built, os.path.join(tmp, "trace.onnx"), sets)
        path = os.path.join(tmp, "fxport.onnx")
        ours: dict[str, Any] = {}
        cpu = time.process_time()
        try:
            result, seconds = convert_fxport(built, path)
        except Exception as exc:  # noqa: BLE001
            ours.update(verdict="refused" if _is_fxport_error(exc) else "internal error", message=first_line(exc))
        else:
            cpu = time.process_time() - cpu
            check = check_file(built, path, sets)
            noisy = [row for row in result.verification if row.onnx_error is not None]
            ours.update(verdict="ok" if check.passed else "wrong", message="; ".join(check.failures[:2]),
                        max_abs=check.max_abs, seconds=seconds, verify_seconds=result.timings.get("verify", 0.0),
                        cpu_seconds=cpu,
                        verified_sets=len(result.verification), noise_judged=len(noisy),
                        ranges=[w for w in result.warnings if "narrow" in w or "bounded" in w][:2])
        record["fxport"] = ours
        for _ in range(int(os.environ.get(REPEAT_ENV, "1")) - 1):  # the faster of each pair of timings
            _time_again(record["dynamo"], lambda: convert_dynamo(built, os.path.join(tmp, "dynamo.onnx")))
            _time_again(ours, lambda: convert_fxport(built, path)[1])
    return record


#: How many times the worker times each of ``dynamo=True`` and fxport (``--repeat``; the fastest counts).
REPEAT_ENV = "FXPORT_VISION_REPEAT"


def _time_again(side: dict, convert: Callable[[], float]) -> None:
    """Convert once more; ``side`` keeps the shorter wall and CPU time (a converted side only)."""
    if "seconds" not in side:
        return
    cpu = time.process_time()
    seconds = convert()
    side["seconds"] = min(side["seconds"], seconds)
    side["cpu_seconds"] = min(side.get("cpu_seconds", float("inf")), time.process_time() - cpu)
    side["timings"] = side.get("timings", 1) + 1


# --- the table ----------------------------------------------------------------------------------

def _cell(side: dict) -> str:
    if side["verdict"] == "ok":
        return f"✓ {side['max_abs']:.1e}"
    if side["verdict"] == "wrong":
        return f"**wrong** ({side['message'][:90]})"
    return f"✗ {side['message'][:110]}"


def _time_cell(record: dict) -> str:
    ours, stock = record["fxport"].get("seconds"), record["dynamo"].get("seconds")
    if ours is None:
        return "—"
    text = f"{ours:.1f} s"
    if not stock:
        return text
    ours_cpu, stock_cpu = record["fxport"].get("cpu_seconds"), record["dynamo"].get("cpu_seconds")
    cpu = f"; CPU time {ours_cpu / stock_cpu:.2f}×" if ours_cpu and stock_cpu else ""
    best = f"; fastest of {record['fxport']['timings']}" if record["fxport"].get("timings", 1) > 1 else ""
    return text + f" ({ours / stock:.2f}× dynamo's {stock:.1f} s{cpu}{best})"


def markdown(records: list[dict]) -> str:
    counts = {side: sum(r[side]["verdict"] == "ok" for r in records) for side in ("fxport", "dynamo", "trace")}
    wrong = {side: sum(r[side]["verdict"] == "wrong" for r in records) for side in ("fxport", "dynamo", "trace")}
    lines = [
        "| model | family | fxport | `dynamo=True` | TorchScript trace | fxport convert time (verified) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in records:
        lines.append(f"| {r['name']} | {r['family']} | {_cell(r['fxport'])} | {_cell(r['dynamo'])} | "
                     f"{_cell(r['trace'])} | {_time_cell(r)} |")
    summary = ", ".join(f"{side} {counts[side]}/{len(records)} correct ({wrong[side]} wrong)"
                        for side in ("fxport", "dynamo", "trace"))
    return "\n".join(lines) + f"\n\n{summary}.\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated model names: " + ", ".join(MODELS))
    parser.add_argument("--timeout", type=float, default=1200, help="seconds per model")
    parser.add_argument("--memory-gb", type=float, default=12, help="address-space limit per subprocess (0: none)")
    parser.add_argument("--output", help="markdown file for the table (default: the sweep section of docs/vision-models.md)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="time dynamo=True and fxport this many times each, one after the other; "
                        "the table shows the fastest (the machine's noise is one-sided)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--record", help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.worker:
        import json

        with open(options.record, "w") as handle:
            json.dump(run_model(options.worker), handle)
        return 0
    names = options.only.split(",") if options.only else list(MODELS)
    os.environ[REPEAT_ENV] = str(max(1, options.repeat))  # read by each model's worker
    records = []
    for name in names:
        record = run_in_subprocess(name, options.timeout, options.memory_gb, script="benchmarks.vision_models")
        record.setdefault("family", MODELS[name].family)
        for side in ("fxport", "dynamo", "trace"):
            record.setdefault(side, dict(record.get("stock", {"verdict": "crashed", "message": "?"})))
        records.append(record)
        print(f"{name}: fxport {record['fxport']['verdict']}, dynamo {record['dynamo']['verdict']}, "
              f"trace {record['trace']['verdict']}", file=sys.stderr, flush=True)
    table = markdown(records)
    print(table)
    target = options.output or (DOC if not options.only else None)
    if target:
        _write_sweep_section(target, table)
    return 0


_BEGIN, _END = "<!-- sweep: begin -->", "<!-- sweep: end -->"


def _write_sweep_section(path: str, table: str) -> None:
    """Replace the generated section of ``path`` (between the sweep markers) with ``table``."""
    stamp = f"Measured {datetime.date.today()} on this machine (torch's default threads, as `fxport convert` runs; `python3 -m benchmarks.vision_models`).\n\n"
    text = open(path).read() if os.path.exists(path) else f"# torchvision models\n\n{_BEGIN}\n{_END}\n"
    head, rest = text.split(_BEGIN, 1)
    tail = rest.split(_END, 1)[1]
    with open(path, "w") as handle:
        handle.write(f"{head}{_BEGIN}\n{stamp}{table}{_END}{tail}")


if __name__ == "__main__":
    sys.exit(main())
