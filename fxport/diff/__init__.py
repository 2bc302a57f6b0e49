"""``fxport diff``: see what rewriting changed, from source to captured graph to ONNX.

Example::

    >>> import torch
    >>> from fxport.diff import diff_model
    >>> class Net(torch.nn.Module):
    ...     def forward(self, x):
    ...         return torch.special.erfinv(x) * 2
    >>> d = diff_model(Net(), (torch.rand(2, 3) * 0.5,), verify=False)
    >>> [r.rewrite.rule for r in d.rewrites]
    ['aten::erfinv']
    >>> [(c.op, c.delta) for c in d.onnx.op_deltas() if c.op in ("Erf", "aten::erfinv")]
    [('Erf', 1), ('aten::erfinv', -1)]
"""

from fxport.diff.model_diff import ModelDiff, diff_model, diff_onnx_files
from fxport.diff.onnx_diff import OnnxGraphDiff, diff_onnx

__all__ = ["ModelDiff", "OnnxGraphDiff", "diff_model", "diff_onnx", "diff_onnx_files"]
