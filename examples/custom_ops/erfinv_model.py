"""torch.erfinv: the stock exporter decomposes it to prims::erf_inv and fails; fxport's
built-in rule translates it.

    fxport convert examples/custom_ops/erfinv_model.py:Erfinv -i x=8
"""

import torch


class Erfinv(torch.nn.Module):
    def forward(self, x):
        return torch.erfinv(torch.tanh(x))
