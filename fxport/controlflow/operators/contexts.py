"""``_fx.context``: a context manager used inside a branch or loop body fxport may trace.

The ``with`` converter (:mod:`fxport.controlflow.converters.with_statements`) wraps context
managers it does not know to be harmless. When the body runs as Python (eager, or a branch on
a Python value) the manager is returned unchanged; when torch traces the body for
``torch.cond``/``while_loop`` its ``__enter__``/``__exit__`` would run once at trace time and
not in the ONNX model, so that is refused in one line at the ``with``.

Example::

    >>> import contextlib
    >>> from fxport.controlflow.operators.contexts import context
    >>> cm = contextlib.suppress(KeyError)
    >>> context(cm, "contextlib.suppress(KeyError)", "m.py", 3, "forward") is cm
    True
"""

from __future__ import annotations

import torch

from fxport.controlflow.operators.failures import FailureInTracedBody
from fxport.controlflow.operators.state import in_traced_body
from fxport.errors import ControlFlowError, SourceLocation

_HINT = "move the with block out of the branch or loop body, or make the condition a Python value"


def context(manager, text: str, filename: str, lineno: int, function: str):
    """``manager``, or a ControlFlowError at the ``with`` when the body is being traced."""
    if not in_traced_body():
        return manager
    what = (f"with {text} inside a branch or loop body on a tensor condition cannot be converted: "
            "its enter/exit would run once while tracing, not in the ONNX model")
    if torch.compiler.is_dynamo_compiling():
        raise FailureInTracedBody(what, filename, lineno, function, _HINT)
    raise ControlFlowError(what, where=SourceLocation(filename, lineno, function), hint=_HINT)
