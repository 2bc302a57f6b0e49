"""Code the patch-rule tests replace: an opaque function and a module class torch.export
cannot trace (they go through NumPy)."""

import torch


def opaque_double(x):
    """2x, computed where torch.export cannot see."""
    return torch.from_numpy(x.detach().numpy() * 2)


class OpaqueGate(torch.nn.Module):
    """x * sigmoid(x), through NumPy."""

    def forward(self, x):
        return torch.from_numpy(self.gate(x.detach().numpy()))

    @staticmethod
    def gate(array):
        import numpy as np

        return array / (1 + np.exp(-array))


class UsesOpaque(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = OpaqueGate()

    def forward(self, x):
        return self.gate(opaque_double(x)) + 1
