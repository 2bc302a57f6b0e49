"""``if boxes.numel() == 0: return keep`` beside ``return keep, count``: a side taken only at size 0.

An early return for empty inputs often gives another structure or rank than the function's other
return (amdegroot/ssd.pytorch's ``nms`` returns ``keep`` for no boxes and ``keep, count`` after
its loop; mmtracking returns ``img.new_zeros((0,))`` beside a 4-d ``torch.cat``). No graph
computes a value whose structure or rank depends on a size, so that ``if`` is refused. Where its
test is true only at size 0 of dimensions the user declared dynamic (``x.numel() == 0``,
``len(x) == 0``, ``x.size(0) < 1``, the else of ``x.shape[0] > 0``), dropping the size-0 side is
exact over sizes of at least 1: there the side is never taken. :func:`marked` tags the refusal
with those dimensions (``size_zero_dims``), and the capture exports again with each of them from
1 (fxport/capture/size_zero_branches.py), where the test is a plain ``False`` and the ``if``
is Python's; the narrowing is a warning at the ``if`` and the range in the ONNX metadata.

A size read from data (a filtered count, ``nonzero()``'s rows) is no declared dimension: its
``if`` stays refused with the message it had.

Example::

    >>> from fxport.errors import ControlFlowError
    >>> err = marked(ControlFlowError("if: ..."), None, (("n",), ("L['x'].size()[0]",)))
    >>> err.size_zero_dims
    ()
"""

from __future__ import annotations

import contextlib

import torch

from fxport.controlflow.operators.size_tests import zero_only_side


#: the input sizes (``L['x'].size()[0]``) the capture running now exports without size 0
_EXCLUDED: list[frozenset] = []


@contextlib.contextmanager
def sizes_without_zero(sources):
    """While active, an ``if`` that only size 0 of these input sizes takes runs its other side
    (:func:`side_kept`): the capture exports them from 1 (a ``Dim.DYNAMIC`` hint's ``min`` does
    not reach the trace, so the test would not be decided otherwise)."""
    _EXCLUDED.append(frozenset(sources))
    try:
        yield
    finally:
        _EXCLUDED.pop()


def side_kept(pred) -> bool | None:
    """The side of ``pred`` taken wherever the input sizes the capture excludes 0 of
    (:func:`sizes_without_zero`) are at least 1, when its other side is taken only at size 0 of
    them; None otherwise."""
    if not _EXCLUDED or not _EXCLUDED[-1]:
        return None
    found, sources = _zero_side_sources(pred)
    if found is None or not all(names & _EXCLUDED[-1] for names in sources):
        return None
    return not found[1]


def zero_side_dims(pred) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(dimension names, input sizes)`` of the declared dimensions whose size 0 alone takes a
    side of ``pred`` (a size test, before ``predicate()`` copies it): every symbol of the tested
    size must be an input size the user declared dynamic whose range starts at 0. ``((), ())``
    otherwise (a size read from data, a size other than a product of symbols, a test true at
    sizes above 0 too)."""
    found, sources = _zero_side_sources(pred)
    shape_env = _shape_env(pred)
    if found is None or shape_env is None:
        return (), ()
    names = []
    for symbol in found[0]:
        name = _declared_name(shape_env, symbol)
        value_range = shape_env.var_to_range.get(symbol)
        if name is None or value_range is None or value_range.lower != 0:
            return (), ()
        names.append(name)
    return tuple(sorted(set(names))), tuple(sorted(set().union(*sources)))


def _zero_side_sources(pred):
    """``(zero_only_side(pred), [the input sizes each of its symbols stands for])``; ``(None, [])``
    where a symbol stands for none (a size read from data)."""
    found = zero_only_side(pred)
    shape_env = _shape_env(pred)
    if found is None or shape_env is None:
        return None, []
    sources = [frozenset(source.name for source in getattr(shape_env, "var_to_sources", {}).get(symbol, ()))
               for symbol in found[0]]
    if not all(sources):
        return None, []
    return found, sources


def marked(error, info, dims: tuple[tuple[str, ...], tuple[str, ...]]):
    """``error`` tagged with ``dims`` (:func:`zero_side_dims`: ``size_zero_dims``,
    ``size_zero_sources``) when it refuses values of another structure or rank on the two sides
    of the ``if`` ``info`` itself (:func:`~.failures.fail`'s ``values_differ``), not of a
    statement inside a side; ``error`` as it was otherwise."""
    names, sources = dims
    if names and info is not None and getattr(error, "values_differ_at", None) is info \
            and not getattr(error, "size_zero_dims", ()):
        error.size_zero_dims, error.size_zero_sources = names, sources
    return error


def _shape_env(pred):
    if isinstance(pred, (torch.SymBool, torch.SymInt)):
        return pred.node.shape_env
    fake_mode = getattr(pred, "fake_mode", None)
    return getattr(fake_mode, "shape_env", None)


def _declared_name(shape_env, symbol) -> str | None:
    """The Dim name of the input size ``symbol`` is, where the capture declared it (torch names
    exactly those in ``source_name_to_debug_name``); None for any other symbol."""
    debug_names = getattr(shape_env, "source_name_to_debug_name", {})
    for source in getattr(shape_env, "var_to_sources", {}).get(symbol, ()):
        name = debug_names.get(source.name)
        if name is not None:
            return name
    return None
