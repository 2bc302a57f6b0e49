"""``x.squeeze()`` removes the dimensions torch removed when it traced the model (``aten::squeeze``).

The stock translation is ``Squeeze(x)`` with no axes: ONNX Runtime then removes every dimension
that is 1 *at run time*. torch traced a size that comes from data (``(iou <= t).nonzero()`` has
an unbacked number of rows) as not 1 and kept it, and the rest of the graph was built on that
rank. So at run time, when exactly one row came back, the file dropped a dimension the graph
still indexed: the tutorial NMS ``idx = (iou <= threshold).nonzero().squeeze()`` made ``order``
0-d inside its Loop and a ``Shape``/``Reshape`` later failed (found by the public-loop corpus).
This rule squeezes exactly the axes whose traced size is 1, as the traced program does; a tensor
with none is passed on unchanged. Where eager's ``squeeze`` would also drop a data-dependent 1,
the values agree (one element either way) and only the rank differs, which verification checks
on the outputs.
"""

from __future__ import annotations

from onnxscript import opset18 as op

import fxport
from fxport.rewrites._helpers import ints


@fxport.onnx_op("aten::squeeze", opset=18, priority=fxport.BUILTIN_PRIORITY)
def squeeze(self):
    """Squeeze the axes of traced size 1; the input unchanged when there are none."""
    shape = self.shape
    if shape is None:
        return op.Squeeze(self)
    axes = [axis for axis, size in enumerate(shape) if isinstance(size, int) and size == 1]
    if not axes:
        return op.Identity(self)
    return op.Squeeze(self, ints(*axes))
