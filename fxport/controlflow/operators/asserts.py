"""``assert test, message``: Python's assert for Python values; refused on a tensor being exported.

ONNX has no operator that stops a run with a message, and the dynamo exporter drops torch's own
runtime asserts (``aten._assert_async`` leaves no node in the file), so a check on a tensor's
value cannot be kept in the ONNX file. Rather than drop it silently, fxport refuses it at the
assert's line (docs/control-flow.md, "assert"). A condition that is a Python value, or a size
(a SymBool torch.export guards on), runs as Python runs it, and so does every assert when the
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

from fxport.controlflow.operators.failures import fail
from fxport.controlflow.operators.rule_names import rule_name
from fxport.controlflow.operators.state import is_disabled, record, was_recorded
from fxport.controlflow.operators.values import is_traced


def assert_stmt(test, message: Callable[[], object] | None, info) -> None:
    """``assert test, message()`` (the message is built only when the assert fails, as in Python)."""
    if isinstance(test, torch.Tensor) and is_traced(test):
        rule, detail = rule_name("assert", "dropped"), "checked in PyTorch only: the ONNX file has no operator that stops a run"
        unwarned = torch.compiler.is_dynamo_compiling() and not was_recorded(info, rule, detail)
        if is_disabled(rule) or unwarned:  # a body dynamo traces cannot record the warning: refuse
            why = ("--disable assert-on-tensor asked for this refusal" if is_disabled(rule) else
                   "here it sits in a body torch traces, where fxport cannot record the warning it owes you")
            fail("assert on a tensor's value cannot be kept in the ONNX file (ONNX has no operator that "
                 "stops a run, and the exporter drops torch's runtime asserts)", info,
                 f"check the inputs before calling the model, or assert on a Python value such as a shape ({why})")
        record(info, rule, detail, while_probing=True)
        return
    if not test:
        raise AssertionError(message()) if message is not None else AssertionError()
