"""Route 3 of the seed: an autograd.Function with an opaque forward, mapped to standard ops.

A patch rule replaces the Function's ``forward`` while fxport captures, with a traceable
PyTorch expression; the exporter then emits plain ONNX ``Mul``/``Add``.
"""

import fxport


@fxport.patch("my_lib.MyAddFunction.forward")
def my_add_forward(ctx, a, b):
    """my_add(a, b) = 2a + b in traceable PyTorch (the kernel is opaque to torch.export)."""
    return 2 * a + b
