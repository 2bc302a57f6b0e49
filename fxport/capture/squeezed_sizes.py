"""``squeeze()`` of a dynamic size that may be 1: the size-oblivious capture keeps the axis.

Captured with sizes kept symbolic down to 0 and 1 (docs/architecture.md, "Dynamic sizes"), torch
decides ``size == 1`` as if the size were at least 2, without a guard: ``out.squeeze()`` on a
``(1, L, 1)`` tensor becomes a squeeze of the last axis only, so the file returns ``(1, 1)`` at
``L = 1`` where PyTorch returns ``()`` (FastSpeech's duration predictor: ``out = out.squeeze()``).
No ONNX graph of fixed rank computes both. :func:`watching_squeezes` records, during such a
capture, each ``squeeze`` of the model's own code over an input's dynamic size whose range holds
1, with the user's line; the capture then exports that dimension for sizes of at least 2, as
torch's 0/1 specialisation would, with the line as the reason (the ONNX metadata and the
narrowing warning say so). Verification still runs size 1: where the file equals eager there (a
squeeze whose axis the model sums away later) the range is widened back
(fxport/verify/verified_ranges.py); where it differs, the refusal names the line and the range,
and ``squeeze(-1)`` (the axes the model means) or ``Dim(..., min=2)`` converts.

Example::

    >>> import torch
    >>> class Squeezed(torch.nn.Module):
    ...     def forward(self, x):
    ...         return x.squeeze()
    >>> found = {}
    >>> with watching_squeezes(found):
    ...     _ = Squeezed()(torch.ones(2, 1))   # eager: no symbolic size, nothing recorded
    >>> found
    {}
"""

from __future__ import annotations

import contextlib
import functools
import sys
from typing import Any

import torch

from fxport.capture.failures import traced_user_frame
from fxport.capture.sources import is_model_file, source_name

#: How the capture words a dimension narrowed here (``DimRange.reason``).
REASON = ("narrowed by squeeze() at {where}, which removes this axis at size 1 only (the file keeps it; "
          "squeeze the axes meant, squeeze(-1), to keep size 1)")


@contextlib.contextmanager
def watching_squeezes(found: dict, enabled: bool = True):
    """While active, ``Tensor.squeeze`` and ``torch.squeeze`` called by the model's code on a
    tensor with an input's dynamic size that may be 1, along an axis they would remove at 1,
    record ``found[source] = SourceLocation`` (the first such call per size; ``source`` names the
    input size, ``L['x'].size()[1]``, one entry for each input that shares it). fxport's own
    squeezes (its indexing helpers) and torch's are not the model's: only a direct call from the
    model's code counts."""
    if not enabled:
        yield found
        return
    owned = "squeeze" in torch.Tensor.__dict__
    method, function = torch.Tensor.squeeze, torch.squeeze

    @functools.wraps(method)
    def tensor_squeeze(self, *args, **kwargs):
        if is_model_file(sys._getframe(1).f_code.co_filename):
            _note(found, self, args, kwargs)
        return method(self, *args, **kwargs)

    @functools.wraps(function)
    def torch_squeeze(input, *args, **kwargs):
        if is_model_file(sys._getframe(1).f_code.co_filename):
            _note(found, input, args, kwargs)
        return function(input, *args, **kwargs)

    torch.Tensor.squeeze, torch.squeeze = tensor_squeeze, torch_squeeze
    try:
        yield found
    finally:
        torch.squeeze = function
        if owned:
            torch.Tensor.squeeze = method
        else:
            del torch.Tensor.squeeze


def _note(found: dict, tensor: Any, args: tuple, kwargs: dict) -> None:
    if not isinstance(tensor, torch.Tensor) or not any(isinstance(s, torch.SymInt) for s in tensor.shape):
        return
    for axis in _axes(tensor.dim(), args, kwargs):
        size = tensor.shape[axis]
        sources = _may_be_one(size)
        if not sources or all(source in found for source in sources):
            continue
        where = traced_user_frame()
        if where is not None:
            for source in sources:
                found.setdefault(source, where)


def _axes(rank: int, args: tuple, kwargs: dict) -> list[int]:
    dim = args[0] if args else kwargs.get("dim")
    if dim is None:
        return list(range(rank))
    dims = dim if isinstance(dim, (list, tuple)) else (dim,)
    if not all(isinstance(d, int) for d in dims) or rank == 0:
        return []  # a named dimension or a 0-d tensor: torch's own error, or nothing to remove
    return [d % rank for d in dims if -rank <= d < rank]


def _may_be_one(size: Any) -> list[str]:
    """The input sizes ``size`` stands for (``L['x'].size()[1]``), when it is an input's dynamic
    size whose range holds 1; else none."""
    if not isinstance(size, torch.SymInt):
        return []
    node = size.node
    expr, shape_env = node.expr, getattr(node, "shape_env", None)
    if shape_env is None or not getattr(expr, "is_Symbol", False) or not shape_env.var_to_sources.get(expr):
        return []
    value_range = shape_env.var_to_range.get(expr)
    if value_range is None or not (value_range.lower <= 1 <= value_range.upper):
        return []
    return [source_name(source) for source in shape_env.var_to_sources[expr]]


def squeezed_at(found: dict, size: torch.SymInt):
    """Where the model squeezed the input size ``size`` (a size of the captured program's inputs),
    or None. The names are those of every input size it stands for, also of the sizes torch
    replaced by it (``L['x'].size()[1]`` once ``x`` and ``target`` share their ``L``)."""
    if not found:
        return None
    node = size.node
    shape_env, expr = node.shape_env, node.expr
    symbols = [expr] + [symbol for symbol, replaced in shape_env.replacements.items() if replaced == expr]
    names = [source_name(source) for symbol in symbols for source in shape_env.var_to_sources.get(symbol, ())]
    return next((found[name] for name in names if name in found), None)
