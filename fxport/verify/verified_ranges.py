"""The range verification leaves each dynamic dimension: widened down to the sizes 0 and 1 it
checked, narrowed past an edge size nobody asked for where ONNX Runtime fails.

When the size-oblivious capture fails, the model is captured from its example grown to size 2
along dynamic dimensions, and torch.export makes the program valid for sizes of at least 2
only (its 0/1 specialisation); the capture warns that the dimension is narrowed and the ONNX
metadata records ``[2, null]``. Verification runs the file at the sizes below that bound anyway
(``size[batch=0] outside exported 2..inf``). When every size the declared range allows below the
bound passed (or eager PyTorch itself rejects it: the model does not run there), no size of
the declared range is left unchecked, so the range is widened back to the declared one: the
warning is dropped and the metadata records the declared range. The same holds for any exported
start whose every size below was checked: ``3..`` where torch words its 0/1 specialisation of
``frames - 1`` as ``Dim('frames', min=3)`` (verification runs 0, 1 and 2 below it).

Sizes nobody asked for are not the user's contract. Verification makes up edge sizes (0, 1, 2,
sizes just outside a range torch.export narrowed); where ONNX Runtime fails or crashes only at
such sizes, below every size the user's own input sets have, and every other set passes, the
range is narrowed past them instead of refusing the model (:func:`exclude_failed_edges`): the
rows say so, one warning names the size and ONNX Runtime's words, and the metadata records the
narrowed range (:func:`widen_verified_ranges`). A size the user gave (an input set of it, the
declared minimum ``Dim(min=1)``) still refuses, and so does a wrong value at any size. A
declared minimum of 0 cannot be told from torch's default (``Dim("b")`` has ``min=0`` too):
give an input set of size 0 to require it.

Example::

    >>> widen_verified_ranges(None, [], [])      # nothing captured, nothing to widen
    []
"""

from __future__ import annotations

import dataclasses
import re

from fxport.capture.dynamic_dims import (_RANGES_KEY, UNBOUNDED, _user_input_values, narrowing_notes,
                                         record_dynamic_ranges)
from fxport.verify.inputs.sizes import example_dim_sizes

#: How a row left out by a narrowed range begins: ``skipped: excluded, b narrowed to 1..inf (...)``.
EXCLUDED = "skipped: excluded, "
_EXCLUDED_NOTE = re.compile(r"^skipped: excluded, (\w+) narrowed to (\d+)\.\.\S+ at (\w+=\d+): (.*)$")
#: The row marker verify_model gives a set ONNX Runtime could not run (an error or a crash).
ORT_FAILED = "ONNX Runtime failed"
#: Why a narrowed range's metadata and warning say it was narrowed.
NARROWED_BY_VERIFICATION = "narrowed by verification"


def exclude_failed_edges(rows, sets, user_sets, dynamic_axes, bounds) -> list | None:
    """``rows`` with each failed edge set turned into an excluded row, when every failed row is
    ONNX Runtime failing (an error or a crash, never a wrong value) on an edge set fxport made up
    (``size[...]``, not a declared or exported bound: ``min``/``max``) and a dimension of it can
    start past the failing sizes without losing a size of the user's sets or the declared
    minimum; None when any failure is not of that kind (verification refuses as before). An
    edge set eager itself rejects below every size of the user's sets (GPT-J's generator at batch
    0: "cannot reshape tensor of 0 elements") is left out the same way: not the model's range.

    ``rows[i]`` is ``sets[i]``'s row; ``user_sets`` the caller's sets (the example first).

    >>> import torch
    >>> from fxport.eager.inputs import InputSet
    >>> from fxport.report.result import VerificationRow
    >>> sets = [InputSet((torch.ones(2, 3),), name="example"), InputSet((torch.ones(0, 3),), name="size[b=0]")]
    >>> rows = [VerificationRow("example", [[2, 3]], "CPU", 0, 0, 1, True),
    ...         VerificationRow("size[b=0]", [[0, 3]], "CPU", 0, 0, 1, False, [ORT_FAILED], "ONNX Runtime failed: crashed")]
    >>> exclude_failed_edges(rows, sets, sets[:1], {0: {0: "b"}}, {})[1].note
    'skipped: excluded, b narrowed to 1..inf at b=0: ONNX Runtime failed: crashed'
    """
    failed = [index for index, row in enumerate(rows) if not row.passed]
    user_ids = {id(s) for s in user_sets}
    rejected = [index for index, row in enumerate(rows) if (row.note or "").startswith(_EAGER_REJECTS)
                and id(sets[index]) not in user_ids and sets[index].name.startswith("size[")
                and not _bound_edge(sets[index].name) and "outside exported" not in sets[index].name]
    if not (failed or rejected) or not dynamic_axes:
        return None
    for index in failed:
        if id(sets[index]) in user_ids or rows[index].mismatched_outputs != [ORT_FAILED] \
                or not sets[index].name.startswith("size[") or _bound_edge(sets[index].name):
            return None
    example = example_dim_sizes(user_sets[0], dynamic_axes)
    smallest = {name: min(example_dim_sizes(s, dynamic_axes)[name] for s in user_sets) for name in example}
    declared_low = _declared_lows(dynamic_axes, bounds)
    low: dict[str, int] = {}
    for index in failed:  # a set that changed one dimension says where that one must start
        sizes = example_dim_sizes(sets[index], dynamic_axes)
        changed = [name for name in example if sizes[name] != example[name]]
        if len(changed) == 1:
            name = changed[0]
            size = sizes[name]
            if size >= smallest[name] or (size == declared_low.get(name, 0) and size > 0):
                return None  # a size the user's sets or declared minimum ask for
            low[name] = max(low.get(name, 0), size + 1)
    for index in rejected:  # eager itself raises at a size below every size the user gave: not the model's
        sizes = example_dim_sizes(sets[index], dynamic_axes)
        changed = [name for name in example if sizes[name] != example[name]]
        if len(changed) == 1 and sizes[changed[0]] < smallest[changed[0]] \
                and not (sizes[changed[0]] == declared_low.get(changed[0], 0) and sizes[changed[0]] > 0):
            low[changed[0]] = max(low.get(changed[0], 0), sizes[changed[0]] + 1)
    if not low:
        return None
    for index in failed:  # every failed set must fall outside the narrowed ranges
        sizes = example_dim_sizes(sets[index], dynamic_axes)
        if not any(sizes[name] < start for name, start in low.items()):
            return None
    result = list(rows)
    for index, row in enumerate(rows):
        sizes = example_dim_sizes(sets[index], dynamic_axes)
        outside = [name for name, start in low.items() if sizes[name] < start]
        if (not row.passed or index in rejected) and outside:
            name = outside[0]
            result[index] = dataclasses.replace(
                row, passed=True, mismatched_outputs=[],
                note=f"{EXCLUDED}{name} narrowed to {low[name]}..{_high(name, dynamic_axes, bounds)} "
                     f"at {name}={sizes[name]}: {_reason(row.note)}")
    return result


_EAGER_REJECTS = "skipped: eager rejects"  # a generated set eager raises on (verification.py)


def _reason(note: str | None) -> str:
    """Why a left-out set failed: ONNX Runtime's words, or eager's rejection (``eager rejects ...``)."""
    note = note or ""
    return note[len("skipped: "):] if note.startswith(_EAGER_REJECTS) else note


def _bound_edge(name: str) -> bool:
    """A set at a declared or exported bound (``size[b=8] max``): a size someone chose."""
    label = name.split("]", 1)[1].split(",", 1)[0].strip() if "]" in name else ""
    return label in ("min", "max")


def _declared_lows(dynamic_axes, bounds) -> dict[str, int]:
    lows: dict[str, int] = {}
    for index, axes in dynamic_axes.items():
        for axis, name in axes.items():
            declared = getattr((bounds or {}).get(index, {}).get(axis), "declared", (0, UNBOUNDED))
            lows[name] = max(lows.get(name, 0), declared[0])
    return lows


def _high(name: str, dynamic_axes, bounds) -> str:
    highs = [getattr((bounds or {}).get(index, {}).get(axis), "__getitem__", lambda _: UNBOUNDED)(1)
             for index, axes in dynamic_axes.items() for axis, dim in axes.items() if dim == name]
    high = min(highs, default=UNBOUNDED)
    return "inf" if high >= UNBOUNDED else str(high)


def excluded_sizes(rows) -> dict[str, tuple[int, str, str]]:
    """Dimension name → (where its range starts now, the size left out (``b=0``), ONNX Runtime's words)
    from the rows :func:`exclude_failed_edges` left out."""
    found: dict[str, tuple[int, str, str]] = {}
    for row in rows:
        match = _EXCLUDED_NOTE.match(row.note or "")
        if match:
            name, start, where, why = match.group(1), int(match.group(2)), match.group(3), match.group(4)
            if name not in found or start > found[name][0]:
                found[name] = (start, where, why)
    return found

#: the exported lower bound that torch.export's 0/1 specialisation gives
_SPECIALISED_LOW = 2


def widen_verified_ranges(program, rows, warnings: list[str], onnx_model=None) -> list[str]:
    """Widen each dimension whose exported range starts above the declared minimum where every
    size below its start passed in ``rows`` (or eager rejected it): ``2..`` from torch.export's
    0/1 specialisation, ``3..`` from that of a size ``frames - 1`` (a guard ``frames - 1 >= 2``
    that torch words as ``Dim('frames', min=3)``). A start other than 2 also needs the size just
    below it to have run and passed (a convolution's ``height >= 4`` is eager's own bound, not
    torch's; the same for a start at 1); a start verification did not reach with a row at every
    size below it stays. Also narrow each dimension past the edge sizes
    :func:`exclude_failed_edges` left out of ``rows``;
    the narrowing warnings of ``program`` in ``warnings`` are replaced by what is left (one
    warning per dimension narrowed by verification), and ``onnx_model``'s range metadata is
    written again. Returns the names of the dimensions whose range changed."""
    if program is None:
        return []
    before = {grown: narrowing_notes(program, grown) for grown in (False, True)}
    excluded = excluded_sizes(rows)
    changed, narrowed = [], {}
    for index, node, _ in _user_input_values(program):
        for axis, stored in node.meta.get(_RANGES_KEY, {}).items():
            declared_low = stored["declared"][0]
            if stored["name"] in excluded:
                start, where, why = excluded[stored["name"]]
                if start < stored["low"] and not all(_checked(rows, index, axis, size)
                                                     for size in range(start, stored["low"])):
                    continue  # below the exported range, and not every size there passed: as it was
                side = "eager rejects these inputs" if why.startswith("eager rejects") else "ONNX Runtime fails"
                stored.update(low=start, where=None, reason=f"{NARROWED_BY_VERIFICATION}: {side} at "
                                                            f"{where}, a size nobody asked for")
                narrowed[stored["name"]] = (stored, where, why)
                changed.append(stored["name"])
                continue
            if stored["low"] <= declared_low or (stored["low"] != _SPECIALISED_LOW
                                                 and not _checked(rows, index, axis, stored["low"] - 1, ran=True)):
                continue  # not torch's 2: the size just below the start must have run and passed (no bound eager has)
            if all(_checked(rows, index, axis, size) for size in range(declared_low, stored["low"])):
                stored.update(low=declared_low, where=None, reason=None if stored["high"] == stored["declared"][1]
                              else stored["reason"])
                changed.append(stored["name"])
    if changed:
        for grown, notes in before.items():
            if any(note in warnings for note in notes):
                after = [note for note in narrowing_notes(program, grown) if NARROWED_BY_VERIFICATION not in note]
                warnings[:] = [w for w in warnings if w not in notes] + [n for n in after if n not in warnings]
        for name, (stored, where, why) in narrowed.items():
            warning = (f"dynamic dimension {name!r} is narrowed to {_range(stored)} (declared "
                       f"{_range(stored, stored['declared'])}) by verification: {where} is a size fxport made up, "
                       f"and there {why}; the ONNX metadata records {_range(stored)}; give an input set "
                       f"with {where} to require it")
            if warning not in warnings:
                warnings.append(warning)
        if onnx_model is not None:
            record_dynamic_ranges(onnx_model, program)
    return list(dict.fromkeys(changed))


def _range(stored: dict, bounds=None) -> str:
    low, high = bounds if bounds is not None else (stored["low"], stored["high"])
    return f"{low}..{'inf' if high >= UNBOUNDED else high}"


def _checked(rows, index: int, axis: int, size: int, ran: bool = False) -> bool:
    """Whether a row at ``size`` along input ``index``'s ``axis`` passed, or eager rejected it
    (not with ``ran``: the row ran and passed)."""
    for row in rows:
        shapes = row.input_shapes
        if index >= len(shapes) or axis >= len(shapes[index]) or shapes[index][axis] != size:
            continue
        note = row.note or ""
        if row.passed and (not note.startswith("skipped") or ("eager rejects" in note and not ran)):
            return True
    return False
