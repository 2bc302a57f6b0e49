"""A rule module as an installed package would expose it under entry-point group fxport.rules."""

from onnxscript import opset18 as op

import fxport


@fxport.onnx_op("aten::i0", name="entry-point-i0")
def i0(self):
    """Placeholder translation used by the entry-point loading test."""
    return op.Abs(self)
