"""Real architectures from transformers, built from tiny configs with random weights.

The same builders and the same checker as the real-model sweep (benchmarks/real_models.py,
docs/real-models.md), on a representative subset: a decoder with an attention mask (GPT-2),
an encoder (BERT), a seq2seq model with decoder inputs (T5) and an MoE model (Mixtral).
Each is converted with dynamic batch and sequence and verified by fxport, then its written file
is checked against eager PyTorch on sizes and padding-shaped masks the export never saw.
Nothing is downloaded.
"""

import numpy as np
import onnx
import pytest

transformers = pytest.importorskip("transformers")

from benchmarks.real_models import build, check_file, check_inputs, convert_fxport  # noqa: E402

CI_SUBSET = ["gpt2", "bert", "t5", "mixtral"]
#: all four are marked slow and run in CI right after the README's test command
SLOW = {"gpt2", "bert", "t5", "mixtral"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in CI_SUBSET])
def test_real_model_converts_verifies_and_equals_eager(name, tmp_path):
    built = build(name)
    path = str(tmp_path / f"{name}.onnx")
    result, _ = convert_fxport(built, path)
    assert result.verified
    verified = [row.name for row in result.verification]
    assert any("left-padded" in row for row in verified), verified
    assert any(row.startswith("larger[") for row in verified), verified
    if name == "bert":  # position table bounds seq: fxport adopts torch.export's bound and says so
        assert any("'seq' is bounded by the model" in w for w in result.warnings)

    sets = check_inputs(built)
    assert {"batch=1 seq=5", "batch=3 seq=13 left-padded"} <= {label.split(" tgt=")[0] for label, _ in sets}
    check = check_file(built, path, sets)
    assert check.passed, check.summary()

    # The checker is not blind: the same file with perturbed weights is reported as different.
    model = onnx.load(path)
    largest = max(model.graph.initializer, key=lambda t: int(np.prod(t.dims)))
    values = onnx.numpy_helper.to_array(largest)
    noise = np.random.default_rng(0).normal(0, 0.1, values.shape).astype(values.dtype)
    largest.CopyFrom(onnx.numpy_helper.from_array(values + noise, largest.name))
    broken = str(tmp_path / f"{name}-perturbed.onnx")
    onnx.save(model, broken)
    assert not check_file(built, broken, sets[:2]).passed
