"""``float(t)`` and ``t.tolist()``: numbers read from tensors inside converted code.

Python's ``float(t)`` on a traced tensor reads the value (``.item()``) and then guards on it,
which fails inside a ``cond`` branch or a ``while_loop`` body (and in a branch run for
``where``). Inside converted code the number stays symbolic instead: ``float_`` reads it with
``.item()`` (a SymFloat: a double, as in Python, usable in arithmetic and comparisons, which
become tensor ops), ``float`` of an integer tensor is ``sym_float`` of its ``.item()``. At the
top level of a function (``nested=False``, outside any traced body) ``float(t)`` runs as written,
so top-level behaviour does not change. ``int(t)`` is :func:`~fxport.controlflow.operators.loops.statements.int_`.

``t.data`` inside converted code is ``t.detach()`` while exporting (the same values; ``.data`` of a
tensor traced into a loop body is a tensor the body's tracer does not know, which export then
fails on as a "fake tensor in the constants"). ``t.numpy()`` of a tensor being exported is
refused in one line at the user's line; ``int(t.numpy())``, ``float(t.numpy())``,
``t.numpy().item()`` and ``t.numpy().tolist()`` read the number from ``t`` itself.

Example::

    >>> import torch
    >>> from fxport.controlflow.operators.numbers import float_, tolist
    >>> float_(torch.tensor(3)), float_(2), tolist(torch.tensor(2.5)), tolist(torch.tensor([1, 2]))
    (3.0, 2.0, 2.5, [1, 2])
"""

from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from fxport.controlflow.operators.state import in_traced_body
from fxport.controlflow.operators.values import is_symbolic, is_traced
from fxport.controlflow.operators.failures import refuse_here


def float_(value, nested: bool = True):
    """``float(value)``; a traced one-element tensor in converted code gives a SymFloat, no guard."""
    if not (nested or in_traced_body()):  # the function's top level: as written
        return float(value)
    if is_symbolic(value):  # float(t.item()) / float(n) of a traced number: no guard on its value
        return value if isinstance(value, (float, torch.SymFloat)) else torch.sym_float(value)
    if not _reads_symbolically(value):
        return float(value)
    number = value.reshape(()).item()
    return number if value.dtype.is_floating_point else torch.sym_float(number)


def tolist(value, nested: bool = True):
    """``value.tolist()``; a traced 0-d tensor in converted code gives its number without a guard."""
    if isinstance(value, torch.Tensor) and value.dim() == 0 and (nested or in_traced_body()) and _reads_symbolically(value):
        return value.item()
    return value.tolist()


def _reads_symbolically(value) -> bool:
    """A traced one-element real tensor."""
    return (
        isinstance(value, torch.Tensor)
        and is_traced(value)
        and statically_known_true(value.numel() == 1)
        and not value.is_complex()
    )


def data_(value, nested: bool = True):
    """``value.data``; a traced tensor in converted code gives ``value.detach()`` (same values)."""
    if isinstance(value, torch.Tensor) and is_traced(value) and (nested or in_traced_body()):
        return value.detach()
    return value.data


def numpy_(value):
    """``value.numpy()``: refused in one line for a tensor being exported (the file cannot hold a
    numpy array); as written otherwise."""
    if isinstance(value, torch.Tensor) and is_traced(value):
        refuse_here(".numpy() of a tensor being exported: an ONNX file computes with tensors only, and the numpy "
                    "array would be read once, while exporting",
                    "compute with the tensor (drop .numpy(); int(t.numpy()) reads the number from t itself)")
    return value.numpy()


def without_numpy(value):
    """The tensor under ``t.numpy()`` read as a number (``int(t.numpy())``): ``t`` itself while
    exporting, where Python reads the same number from either; the array otherwise."""
    if isinstance(value, torch.Tensor) and is_traced(value):
        return value
    return value.numpy()
