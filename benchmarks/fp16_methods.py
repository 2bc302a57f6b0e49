"""Which fp16 export is correct? The measurement behind fxport's choice (docs/precision.md).

Method A converts the float32 ONNX with
``onnxruntime.transformers.float16.convert_float_to_float16`` (the usual recipe, with an
accuracy block list); method B exports a ``.half()`` copy of the module (what fxport does).
For each model: does the result pass the ONNX checker and strict type inference, does ONNX
Runtime load it, and how far is it from eager float32 on fresh inputs?

Usage::

    python3 -m benchmarks.fp16_methods
"""

from __future__ import annotations

import copy

import numpy as np
import onnx
import torch
from torch import nn

from benchmarks.common import Section, ort_session, print_section
from fxport.common.quiet import quiet_torch

#: Ops method A keeps in float32 (its library defaults plus the usual accuracy-sensitive ones).
ACCURACY_BLOCK_LIST = ["Pow", "ReduceMean", "ReduceSum", "Exp", "Log", "Softmax", "LogSoftmax", "LayerNormalization"]


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(32)
        self.attention = nn.MultiheadAttention(32, 4, batch_first=True)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        h = self.norm(x)
        a, _ = self.attention(h, h, h)
        return torch.softmax(self.head(a + x), -1), x.mean().pow(2)


def cases():
    from examples.srcnn import SuperResolutionNet

    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
    return [("mlp", mlp.eval(), torch.randn(8, 64)),
            ("srcnn (bicubic resize + conv)", SuperResolutionNet().eval(), torch.rand(2, 3, 16, 16)),
            ("attention + layernorm + softmax", Attention().eval(), torch.randn(2, 7, 32))]


def method_a(module, x):
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST, convert_float_to_float16

    with quiet_torch():
        fp32 = torch.onnx.export(module, (x,), dynamo=True, verbose=False).model_proto
    return convert_float_to_float16(fp32, keep_io_types=False, op_block_list=DEFAULT_OP_BLOCK_LIST + ACCURACY_BLOCK_LIST)


def method_b(module, x):
    with quiet_torch():
        return torch.onnx.export(copy.deepcopy(module).half(), (x.half(),), dynamo=True, verbose=False).model_proto


def assess(build, module, x) -> list[str]:
    """[valid ONNX?, ORT loads?, max abs error vs eager fp32] for one method and model."""
    try:
        model = build(module, x)
    except Exception as exc:  # the method itself failed
        return [f"export failed: {type(exc).__name__}", "—", "—"]
    try:
        onnx.checker.check_model(model)
        onnx.shape_inference.infer_shapes(model, strict_mode=True, check_type=True)
        valid = "yes"
    except Exception as exc:
        valid = "no: " + str(exc).strip().splitlines()[0][:70]
    try:
        session = ort_session(model)
    except Exception as exc:
        return [valid, "no: " + str(exc).splitlines()[0][:60], "—"]
    fresh = torch.randn_like(x) if x.min() < 0 else torch.rand_like(x)
    outputs = session.run(None, {session.get_inputs()[0].name: fresh.half().numpy()})
    with torch.no_grad():
        expected = module(fresh)
    expected = expected if isinstance(expected, tuple) else (expected,)
    error = max(float(np.abs(o.astype(np.float64) - e.double().numpy()).max()) for o, e in zip(outputs, expected))
    return [valid, "yes", f"{error:.1e}"]


def run(repeats: int = 1) -> Section:
    rows = []
    for name, module, x in cases():
        rows.append([name, *assess(method_a, module, x), *assess(method_b, module, x)])
    return Section(
        "fp16 export: convert_float_to_float16 (A) vs exporting a .half() copy (B)",
        "Valid = onnx.checker + strict shape/type inference; error = max abs difference from eager "
        "float32 on fresh inputs (fp16 inputs to ONNX Runtime CPU).",
        ["model", "A valid", "A loads", "A error", "B valid", "B loads", "B error"],
        rows,
    )


if __name__ == "__main__":
    print_section(run())
