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

__version__ = "0.1.0"

#: Public names whose modules import torch: loaded on first use, so that ``import fxport.cli``
#: (``fxport --help``, ``fxport --version``) starts without importing torch.
_LAZY = {
    "convert": "fxport.engine.pipeline",
    "AppliedRewrite": "fxport.report.result",
    "ConversionResult": "fxport.report.result",
    "VerificationRow": "fxport.report.result",
    "rules": "fxport.rules",
    "BUILTIN_PRIORITY": "fxport.rules",
    "Scope": "fxport.rules",
    "graph_rule": "fxport.rules",
    "onnx_op": "fxport.rules",
    "patch": "fxport.rules",
    "decision": "fxport.rules",
}


def __getattr__(name: str):
    """Import the module behind a public name on first access (PEP 562)."""
    import importlib

    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'fxport' has no attribute {name!r}")
    module = importlib.import_module(module_name)
    value = module if name == "rules" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
    "decision",
    "graph_rule",
    "onnx_op",
    "patch",
    "rules",
]
