"""Lists grown with ``.append`` in a data-dependent loop: how each is carried, and what it is after.

A loop whose carried shapes stay fixed (``while_loop``) carries a list as an
:class:`~fxport.controlflow.operators.lists.appender.Appender` in ``rows`` mode (a buffer of the
range's length plus a length) or ``count`` mode (a count, then a second pass that writes the
rows); a loop whose state grows (an ONNX ``Loop`` around its exported body,
:mod:`fxport.controlflow.operators.loops.growing`) carries it in ``grow`` mode, the stack of its
elements so far, one row longer after each append, or in ``concat`` mode, where the probe shows
elements whose length along one axis is data, their concatenation along it and their number. The
probe of the body (one run outside the loop) gives the element's type and shape.

A list an outer (or earlier) data-dependent loop grows that a loop inside it appends to as well
(``for c in labels.unique(): ... while dc.shape[0]: det_max.append(dc[:1])``, ultralytics'
YOLOv3 NMS per class): the inner loop cannot carry the outer one's buffer, so it grows a list of
its own, started empty (:class:`~fxport.controlflow.operators.lists.appender.NestedIn`), and after
it :func:`extended` adds every element of that list to the outer one in the outer one's mode:
``probe`` (the inner list's element, and ``extended``, so the outer loop counts its appends: a
trip appends a data-dependent number of elements), ``count`` (the inner list's number of elements
and sums of sizes), ``write`` (its rows, its stack or its cat along the outer list's cat
dimension, at the running offset), ``grow`` (its stack, concatenated), a finished list (the two
stacks joined). Exact after any number of trips of either loop: the inner list holds the
elements in the order the inner loop appended them, and each outer trip adds them after the
ones before. An inner loop that reads the list (NeMo's ``label[-1]`` in the symbols ``while``
inside the frames ``for``) gets a :class:`~fxport.controlflow.operators.lists.appender.Continues`
instead: both loops carry the stack, the inner one's starts with the outer one's rows, and after
it that stack is the outer list (:func:`_replaced`; reads: in_loop.py).

Example::

    >>> import torch
    >>> from fxport.controlflow.operators.lists.appender import Appender, stack
    >>> probed = Appender("ys", [])
    >>> probed.probe = [torch.ones(2)]
    >>> grown = allocate_growing(Appender("ys", [torch.zeros(2)]), probed, None)
    >>> grown.mode, tuple(grown.data.shape)
    ('grow', (1, 2))
    >>> grown.append(torch.full((2,), 3.0)); grown.finished = True
    >>> stack(grown).tolist()
    [[0.0, 0.0], [3.0, 3.0]]
    >>> from fxport.controlflow.operators.lists.appender import NESTED_IN
    >>> inner = Appender("ys", NESTED_IN, torch.ones(2, 2), torch.zeros((), dtype=torch.int64), mode="grow")
    >>> inner.finished = True                   # what a loop inside grew: two more elements
    >>> stack(extended(grown, inner)).tolist()
    [[0.0, 0.0], [3.0, 3.0], [1.0, 1.0], [1.0, 1.0]]
"""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree

from fxport.controlflow.operators.lists.appender import (Appender, Continued, Continues, NestedIn, Replay, SelectedBefore,
                                                        SelectedContinued, cat, data_sized, stack, varies)
from fxport.controlflow.operators.failures import fail
from fxport.controlflow.operators.lists.elements import element_rows, numbers_in_rows_as_tensors
from fxport.controlflow.operators.values import as_int64, dense, same_size


def allocate(appender: Appender, probed, rng, info) -> Appender:
    """``rows`` mode (a range, elements of one shape, one append a trip at most), else ``count``
    mode (two passes); a list a nested loop appends to (``extended``) gets a count."""
    element, values = _probed_element(appender, probed, info)
    if rng is None or probed.extended or any(data_sized(s) for v in values for s in v.shape):
        if probed.asked_empty and not probed.extended:
            # ``xs == []`` on the first trip: a later one may read the list, which a count cannot
            # answer; the loop carries the stack instead (in_loop.py; while_loop reads the flag)
            probed.read_inside = True
        sums = torch.zeros(element.dim(), dtype=torch.int64)
        grown = Appender(appender.name, numbers_in_rows_as_tensors(appender.initial), sums, torch.zeros((), dtype=torch.int64), mode="count")
        grown.probe, grown.location = [element], appender.location
        return _noted(grown, appender, probed)
    trips = rng.trip_count()
    if isinstance(trips, torch.Tensor):
        trips = trips.item()
        torch._check(trips >= 0)
    buf = torch.zeros((trips,) + tuple(element.shape), dtype=element.dtype)
    grown = Appender(appender.name, numbers_in_rows_as_tensors(appender.initial), buf, torch.zeros((), dtype=torch.int64))
    grown.location = appender.location  # refusals about the list name its loop
    return _noted(grown, appender, probed)


def allocate_growing(appender: Appender, probed, info) -> Appender:
    """``grow`` mode, for a loop whose state grows: the stack of the elements so far (the initial
    ones first), carried as a tensor that grows along axis 0."""
    element, values = _probed_element(appender, probed, info)
    first = element_rows(appender.initial)
    if any(varies(s) for v in values for s in v.shape):
        return _concatenating(appender, probed, values, first, info)
    if any(e.shape != element.shape for e in first):
        fail(f"{info.kind}: list {appender.name!r} gets elements of changing size in a loop whose state grows", info,
             f"append elements of one shape to {appender.name!r}, or grow a tensor with torch.cat instead")
    rows = [e.to(element.dtype).unsqueeze(0) for e in first]
    if probed.front:  # grown at the front: the rows in the order they come, so those before it reversed
        rows = rows[::-1]
    initial = appender.initial if isinstance(appender.initial, SelectedBefore) else []  # empty: SelectedBefore, NestedIn
    if isinstance(appender.initial, Continues) and appender.initial.read:  # the outer loop's elements first
        rows, initial = _continued(appender, element, info), Continued()
    elif type(appender.initial) is SelectedBefore and appender.initial.read:  # the rows kept before the loop first
        rows, initial = _kept_before(appender, element, info), SelectedContinued()
    data = torch.cat(rows) if rows else torch.zeros((0,) + tuple(element.shape), dtype=element.dtype)
    grown = Appender(appender.name, initial, dense(data), torch.zeros((), dtype=torch.int64), mode="grow")
    grown.location = appender.location
    return _noted(grown, appender, probed)


def _concatenating(appender: Appender, probed: Appender, values: list, first: list, info) -> Appender:
    """``concat`` mode, for a loop whose state grows and whose elements' length along one axis is data
    (appender.py): the concatenation of the elements so far along that axis, moved to the front (the
    elements before the loop first), and their number. Elements whose lengths are data along two
    axes, or whose other sizes differ, are refused: no concatenation holds them."""
    axis = _ragged_axis(appender, values, first, info)
    if isinstance(appender.initial, (SelectedBefore, Continues)):
        fail(f"{info.kind}: list {appender.name!r}, whose elements' lengths are data, holds elements appended before "
             "this loop by another loop or under a tensor condition, which is not supported", info,
             "start a new list for this loop and torch.cat both after it")
    element = values[0]
    rows = [e.to(element.dtype).movedim(axis, 0) for e in first]
    empty = torch.zeros((0,) + tuple(element.movedim(axis, 0).shape[1:]), dtype=element.dtype)
    data = torch.cat(rows) if rows else empty
    grown = Appender(appender.name, [], dense(data), torch.zeros((), dtype=torch.int64), mode="concat", axis=axis)
    grown.location = appender.location
    return _noted(grown, appender, probed)


def _ragged_axis(appender: Appender, values: list, first: list, info) -> int:
    """The one axis along which the probed elements' lengths are data (the others agree with the
    elements before the loop)."""
    element = values[0]
    if len({v.dim() for v in values + first}) != 1:
        fail(f"{info.kind}: list {appender.name!r} gets elements of different ranks in a loop whose state grows", info,
             f"append tensors of one rank to {appender.name!r}")
    axes = {axis for v in values for axis, size in enumerate(v.shape) if varies(size)}
    if len(axes) != 1:
        fail(f"{info.kind}: list {appender.name!r} gets elements whose sizes along {len(axes)} axes are data, in a loop "
             "whose state grows", info, "append elements whose length is data along one axis only, "
             "and torch.cat them along it after the loop")
    (axis,) = axes
    for other in values[1:] + first:
        if not all(same_size(a, b) for j, (a, b) in enumerate(zip(other.shape, element.shape)) if j != axis):
            fail(f"{info.kind}: list {appender.name!r} gets elements that differ in sizes other than along axis {axis}, "
                 "in a loop whose state grows", info, f"append elements that differ only in their length along axis {axis}")
    return axis


def _continued(appender: Appender, element: torch.Tensor, info) -> list:
    """The rows a loop nested in another one starts its list's stack with: the outer loop's
    elements so far (a read :class:`Continues`)."""
    before = appender.initial
    if before.rows is not None:
        rows = [before.rows.to(element.dtype)]
    else:
        rows = [e.to(element.dtype).unsqueeze(0) for e in element_rows(before.items)]
    for part in rows:
        if not _rows_of(part, element):
            fail(f"{info.kind}: list {appender.name!r} gets elements of other shapes in this loop than in the loop "
                 "around it, and is read here", info, f"append elements of one shape to {appender.name!r}")
    return rows


def _kept_before(appender: Appender, element: torch.Tensor, info) -> list:
    """The rows a loop starts its list's stack with when it reads a list appended to under a
    tensor condition before it (a read :class:`SelectedBefore`): the kept ones, in order."""
    kept = appender.initial.selected.stacked()
    if not _rows_of(kept, element):
        fail(f"{info.kind}: list {appender.name!r} gets elements of other shapes in this loop than before it, and is "
             "read here", info, f"append elements of one shape to {appender.name!r}")
    return [kept.to(element.dtype)]


def _rows_of(part: torch.Tensor, element: torch.Tensor) -> bool:
    """Whether ``part`` is rows of ``element``'s shape (a stack of such elements)."""
    return part.dim() == element.dim() + 1 and all(same_size(a, b) for a, b in zip(part.shape[1:], element.shape))


def _noted(grown: Appender, entry: Appender, probed: Appender) -> Appender:
    """``grown`` with what the probe learned: a loop nested in this one appends to the list; the end
    its trips grow it at (front.py)."""
    grown.extended = probed.extended
    grown._shared["front"], grown._shared["at_end"] = probed.front, probed._shared.get("at_end", False)
    for flag in ("of_lists", "empty_lists"):  # a list of lists (appender.py); one of them may be empty
        if probed._shared.get(flag) or entry._shared.get(flag):
            grown._shared[flag] = True
    grown.keep_record(probed, entry)  # the records' fields name the rows' columns (columns.py)
    return grown


def _probed_element(appender: Appender, probed, info):
    values = probed.probe if isinstance(probed, Appender) else []
    if not values:
        fail(f"{info.kind}: could not learn the element type of list {appender.name!r} (no append on the first "
             "iteration)", info, "append on every iteration or preallocate a buffer and write buf[i] = ...")
    return values[0], values


def finish(values, entry, info, loop) -> list:
    """The lists after the loop: ``rows`` learns whether the buffer is exact, ``count`` gets
    the :class:`Replay` that writes its rows when it is stacked; appends after the loop are
    kept aside (``tail``). ``loop``: the lowered loop (its ``run`` and ``free``)."""
    finished, snapshots = [], None
    for value, before in zip(values, entry):
        if isinstance(value, Appender):
            value.exact = (info.kind == "for" and value.name in info.exact_appends and not info.break_flag
                           and loop.test_fn is None)  # a folded leading break (a stop test) may end it early
            if value.mode == "count":
                snapshots = snapshots or (_snapshot(entry), _snapshot(loop.free))
                value.replay = Replay(loop.run, *snapshots, before.probe[0])
            value.finished = True
        finished.append(value)
    return finished


def finish_grown(values) -> tuple:
    """The lists after a loop whose state grows: their stacks are complete."""
    for value in values:
        if isinstance(value, Appender):
            value.finished = True
    return tuple(values)


def _snapshot(values) -> tuple:
    """Copies of the tensors a second pass starts from: code between the loop and the stack may
    write into them in place (``scale.mul_(2)``), and pass 2 must see what pass 1 saw."""
    return tuple(dense(v) if isinstance(v, torch.Tensor) else v for v in values)


def check_not_returned(outputs) -> None:
    """A model output may not be a list grown in a data-dependent loop or appended to under a
    tensor condition: how many tensors it holds is data, and an ONNX graph has a fixed number
    of outputs."""
    for value in pytree.tree_leaves(outputs, is_leaf=lambda v: isinstance(v, Appender)):
        if isinstance(value, Appender) and (value.of_lists or value.mode == "concat"):  # lengths that are data too
            whole = f"torch.cat([torch.tensor(z) for z in {value.name}])" if value.of_lists else f"torch.cat({value.name})"
            fail(f"the model returns list {value.name!r}, whose number of elements and their lengths depend on the data",
                 value, f"return {whole} and a tensor of the elements' lengths (or a padded tensor) instead of the list")
        if isinstance(value, Appender):
            fail(f"the model returns list {value.name!r}, whose number of elements depends on the data", value,
                 f"return torch.stack({value.name}) or torch.cat({value.name}) instead of the list")


# --- a list a loop nested in its loop (or a later loop) appends to ---------------------------------


def extended(outer: Appender, inner) -> Appender:
    """``outer`` with every element of ``inner`` (the inner loop's list, or the :class:`NestedIn`
    it started from when it appended nothing) added after its own (see the module doc)."""
    if isinstance(inner, NestedIn):
        for value in inner:
            outer.append(value)
        return outer
    if isinstance(inner, Appender) and isinstance(inner.initial, Continued):
        return _replaced(outer, inner)
    if not isinstance(inner, Appender):
        fail(f"list {outer.name!r}, grown in a data-dependent loop, is replaced in a data-dependent loop inside it",
             outer, f"only append to {outer.name!r} there")
    if not outer.finished:  # the inner loop's elements go at the end of the outer loop's list
        outer._grown_at(front=False)
    if outer.finished:
        return _joined(outer, inner)
    if outer.mode == "probe":
        outer.probe.append(_element(inner))
        outer.extended = True
        return outer
    if outer.mode == "count":
        return _counted(outer, inner)
    if outer.mode == "write":
        return _written(outer, inner)
    if outer.mode == "grow":
        return outer.rebuilt(torch.cat([outer.data, _rows_like(outer, inner, stack(inner))]), outer.length)
    if outer.mode == "concat":  # each of the inner list's elements, one element more of the outer one
        return outer.rebuilt(torch.cat([outer.data, outer.piece_of(cat(inner, outer.axis))]), outer.length + _count(inner))
    fail(f"list {outer.name!r} is appended to in a data-dependent loop nested in another one that grows it, on a path "
         "the outer loop's first run did not take", outer,
         f"collect the inner loop's elements in a list of its own and append torch.cat of it to {outer.name!r}")


def _replaced(outer: Appender, inner: Appender) -> Appender:
    """``outer`` after a loop inside its loop that read it: the inner loop's stack holds all the
    elements (those of ``outer`` first), so it is the outer list now."""
    if outer.mode == "probe":  # the element type, and a data-dependent number of appends a trip
        outer.probe.append(_element(inner))
        outer.extended = True
        return outer
    if outer.mode == "grow" and not outer.finished:
        return outer.rebuilt(_rows_like(outer, inner, stack(inner)), outer.length)
    fail(f"list {outer.name!r} is read in a data-dependent loop nested in another one that grows it, on a path the "
         "outer loop's first run did not take", outer,
         f"keep the value you need in a variable of its own (last = k where you append k to {outer.name!r})")


def _element(inner: Appender) -> torch.Tensor:
    """An element of the inner list (its dtype, rank, and which sizes are fixed), for the probe."""
    if inner.mode == "count":
        return inner.replay.element
    return inner.data.new_zeros(inner.data.shape[1:])


def _count(inner: Appender) -> torch.Tensor:
    """The number of elements the inner loop appended, a 0-d int64 tensor."""
    if inner.mode == "count" or (inner.mode == "rows" and not inner.exact):
        return as_int64(inner.length)
    return as_int64(inner.data.shape[0])  # every row of the buffer, or the stack that grew


def _counted(outer: Appender, inner: Appender) -> Appender:
    """Pass 1: the counts and the sums of each size add up."""
    element = _element(inner)
    if element.dim() != outer.data.shape[0]:
        fail(f"list {outer.name!r} grown in a data-dependent loop gets elements of {element.dim()} and "
             f"{outer.data.shape[0]} dimensions", outer, "append tensors of one rank")
    count = _count(inner)
    if not element.dim():
        return outer.rebuilt(outer.data, outer.length + count)
    sums = inner.data if inner.mode == "count" else count * torch.stack([as_int64(s) for s in element.shape])
    return outer.rebuilt(outer.data + sums, outer.length + count)


def _written(outer: Appender, inner: Appender) -> Appender:
    """Pass 2: the inner list's rows, in the outer buffer's layout, at the running offset."""
    if outer.axis is None:
        rows = stack(inner)
    else:
        rows = torch.movedim(cat(inner, outer.axis), outer.axis, 0)
    writer = outer.rebuilt(outer.data, outer.length)
    writer.write_rows(rows, _count(inner))
    return writer


def _rows_like(outer: Appender, inner: Appender, rows: torch.Tensor) -> torch.Tensor:
    """``rows`` (the inner list's stack) checked to continue ``outer``'s stack."""
    want = outer.data.shape[1:]
    if rows.dim() != outer.data.dim() or not all(same_size(a, b) for a, b in zip(rows.shape[1:], want)) \
            or any(varies(s) for s in rows.shape[1:]):
        fail(f"list {outer.name!r} gets elements of changing size in a loop whose state grows", outer,
             f"append elements of one shape to {outer.name!r}, or grow a tensor with torch.cat instead")
    return rows.to(outer.data.dtype)


def _joined(outer: Appender, inner: Appender) -> Appender:
    """A list grown by an earlier loop, appended to by a later one: one stack of both."""
    if not (outer._one_shape() and inner._one_shape()):
        fail(f"list {outer.name!r}, grown by a data-dependent loop with elements that change size, is appended to by "
             "a later data-dependent loop", outer,
             "torch.cat each loop's list on its own and join the results, or start a new list for the later loop")
    first = stack(outer)
    stacked = Appender(outer.name, [], first, torch.zeros((), dtype=torch.int64), mode="grow")
    stacked.location = outer.location
    joined = Appender(outer.name, [], torch.cat([first, _rows_like(stacked, inner, stack(inner))]),
                      torch.zeros((), dtype=torch.int64), mode="grow")
    joined.location, joined.finished = outer.location, True
    joined.keep_record(outer, inner)
    return joined
