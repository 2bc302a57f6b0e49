"""External data: models over 2 GB written as MODEL.onnx + MODEL.onnx.data, atomically.

Most tests force external data on a small model (``external_data=True``); one converts a real
> 2 GiB model in a subprocess and checks its peak memory against its weights.

All are marked slow (each converts and writes a model; 17 took 2 min of the README command).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import fxport
import fxport.lower.external
from fxport.errors import OutputWriteError, UsageError, VerificationError
from fxport.lower.external import PROTOBUF_LIMIT, external_data_wanted, uses_external_data
from tests.conftest import REPO


#: external-data files (each test converts and writes a model): run with the tests marked slow (CI),
#: not in the README command
pytestmark = pytest.mark.slow


class Table(torch.nn.Module):
    """An embedding table and a data-dependent ``if``: ids 0 take the first branch, ids 1 the second."""

    def __init__(self, rows: int = 2000, dim: int = 64, seed: int = 0):
        super().__init__()
        generator = torch.Generator().manual_seed(seed)
        weight = torch.rand(rows, dim, generator=generator) * 2 - 1
        weight[0], weight[1] = 1.0, -1.0
        self.table = torch.nn.Embedding(rows, dim, _weight=weight)
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, ids):
        h = self.table(ids)
        if h.sum() > 0:
            h = self.proj(h)
        else:
            h = torch.tanh(h) - 1.0
        return h


THEN, ELSE = torch.zeros(2, 5, dtype=torch.int64), torch.ones(2, 5, dtype=torch.int64)


def example():
    return (torch.randint(0, 2000, (2, 5), generator=torch.Generator().manual_seed(1)),)


def run_file(path, ids):
    session = ort.InferenceSession(os.fspath(path), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: ids.numpy()})[0]


def assert_file_matches(module, path, *inputs):
    for ids in inputs:
        with torch.no_grad():
            expected = module(ids).numpy()
        np.testing.assert_allclose(run_file(path, ids), expected, atol=1e-5, rtol=1e-4)


def listing(folder):
    return sorted(os.listdir(folder))


def snapshot(folder):
    return {name: open(os.path.join(folder, name), "rb").read() for name in listing(folder)}


def external_locations(model: onnx.ModelProto) -> set[str]:
    return {entry.value for t in model.graph.initializer for entry in t.external_data if entry.key == "location"}


# --- the pair -------------------------------------------------------------------------------

def test_forced_external_data_writes_a_pair_that_runs_on_both_branches(tmp_path):
    module = Table().eval()
    path = tmp_path / "net.onnx"
    result = fxport.convert(module, example(), output=path, external_data=True)
    assert result.verified
    assert listing(tmp_path) == ["net.onnx", "net.onnx.data"]
    saved = onnx.load(path, load_external_data=False)
    assert uses_external_data(saved) and external_locations(saved) == {"net.onnx.data"}
    assert os.path.getsize(tmp_path / "net.onnx") < 20_000 < os.path.getsize(tmp_path / "net.onnx.data")
    assert uses_external_data(result.model)  # the graph in memory, weights in the file
    onnx.checker.check_model(os.fspath(path))
    assert_file_matches(module, path, THEN, ELSE)
    assert [n.op_type for n in saved.graph.node].count("If") == 1  # the converted `if`


def test_small_model_stays_one_file(tmp_path):
    result = fxport.convert(Table().eval(), example(), output=tmp_path / "net.onnx")
    assert listing(tmp_path) == ["net.onnx"]
    assert not uses_external_data(result.model)


def test_size_decides_by_default(tmp_path, monkeypatch):
    monkeypatch.setattr(fxport.lower.external, "THRESHOLD_BYTES", 100_000)  # the table is 512 kB
    fxport.convert(Table().eval(), example(), output=tmp_path / "net.onnx", verify=False)
    assert listing(tmp_path) == ["net.onnx", "net.onnx.data"]


def test_threshold_and_the_protobuf_limit():
    assert external_data_wanted(None, fxport.lower.external.THRESHOLD_BYTES + 1)
    assert not external_data_wanted(None, 2**20)
    assert external_data_wanted(True, 10) and not external_data_wanted(False, 2**30)
    with pytest.raises(UsageError, match="2 GiB"):
        external_data_wanted(False, PROTOBUF_LIMIT + 1)


def test_without_output_the_weights_come_back_into_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", os.fspath(tmp_path))  # where the stage goes
    module = Table().eval()
    result = fxport.convert(module, example(), external_data=True)
    assert not uses_external_data(result.model) and result.output_path is None
    # the staged pair is gone (torch may put its own caches in the temp dir: not fxport's)
    assert [name for name in listing(tmp_path) if not name.startswith("torchinductor_")] == []
    session = ort.InferenceSession(result.model.SerializeToString(), providers=["CPUExecutionProvider"])
    with torch.no_grad():
        np.testing.assert_allclose(session.run(None, {"ids": ELSE.numpy()})[0], module(ELSE).numpy(), atol=1e-5)


# --- atomicity ------------------------------------------------------------------------------

@pytest.fixture()
def old_pair(tmp_path):
    """A good pair from another model (seed 1) already at tmp_path/net.onnx."""
    old = Table(seed=1).eval()
    fxport.convert(old, example(), output=tmp_path / "net.onnx", external_data=True, verify=False)
    return old, snapshot(tmp_path)


def test_overwrite_replaces_both_files(tmp_path, old_pair):
    old, before = old_pair
    new = Table(seed=2).eval()
    fxport.convert(new, example(), output=tmp_path / "net.onnx", external_data=True, verify=False)
    after = snapshot(tmp_path)
    assert list(after) == ["net.onnx", "net.onnx.data"]
    assert after["net.onnx.data"] != before["net.onnx.data"]
    assert_file_matches(new, tmp_path / "net.onnx", THEN, ELSE, example()[0])


def test_overwrite_keeps_the_modes_of_the_old_pair(tmp_path, old_pair):
    os.chmod(tmp_path / "net.onnx", 0o640)
    os.chmod(tmp_path / "net.onnx.data", 0o604)
    fxport.convert(Table(seed=2).eval(), example(), output=tmp_path / "net.onnx", external_data=True, verify=False)
    assert os.stat(tmp_path / "net.onnx").st_mode & 0o777 == 0o640
    assert os.stat(tmp_path / "net.onnx.data").st_mode & 0o777 == 0o604


def test_a_session_on_the_old_pair_keeps_working_after_an_overwrite(tmp_path, old_pair):
    old, _ = old_pair
    session = ort.InferenceSession(os.fspath(tmp_path / "net.onnx"), providers=["CPUExecutionProvider"])
    fxport.convert(Table(seed=2).eval(), example(), output=tmp_path / "net.onnx", external_data=True, verify=False)
    ids = example()[0]
    with torch.no_grad():
        np.testing.assert_allclose(session.run(None, {"ids": ids.numpy()})[0], old(ids).numpy(), atol=1e-5)


def test_failure_writing_the_data_leaves_the_old_pair(tmp_path, old_pair, monkeypatch):
    import onnx_ir

    real = onnx_ir.external_data.unload_from_model

    def disk_full(model, base_dir, relative_path, **options):
        with open(os.path.join(base_dir, relative_path), "wb") as handle:
            handle.write(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(onnx_ir.external_data, "unload_from_model", disk_full)
    with pytest.raises(OutputWriteError, match="No space left"):
        fxport.convert(Table(seed=2).eval(), example(), output=tmp_path / "net.onnx", external_data=True)
    assert snapshot(tmp_path) == old_pair[1]
    assert real is not disk_full


def fail_the_model_rename(monkeypatch) -> None:
    """Make the final rename (staged model → net.onnx) fail with an I/O error; other renames work."""
    real_replace = os.replace

    def replace(source, target):
        if os.fspath(target).endswith("net.onnx"):
            raise OSError(5, "Input/output error")
        return real_replace(source, target)

    monkeypatch.setattr(fxport.lower.external.os, "replace", replace)


def test_failure_of_the_model_rename_puts_the_old_data_back(tmp_path, old_pair, monkeypatch):
    fail_the_model_rename(monkeypatch)
    with pytest.raises(OutputWriteError, match="Input/output"):
        fxport.convert(Table(seed=2).eval(), example(), output=tmp_path / "net.onnx", external_data=True,
                       verify=False)
    assert snapshot(tmp_path) == old_pair[1]  # nothing half-replaced, no staging left
    assert_file_matches(old_pair[0], tmp_path / "net.onnx", THEN, ELSE)


def test_failure_of_the_model_rename_without_an_old_pair_leaves_nothing(tmp_path, monkeypatch):
    fail_the_model_rename(monkeypatch)
    with pytest.raises(OutputWriteError):
        fxport.convert(Table().eval(), example(), output=tmp_path / "net.onnx", external_data=True, verify=False)
    assert listing(tmp_path) == []


def test_failed_verification_writes_nothing_and_keeps_the_old_pair(tmp_path, old_pair, monkeypatch):
    def mismatch(*args, **kwargs):
        raise VerificationError("ONNX Runtime differs from eager PyTorch (simulated)")

    import fxport.verify.stage

    monkeypatch.setattr(fxport.verify.stage, "verify_model", mismatch)
    with pytest.raises(VerificationError):
        fxport.convert(Table(seed=2).eval(), example(), output=tmp_path / "net.onnx", external_data=True)
    assert snapshot(tmp_path) == old_pair[1]


def test_verification_reads_the_staged_file_not_a_serialised_copy(tmp_path, monkeypatch):
    """ONNX Runtime gets a path beside the staged data; SerializeToString of the weights never happens."""
    from fxport.verify import verification as verify

    seen = []
    real_init = verify.OnnxRunner.__init__

    def spy(self, model, *args, **kwargs):
        seen.append(model)
        real_init(self, model, *args, **kwargs)

    monkeypatch.setattr(verify.OnnxRunner, "__init__", spy)
    fxport.convert(Table().eval(), example(), output=tmp_path / "net.onnx", external_data=True)
    assert seen and all(isinstance(m, str) and os.path.basename(m) == "net.onnx" for m in seen)
    assert all(os.path.dirname(m) != os.fspath(tmp_path) for m in seen)  # staged, then committed


@pytest.mark.slow
def test_cli_external_data_flag(tmp_path):
    from tests.conftest import run_cli

    out = tmp_path / "srcnn.onnx"
    done = run_cli("convert", "examples/srcnn.py:SuperResolutionNet", "-o", str(out), "--external-data", "--quiet")
    assert done.returncode == 0, done.stderr
    assert listing(tmp_path) == ["srcnn.onnx", "srcnn.onnx.data"]
    assert external_locations(onnx.load(out, load_external_data=False)) == {"srcnn.onnx.data"}
    onnx.checker.check_model(os.fspath(out))


# --- precision and diff ---------------------------------------------------------------------

@pytest.mark.parametrize("precision", ["fp16", "int8"])
def test_precision_keeps_external_data(tmp_path, precision):
    module = Table().eval()
    result = fxport.convert(module, example(), output=tmp_path / "net.onnx", external_data=True,
                            precision=precision)
    assert result.verified and listing(tmp_path) == ["net.onnx", "net.onnx.data"]
    saved = onnx.load(tmp_path / "net.onnx", load_external_data=False)
    assert external_locations(saved) == {"net.onnx.data"}
    onnx.checker.check_model(os.fspath(tmp_path / "net.onnx"))
    tolerance = {"fp16": 2e-2, "int8": 1e-1}[precision]
    for ids in (THEN, ELSE):
        with torch.no_grad():
            np.testing.assert_allclose(run_file(tmp_path / "net.onnx", ids).astype(np.float32), module(ids).numpy(),
                                       atol=tolerance, rtol=tolerance)


def test_diff_of_two_external_data_files(tmp_path):
    from fxport.diff.model_diff import diff_onnx_files

    for name, seed in (("a", 1), ("b", 2)):
        (tmp_path / name).mkdir()
        fxport.convert(Table(seed=seed).eval(), example(), output=tmp_path / name / "net.onnx",
                       external_data=True, verify=False)
    diff = diff_onnx_files(os.fspath(tmp_path / "a" / "net.onnx"), os.fspath(tmp_path / "b" / "net.onnx"))
    assert not diff.onnx.op_deltas()


def test_diff_model_with_external_data(tmp_path, monkeypatch):
    from fxport.diff.model_diff import diff_model

    monkeypatch.setattr(tempfile, "tempdir", os.fspath(tmp_path))
    diff = diff_model(Table().eval(), example(), external_data=True, verify=False)
    assert diff.result is not None and "If" in {n.op_type for n in diff.result.model.graph.node}
    assert listing(tmp_path) == []


# --- a real model over 2 GiB ------------------------------------------------------------------

_BIG_CHILD = r'''
import json, os, sys, threading, time
import numpy as np, onnxruntime as ort, torch
import fxport
from tests.test_external_data import ELSE, THEN, Table


def rss():
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) * 1024 for line in handle if line.startswith("VmRSS:"))

folder, rows, dim = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
module = Table(rows, dim).eval()
weights = sum(p.numel() * p.element_size() for p in module.parameters())
before, peak, running = rss(), [rss()], [True]
def sample():
    while running[0]:
        peak[0] = max(peak[0], rss()); time.sleep(0.005)
thread = threading.Thread(target=sample, daemon=True); thread.start()
result = fxport.convert(module, (torch.randint(0, rows, (2, 5)),), output=os.path.join(folder, "model.onnx"))
running[0] = False; thread.join()
session = ort.InferenceSession(os.path.join(folder, "model.onnx"), providers=["CPUExecutionProvider"])
errors = []
for ids in (THEN, ELSE, torch.randint(0, rows, (2, 5))):
    with torch.no_grad():
        errors.append(float(np.abs(session.run(None, {"ids": ids.numpy()})[0] - module(ids).numpy()).max()))
print(json.dumps({"weights": weights, "before": before, "peak": peak[0], "verified": result.verified,
                  "files": {n: os.path.getsize(os.path.join(folder, n)) for n in sorted(os.listdir(folder))},
                  "errors": errors, "ifs": [n.op_type for n in result.model.graph.node].count("If")}))
'''


@pytest.mark.slow
def test_model_over_2gb_converts_verifies_and_runs(tmp_path):
    """2.29 GB of float32 weights: a pair on disk, verified, equal to eager on both branches.

    Runs in a subprocess so its peak memory is its own: the conversion, ONNX checker and
    verification together may hold at most half a copy of the weights on top of the model's own.
    """
    rows, dim = 560_000, 1024
    assert rows * dim * 4 > 2**31
    done = subprocess.run([sys.executable, "-c", _BIG_CHILD, os.fspath(tmp_path), str(rows), str(dim)],
                          capture_output=True, text=True, cwd=REPO, timeout=1200,
                          env=dict(os.environ, PYTHONPATH=REPO))
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert record["verified"] and record["ifs"] == 1
    assert sorted(record["files"]) == ["model.onnx", "model.onnx.data"]
    assert record["files"]["model.onnx.data"] >= record["weights"] > 2**31
    assert record["files"]["model.onnx"] < 1_000_000
    assert max(record["errors"]) <= 1e-5
    extra = (record["peak"] - record["before"]) / record["weights"]
    print(f"weights {record['weights'] / 1e9:.2f} GB, peak RSS {record['peak'] / 1e9:.2f} GB, extra {extra:.2f}x")
    assert extra < 0.5, f"conversion held {extra:.2f} extra copies of the weights"
