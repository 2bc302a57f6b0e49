"""Where the model narrows the range of an input size while it is traced: the first narrowing
(``x.shape[0] >= 2`` from a broadcast) and the one that leaves a single value (``[w] * n``
building a list of ``n`` items), each at the user's line, which torch's messages do not name.

Example::

    >>> with watch_range_narrowing() as narrowed_at:  # doctest: +SKIP
    ...     torch.export.export(model, args, dynamic_shapes=spec)
    >>> narrowed_at.pinned                            # doctest: +SKIP
    {("L['x'].size()[0]",): SourceLocation('model.py', 12, 'maxmul')}
"""

from __future__ import annotations

import contextlib
from typing import Any

from fxport.capture.failures import traced_user_frame
from fxport.capture.sources import source_name


class RangeNarrowings(dict):
    """:func:`symbol_key` → SourceLocation of the first narrowing of that size's range; ``pinned``:
    the same keys → the narrowing that left one value, the line a "specialises dynamic dimension"
    error names (it may come many lines after the first narrowing)."""

    def __init__(self):
        super().__init__()
        self.pinned: dict = {}


@contextlib.contextmanager
def watch_range_narrowing():
    """Collect where a size symbol's range is narrowed while the model is traced.

    Yields a :class:`RangeNarrowings` of the first narrowing with a frame of the user's code
    inside the traced call (torch keeps only its own frame for the range; the user's line is what
    a message needs), and of the narrowing to a single value. Keys name the input size
    (``L['x'].size()[0]``), so a narrowing seen in a failed attempt still locates the range of the
    one that succeeds.
    """
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    found = RangeNarrowings()
    original = ShapeEnv._update_var_to_range

    def update(self, symbol, vr, vr_sloc=None, **kwargs):
        before = self.var_to_range.get(symbol)
        original(self, symbol, vr, vr_sloc, **kwargs)
        after = self.var_to_range.get(symbol)
        if before is None or after == before:
            return
        key = symbol_key(self, symbol)
        pins = after is not None and after.is_singleton() and key not in found.pinned
        if key not in found or pins:
            where = traced_user_frame()
            if where is not None:
                found.setdefault(key, where)
                if pins:
                    found.pinned[key] = where

    ShapeEnv._update_var_to_range = update
    try:
        yield found
    finally:
        ShapeEnv._update_var_to_range = original


def symbol_key(shape_env, symbol) -> Any:
    """The input sizes a size symbol stands for (``("L['x'].size()[0]",)``), else the symbol."""
    sources = getattr(shape_env, "var_to_sources", {}).get(symbol)
    return tuple(sorted(source_name(source) for source in sources)) if sources else (id(shape_env), symbol)
