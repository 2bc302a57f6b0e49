"""``while`` and ``for``: a Python loop, or ``while_loop`` once the loop is data-dependent.

A loop whose test or range is a Python value runs as a Python loop (unrolled by export). Once
the test, a bound of ``range`` or the break flag is traced, the (remaining) iterations are
lowered by :func:`~fxport.controlflow.operators.loops.while_loop.tensor_loop`.

A disabled ``while-to-while_loop`` / ``for-to-while_loop`` (``<kind>-in-traced-body`` inside a
traced body) leaves the loop as written: it runs as a Python loop, so the capture fails on a
traced test or bound as it would without fxport.

Example::

    >>> from fxport.controlflow.operators import StatementInfo, for_stmt, while_stmt
    >>> info = StatementInfo("for", None, ("acc",), params=("acc",))
    >>> for_stmt(range(3), lambda i, acc: (acc + i,), (0,), info)
    (3,)
    >>> while_stmt(lambda n: n < 5, lambda n: (n * 2,), (1,), StatementInfo("while", None, ("n",)))
    (8,)
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Callable

import torch

from fxport.controlflow.operators.lists.appender import Appender, stack
from fxport.controlflow.operators.lists import tensor_items
from fxport.controlflow.operators.containers import fresh_copy, is_container
from fxport.controlflow.operators.failures import fail
from fxport.controlflow.operators.logical import and_, not_
from fxport.controlflow.operators.loops.rows import Rows
from fxport.controlflow.operators.loops.while_loop import tensor_loop
from fxport.controlflow.operators.rule_names import rule_name
from fxport.controlflow.operators.state import in_traced_body, is_disabled, note
from fxport.controlflow.operators.targets import versions
from fxport.controlflow.operators.values import as_int64, is_symbolic, is_traced
from fxport.eager.limits import EagerRunStopped
from fxport.errors import ControlFlowError

_TRIP_LIMIT: list[int | None] = [None]


@contextlib.contextmanager
def trip_limit(trips: int):
    """Loops run as Python (eagerly) stop with :class:`~fxport.eager.limits.EagerRunStopped`
    after ``trips`` iterations (the coverage search's inputs; fxport/eager/limits.py)."""
    previous, _TRIP_LIMIT[0] = _TRIP_LIMIT[0], trips
    try:
        yield
    finally:
        _TRIP_LIMIT[0] = previous


def _count_trip(trips: int, info) -> int:
    limit = _TRIP_LIMIT[0]
    if limit is not None and trips >= limit:
        raise EagerRunStopped(f"the {info.kind} loop ran past {limit} iterations", info.location)
    return trips + 1


class TensorRange:
    """``range(start, stop, step)`` whose bounds are traced (tensor or SymInt); step is a Python int."""

    def __init__(self, start, stop, step: int):
        self.start, self.stop, self.step = start, stop, step

    def trip_count(self):
        """Number of iterations as a SymInt/int when the bounds allow it, else a 0-d tensor."""
        start, stop, step = self.start, self.stop, self.step
        if any(isinstance(v, torch.Tensor) for v in (start, stop)):
            diff = as_int64(stop) - as_int64(start)
            return torch.clamp((diff + (step - 1 if step > 0 else step + 1)) // step, min=0)
        count = (stop - start + (step - 1 if step > 0 else step + 1)) // step
        return torch.sym_max(count, 0)

    def least_trips(self) -> int:
        """The fewest iterations a loop over this range with a ``break`` runs: 1 for a static
        non-empty range (the break comes after a first iteration), else 0."""
        # inside a body dynamo traces a symbolic size passes isinstance(v, int): ask is_symbolic,
        # or len() below would fix it to the example's value
        static = all(isinstance(v, int) and not isinstance(v, bool) and not is_symbolic(v)
                     for v in (self.start, self.stop))
        return 1 if static and len(range(self.start, self.stop, self.step)) > 0 else 0

    def as_written(self) -> range:
        """The Python ``range`` the user wrote (its bounds become Python ints, as without fxport)."""
        return range(self.start, self.stop, self.step)


def item_(value):
    """``t.item()``: inside a traced body an integer (or bool) tensor stays a 0-d tensor, as
    ``int(t)`` does (an index, a bound, a count: ``dets[maxpos.item() + i + 1]``), instead of an
    unbacked number torch cannot guard on there; elsewhere, and for floats, ``.item()`` as written.
    A tensor whose size is data is read by summing it: its one element where eager reads it, and
    no failure on the side of a where-selected ``if`` that eager did not take (``order.item()``
    under ``if order.numel() == 1``, with other sizes on the other side)."""
    if (isinstance(value, torch.Tensor) and in_traced_body() and is_traced(value)
            and not value.dtype.is_floating_point and not value.is_complex()):
        numel = value.numel()
        if isinstance(numel, int) and numel == 1:
            return value.reshape(())
        if not isinstance(numel, int):
            return value.reshape(-1).sum().to(value.dtype)
    return value.item()


def int_(value):
    """``int(t)``: a traced tensor gives a SymInt (``t.item()``) instead of a guard on its value."""
    if isinstance(value, torch.Tensor) and is_traced(value) and value.numel() == 1:
        if torch.compiler.is_dynamo_compiling():  # inside a traced body: keep it a tensor
            return value.reshape(()).to(torch.int64)
        return value.reshape(()).to(torch.int64).item()
    if is_symbolic(value):  # int(x.shape[0] / 2) inside a traced body: no guard on its value
        return value if isinstance(value, (int, torch.SymInt)) and not isinstance(value, (bool, torch.SymBool)) else torch.sym_int(value)
    return int(value)


def range_(*args):
    """``range(...)`` in a ``for`` header: a Python range, or a :class:`TensorRange` when traced."""
    if not any(is_traced(a) for a in args):
        return range(*(int(a) if isinstance(a, torch.Tensor) else a for a in args))
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
    if is_traced(step):
        raise ControlFlowError("range() with a data-dependent step is not supported", hint="use a constant step")
    if step == 0:
        raise ValueError("range() arg 3 must not be zero")
    return TensorRange(start, stop, int(step))


def reversed_(values):
    """``reversed(values)`` in a ``for`` header: a list grown in a data-dependent loop or a traced
    tensor gives its rows last first (``stack(...).flip(0)``, which a loop over a data-dependent
    number of rows reads one by one); anything else, the builtin.

    >>> list(reversed_([1, 2]))
    [2, 1]
    """
    if isinstance(values, Appender):
        return stack(values).flip(0)
    if isinstance(values, torch.Tensor) and values.dim() > 0 and is_traced(values):
        return values.flip(0)
    return reversed(values)


def reversed_range(*args):
    """``reversed(range(...))`` in a ``for`` header: the reversed Python range, or a
    :class:`TensorRange` from the last item down when the bounds are traced.

    >>> reversed_range(1, 4)
    range(3, 0, -1)
    """
    forward = range_(*args)
    if isinstance(forward, range):
        return forward[::-1]
    count = forward.trip_count()
    start, step = forward.start, forward.step
    if isinstance(count, torch.Tensor) or isinstance(start, torch.Tensor):
        start = as_int64(start)
    return TensorRange(start + (count - 1) * step, start - step, -step)


def _left_as_written(kind: str) -> bool:
    """The loop's conversion is disabled here (see the module doc)."""
    return is_disabled(rule_name(kind, "in-traced-body" if in_traced_body() else "while_loop"))


#: How a loop run as Python ended, noted for coverage beside its trip count (verify/exercise.py):
#: each exit is a side to cover, like the two sides of an ``if``.
LEFT_BY_TEST = "left by its test"
LEFT_BY_BREAK = "left by a break"
LEFT_AT_BOUND = "left at its trip bound"
#: a carried tensor had fewer elements after the loop than before it / none at all
SHRANK = "shrank a carried tensor"
EMPTIED = "emptied a carried tensor"


def _note_how_it_ended(info, trips: int, entry: tuple, final: tuple, broke: bool = False) -> None:
    """Coverage notes of one finished Python run of a loop: its trips, its exit (``broke``: a
    folded leading break), and whether a carried tensor shrank or emptied (state that shrinks
    must be seen empty too)."""
    note(info, trips)
    if info is None:
        return
    slot = info.names.index(info.break_flag) if info.break_flag in info.names else None
    broke = broke or slot is not None and not is_traced(final[slot]) and bool(final[slot])
    if broke:
        note(info, LEFT_BY_BREAK)
    elif trips > 0:
        note(info, LEFT_BY_TEST if info.kind == "while" else LEFT_AT_BOUND)
    for before, after in zip(entry, final):
        if isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor) and after.numel() < before.numel():
            note(info, SHRANK)
            if after.numel() == 0:
                note(info, EMPTIED)


def while_stmt(test_fn: Callable, body_fn: Callable, args: tuple, info, stop_fn: Callable | None = None):
    """Run an outlined ``while``: a Python loop, or ``while_loop`` once the test is traced.
    ``stop_fn``: a leading ``if t: break`` folded out of the body, asked after the test."""
    passing = tensor_items.passing_loop(args, len(info.names))  # t.tolist() of a dynamic length: as t
    if passing:
        return passing.results(while_stmt(passing.fn(test_fn), passing.fn(body_fn), passing.args, info,
                                          passing.fn(stop_fn)))
    count = len(info.names)
    state, free = tuple(args[:count]), tuple(args[count:])
    entry, trips = state, 0
    whole_test = test_fn if stop_fn is None else _test_then_going_on(test_fn, stop_fn)
    while True:
        test = test_fn(*state, *free)
        if is_traced(test) and not _left_as_written(info.kind):
            return tensor_loop(info, state, free, test_fn=whole_test, body_fn=body_fn)
        if not test:
            _note_how_it_ended(info, trips, entry, state)
            return state
        stop = None if stop_fn is None else stop_fn(*state, *free)
        if is_traced(stop) and not _left_as_written(info.kind):
            return tensor_loop(info, state, free, test_fn=whole_test, body_fn=body_fn)
        if stop is not None and stop:  # counted as the body's break was: an iteration entered and left
            _note_how_it_ended(info, _count_trip(trips, info), entry, state, broke=True)
            return state
        state = tuple(body_fn(*state, *free))
        trips = _count_trip(trips, info)


def for_stmt(iterable, body_fn: Callable, args: tuple, info, stop_fn: Callable | None = None):
    """Run an outlined ``for``: a Python loop (static trip count), or ``while_loop``. ``stop_fn``:
    a leading ``if t: break`` folded out of the body, asked before each iteration."""
    passing = tensor_items.passing_loop(args, len(info.names))  # t.tolist() of a dynamic length: as t
    if passing:
        return passing.results(for_stmt(iterable, passing.fn(body_fn, leading=1), passing.args, info,
                                        passing.fn(stop_fn)))
    if isinstance(iterable, tensor_items.TensorItems):  # its items: the rows of its tensor
        iterable, body_fn = iterable.tensor, iterable.rows_body(body_fn)
    count = len(info.names)
    state, free = tuple(args[:count]), tuple(args[count:])
    test_fn = None if stop_fn is None else _going_on(stop_fn)
    if isinstance(iterable, TensorRange):
        if not _left_as_written(info.kind):
            return tensor_loop(info, state, free, body_fn=body_fn, test_fn=test_fn, rng=iterable)
        iterable = iterable.as_written()
    if isinstance(iterable, Appender):  # a list grown in an earlier data-dependent loop
        iterable = iterable.rows()
    if isinstance(iterable, Rows) and is_symbolic(iterable.length) and not _left_as_written(info.kind):
        return _rows_loop(iterable, 0, body_fn, state, free, info, test_fn)  # zip/enumerate of tensors' rows
    if (isinstance(iterable, torch.Tensor) and is_traced(iterable) and iterable.dim() > 0
            and is_symbolic(iterable.shape[0]) and not _left_as_written(info.kind)):
        rows = TensorRange(0, iterable.shape[0], 1)
        return tensor_loop(info, state, free + (iterable,), body_fn=body_fn, test_fn=test_fn, rng=rows,
                           item_from_rows=True)
    if (info.break_flag and info.appended and isinstance(iterable, range) and torch.compiler.is_exporting()
            and not _left_as_written(info.kind) and not (len(iterable) and _none_carried(state, info))):
        # a data-dependent break would leave appends under a tensor condition: loop on tensors
        rng = TensorRange(iterable.start, iterable.stop, iterable.step)
        return tensor_loop(info, state, free, body_fn=body_fn, test_fn=test_fn, rng=rng)
    flag_slot = info.names.index(info.break_flag) if info is not None and info.break_flag else None
    trips, before, entry, wrote = 0, state, state, False
    for position, item in enumerate(iterable):
        stop = None if stop_fn is None else stop_fn(*state, *free)
        if is_traced(stop) and not _left_as_written(info.kind):  # the rest as a while_loop asking it
            return _continue_as_tensor_loop(iterable, position, body_fn, state, free, info, test_fn)
        if stop is not None and stop:  # counted as the body's break was: an iteration entered and left
            _note_how_it_ended(info, _count_trip(trips, info), entry, state, broke=True)
            return state
        if flag_slot is not None:
            flag = state[flag_slot]
            if is_traced(flag) and not _left_as_written(info.kind):
                # the tensor loop takes over from the iteration whose break made the flag a
                # tensor, with that iteration's entry state: its rest ran under a cond on the
                # flag, which merges the sizes the branches give (a grown cache, a grown mask)
                # into unrelated ones the next iterations could not compare. Not when the body
                # writes in place: that iteration already changed the entry state's tensors
                # Nor when that entry state holds a None the iteration replaced (``pred = None``
                # before the loop, ``x = ... if pred is None else pred``): the iteration is then
                # the first one, peeled, and the loop carries its tensors from there
                # Nor when the iteration merged no sizes (its break was its last statement) and
                # changed no rank (a rank change is peeled from the entry): the loop then starts
                # after it, and a first trip unlike the rest (``if t == 0:`` repeats the state
                # per beam) stays outside the loop
                if set(info.mutated) - {info.break_flag} or wrote or _replaces_none(before, state) \
                        or not (_merged_sizes(before, state) or _ranks_changed(before, state)):
                    return _continue_as_tensor_loop(iterable, position, body_fn, state, free, info, test_fn)
                return _continue_as_tensor_loop(iterable, position - 1, body_fn, before, free, info, test_fn)
            if flag:
                break
        # the entry state, kept apart from what this iteration may change in place inside a
        # library object (a StaticCache's index_copy_), in case the loop takes over from it
        before = tuple(fresh_copy(v) if flag_slot is not None and is_container(v) else v for v in state)
        # a function the body calls may write a tensor of the state or of the function in place
        # (the converter cannot see it): then that iteration is not run again from its entry state
        # (dynamo reads no version counter inside a body it traces)
        seen = versions(state + free) if flag_slot is not None and not torch.compiler.is_dynamo_compiling() else None
        state = tuple(body_fn(item, *state, *free))
        wrote = seen is not None and versions(before + free) != seen
        trips = _count_trip(trips, info)
    _note_how_it_ended(info, trips, entry, state)
    return state


def _none_carried(state: tuple, info) -> bool:
    """A carried value is None before the loop (not a return value or a name the body binds
    first): the first iteration runs as Python, peeled, so the loop carries what it made."""
    return any(v is None and n != info.retval and n not in info.written_first for n, v in zip(info.names, state))


def _merged_sizes(before: tuple, after: tuple) -> bool:
    """Whether a tensor of ``after`` has a size torch knows only at run time (a ``cond`` merged
    two sizes into it) that no tensor of ``before`` has; True for a library object in the state
    (a cache: its tensors are not looked into)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    def unbacked(values) -> set:
        leaves = torch.utils._pytree.tree_leaves(list(values))
        return set().union(*(free_unbacked_symbols(leaf.shape) for leaf in leaves if isinstance(leaf, torch.Tensor)))

    if torch.compiler.is_dynamo_compiling() or any(is_container(v) for v in after):
        return True  # inside a body dynamo traces (which reads no symbols): as if merged
    return bool(unbacked(after) - unbacked(before))


def _ranks_changed(before: tuple, after: tuple) -> bool:
    """Whether a carried tensor has another rank after the iteration than before it."""
    return any(isinstance(b, torch.Tensor) and isinstance(a, torch.Tensor) and a.dim() != b.dim()
               for b, a in zip(before, after))


def _replaces_none(before: tuple, after: tuple) -> bool:
    """A carried value None on entry to an iteration and not None after it."""
    return any(b is None and a is not None for b, a in zip(before, after))


def _continue_as_tensor_loop(iterable, position, body_fn, state, free, info, test_fn=None):
    if isinstance(iterable, Rows):
        return _rows_loop(iterable, position, body_fn, state, free, info, test_fn)
    if not isinstance(iterable, range):
        fail(f"for: break on a tensor condition in a loop over a {type(iterable).__name__}", info,
             "loop over range(...) so the remaining iterations can become a while_loop")
    rest = iterable[position:]
    rng = TensorRange(rest.start, rest.stop, rest.step)
    return tensor_loop(info, state, free, body_fn=body_fn, test_fn=test_fn, rng=rng)


def _rows_loop(rows: Rows, position, body_fn, state, free, info, test_fn):
    """The items of ``rows`` from ``position`` on as a ``while_loop`` over their positions: the
    tensors travel as the body's last inputs, and the body reads each item at the counter."""
    count = len(rows.tensors)

    def rows_body(counter, *values):
        return body_fn(rows.item(counter, values[-count:]), *values[:-count])

    rows_test = None if test_fn is None else (lambda *values: test_fn(*values[:-count]))
    return tensor_loop(_reading_rows(info, count), state, free + rows.tensors, body_fn=rows_body, test_fn=rows_test,
                       rng=TensorRange(position, rows.length, 1))


def _reading_rows(info, count: int):
    """``info`` with ``count`` more parameters, the tensors whose rows the body reads (one such
    StatementInfo per loop, so what its probes learn is found again inside a traced body)."""
    made = getattr(info, "_fx_reading_rows", None)
    if made is None or len(made.params) != len(info.params) + count:
        made = dataclasses.replace(info, params=tuple(info.params) + tuple(f"_fx_rows_{k}" for k in range(count)))
        if not torch.compiler.is_dynamo_compiling():  # dynamo refuses a write to an outer object
            info._fx_reading_rows = made
    return made


def _test_then_going_on(test_fn: Callable, stop_fn: Callable) -> Callable:
    """The loop test of a ``while`` whose leading ``if t: break`` was folded: ``test and not t``."""
    going_on = _going_on(stop_fn)
    return lambda *values: and_(lambda: test_fn(*values), lambda: going_on(*values))


def _going_on(stop_fn: Callable) -> Callable:
    """The loop test of a ``for`` whose leading ``if t: break`` was folded: ``not t``."""
    return lambda *values: not_(stop_fn(*values))
