"""``value[index]`` and ``target[index] = value`` with an index computed at run time.

A traced 0-d integer index becomes ``index_select``/``index_put`` instead of a guard on its
value (``.item()``), as does a traced start of ``narrow`` and a traced shift of ``roll``; a
Python list of ints read at a traced index (``table[x.argmax()]``) is read from a tensor of its
items (outside bodies dynamo traces);
everything else indexes as Python does.

Size: reads and writes by traced positions share their reading of an index (tensor slices,
several traced positions in one write, numbers read from data), so they stay one module.

Example::

    >>> import torch
    >>> from fxport.controlflow.operators.indexing import getitem, setitem
    >>> getitem(torch.arange(4), 2), setitem([0, 0], 1, 5)
    (tensor(2), [0, 5])
"""

from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import guard_or_false

from fxport.controlflow.operators.counters import known_width
from fxport.controlflow.operators.lists.appender import Appender, stack
from fxport.controlflow.operators.lists import tensor_items
from fxport.controlflow.operators.lists.tensor_items import TensorItems
from fxport.controlflow.operators.failures import refuse_here
from fxport.controlflow.operators.numbers import int_read_from_data
from fxport.controlflow.operators.state import in_traced_body
from fxport.controlflow.operators.values import as_int64, is_symbolic, is_traced, scalar


class TensorSlice:
    """``a:b:c`` whose start or stop is a traced 0-d integer tensor (``scores[pos:]``, ``buf[:, t:t + 1]``).

    Kept apart from Python's ``slice``: dynamo turns a tensor bound of a ``slice`` into a number
    read from the tensor before any operator sees it, a number a loop body cannot carry.
    """

    __slots__ = ("start", "stop", "step", "width")

    def __init__(self, start, stop, step, width: int | None = None):
        self.start, self.stop, self.step = start, stop, step
        self.width = width  # k of ``a:a + k`` as written (counters.known_width), else None

    def as_slice(self) -> slice:
        """The slice as written (its tensor bounds read as Python does)."""
        return slice(self.start, self.stop, self.step)


def slice_(start, stop, step, width: int | None = None):
    """``a:b:c`` in a computed index: a :class:`TensorSlice` when a bound is traced, else a slice.
    ``width``: the ``k`` of ``a:a + k`` as the source wrote it (the converter passes it).

    >>> slice_(1, None, None)
    slice(1, None, None)
    """
    if _is_traced_index(start) or _is_traced_index(stop):
        return TensorSlice(start, stop, step, width if step in (None, 1) else None)
    return slice(start, stop, step)


def _as_slices(parts: tuple) -> tuple:
    return tuple(p.as_slice() if isinstance(p, TensorSlice) else p for p in parts)


def narrow(input, dim, start, length):
    """``input.narrow(dim, start, length)``; a traced 0-d integer ``start`` (a loop counter)
    selects ``length`` rows from it with ``index_select``, as ``x[t:t + 1]`` does, instead of
    reading it as a number (an unbacked size a loop body cannot return).

    >>> narrow(torch.arange(6).reshape(3, 2), dim=0, start=1, length=2).tolist()
    [[2, 3], [4, 5]]
    """
    if not (isinstance(input, torch.Tensor) and _is_traced_index(start)):
        return input.narrow(dim, start, length)
    dim = dim % input.dim() if isinstance(dim, int) else dim
    if isinstance(length, int) and not is_symbolic(length):
        size = input.shape[dim]
        rows = torch.arange(length, dtype=torch.int64) + _position(start, size)  # a negative start counts from the end
        return torch.index_select(input, dim, rows.clamp(max=size - 1))  # clamped as _position clamps
    return getitem(input, (slice(None),) * dim + (TensorSlice(start, start + length, None),))


def roll(input, *args, **kwargs):
    """``input.roll(shifts, dims)`` (``torch.roll(x, ...)`` comes as ``x``; ``np.roll(a, ...)`` as
    the module ``np``, whose ``roll`` is called as written); a traced 0-d integer shift (a number
    read from a tensor in a loop body) gathers each row from its rolled position (``index_select``
    at ``(i - shift) mod size``) instead of reading the shift as a number.

    >>> roll(torch.arange(4), 1).tolist()
    [3, 0, 1, 2]
    """
    shifts = args[0] if args else kwargs.get("shifts")
    dims = args[1] if len(args) > 1 else kwargs.get("dims")
    dim = dims[0] if isinstance(dims, (list, tuple)) and len(dims) == 1 else dims
    if not (isinstance(input, torch.Tensor) and _is_traced_index(shifts) and (dim is None or isinstance(dim, int))
            and len(args) + len(kwargs) <= 2):
        return input.roll(*args, **kwargs)
    if dim is None:  # the flattened tensor rolled, in its shape again
        return roll(input.reshape(-1), shifts, 0).reshape(input.shape)
    size = input.shape[dim]
    rows = torch.remainder(torch.arange(size, dtype=torch.int64) - shifts.to(torch.int64), as_int64(size))
    return torch.index_select(input, dim, rows)


def _is_traced_index(index) -> bool:
    return (
        isinstance(index, torch.Tensor)
        and is_traced(index)
        and index.dim() == 0
        and not index.dtype.is_floating_point
        and index.dtype != torch.bool
    )


def _position(index: torch.Tensor, size) -> torch.Tensor:
    """The 1-element int64 position of a traced index along a dimension of ``size``.

    A negative index counts from the end, and the position is clamped into the dimension: an
    index that is valid is unchanged, and one that is not (only where the statement's result is
    discarded, as on the untaken side of an ``if`` lowered with where, since eager would have
    raised) cannot make ONNX Runtime fail on Gather/ScatterND.
    """
    position = torch.where(index < 0, index + size, index).reshape(1).to(torch.int64)
    return position.clamp(max=size - 1).clamp(min=0)


def _read_int(part) -> bool:
    """An int torch keeps symbolic that was read from data (a loop counter, ``t.item()``), which
    dynamo's indexing refuses inside a body it traces ("got SymInt"); sizes index as written."""
    return int_read_from_data(part)


def _numbers_as_positions(index):
    """``index`` with each int read from data (:func:`_read_int`) as a 0-d int64 tensor, which the
    tensor-index paths select with (``cost[i - 1, j - 1]``, ``X[:, k % m]``); slices keep their
    symbolic bounds (``F[:, :n]``: a length torch relates to ``torch.eye(n)``)."""
    if isinstance(index, tuple):
        return tuple(as_int64(p) if _read_int(p) else p for p in index)
    return as_int64(index) if _read_int(index) else index


def getitem(value, index):
    """``value[index]``; a traced 0-d integer index becomes index_select (no .item() guard)."""
    if isinstance(value, TensorItems):  # t.tolist() of a vector of dynamic length: an item of t
        return value.item(index)
    if isinstance(value, torch.Tensor):
        index = _numbers_as_positions(index)
    parts = index if isinstance(index, tuple) else (index,)
    if isinstance(value, Appender) and value.finished and isinstance(index, (slice, TensorSlice)):
        return value.sliced(getitem(stack(value), index))  # history[:seq_ends[i]]: a list of those rows
    if isinstance(value, (list, tuple)) and any(_is_traced_index(p) for p in parts) and _int_items(value, parts):
        return getitem(_as_int_tensor(value), index)  # [3, 1, 4][t]: the items as a tensor, one selected
    if isinstance(value, (list, tuple)) and any(_is_traced_index(p) for p in parts):
        kind = "list" if isinstance(value, list) else "tuple"  # a list fxport made (SelectedBefore) reads as one
        refuse_here(f"a Python {kind} indexed by a value computed at run time (a loop counter or a "
                    "number read from a tensor) in a data-dependent loop or branch: the exported file cannot pick one "
                    "of its items",
                    "index a tensor instead (keep t rather than t.tolist(), or torch.stack the list before the loop)")
    if not isinstance(value, torch.Tensor) or any(isinstance(p, TensorSlice) and not _has_traced_bound(p) for p in parts):
        parts = _as_slices(parts)
        return value[parts if isinstance(index, tuple) else parts[0]]
    if not any(_is_traced_index(p) or _has_traced_bound(p) for p in parts):
        return value[index]
    if any(_has_traced_bound(p) for p in parts) and any(isinstance(p, torch.Tensor) and p.dim() >= 1 for p in parts):
        return _advanced_beside_slices(value, parts)
    result, dim = value, 0
    squeeze = []
    for part in parts:
        if _is_traced_index(part):
            position = _position(part, result.shape[dim])
            result = torch.index_select(result, dim, position)
            squeeze.append(dim)
            dim += 1
        elif _has_traced_bound(part):
            result = _select_slice(result, dim, part)
            dim += 1
        elif isinstance(part, slice):
            result = result[(slice(None),) * dim + (part,)]
            dim += 1
        elif isinstance(part, int):
            result = torch.narrow(result, dim, part if part >= 0 else part + result.shape[dim], 1)
            squeeze.append(dim)
            dim += 1
        else:
            return _advanced(value, _as_slices(parts))
    for d in reversed(squeeze):
        result = result.squeeze(d)
    return result


def _int_items(value, parts: tuple) -> bool:
    """A non-empty list/tuple of ints (Python ints and bools, 0-d int64 tensors; no SymInt, a
    number read from data) read at one traced index outside a body dynamo traces (at the top
    level, or in the probe of a loop body): its items as an int64 tensor read back as Python reads
    them (``~True`` is ``~1``). Not floats (a 0-d float64 tensor promotes where a Python float does
    not), nor tensors of other dtypes (``~`` of a bool tensor is not ``~True``)."""
    if torch.compiler.is_dynamo_compiling():
        return False  # in a body dynamo traces, reading an item read from data (t.tolist()) fails to lift it
    if type(value) not in (list, tuple) or not value or len(parts) != 1:
        return False
    if any(is_symbolic(v) for v in value):
        return False
    return all(isinstance(v, int) or isinstance(v, torch.Tensor) and v.dim() == 0 and v.dtype == torch.int64
               for v in value)


def _as_int_tensor(value) -> torch.Tensor:
    return torch.stack([as_int64(v) for v in value])


def _advanced_beside_slices(value: torch.Tensor, parts: tuple):
    """``value[rows, :step]``: an index tensor beside a slice with a traced bound. The slice's
    positions are selected first (``index_select`` keeps the dimension), then the index tensors
    index as eager indexes them, the slice now a full ``:``."""
    if len(parts) > value.dim() or not all(_has_traced_bound(p) or _is_plain_part(p) for p in parts):
        return value[_as_slices(parts)]
    for dim, part in enumerate(parts):
        if _has_traced_bound(part):
            value = _select_slice(value, dim, part)
    rest = tuple(slice(None) if _has_traced_bound(p) else p for p in parts)
    return _advanced(value, rest)


def _is_traced_bound(bound) -> bool:
    return bound is not None and _is_traced_index(bound)


def _has_traced_bound(part) -> bool:
    """A :class:`TensorSlice` with a positive int step (``x[pos:]``, ``x[t:t + 1]``)."""
    if not isinstance(part, TensorSlice):
        return False
    return part.step is None or (isinstance(part.step, int) and not is_symbolic(part.step) and part.step > 0)


def _slice_rows(part: slice, size) -> torch.Tensor:
    """The positions ``range(size)[part]`` holds, for a slice with traced bounds: their count is
    read from the bounds once (a number torch keeps symbolic, checked to lie in [0, size])."""
    width = getattr(part, "width", None)
    if width is not None and known_width(part.start, width, size) is not None:
        # t:t + k by a loop counter that stays where the slice is whole: exactly k positions
        return torch.arange(width, dtype=torch.int64) + as_int64(part.start)
    step = part.step or 1
    start, stop = _bound(part.start, 0, size), _bound(part.stop, size, size)
    count = torch.clamp((stop - start + step - 1) // step, min=0).item()
    torch._check(count >= 0)
    torch._check(count <= size)
    return torch.arange(count, dtype=torch.int64) * step + start


def _select_slice(value: torch.Tensor, dim: int, part: slice) -> torch.Tensor:
    """``value[(:,) * dim + (part,)]`` for a slice with traced bounds, as ``index_select`` (a new
    tensor, not a view whose offset torch would have to carry out of a loop body)."""
    return torch.index_select(value, dim, _slice_rows(part, value.shape[dim]))


def _is_plain_part(part) -> bool:
    """An index part that takes exactly one dimension of the value: an int, a slice, a traced
    0-d index or an integer index tensor (no None, Ellipsis or boolean mask)."""
    if isinstance(part, (int, slice)) and not isinstance(part, bool):
        return True
    return isinstance(part, torch.Tensor) and not part.dtype.is_floating_point and part.dtype != torch.bool


def _advanced(value: torch.Tensor, parts: tuple):
    """``value[t, idx]``: a traced 0-d index beside an integer index tensor. As an index tensor of
    one element it broadcasts with the others to the shape eager's integer gives (no .item())."""
    has_tensor_index = any(isinstance(p, torch.Tensor) and p.dim() >= 1 for p in parts)
    if not has_tensor_index or len(parts) > value.dim() or not all(_is_plain_part(p) for p in parts):
        return value[parts]
    return value[tuple(_position(p, value.shape[d]) if _is_traced_index(p) else p for d, p in enumerate(parts))]


def _one_traced_axis(target, index) -> int | None:
    """The axis of ``target[:, ..., t]``'s one traced 0-d index (or symbolic size, which torch
    would specialise) when every other part is ``:``."""
    if not isinstance(target, torch.Tensor) or not isinstance(index, tuple):
        return None
    traced = [i for i, part in enumerate(index)
              if _is_traced_index(part) or isinstance(part, torch.SymInt) and is_symbolic(part)]
    plain = all(part == slice(None) for i, part in enumerate(index) if i not in traced)
    return traced[0] if len(traced) == 1 and plain and len(index) <= target.dim() else None


def setitem(target, index, value):
    """``target[index] = value``; with a traced 0-d index the tensor is updated functionally."""
    if isinstance(target, torch.Tensor):
        index = _numbers_as_positions(index)
    axis = _traced_slice_axis(target, index)
    if axis is not None:  # scores[pos:] = w * scores[pos:], buf[:, t:t + 1] = v: rows written by index
        return _set_slice(target, index if isinstance(index, tuple) else (index,), axis, value)
    if _traced_slice_among_basic_parts(target, index):  # cache[:b, pos:pos + t] = v: positions per axis
        return _set_basic(target, index, value)
    if isinstance(index, TensorSlice) or isinstance(index, tuple) and any(isinstance(p, TensorSlice) for p in index):
        index = _as_slices(index)[0] if isinstance(index, TensorSlice) else _as_slices(index)
    if isinstance(target, torch.Tensor) and _is_traced_index(index):
        position = _position(index, target.shape[0])
        value = scalar(value, target.dtype) if not isinstance(value, torch.Tensor) else value.to(target.dtype)
        if value.dim():  # the row as eager writes it (leading 1s dropped, broadcast): ONNX ScatterND does neither
            row = target.shape[1:]
            value = value.reshape(value.shape[value.dim() - len(row):]) if value.dim() > len(row) else value
            value = value.expand(row).unsqueeze(0)
        return torch.index_put(target, (position,), value)
    axis = _one_traced_axis(target, index)
    if axis is not None:  # out[:, t] = v: the same along the indexed axis moved to the front
        position = index[axis] if isinstance(index[axis], torch.Tensor) else scalar(index[axis])
        moved = setitem(target.movedim(axis, 0), position, value)
        return moved.movedim(0, axis)
    axis = _traced_axis_among_basic_parts(target, index)
    if axis is not None:  # buf[t + 1, 1:] = v: the row at t, written as eager would, put back at t
        return _set_row(target, index, axis, value)
    if _traced_beside_index_tensors(target, index):  # path[rows, idx, j] = 1 with a traced j
        return _set_advanced(target, index, value)
    if _traced_among_basic_parts(target, index):  # cost[i, j] = v, H[:, a:b, a:b] = v: positions per axis
        return _set_basic(target, index, value)
    if hasattr(type(target), "refuse_write"):  # a list fxport holds otherwise (lists/number_lists.py)
        target.refuse_write()
    if not isinstance(target, torch.Tensor) and (is_traced(index) or is_traced(value)) and in_traced_body():
        # in a while_loop body or the probe of any data-dependent loop (a loop whose state grows
        # runs its body outside dynamo, where the write would land in a list the file never reads)
        refuse_here(f"a {type(target).__name__} is changed with [...] = inside a data-dependent loop or branch",
                    "use a preallocated tensor (buf[i] = v) or append to a list and torch.stack it")
    if isinstance(target, torch.Tensor) and isinstance(value, torch.Tensor) and value.dtype != target.dtype:
        value = value.to(target.dtype)  # as eager's assignment casts (a counter promoted to int64 into floats)
    target[index] = value
    return target


def _traced_axis_among_basic_parts(target, index) -> int | None:
    """The axis of the one traced 0-d index in ``target[..]``'s tuple when every other part is an
    int or a slice (``trellis[t + 1, 1:]``)."""
    if not isinstance(target, torch.Tensor) or not isinstance(index, tuple) or len(index) > target.dim():
        return None
    traced = [i for i, part in enumerate(index) if _is_traced_index(part)]
    basic = all(isinstance(part, (int, slice)) and not isinstance(part, bool)
                for i, part in enumerate(index) if i not in traced)
    return traced[0] if len(traced) == 1 and basic else None


def _traced_among_basic_parts(target, index) -> bool:
    """``target[..]``'s tuple holds traced 0-d indices or slices with traced bounds (any number of
    them), every other part an int or a slice, one part per dimension at most."""
    if not isinstance(target, torch.Tensor) or not isinstance(index, tuple) or len(index) > target.dim():
        return False
    return (any(_is_traced_index(p) or _has_traced_bound(p) for p in index)
            and all(_is_traced_index(p) or _has_traced_bound(p) or isinstance(p, slice)
                    or isinstance(p, int) and not isinstance(p, bool) for p in index))


def _traced_slice_among_basic_parts(target, index) -> bool:
    """:func:`_traced_among_basic_parts` with a slice by a traced bound among the parts (taken
    before the slices are read as Python's, which would read the bound as a number)."""
    return (isinstance(index, tuple) and any(_has_traced_bound(p) for p in index)
            and _traced_among_basic_parts(target, index))


def _set_basic(target: torch.Tensor, index: tuple, value):
    """``target[index] = value`` for :func:`_traced_among_basic_parts`: the positions each part
    takes along its axis (one for an index, the rows of a slice), broadcast against each other as
    the axes the slices keep, written with ``index_put``; the value lines up with those axes and the
    ones the index does not reach, as eager's assignment lines it up. A slice with a traced bound
    takes as many rows as the value has along its axis (:func:`_written_rows`). The result is the
    new target."""
    value = value.to(target.dtype) if isinstance(value, torch.Tensor) else scalar(value, target.dtype)
    kept_axes = sum(1 for part in index if not (_is_traced_index(part) or isinstance(part, int)))
    lengths = _value_lengths(value, kept_axes + target.dim() - len(index))
    positions, kept_axis = [], 0
    for axis, part in enumerate(index):
        keeps = not (_is_traced_index(part) or isinstance(part, int))
        positions.append(_positions_of(part, target.shape[axis], lengths[kept_axis] if keeps else None))
        kept_axis += keeps
    kept = [rows for rows, keeps in positions if keeps]
    indices, axis = [], 0
    for rows, keeps in positions:
        shape = [1] * len(kept)
        if keeps:
            shape[axis] = -1
            axis += 1
        indices.append(rows.reshape(shape))
    region = [rows.shape[0] for rows in kept] + list(target.shape[len(index):])
    return torch.index_put(target, tuple(indices), value.expand(region))


def _value_lengths(value: torch.Tensor, region_rank: int) -> list:
    """The value's length along each axis of a written region of ``region_rank`` axes, as eager
    lines the value up with it (from the right); None where the value has no such axis."""
    missing = region_rank - value.dim()
    return [None if axis < missing else value.shape[axis - missing] for axis in range(region_rank)]


def _positions_of(part, size, value_length=None) -> tuple:
    """(int64 positions, whether the axis is kept) of one basic index part along an axis of
    ``size``; ``value_length``: the written value's length along the axis (None: none, or a read)."""
    if _is_traced_index(part):
        return _position(part, size), False
    if _has_traced_bound(part):
        return _written_rows(part, size, value_length), True
    if isinstance(part, slice):
        return torch.arange(size, dtype=torch.int64)[part], True
    return _position(scalar(part, torch.int64), size), False


def _written_rows(part, size, value_length) -> torch.Tensor:
    """The positions a slice with a traced bound writes along an axis of ``size``: ``start, start
    + step, ...``, as many as the value has rows along it (``kbuf[:, pos:pos + t] = k``: t rows,
    no length read from a tensor); where the value broadcasts along the axis (length 1, or no such
    axis), as many as the slice holds (:func:`_slice_rows`), as eager's assignment broadcasts."""
    if value_length is None or guard_or_false(value_length == 1):
        return _slice_rows(part, size)
    return torch.arange(value_length, dtype=torch.int64) * (part.step or 1) + _bound(part.start, 0, size)


def _traced_beside_index_tensors(target, index) -> bool:
    """``target[rows, idx, j]``: a traced 0-d index beside an integer index tensor, every part
    an int, an integer tensor or a traced 0-d index (one part per dimension at most)."""
    if not isinstance(target, torch.Tensor) or not isinstance(index, tuple) or len(index) > target.dim():
        return False
    return (any(_is_traced_index(p) for p in index)
            and any(isinstance(p, torch.Tensor) and p.dim() >= 1 for p in index)
            and all(_is_plain_part(p) and not isinstance(p, slice) for p in index))


def _set_advanced(target: torch.Tensor, index: tuple, value):
    """``target[index] = value`` for :func:`_traced_beside_index_tensors`: the traced index as a
    one-element index tensor (it broadcasts with the others as eager's int does), written with
    ``index_put``; the result is the new target."""
    parts = tuple(_position(p if isinstance(p, torch.Tensor) else scalar(p, torch.int64), target.shape[d])
                  if _is_traced_index(p) or isinstance(p, int) else p.to(torch.int64) for d, p in enumerate(index))
    value = value.to(target.dtype) if isinstance(value, torch.Tensor) else scalar(value, target.dtype)
    return torch.index_put(target, parts, value)


def _set_row(target: torch.Tensor, index: tuple, axis: int, value):
    """``target[index] = value`` where ``index[axis]`` is traced: the row at that position is taken
    (``index_select``), assigned with the other parts as eager assigns, and written back
    (``index_put``); the result is the new target."""
    moved = target.movedim(axis, 0)
    position = _position(index[axis], moved.shape[0])
    row = torch.index_select(moved, 0, position).squeeze(0).clone()
    rest = index[:axis] + index[axis + 1:]
    row[rest] = value.to(row.dtype) if isinstance(value, torch.Tensor) else value
    return torch.index_put(moved, (position,), row.unsqueeze(0)).movedim(0, axis)


def _traced_slice_axis(target, index) -> int | None:
    """The axis of the one slice of ``target[..]`` with a traced 0-d bound (``scores[pos:]``,
    ``buf[:, t:t + 1]``) when every other part is ``:`` and the step a positive int."""
    if not isinstance(target, torch.Tensor):
        return None
    parts = index if isinstance(index, tuple) else (index,)
    traced = [i for i, p in enumerate(parts) if _has_traced_bound(p)]
    if len(parts) > target.dim() or len(traced) != 1:
        return None
    plain = all(isinstance(p, slice) and p == slice(None) for i, p in enumerate(parts) if i != traced[0])
    return traced[0] if plain else None


def _bound(bound, default, size) -> torch.Tensor:
    """A slice bound as Python normalises it: negative counts from the end, clamped to [0, size]."""
    if bound is None:
        return scalar(default, torch.int64)
    bound = bound if isinstance(bound, torch.Tensor) else scalar(bound, torch.int64)
    bound = bound.to(torch.int64)
    return torch.where(bound < 0, bound + size, bound).clamp(min=0).clamp(max=size)


def _set_slice(target: torch.Tensor, parts: tuple, axis: int, value):
    """``target[..., a:b:s, ...] = value`` with a traced bound: the rows ``a, a + s, ...`` written
    with ``index_put`` (positions counted from the value's rows, so no size is read from a tensor
    unless the value broadcasts along the axis, as eager's assignment does)."""
    part, moved = parts[axis], target.movedim(axis, 0)
    if not isinstance(value, torch.Tensor):
        value = scalar(value, target.dtype)
    value = value.to(target.dtype)
    while value.dim() < target.dim():  # the value lines up with target[index]: its rank, axis first
        value = value.unsqueeze(0)
    value = value.movedim(axis, 0)
    rows = _written_rows(part, moved.shape[0], value.shape[0])
    value = value.expand(rows.shape[0], *moved.shape[1:])
    return torch.index_put(moved, (rows,), value).movedim(0, axis)


tensor_items.use_indexing(getitem, TensorSlice)  # TensorItems read their items through getitem
