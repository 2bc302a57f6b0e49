"""A gated MLP whose control flow depends on tensor values.

``torch.onnx.export(dynamo=True)`` refuses it and the TorchScript trace silently keeps only the
branches the example took. fxport converts the ``if`` on a submodule call into ONNX ``If`` and
the cheap conditional expression into ``Where``, then verifies every input set below — chosen so
that each branch is taken — plus generated ones at other batch sizes::

    fxport convert examples/gated_mlp.py:GatedMLP -o gated_mlp.onnx
"""

import torch
from torch import nn


class GatedMLP(nn.Module):
    example_dynamic_shapes = {"x": {0: "batch"}}

    def __init__(self, width: int = 16):
        super().__init__()
        torch.manual_seed(0)
        self.encoder = nn.Linear(8, width)
        self.positive = nn.Sequential(nn.Linear(width, width), nn.GELU())
        self.negative = nn.Sequential(nn.Linear(width, width), nn.Tanh())
        self.head = nn.Linear(width, 4)

    def forward(self, x):
        h = self.encoder(x)
        if h.mean() > 0:  # data-dependent branch between two submodules → ONNX If
            h = self.positive(h)
        else:
            h = self.negative(h) * 2
        scale = 2.0 if x.abs().max() > 1.5 else 0.5  # cheap and pure → ONNX Where
        return self.head(h) * scale

    def example_inputs(self):
        """Input sets that take each side of both conditions (the first one is exported)."""
        return [
            (torch.full((3, 8), -2.0),),  # h.mean() > 0, |x| > 1.5
            (torch.full((2, 8), 2.0),),   # h.mean() ≤ 0, |x| > 1.5
            (torch.full((5, 8), -0.5),),  # h.mean() > 0, |x| ≤ 1.5
            (torch.full((4, 8), 1.0),),   # h.mean() ≤ 0, |x| ≤ 1.5
        ]
