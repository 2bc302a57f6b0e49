"""Shapes as fxport writes and reads them; imports nothing (the CLI formats shapes at start-up).

Two spellings: the command line's ``2x3`` (``scalar`` for a 0-d tensor), read by ``-i
x=2x3`` and shown in the verification table; and the typed ``f32[2, 3]`` / ``float32[batch,
3]`` of graph and ONNX diffs.

Example::

    >>> parse_shape("1x3x224x224"), parse_shape("scalar")
    ((1, 3, 224, 224), ())
    >>> shape_text((2, 3)), shape_text(())
    ('2x3', 'scalar')
    >>> typed_shape("f32", [2, "batch"])
    'f32[2, batch]'
"""

from __future__ import annotations

from typing import Iterable

#: What ``-i NAME=SHAPE`` accepts for a 0-d tensor.
SCALAR_SPELLINGS = ("scalar", "()", "[]")


def parse_shape(text: str) -> tuple[int, ...]:
    """``"2x3"`` → ``(2, 3)``; ``"scalar"`` → ``()``. ValueError for anything else (negative sizes too)."""
    if text in SCALAR_SPELLINGS:
        return ()
    try:
        shape = tuple(int(d) for d in text.lower().split("x"))
    except ValueError:
        shape = ()
    if not shape or any(d < 0 for d in shape):
        raise ValueError(f"bad shape {text!r}")
    return shape


def shape_text(shape: Iterable[int]) -> str:
    """``(2, 3)`` → ``"2x3"``; ``()`` → ``"scalar"`` (what :func:`parse_shape` reads back)."""
    return "x".join(map(str, shape)) or "scalar"


def typed_shape(dtype: str, dims: Iterable[object]) -> str:
    """``("f32", [2, 3])`` → ``"f32[2, 3]"``: a value's type as the diffs show it."""
    return f"{dtype}[{', '.join(map(str, dims))}]"
