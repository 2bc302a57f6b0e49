"""A variable None before a data-dependent loop whose first iteration always sets it: that
iteration runs on its own, peeled, and the loop carries what it made from the second on.

``past = None`` before transformers 3's ``while cur_len < max_length:`` whose body calls the
model with ``past_key_values=past`` and sets ``past = outputs[1]``: the first trip reads None
(the model runs the whole prompt, no cache), the next ones a cache. Carried as a
:class:`~fxport.controlflow.operators.optional.MaybeNone`, every trip would run both calls; peeled,
the first trip runs as written with ``past`` None, and the loop body only ever sees a cache.

The first trip runs only where the loop's first test holds: a Python test runs it as Python, a
traced one in a ``torch.cond`` (an ONNX ``If``) whose other side leaves the state as it was, with
a placeholder of the value's type for the variable. The loop after it asks that first test again
(carried along), so where the first trip did not run, no trip runs and the placeholder is never
read; after the loop the variable is None there again (a MaybeNone set by the first test).

A loop is peeled only when the body, run once with the variable None (a probe, whose ops are
dead code), sets it on every path (not under a condition: then it stays a MaybeNone), and the
loop appends to no list and returns nothing. A ``for row in x`` peels its first row.

A carried tensor whose first trip changes its rank (``decoder_input = torch.tensor([[SOS]])``,
shape (1, 1), before a loop that sets ``decoder_input = topi.squeeze()``, 0-d; ``eigval =
torch.Tensor([inf])`` before ``eigval = new_v.norm() / v.norm()``) is peeled the same way when
the loop's probe refuses it (:class:`FirstTripReshapes`): the first trip runs as Python, also
in a loop that appends to lists, and the loop carries the rank it made. Whether the second trip
keeps it is the rest's own probe's check: a rank that changes again is refused there, in one
line. With a traced first test the loop may run no trip, after which the variable would have
the rank it had before: no If gives two ranks, so that is refused (one line, at the loop). A
loop that returns from inside is not peeled: its refusal stands.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch

from fxport.controlflow.operators.failures import fail
from fxport.controlflow.operators.indexing import getitem
from fxport.controlflow.operators.lists.selected import joined_after, lists_selected_before
from fxport.controlflow.operators.logical import and_
from fxport.controlflow.operators.optional import MaybeNone, is_optional, placeholder, unset
from fxport.controlflow.operators.state import probing, record
from fxport.controlflow.operators.targets import probe_copy
from fxport.controlflow.operators.rule_names import rule_name
from fxport.controlflow.operators.values import Undefined, as_bool_tensor, as_int64, is_number, is_traced, scalar
from fxport.errors import ControlFlowError


class FirstTripReshapes(ControlFlowError):
    """The probe of a loop body saw the carried tensor ``name`` change rank (``before`` →
    ``after``, shapes): its message is the refusal, unless the loop's first trip is peeled
    (:func:`peeled_loop` with ``reshaped``). ``info``: the loop whose probe saw it."""

    def __init__(self, what, info, hint, name, before, after):
        super().__init__(what, where=info.location, hint=hint)
        self.info, self.name, self.before, self.after = info, name, before, after


def reshapes(what, info, hint, name, before, after) -> None:
    """Raise :class:`FirstTripReshapes` for the carried tensor ``name`` of the loop ``info``;
    nothing inside a body dynamo traces (no loop starts again there) or for a leaf of a
    carried tuple (the caller refuses it then)."""
    if info is None or name not in info.names or torch.compiler.is_dynamo_compiling():
        return
    raise FirstTripReshapes(what, info, hint, name, before, after)


def peeled_loop(info, state, free, body_fn, test_fn, rng, item_from_rows: bool, run_rest: Callable,
                reshaped: FirstTripReshapes | None = None):
    """The loop's final state with its first trip peeled (see the module doc), or None when the
    loop is not one to peel. ``run_rest(info, state, free, body_fn, test_fn, rng)`` lowers a loop
    (and an ``item_from_rows`` flag). ``reshaped``: the probe of the loop as it was saw a carried
    tensor change rank; the first trip is peeled or that refusal raised (never None then)."""
    if reshaped is not None:
        return _peeled_for_rank(info, state, free, body_fn, test_fn, rng, item_from_rows, run_rest, reshaped)
    slots = _none_slots(info, state)
    if not slots or info.appended or info.retval:
        return None
    first_item = _item(free, rng, item_from_rows)
    first_values = _first_trip_probe(info, state, free, body_fn, first_item)
    if any(first_values[i] is None or is_optional(first_values[i]) for i in slots):
        return None  # set only on some paths of the first trip: carried as a MaybeNone
    first_test = _first_test(info, state, free, test_fn, rng)
    if not is_traced(first_test):
        if not first_test:
            return tuple(state)
        return _rest_after_python_trip(info, state, free, body_fn, test_fn, rng, first_item, item_from_rows, run_rest)
    after_first = _first_trip_in_cond(first_test, info, state, free, body_fn, _item_operands(free, rng, item_from_rows),
                                      slots, first_values)
    after_first = [v.value if i in slots else v for i, v in enumerate(after_first)]
    final = _rest(info, after_first, free, body_fn, test_fn, rng, item_from_rows, run_rest, as_bool_tensor(first_test))
    names = ", ".join(repr(info.names[i]) for i in slots)
    record(info, rule_name(info.kind, "while_loop"), f"first iteration peeled into an If on the loop's first test: "
           f"it sets {names}, None before the loop", lowering="If + while_loop (ONNX If, Loop)")
    flag = as_bool_tensor(first_test)
    return tuple(MaybeNone(v, flag, info.location) if i in slots else v for i, v in enumerate(final))


def _peeled_for_rank(info, state, free, body_fn, test_fn, rng, item_from_rows, run_rest, reshaped):
    """The first trip run as Python, where the probe saw it change a carried tensor's rank; the
    loop from the second trip carries the rank it made (its own probe refuses one that changes
    again). Where whether a first trip runs is traced, refused: after no trip the variable keeps
    the rank it had before the loop, and no If gives a value of two ranks."""
    if info.retval:
        raise reshaped
    first_test = _first_test(info, state, free, test_fn, rng)
    if is_traced(first_test):
        fail(f"{info.kind}: loop variable {reshaped.name!r} changes shape from {reshaped.before} to {reshaped.after} "
             f"in the first iteration, and whether the loop runs an iteration depends on the input: after no "
             f"iteration it would keep the shape {reshaped.before}", info,
             f"give {reshaped.name!r} the shape {reshaped.after} before the loop (reshape or squeeze its initial value)")
    if not first_test:
        return tuple(state)
    params = tuple(state) + tuple(free[: len(info.params) - len(info.names)])
    # a Python range's first item as the int eager gives (``buf[i] = row`` indexes by a number)
    item = rng.start if rng is not None and not item_from_rows and not is_traced(rng.start) else \
        _item(free, rng, item_from_rows)
    after = tuple(body_fn(item, *params) if item is not None else body_fn(*params))
    # a list the first trip appended to under a tensor condition (a SelectedList): the rest
    # grows a list of its own, joined to it after the loop (as tensor_loop does for its entry)
    after, selected = lists_selected_before(after)
    values = joined_after(_rest(info, list(after), free, body_fn, test_fn, rng, item_from_rows, run_rest, None),
                          selected)
    record(info, rule_name(info.kind, "while_loop"), f"first iteration peeled (run as Python): it changes the shape "
           f"of {reshaped.name!r} from {reshaped.before} to {reshaped.after}", lowering="while_loop (ONNX Loop)")
    return values


def _none_slots(info, state) -> list[int]:
    return [i for i, (name, value) in enumerate(zip(info.names, state))
            if value is None and name != info.retval and name not in info.written_first]


def _item(free, rng, item_from_rows):
    """The first trip's loop item: the range's first counter (an int64 tensor), or the first row
    of the tensor a ``for row in x`` iterates (the last of ``free``); None for a ``while``."""
    if rng is None:
        return None
    counter = as_int64(rng.start)
    return getitem(free[-1], counter) if item_from_rows else counter


def _item_operands(free, rng, item_from_rows) -> tuple:
    """What the first trip's item is made of inside the ``cond``: the counter, and the rows a
    ``for row in x`` reads (indexed there: outside, an empty ``x`` would fail in ONNX Runtime)."""
    if rng is None:
        return ()
    return (as_int64(rng.start), free[-1]) if item_from_rows else (as_int64(rng.start),)


def _first_trip_probe(info, state, free, body_fn, item) -> tuple:
    """The values one trip gives from ``state`` (run outside the loop; its ops are dead code, and
    it writes in place only into copies)."""
    copies = tuple(probe_copy(v) for v in state)  # every tensor: a function the body calls may write one
    params = copies + tuple(probe_copy(v) for v in free[: len(info.params) - len(info.names)])
    with probing():
        return tuple(body_fn(item, *params) if item is not None else body_fn(*params))


def _first_test(info, state, free, test_fn, rng):
    """Whether the loop runs its first trip: the range is not empty, and its test holds."""
    params = tuple(state) + tuple(free[: len(info.params) - len(info.names)])
    test = None
    if rng is not None:
        start, stop = rng.start, rng.stop
        test = (as_int64(start) < as_int64(stop) if rng.step > 0 else as_int64(start) > as_int64(stop)) \
            if any(is_traced(v) for v in (start, stop)) else (start < stop if rng.step > 0 else start > stop)
    if test_fn is not None:
        test = test_fn(*params) if test is None else and_(lambda: test, lambda: test_fn(*params))
    if info.break_flag:
        flag = state[info.names.index(info.break_flag)]
        test = and_(lambda: test, lambda: not flag) if not is_traced(flag) else \
            torch.logical_and(as_bool_tensor(test), torch.logical_not(as_bool_tensor(flag)))
    return test


def _rest_after_python_trip(info, state, free, body_fn, test_fn, rng, item, item_from_rows, run_rest):
    params = tuple(state) + tuple(free[: len(info.params) - len(info.names)])
    after = tuple(body_fn(item, *params) if item is not None else body_fn(*params))
    return _rest(info, list(after), free, body_fn, test_fn, rng, item_from_rows, run_rest, None)


def _first_trip_in_cond(first_test, info, state, free, body_fn, item_operands, slots, first_values) -> list:
    """The state after the first trip where ``first_test`` holds, the state as it was (with
    placeholders for the variables None before the loop) where it does not: a ``torch.cond``."""
    from fxport.controlflow.operators.conditionals import if_stmt

    count, extra = len(info.names), len(item_operands)
    entry = [unset(first_values[i], info.location) if i in slots else
             _unbound_placeholder(first_values[i]) if isinstance(v, Undefined) and info.names[i] in info.written_first
             else v for i, v in enumerate(state)]

    def first_trip(*values):
        carried = [None if i in slots else v for i, v in enumerate(values[:count])]
        rest = values[count:len(values) - extra]
        if not extra:
            return tuple(body_fn(*carried, *rest))
        counter = values[len(values) - extra]
        item = getitem(values[-1], counter) if extra == 2 else counter
        return tuple(body_fn(item, *carried, *rest))

    def no_trip(*values):
        return tuple(values[:count])

    free_params = tuple(free[: len(info.params) - len(info.names)])
    peel_info = dataclasses.replace(
        info, kind="if", params=tuple(info.params) + ("_fx_first_counter", "_fx_rows")[:len(item_operands)],
        expensive=("the first iteration of a loop, peeled",), side_effects=(), branch_writes=None,
        dead_if_false=(), children=[], break_flag=None)
    return list(if_stmt(first_test, first_trip, no_trip, tuple(entry) + free_params + item_operands, peel_info))


def _unbound_placeholder(assigned):
    """A variable with no value before the loop that every trip assigns before reading it: zeros
    of its type where the first trip did not run (eager: unbound there; no trip reads them)."""
    return placeholder(scalar(assigned) if is_number(assigned) else assigned)


def _rest(info, state, free, body_fn, test_fn, rng, item_from_rows, run_rest, first_test):
    """The loop from its second trip: the range advanced by one step, and where the first test is
    traced, that test asked again before each trip (carried as one more value the body reads,
    before the rows a ``for row in x`` iterates)."""
    if rng is not None:
        start = rng.start + rng.step if not isinstance(rng.start, torch.Tensor) else as_int64(rng.start) + rng.step
        rng = type(rng)(start, rng.stop, rng.step)  # a TensorRange (operators/loops.py) one step on
    if first_test is None:
        return run_rest(info, tuple(state), free, body_fn, test_fn, rng, item_from_rows)
    count = len(info.params) - len(info.names)
    own_free, rows = tuple(free[:count]), tuple(free[count:])
    rest_info = dataclasses.replace(info, params=tuple(info.params) + ("_fx_first_test",))

    def body(*values):
        return body_fn(*values[:-1]) if rng is None else body_fn(values[0], *values[1:-1])

    def test(*values):
        return and_(lambda: values[-1], lambda: test_fn(*values[:-1])) if test_fn is not None else values[-1]

    return run_rest(rest_info, tuple(state), own_free + (first_test,) + rows, body, test, rng, item_from_rows)
