"""Sizes 0 and 1 that verification checked: a dimension exported for 2..inf is valid down to them.

When the size-oblivious capture fails, the model is captured from its example grown to size 2
along dynamic dimensions, and torch.export makes the program valid for sizes of at least 2
only (its 0/1 specialisation); the capture warns that the dimension is narrowed and the ONNX
metadata records ``[2, null]``. Verification runs the file at the sizes below that bound anyway
(``size[batch=0] outside exported 2..inf``). When every size the declared range allows below the
bound passed (or eager PyTorch itself rejects it: the model does not run there), no size of
the declared range is left unchecked, so the range is widened back to the declared one: the
warning is dropped and the metadata records the declared range.

Example::

    >>> widen_verified_ranges(None, [], [])      # nothing captured, nothing to widen
    []
"""

from __future__ import annotations

from fxport.capture.dynamic_dims import _RANGES_KEY, _user_input_values, narrowing_notes, record_dynamic_ranges

#: the exported lower bound that torch.export's 0/1 specialisation gives
_SPECIALISED_LOW = 2


def widen_verified_ranges(program, rows, warnings: list[str], onnx_model=None) -> list[str]:
    """Widen each dimension narrowed to ``2..`` whose sizes below 2 all passed in ``rows``; the
    narrowing warnings of ``program`` in ``warnings`` are replaced by what is left, and
    ``onnx_model``'s range metadata is written again. Returns the widened dimensions' names."""
    if program is None:
        return []
    before = {grown: narrowing_notes(program, grown) for grown in (False, True)}
    widened = []
    for index, node, _ in _user_input_values(program):
        for axis, stored in node.meta.get(_RANGES_KEY, {}).items():
            declared_low = stored["declared"][0]
            if stored["low"] != _SPECIALISED_LOW or declared_low >= _SPECIALISED_LOW:
                continue
            if all(_checked(rows, index, axis, size) for size in range(declared_low, _SPECIALISED_LOW)):
                stored.update(low=declared_low, where=None, reason=None if stored["high"] == stored["declared"][1]
                              else stored["reason"])
                widened.append(stored["name"])
    if widened:
        for grown, notes in before.items():
            if any(note in warnings for note in notes):
                after = narrowing_notes(program, grown)
                warnings[:] = [w for w in warnings if w not in notes] + [n for n in after if n not in warnings]
        if onnx_model is not None:
            record_dynamic_ranges(onnx_model, program)
    return widened


def _checked(rows, index: int, axis: int, size: int) -> bool:
    """Whether a row at ``size`` along input ``index``'s ``axis`` passed, or eager rejected it."""
    for row in rows:
        shapes = row.input_shapes
        if index >= len(shapes) or axis >= len(shapes[index]) or shapes[index][axis] != size:
            continue
        note = row.note or ""
        if row.passed and (not note.startswith("skipped") or "eager rejects" in note):
            return True
    return False
