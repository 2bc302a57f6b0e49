"""``aten::searchsorted`` (both sides, ``sorter``, ``out_int32``).

Each value counts the boundaries before it (``<`` for the left side, ``<=`` for the right):
exact, O(len(values) · len(boundaries)) memory. NaN values sort after every boundary, as in
torch. (``torch.bucketize`` is translated correctly by the stock exporter on torch 2.13, both
sides; fxport's tests check that too.) NaN inside ``sorted_sequence`` is not supported (torch's
binary search gives order-dependent answers there).
"""

from __future__ import annotations

from onnxscript import ir
from onnxscript import opset18 as op

import fxport
from fxport.rewrites._helpers import ints, is_float, rank


@fxport.onnx_op("aten::searchsorted.Tensor", name="aten::searchsorted", opset=18,
                priority=fxport.BUILTIN_PRIORITY)
def searchsorted(sorted_sequence, self, out_int32: bool = False, right: bool = False,
                 side: str | None = None, sorter=None):
    """Insertion indices of values into sorted boundaries (left or right side); exact."""
    boundaries = sorted_sequence
    if sorter is not None:
        boundaries = op.GatherElements(boundaries, sorter, axis=-1)
    values = op.Unsqueeze(self, ints(-1))                          # [..., k, 1]
    if rank(sorted_sequence) > 1:
        boundaries = op.Unsqueeze(boundaries, ints(-2))            # [..., 1, m]
    use_right = right or side == "right"
    if use_right:
        before = op.LessOrEqual(boundaries, values)
    else:
        before = op.Less(boundaries, values)
    if is_float(self):
        # NaN values go after every (non-NaN) boundary.
        before = op.Or(before, op.And(op.IsNaN(values), op.Not(op.IsNaN(boundaries))))
    count = op.ReduceSum(op.Cast(before, to=ir.DataType.INT64), ints(-1), keepdims=0)
    return op.Cast(count, to=ir.DataType.INT32) if out_int32 else count
