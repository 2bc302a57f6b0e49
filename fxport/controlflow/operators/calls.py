"""Call sites in converted code: ``f(x)`` runs the converted version of a user function.

The converter itself lives on the compiler side; it registers itself with
:func:`use_converter`, so these operators import nothing from it. :data:`CONVERTED` caches
``original function → converted function`` (``None``: not user code, called as is).

Example::

    >>> from fxport.controlflow.operators.calls import call
    >>> call(len)([1, 2])                    # not user code: called as is
    2
"""

from __future__ import annotations

import builtins

import functools
import types
from typing import Callable

import torch

from fxport.controlflow.operators.values import is_traced

#: original function → converted function (None: not user code, left alone)
CONVERTED: dict[Callable, Callable | None] = {}
_CONVERTER: list[Callable] = []


def use_converter(converter: Callable[[Callable], Callable | None]) -> None:
    """Convert user functions met at call sites with ``converter`` (``fn → converted or None``)."""
    _CONVERTER[:] = [converter]


def call(f):
    """The converted version of a user function/method ``f`` (lazily), else ``f`` itself."""
    if isinstance(f, types.MethodType):
        converted = _lookup(f.__func__)
        # functools.partial rather than MethodType: dynamo traces partial, not method construction
        return functools.partial(converted, f.__self__) if converted is not None else f
    if isinstance(f, types.FunctionType):
        converted = _lookup(f)
        return converted if converted is not None else f
    if isinstance(f, functools.partial) and isinstance(f.func, (types.FunctionType, types.MethodType)):
        inner = call(f.func)
        return f if inner is f.func else functools.partial(inner, *f.args, **f.keywords)
    return f


def _lookup(fn):
    if fn in CONVERTED:
        return CONVERTED[fn]
    if torch.compiler.is_dynamo_compiling() or not _CONVERTER:
        return None
    return _CONVERTER[0](fn)


def _same_shape(a: torch.Tensor, b: torch.Tensor):
    """True/False where the shapes are known equal or different, else None (sizes only known at run time)."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    if a.dim() != b.dim():
        return False
    if all(statically_known_true(x == y) for x, y in zip(a.shape, b.shape)):
        return True
    if any(statically_known_true(x != y) for x, y in zip(a.shape, b.shape)):
        return False
    return None


def equal(a, b):
    """``torch.equal(a, b)`` in converted code: while exporting, a 0-d bool tensor (the same
    answer, kept a tensor so that ``if``/``while`` on it converts instead of guarding)."""
    if not (is_traced(a) and is_traced(b)):
        return torch.equal(a, b)
    same = _same_shape(a, b)
    if same is None:
        return torch.equal(a, b)  # torch says where the sizes must be known
    return (a == b).all() if same else torch.zeros((), dtype=torch.bool)


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``torch.allclose(a, b, ...)`` in converted code: a 0-d bool tensor while exporting."""
    if not (is_traced(a) and is_traced(b)) or _same_shape(a, b) is not True:
        return torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    return torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan).all()


def all_(values):
    """The builtin ``all(values)``: of a traced tensor whose rows hold one value each, a 0-d bool
    tensor (the same answer; ``if all(lens.le(t)): break`` converts instead of guarding).

    >>> all_(torch.tensor([1, 2])), all_([1, 0])     # eagerly: the builtin's answer
    (True, False)
    """
    if _rows_of_one_value(values):
        return values.reshape(values.shape[0]).bool().all()
    return builtins.all(values)


def any_(values):
    """The builtin ``any(values)``: a 0-d bool tensor for a traced tensor, as :func:`all_`."""
    if _rows_of_one_value(values):
        return values.reshape(values.shape[0]).bool().any()
    return builtins.any(values)


def _rows_of_one_value(values) -> bool:
    """A tensor of rank ≥ 1 whose rows each hold one element (eager takes ``bool`` of each row)."""
    return (isinstance(values, torch.Tensor) and values.dim() >= 1
            and all(size == 1 for size in values.shape[1:]) and (is_traced(values) or torch.compiler.is_exporting()))


def print_(arguments: Callable[[], tuple]) -> None:
    """``print(...)`` inside a converted branch or loop body: printed when the code runs eagerly,
    left out while exporting (an ONNX file cannot print; its outputs are the same either way).
    ``arguments`` builds ``(args, kwargs)`` only when printing, so formatting a traced tensor never
    reads its value."""
    if torch.compiler.is_exporting() or torch.compiler.is_dynamo_compiling():
        return None
    args, kwargs = arguments()
    print(*args, **kwargs)
    return None
