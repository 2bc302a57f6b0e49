"""Fuzz regression (long profile, chunk 58, issue 26's grown-state generators): ONNX Runtime
failed on the example inputs ("Shape mismatch attempting to re-use buffer. {3,0} != {3,1}").

``acc`` starts empty and grows by ``torch.tanh(acc[:, -1:])``, 0 columns on the first step. The
loop's body is captured with growing axes at least 2 long, so the exporter recorded that slice
as 1 column; ONNX Runtime planned buffers from the recorded shape. The body's computed values
now carry no recorded shapes (fxport/lower/grown_loops.py, ``_forget_inner_shapes``).
"""
# expect: equal

import torch
from torch import nn


class Fuzzed(nn.Module):
    def forward(self, x, n):
        h = torch.tanh(x)
        g = torch.tanh(x)
        acc = g[:, :0].clone()
        for i in range(int(n)):
            h = torch.tanh(h) * 0.9 + h * 0.1
            acc = torch.cat([acc, h[:, :1], torch.tanh(acc[:, -1:])], 1)
            h = h + acc[:, :i + 1].sum(dim=-1, keepdim=True) * 0.1
            if not ((g < 2.0).all()):
                break
        return acc, h
