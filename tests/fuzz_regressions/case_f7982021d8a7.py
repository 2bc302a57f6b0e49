"""Fuzz regression (mismatch): ONNX Runtime differs from eager PyTorch on 2 of 10 input sets (first: user-2, output[0], max abs error 10.2); run with --debug, or report the model; fxport never ships a mismatching model

Kept with thresholds 0.1 where the fuzzer drew 0.0: g is h minus its row means there, so
g.sum() > 0.0 compares rounding noise, which eager and ONNX Runtime round differently (with
onnxruntime 1.32 it flipped on 2 input sets). The generator no longer draws 0.0 thresholds.
"""
# expect: equal

import torch
from torch import nn


class Fuzzed(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear(4, 4)
        self.register_buffer("threshold", torch.tensor(0.25))

    def forward(self, x, n):
        h = x
        g = torch.tanh(x)
        if ((h > -0.5).any()) or (h.abs().mean() > self.threshold):
            for i in range(x.shape[0]):
                g = h - h.mean(dim=-1, keepdim=True)
                g = g * 0.0 + g
        else:
            if (h.max() > h.min()) or (h.shape[0] > 3):
                g = torch.maximum(h, g)
                g = torch.sqrt(h) * 0.5
        for i in range(int(n)):
            h = h + 0.1 * i
            h = torch.log(h)
            if (h < 2.0).all():
                continue
        for i in range(x.shape[0]):
            if ((h > -0.5).any()) or (h.sum().item() > -0.5):
                if (g.sum().item() > 0.1) and (g.sum() > 0.1):
                    continue
                g = torch.relu(g) - g * 1.0
            else:
                h = g - g.mean(dim=-1, keepdim=True)
                if ((g < 2.0).all()) and (g.abs().mean() > self.threshold):
                    break
        g = self.lin(g)
        if not (h.sum() > 2.0):
            return (g * 2.0).sum(dim=-1)
        return (h + g).sum(dim=-1)
