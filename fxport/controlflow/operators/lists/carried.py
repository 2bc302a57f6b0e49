"""Lists grown with ``.append`` in a data-dependent loop: how each is carried, and what it is after.

A loop whose carried shapes stay fixed (``while_loop``) carries a list as an
:class:`~fxport.controlflow.operators.lists.appender.Appender` in ``rows`` mode (a buffer of the
range's length plus a length) or ``count`` mode (a count, then a second pass that writes the
rows); a loop whose state grows (an ONNX ``Loop`` around its exported body,
:mod:`fxport.controlflow.operators.loops.growing`) carries it in ``grow`` mode, the stack of its
elements so far, one row longer after each append. The probe of the body (one run outside the
loop) gives the element's type and shape.

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
"""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree

from fxport.controlflow.operators.lists.appender import Appender, Replay, SelectedBefore, varies
from fxport.controlflow.operators.failures import fail
from fxport.controlflow.operators.values import dense


def allocate(appender: Appender, probed, rng, info) -> Appender:
    """``rows`` mode (a range, elements of one shape), else ``count`` mode (two passes)."""
    element, values = _probed_element(appender, probed, info)
    if rng is None or any(varies(s) for v in values for s in v.shape):
        sums = torch.zeros(element.dim(), dtype=torch.int64)
        grown = Appender(appender.name, appender.initial, sums, torch.zeros((), dtype=torch.int64), mode="count")
        grown.probe, grown.location = [element], appender.location
        return grown
    trips = rng.trip_count()
    if isinstance(trips, torch.Tensor):
        trips = trips.item()
        torch._check(trips >= 0)
    buf = torch.zeros((trips,) + tuple(element.shape), dtype=element.dtype)
    grown = Appender(appender.name, appender.initial, buf, torch.zeros((), dtype=torch.int64))
    grown.location = appender.location  # refusals about the list name its loop
    return grown


def allocate_growing(appender: Appender, probed, info) -> Appender:
    """``grow`` mode, for a loop whose state grows: the stack of the elements so far (the initial
    ones first), carried as a tensor that grows along axis 0."""
    element, values = _probed_element(appender, probed, info)
    if any(varies(s) for v in values for s in v.shape) or any(e.shape != element.shape for e in appender.initial):
        fail(f"{info.kind}: list {appender.name!r} gets elements of changing size in a loop whose state grows", info,
             f"append elements of one shape to {appender.name!r}, or grow a tensor with torch.cat instead")
    rows = [e.to(element.dtype).unsqueeze(0) for e in appender.initial]
    data = torch.cat(rows) if rows else torch.zeros((0,) + tuple(element.shape), dtype=element.dtype)
    initial = SelectedBefore() if isinstance(appender.initial, SelectedBefore) else []
    grown = Appender(appender.name, initial, dense(data), torch.zeros((), dtype=torch.int64), mode="grow")
    grown.location = appender.location
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
        if isinstance(value, Appender):
            fail(f"the model returns list {value.name!r}, whose number of elements depends on the data", value,
                 f"return torch.stack({value.name}) or torch.cat({value.name}) instead of the list")
