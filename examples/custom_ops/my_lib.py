"""The seed's ``my_add`` library: an autograd.Function whose forward calls opaque code.

``_kernel`` stands in for a compiled C++ extension (``my_lib.my_add``): it works on NumPy
arrays, so torch.export cannot trace through it.
"""

import numpy as np
import torch


def _kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return 2 * a + b


class MyAddFunction(torch.autograd.Function):
    """my_add(a, b) = 2a + b, computed by an opaque kernel."""

    @staticmethod
    def forward(ctx, a, b):
        return torch.from_numpy(_kernel(a.detach().numpy(), b.detach().numpy()))

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad, grad


my_add = MyAddFunction.apply
