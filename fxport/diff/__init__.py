"""``fxport diff``: see what rewriting changed, from source to captured graph to ONNX.

Example::

    >>> from fxport.diff import diff_model, diff_onnx_files      # doctest: +SKIP
    >>> d = diff_model(net, (x,))                                # doctest: +SKIP
    >>> [(c.op, c.delta) for c in d.onnx.op_deltas()]            # doctest: +SKIP
"""

from fxport.diff.model_diff import ModelDiff, diff_model, diff_onnx_files
from fxport.diff.onnx_diff import OnnxGraphDiff, diff_onnx

__all__ = ["ModelDiff", "OnnxGraphDiff", "diff_model", "diff_onnx", "diff_onnx_files"]
