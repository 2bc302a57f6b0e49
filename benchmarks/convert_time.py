"""Conversion time: fxport.convert vs torch.onnx.export(dynamo=True), same models, same run.

fxport is timed without verification (``verify=False``) so both sides do the same work
(capture + lower); verification time is reported on its own. Target: ≤ 1.10× when no rewrite
fires.
"""

from __future__ import annotations

import torch

import fxport
from benchmarks.common import Section, paired_medians, ratio
from fxport.capture.dynamic_dims import normalize_dynamic_shapes
from fxport.eager.inputs import InputSet
from fxport.common.quiet import quiet_torch


def models() -> list[tuple[str, torch.nn.Module, tuple, dict]]:
    """(name, module, example args, simple-form dynamic shapes) for models both tools handle."""
    from examples.srcnn import SuperResolutionNet

    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64)).eval()
    cases = [
        ("mlp", mlp, (torch.randn(8, 64),), {"input": {0: "batch"}}),
        ("srcnn", SuperResolutionNet().eval(), (torch.rand(1 + 1, 3, 32, 32),),
         {"x": {0: "batch", 2: "height", 3: "width"}}),
    ]
    try:
        import transformers

        config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=500, n_positions=128)
        cases.append(("gpt2-tiny", GPT2Hidden(transformers.GPT2Model(config)).eval(),
                      (torch.randint(0, 500, (2, 16)),), {"input_ids": {0: "batch", 1: "seq"}}))
    except ImportError:
        pass
    return cases


class GPT2Hidden(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False).last_hidden_state


def run(repeats: int = 3) -> Section:
    rows = []
    for name, module, args, dynamic in models():
        stock_shapes = normalize_dynamic_shapes(module, dynamic, InputSet(args))

        def stock():
            with quiet_torch():
                torch.onnx.export(module, args, dynamo=True, dynamic_shapes=stock_shapes, verbose=False)

        def ours():
            fxport.convert(module, args, dynamic_shapes=dynamic, verify=False)

        results = []

        def ours_verified():
            results.append(fxport.convert(module, args, dynamic_shapes=dynamic))

        stock_s, ours_s = paired_medians(stock, ours, repeats, warmup=1)
        stock_again_s, end_to_end_s = paired_medians(stock, ours_verified, repeats, warmup=0)
        verified = results[-1]
        checking = verified.timings.get("verify", 0.0) + verified.timings.get("coverage", 0.0)
        rows.append([name, f"{stock_s:.2f}", f"{ours_s:.2f}", ratio(ours_s, stock_s),
                     f"{checking:.2f}", f"{end_to_end_s:.2f}", ratio(end_to_end_s, stock_again_s),
                     str(len(verified.rewrites))])
    return Section(
        "Conversion time: fxport vs torch.onnx.export(dynamo=True)",
        f"Median of {repeats} runs after a warm-up, same process, same models, the two exporters called alternately. fxport without "
        "verification (same work as the stock exporter); its verification time is listed apart, and the "
        "end-to-end runs (verification and coverage included; median of as many runs, again alternating with "
        "the stock export) are compared with the stock export too. "
        "Targets: ratio ≤ 1.10× when no rewrite fires; end to end ≤ 1.10×.",
        ["model", "stock export s", "fxport s", "ratio", "fxport verify s", "fxport end to end s",
         "end-to-end ratio", "rewrites"],
        rows,
    )
