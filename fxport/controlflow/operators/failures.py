"""Refusals raised by the operators, also from inside a body dynamo traces.

Dynamo cannot build fxport's :class:`~fxport.errors.ControlFlowError` inside a cond branch or
while_loop body, and it reports an exception raised there only by its repr. :func:`fail`
therefore raises :class:`FailureInTracedBody` with the error's parts as constant arguments
there, and :func:`find_error` reads them back from whatever torch raises around it.

Example::

    >>> from fxport.controlflow.operators.failures import FailureInTracedBody, find_error
    >>> wrapped = RuntimeError("raised exception FailureInTracedBody('x is bad', 'm.py', 3, 'forward', 'fix x')")
    >>> str(find_error(wrapped))
    'x is bad at m.py:3; fix x'
"""

from __future__ import annotations

import ast
import re

import torch

from fxport.errors import ControlFlowError, SourceLocation


class FailureInTracedBody(Exception):
    """A :class:`ControlFlowError` raised inside a body dynamo traces (a cond branch)."""


def fail(what: str, info, hint: str, values_differ: bool = False):
    """Raise the ControlFlowError ``what`` located at the statement ``info`` (see module doc).
    ``values_differ``: the refusal of an ``if`` whose sides give values of another structure or
    rank, which no graph holds together; the error says so in ``values_differ_at`` (``info``),
    read where a size test may leave one side out (operators/size_zero_sides.py)."""
    where = info.location if info is not None else None
    if torch.compiler.is_dynamo_compiling():
        parts = (where.filename, where.lineno, where.function) if where is not None else (None, None, None)
        raise FailureInTracedBody(what, *parts, hint)
    error = ControlFlowError(what, where=where, hint=hint)
    if values_differ:
        error.values_differ_at = info
    raise error


def refuse_here(what: str, hint: str):
    """Raise the ControlFlowError ``what`` at the innermost user line: read from the stack, or,
    inside a body dynamo traces (no frame can be read there), from torch's report of it."""
    if torch.compiler.is_dynamo_compiling():
        fail(what, None, hint)
    from fxport.common.frames import here

    raise ControlFlowError(what, where=here(), hint=hint)


def check_side_effects(info, construct: str) -> None:
    """Refuse a traced statement whose body has an effect the converter cannot carry."""
    if info is not None and info.side_effects:
        fail(f"{construct} on a tensor condition has a side effect the converter cannot carry "
             f"({info.side_effects[0]})", info,
             "move the side effect out of the branch or make the condition a Python value")


_TRACED_FAILURE = re.compile(r"raised exception FailureInTracedBody(\(.*\))")


def _failure_from_text(text: str) -> ControlFlowError | None:
    """The ControlFlowError a traced body raised, read back from dynamo's report of it."""
    match = _TRACED_FAILURE.search(text)
    if match is None:
        return None
    try:
        return _error_from_parts(*ast.literal_eval(match.group(1)))
    except (ValueError, SyntaxError, TypeError):
        return None


def _error_from_parts(what: str, filename, lineno, function, hint) -> ControlFlowError:
    """The ControlFlowError whose parts :func:`fail` raised as ``FailureInTracedBody`` args."""
    where = SourceLocation(filename, lineno, function) if filename is not None else None
    return ControlFlowError(what, where=where, hint=hint)


def find_error(exc: BaseException) -> ControlFlowError | None:
    """The operators' own error inside what torch raised while tracing a body, if any; one
    raised without a statement is located at the innermost user line torch's report names."""
    error = _own_error(exc)
    if error is not None and error.where is None:
        from fxport.common.frames import user_location_in

        error.where = user_location_in(str(exc))
    return error


def _own_error(exc: BaseException) -> ControlFlowError | None:
    seen = set()
    todo = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ControlFlowError):
            return current
        if isinstance(current, FailureInTracedBody):
            return _error_from_parts(*current.args)
        from_text = _failure_from_text(str(current))
        if from_text is not None:
            return from_text
        todo.extend([current.__cause__, current.__context__])
        for arg in getattr(current, "args", ()):
            if isinstance(arg, BaseException):
                todo.append(arg)
    return None


def writes_an_input(exc: BaseException) -> bool:
    """torch refused a cond branch or while_loop body that writes in place a value from outside it
    (a function it calls writes an attribute, a buffer or a variable the statement does not carry).

    >>> writes_an_input(RuntimeError("Higher order ops do not support input mutation."))
    True
    """
    seen, todo = set(), [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if "do not support input mutation" in str(current):
            return True
        todo.extend([current.__cause__, current.__context__])
    return False
