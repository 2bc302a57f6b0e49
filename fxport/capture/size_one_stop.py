"""A size-oblivious capture that pins a dimension to size 1, found when torch adds the guard.

The first capture runs with torch's ``backed_size_oblivious`` (docs/architecture.md, "Dynamic
sizes"). When the model takes a path only size 1 takes (vit's attention views a transposed
``(seq, batch, dim)`` input as ``(seq * batch, dim)``, which only batch 1 allows), torch adds a
guard such as ``batch == 1`` and reports it only once the whole trace ends. No bound or hint can
make that capture pass, so :func:`stopping_at_size_one_guards` stops it at the guard: one trace
of the model less before the capture from the grown example (vit_b_16: about a second).

Example::

    >>> specialises_size_one(RuntimeError("Not all values of b = L['x'].size()[0] in the specified "
    ...                                   "range satisfy the generated guard L['x'].size()[0] <= 1."))
    True
"""

from __future__ import annotations

import contextlib
from typing import Any

import sympy
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils._sympy.printers import PythonPrinter

from fxport.capture.failures import guards_at_sizes


class SizeOneGuard(RuntimeError):
    """A size-oblivious capture stopped at a guard that holds at size 1 and not at 2; worded
    like torch's constraint violation, so that every reader of that message reads this one."""


class _Stop(BaseException):
    """The stop inside torch's trace: not an ``Exception``, so that no ``except Exception`` in
    the model or in torch takes it for a failure to recover from (torch would have kept the guard
    and failed at the end of the trace all the same); :class:`SizeOneGuard` once out of it."""


#: The sizes above 1 a guard must fail at to pin its dimension to size 1: ``batch == 1`` fails at
#: each, ``frames - 1 != 1`` (torch's 0/1 specialisation of the size ``frames - 1``: a broadcast
#: from a size that may be 1) fails at 2 only; the file computes the general case there too.
PINNED_AWAY = (2, 3, 17)


def pins_to_size_one(at_sizes) -> bool:
    """Whether a guard that holds (True/False per size) as given at 1 and :data:`PINNED_AWAY`
    pins its dimension to 1: holds at 1, fails at every one of the others.

    >>> pins_to_size_one((True, False, False, False)), pins_to_size_one((True, False, True, True))
    (True, False)
    """
    at_one, *above = at_sizes
    return at_one is True and all(at is False for at in above)


def specialises_size_one(exc) -> bool:
    """Whether a size-oblivious capture failed on a guard that holds at size 1 but not above
    (``batch <= 1``: convnext's and vit's size-1 example took a path only size 1 takes): no
    bound or hint makes that capture pass, only the capture from the grown example can. A guard
    that excludes size 2 alone (``frames - 1 != 1``) pins nothing: the capture keeps sizes 0
    and 1 symbolic, and verification runs size 2."""
    return any(pins_to_size_one(at) for _, at in guards_at_sizes(str(exc), 1, *PINNED_AWAY))


@contextlib.contextmanager
def stopping_at_size_one_guards(enabled: bool = True):
    """While active, a guard on one size symbol of a declared dimension that holds at 1 and not
    at 2 or above (:func:`pins_to_size_one`), where the symbol's range holds both 1 and 2, raises
    :class:`SizeOneGuard` at once. Only for captures whose dynamic
    dimensions are all named Dims: a ``Dim.DYNAMIC`` hint lets torch specialise instead. The
    model's own ``except Exception`` does not catch the stop (the guard stands, as in torch)."""
    if not enabled:
        yield
        return
    original = ShapeEnv._log_guard

    def watching(shape_env: ShapeEnv, prefix: str, guard: Any, forcing_spec: bool) -> None:
        original(shape_env, prefix, guard, forcing_spec)
        if prefix == "eval":
            message = _size_one_violation(shape_env, guard)
            if message is not None:
                raise _Stop(message)

    ShapeEnv._log_guard = watching
    try:
        yield
    except _Stop as stop:
        raise SizeOneGuard(str(stop)).with_traceback(stop.__traceback__) from None
    finally:
        ShapeEnv._log_guard = original


def _size_one_violation(shape_env: ShapeEnv, guard: Any) -> str | None:
    """torch's wording of the violation ``guard`` is, or None when it is not a size-1 pin of a
    declared dimension (:func:`declared_dimension_source`)."""
    symbols = getattr(guard, "free_symbols", set())
    if len(symbols) != 1:
        return None
    (symbol,) = symbols
    value_range = shape_env.var_to_range.get(symbol)
    source = declared_dimension_source(shape_env, symbol)
    if value_range is None or source is None or not (value_range.lower <= 1 and value_range.upper >= 2):
        return None
    at_sizes = (guard.xreplace({symbol: sympy.Integer(size)}) for size in (1, *PINNED_AWAY))
    if next(at_sizes) is not sympy.true or any(at is not sympy.false for at in at_sizes):  # lazily: most fail at 1
        return None
    name = shape_env.source_name_to_debug_name[source]
    text = PythonPrinter().doprint(guard).replace(str(symbol), source)
    return f"Not all values of {name} = {source} in the specified range satisfy the generated guard {text}."


def declared_dimension_source(shape_env: ShapeEnv, symbol: Any) -> str | None:
    """The name of the input size ``symbol`` stands for (``L['x'].size()[0]``) where the capture
    declared that size a named Dim, else None.

    Only those sizes are checked against their range when torch.export ends its trace (torch
    names each in ``source_name_to_debug_name``), so only a guard on one of them fails the
    capture. The other symbols of a size-oblivious capture are torch's own: dynamo, tracing a
    ``while_loop`` body or a ``cond`` branch, gives each operand's sizes fresh symbols
    (``L['args'][2][1].size()[0]``), and the control-flow runtime restates a carried ``(1,)``
    there as ``torch._check(s19 == 1)`` (``restore_size_relations``): a guard that holds at 1
    and fails at 2, and pins nothing of the model's inputs. Stopping there threw away a capture
    that would have kept the input sizes 0 and 1 (the forced-alignment backtrack's ``while j >
    0`` lost its no-trip exit at one token)."""
    for source in shape_env.var_to_sources.get(symbol, ()):
        if source.name in shape_env.source_name_to_debug_name:
            return source.name
    return None
