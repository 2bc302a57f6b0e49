"""fxport: get PyTorch models into ONNX correctly.

Models are captured with torch.export, rewritten where the stock exporter refuses them or would
silently get them wrong (data-dependent control flow, ops without an ONNX translation), lowered
with the dynamo exporter and verified against eager PyTorch on inputs the export never saw.

Example::

    >>> import torch, fxport
    >>> class Net(torch.nn.Module):
    ...     def forward(self, x):
    ...         return torch.relu(x) * 2
    >>> result = fxport.convert(Net(), (torch.randn(2, 3),), dynamic_shapes={"x": {0: "batch"}})
    >>> result.verified
    True
"""

from fxport.errors import (
    CaptureError,
    ControlFlowError,
    ConversionError,
    EagerRunError,
    InputSpecError,
    LoweringError,
    ModelLoadError,
    OutputWriteError,
    RuleError,
    SourceLocation,
    UnsupportedOpsError,
    UsageError,
    VerificationError,
)
from fxport.pipeline import convert
from fxport.report import AppliedRewrite, ConversionResult, VerificationRow
from fxport import rules
from fxport.rules import BUILTIN_PRIORITY, Scope, graph_rule, onnx_op, patch

__version__ = "0.1.0"

__all__ = [
    "AppliedRewrite",
    "CaptureError",
    "ControlFlowError",
    "ConversionError",
    "ConversionResult",
    "EagerRunError",
    "InputSpecError",
    "LoweringError",
    "ModelLoadError",
    "OutputWriteError",
    "RuleError",
    "SourceLocation",
    "UnsupportedOpsError",
    "UsageError",
    "VerificationError",
    "VerificationRow",
    "__version__",
    "convert",
    "BUILTIN_PRIORITY",
    "Scope",
    "graph_rule",
    "onnx_op",
    "patch",
    "rules",
]
