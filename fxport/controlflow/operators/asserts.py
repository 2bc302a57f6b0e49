"""``assert test, message``: Python's assert for Python values; refused on a tensor being exported.

ONNX has no operator that stops a run with a message, and the dynamo exporter drops torch's own
runtime asserts (``aten._assert_async`` leaves no node in the file), so a check on a tensor's
value cannot be kept in the ONNX file. Rather than drop it silently, fxport refuses it at the
assert's line (docs/control-flow.md, "assert"). A size known only at run time (a SymBool of a
number read from data) is a ``torch._check``, left out of the file the same way. A condition
that is a Python value, or a size (a SymBool torch.export guards on), runs as Python runs it, and so does every assert when the
model runs eagerly (verification, coverage). ``--disable assert-on-tensor`` leaves tensor asserts
as written: capture then fails on them as it does without fxport.

Example::

    >>> assert_stmt(2 > 1, lambda: "never built", None)
    >>> assert_stmt(1 > 2, lambda: "one is not above two", None)
    Traceback (most recent call last):
    ...
    AssertionError: one is not above two
"""

from __future__ import annotations

from typing import Callable

import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from fxport.controlflow.operators.failures import fail
from fxport.controlflow.operators.rule_names import rule_name
from fxport.controlflow.operators.left_out import key_of, mark
from fxport.controlflow.operators.state import is_disabled
from fxport.controlflow.operators.values import is_traced


def assert_stmt(test, message: Callable[[], object] | None, info) -> None:
    """``assert test, message()`` (the message is built only when the assert fails, as in Python)."""
    if isinstance(test, torch.Tensor) and is_traced(test):
        _left_out(info, "assert", "assert on a tensor's value cannot be kept in the ONNX file")
        return
    if isinstance(test, torch.SymBool) and free_unbacked_symbols(test):
        # a size known only at run time (a branch picked a window of a tensor, a mask kept rows):
        # torch takes the assert as a fact about that size, and the file cannot check it either
        torch._check(test, lambda: str(message()) if message is not None else "assert")
        _left_out(info, "assert", "assert on a size known only at run time cannot be kept in the ONNX file")
        return
    if not test:
        raise AssertionError(message()) if message is not None else AssertionError()


def raise_if(test, exception: Callable[[], object], info, *, negate: bool = False) -> None:
    """``if test: raise exception()`` (``if not test`` with ``negate``): a branch that only raises
    (:mod:`fxport.controlflow.converters.raising_branches`). Example::

        >>> raise_if(1 > 2, lambda: ValueError("never"), None)
        >>> raise_if(1 > 2, lambda: ValueError("one is not above two"), None, negate=True)
        Traceback (most recent call last):
        ...
        ValueError: one is not above two
    """
    if isinstance(test, torch.Tensor) and is_traced(test):
        _left_out(info, "raise", "a raise under a tensor's value cannot be kept in the ONNX file")
        return
    if (not test) if negate else test:
        raise exception()


def _left_out(info, construct: str, refusal: str) -> None:
    """Leave the check out of the file with its marker (:mod:`~fxport.controlflow.operators.left_out`:
    the conversion's warning at its line), or refuse it there when the user disabled that."""
    rule = rule_name(construct, "dropped")
    key = key_of(info)
    if is_disabled(rule) or key is None:
        why = f"--disable {rule} asked for this refusal" if is_disabled(rule) else "the statement was not registered"
        fail(f"{refusal} (ONNX has no operator that stops a run, and the exporter drops torch's runtime asserts)",
             info, f"check the inputs before calling the model, or test a Python value such as a shape ({why})")
    mark(key)
