"""Trace-time loop operators: ``_fx.while_stmt``, ``_fx.for_stmt`` and their helpers.

A loop whose test or range is a Python value runs as a Python loop (unrolled by export). Once
the test, a bound of ``range`` or the break flag is traced, the (remaining) iterations become
``torch._higher_order_ops.while_loop`` (ONNX ``Loop``): ranges get an int64 counter, lists
grown with ``.append`` become a preallocated buffer plus a length.

Example::

    >>> from fxport.controlflow import loops
    >>> info = type("Info", (), {"names": ("acc",), "break_flag": None, "kind": "for", "location": None})()
    >>> loops.for_stmt(range(3), lambda i, acc: (acc + i,), (0,), info)
    (3,)
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.utils._pytree as pytree

from fxport.controlflow.canonicalize import RETVAL
from fxport.controlflow.runtime import (
    Undefined,
    _as_bool_tensor,
    _check_side_effects,
    _dense,
    _dtype,
    _fail,
    _find_error,
    _is_number,
    _is_symbolic,
    _is_traced,
    _note,
    _record,
    _same_size,
    _scalar,
    getitem,
    not_,
    probing,
    restore_size_relations,
    size_relations,
)
from fxport.errors import ControlFlowError


class TensorRange:
    """``range(start, stop, step)`` whose bounds are traced (tensor or SymInt); step is a Python int."""

    def __init__(self, start, stop, step: int):
        self.start, self.stop, self.step = start, stop, step

    def trip_count(self):
        """Number of iterations as a SymInt/int when the bounds allow it, else a 0-d tensor."""
        start, stop, step = self.start, self.stop, self.step
        if any(isinstance(v, torch.Tensor) for v in (start, stop)):
            diff = _as_int64(stop) - _as_int64(start)
            return torch.clamp((diff + (step - 1 if step > 0 else step + 1)) // step, min=0)
        count = (stop - start + (step - 1 if step > 0 else step + 1)) // step
        return torch.sym_max(count, 0)


def _as_int64(value):
    if isinstance(value, torch.Tensor):
        return value.reshape(()).to(torch.int64)
    if _is_symbolic(value):
        return torch.full((), value, dtype=torch.int64)
    return torch.full((), int(value), dtype=torch.int64)


def int_(value):
    """``int(t)``: a traced tensor gives a SymInt (``t.item()``) instead of a guard on its value."""
    if isinstance(value, torch.Tensor) and _is_traced(value) and value.numel() == 1:
        if torch.compiler.is_dynamo_compiling():  # inside a traced body: keep it a tensor
            return value.reshape(()).to(torch.int64)
        return value.reshape(()).to(torch.int64).item()
    if _is_symbolic(value):  # int(x.shape[0] / 2) inside a traced body: no guard on its value
        return value if isinstance(value, (int, torch.SymInt)) and not isinstance(value, (bool, torch.SymBool)) else torch.sym_int(value)
    return int(value)


def range_(*args):
    """``range(...)`` in a ``for`` header: a Python range, or a :class:`TensorRange` when traced."""
    if not any(_is_traced(a) for a in args):
        return range(*(int(a) if isinstance(a, torch.Tensor) else a for a in args))
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
    if _is_traced(step):
        raise ControlFlowError("range() with a data-dependent step is not supported", hint="use a constant step")
    if step == 0:
        raise ValueError("range() arg 3 must not be zero")
    return TensorRange(start, stop, int(step))


class _Appender:
    """A list grown with ``.append`` inside a tensor loop: a preallocated buffer plus a length."""

    def __init__(self, name: str, initial: list, buf=None, length=None):
        self.name, self.initial, self.buf, self.length = name, initial, buf, length
        self.probe: list = []

    def append(self, value):
        value = value if isinstance(value, torch.Tensor) else _scalar(value)
        if self.buf is None:  # probing: learn the element type
            self.probe.append(value)
            return
        position = self.length.reshape(1)
        self.buf = torch.index_put(self.buf, (position,), value.to(self.buf.dtype).unsqueeze(0))
        self.length = self.length + 1

    def copy(self):
        clone = _Appender(self.name, self.initial, self.buf, self.length)
        clone.probe = self.probe
        clone.exact = getattr(self, "exact", False)
        return clone

    def __iter__(self):
        raise ControlFlowError(
            f"list {self.name!r} grown in a data-dependent loop can only be used with torch.stack/torch.cat",
            hint="stack or concatenate it right after the loop",
        )

    def __bool__(self):
        raise ControlFlowError(
            f"truth value of list {self.name!r} grown in a data-dependent loop is not known while exporting",
            hint="make the list non-empty on every path (e.g. append before the break)",
        )

    def __len__(self):
        raise TypeError(f"len() of list {self.name!r} grown in a data-dependent loop; use torch.stack(...).shape[0]")


class _Ref:
    """Compares by identity, so a pytree context holding a list of tensors stays comparable."""

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, _Ref) and other.value is self.value

    def __hash__(self):
        return id(self.value)


def _appender_flatten(appender):
    return [appender.buf, appender.length], (appender.name, _Ref(appender.initial), getattr(appender, "exact", False))


def _appender_unflatten(children, context):
    name, initial, exact = context
    result = _Appender(name, initial.value, children[0], children[1])
    result.exact = exact
    return result


pytree.register_pytree_node(_Appender, _appender_flatten, _appender_unflatten)


def stack(tensors, dim: int = 0, *, out=None):
    """``torch.stack``, also for lists grown in a data-dependent loop."""
    if not isinstance(tensors, _Appender):
        return torch.stack(tensors, dim) if out is None else torch.stack(tensors, dim, out=out)
    return torch.movedim(_stacked(tensors), 0, dim)


def cat(tensors, dim: int = 0, *, out=None):
    """``torch.cat``, also for lists grown in a data-dependent loop."""
    if not isinstance(tensors, _Appender):
        return torch.cat(tensors, dim) if out is None else torch.cat(tensors, dim, out=out)
    stacked = _stacked(tensors)
    moved = torch.movedim(stacked, 0, dim if dim >= 0 else stacked.dim() - 1 + dim)
    shape = list(moved.shape)
    d = dim if dim >= 0 else stacked.dim() - 1 + dim
    return moved.reshape(shape[:d] + [shape[d] * shape[d + 1]] + shape[d + 2 :])


def _stacked(appender: _Appender):
    buf = appender.buf
    if getattr(appender, "exact", False):
        rows = buf
    else:
        count = appender.length.item()
        torch._check(count >= 0)
        torch._check(count <= buf.shape[0])
        rows = buf.narrow(0, 0, count)
    if appender.initial:
        rows = torch.cat([torch.stack(appender.initial).to(rows.dtype), rows])
    return rows


def while_stmt(test_fn: Callable, body_fn: Callable, args: tuple, info):
    """Run an outlined ``while``: a Python loop, or ``while_loop`` once the test is traced."""
    count = len(info.names)
    state, free = tuple(args[:count]), tuple(args[count:])
    trips = 0
    while True:
        test = test_fn(*state, *free)
        if _is_traced(test):
            return _tensor_loop(info, state, free, test_fn=test_fn, body_fn=body_fn)
        if not test:
            _note(info, trips)
            return state
        state = tuple(body_fn(*state, *free))
        trips += 1


def for_stmt(iterable, body_fn: Callable, args: tuple, info):
    """Run an outlined ``for``: a Python loop (static trip count), or ``while_loop``."""
    count = len(info.names)
    state, free = tuple(args[:count]), tuple(args[count:])
    if isinstance(iterable, TensorRange):
        return _tensor_loop(info, state, free, body_fn=body_fn, rng=iterable)
    if isinstance(iterable, torch.Tensor) and _is_traced(iterable) and iterable.dim() > 0 and _is_dynamic(iterable.shape[0]):
        rows = TensorRange(0, iterable.shape[0], 1)
        return _tensor_loop(info, state, free + (iterable,), body_fn=body_fn, rng=rows, item_from_rows=True)
    if info.break_flag and info.appended and isinstance(iterable, range) and torch.compiler.is_exporting():
        # a data-dependent break would leave appends under a tensor condition: loop on tensors
        return _tensor_loop(info, state, free, body_fn=body_fn, rng=TensorRange(iterable.start, iterable.stop, iterable.step))
    flag_slot = info.names.index(info.break_flag) if info is not None and info.break_flag else None
    trips = 0
    for position, item in enumerate(iterable):
        if flag_slot is not None:
            flag = state[flag_slot]
            if _is_traced(flag):
                return _continue_as_tensor_loop(iterable, position, body_fn, state, free, info)
            if flag:
                break
        state = tuple(body_fn(item, *state, *free))
        trips += 1
    _note(info, trips)
    return state


def _is_dynamic(size) -> bool:
    return _is_symbolic(size)


def _continue_as_tensor_loop(iterable, position, body_fn, state, free, info):
    if not isinstance(iterable, range):
        _fail(f"for: break on a tensor condition in a loop over a {type(iterable).__name__}", info,
              "loop over range(...) so the remaining iterations can become a while_loop")
    rest = iterable[position:]
    return _tensor_loop(info, state, free, body_fn=body_fn, rng=TensorRange(rest.start, rest.stop, rest.step))


def _tensor_loop(info, state, free, *, body_fn, test_fn=None, rng=None, item_from_rows=False):
    """Lower a loop to ``torch._higher_order_ops.while_loop`` with an int64 counter for ranges.

    Carried: (counter,) + loop state + the enclosing function's values the body reads (passed
    through unchanged, so the body closes over no traced tensor).
    """
    from torch._higher_order_ops.while_loop import while_loop

    kind = info.kind
    _check_side_effects(info, kind)
    names = info.names
    count = len(names)
    state = _loop_entry_state(state, info, rng)
    state = _promote_numbers(state, free, info, rng, body_fn, item_from_rows)
    all_names = tuple(info.params) + (("_fx_rows",) if item_from_rows else ())
    layout = _Layout(all_names, tuple(state) + tuple(free))
    counter0 = _as_int64(rng.start) if rng is not None else None
    flag_slot = names.index(info.break_flag) if info.break_flag else None
    stop_value = _as_int64(rng.stop) if rng is not None else None

    def keep_going(counter, values, stop):
        ok = None
        if rng is not None:
            ok = _in_range(counter, stop, rng.step)
        if flag_slot is not None:
            ok = _and(ok, not_(values[flag_slot]))
        if test_fn is not None:
            ok = _and(ok, test_fn(*values[:count], *values[count:count + len(info.params) - count]))
        return _as_bool_tensor(ok)

    def split(carried):
        carried = list(carried)
        counter = stop = None
        if rng is not None:
            counter, stop = carried.pop(0), carried.pop(0)
        return counter, stop, carried

    def cond_fn(*carried):
        restore_size_relations(carried, relations)
        counter, stop, rest = split(carried)
        _, values = layout.unpack(rest, False)
        return keep_going(counter, values, stop)

    def step_fn(*carried):
        restore_size_relations(carried, relations)
        counter, stop, rest = split(carried)
        _, values = layout.unpack(rest, False, fresh=True, mutated=info.mutated)
        params = values[: len(info.params)]
        if rng is not None:
            item = getitem(values[-1], counter) if item_from_rows else counter.clone()
            new_state = body_fn(item, *params)
        else:
            new_state = body_fn(*params)
        packed = layout.pack(tuple(new_state) + tuple(values[count:]), info)
        if rng is not None:
            packed = (counter + rng.step, stop) + packed
        return tuple(_dense(t) for t in packed)

    carried = tuple(_dense(t) for t in layout.pack(tuple(state) + tuple(free), info))
    if rng is not None:
        carried = (counter0, stop_value) + carried
    relations = size_relations(carried)
    try:
        final = while_loop(cond_fn, step_fn, carried)
    except Exception as exc:
        inner = _find_error(exc)
        if inner is not None:
            raise inner from None
        raise
    _, _, rest = split(tuple(final))
    _, values = layout.unpack(rest, False)
    values = _finish_appenders(values[:count], info)
    lowering = "while_loop (ONNX Loop)" + (" + preallocated buffer" if info.appended else "")
    counter_text = "int64 counter over a data-dependent range" if rng is not None else "tensor condition"
    _record(info, f"{kind}-to-while_loop", f"{lowering}: {counter_text}; carries {', '.join(names) or 'nothing'}",
            lowering=lowering, carried=list(names))
    return tuple(values)


def _in_range(counter, stop, step: int):
    """The loop test of ``range``: the counter has not reached ``stop``."""
    return counter < stop if step > 0 else counter > stop


def _and(a, b):
    if a is None:
        return b
    return torch.logical_and(_as_bool_tensor(a), _as_bool_tensor(b))


def _loop_entry_state(state, info, rng):
    checked = []
    for name, value in zip(info.names, state):
        if isinstance(value, Undefined):
            _fail(f"{info.kind}: variable {name!r} is first defined inside a data-dependent loop and read "
                  f"after it or in the next iteration, with no value before the loop", info,
                  f"give {name!r} an initial value before the loop")
        if value is None:
            if name == RETVAL:  # a return inside the loop: the probe learns the value's type
                checked.append(value)
                continue
            _fail(f"{info.kind}: loop variable {name!r} is None before a data-dependent loop", info,
                  f"initialise {name!r} with a tensor of the shape and dtype the loop produces")
        if name in info.appended:
            if not isinstance(value, list):
                _fail(f"{info.kind}: {name!r} is appended to but is not a list", info, "use a list")
            if torch.compiler.is_dynamo_compiling():
                _fail(f"{info.kind}: list {name!r} is appended to in a data-dependent loop nested in another traced body",
                      info, "preallocate a buffer before the outer loop and write buf[i] = ...")
            if rng is None:
                _fail(f"{info.kind}: list {name!r} grows without bound in a while loop with a data-dependent condition",
                      info, "loop over range(max_steps) with a break, or preallocate a buffer and write buf[i] = ...")
            value = _Appender(name, list(value))
        checked.append(value)
    return tuple(checked)


def _promote_numbers(state, free, info, rng, body_fn, item_from_rows):
    """Carried Python numbers → 0-d tensors of the dtype the body gives them; size appenders.

    Runs the body once outside the loop (a probe; its ops are dead code and get removed) to
    learn the dtypes, shapes and list elements the loop produces, and to check them.
    """
    promoted = [_number_to_tensor(v) for v in state]
    probe_in = [
        v.copy() if isinstance(v, _Appender) else (v.clone() if isinstance(v, torch.Tensor) and n in info.mutated else v)
        for n, v in zip(info.names, promoted)
    ]
    params = tuple(probe_in) + tuple(free[: len(info.params) - len(info.names)])
    with probing():
        if rng is not None:
            first = _as_int64(rng.start)
            item = getitem(free[-1], first) if item_from_rows else first
            outs = body_fn(item, *params)
        else:
            outs = body_fn(*params)
    final = []
    for name, before, original, after in zip(info.names, promoted, state, outs):
        if isinstance(before, _Appender):
            final.append(_allocate(before, after, rng, info))
            continue
        if before is None and name == RETVAL:
            before = _return_placeholder(after, info)
        if isinstance(before, torch.Tensor) and _is_number(original):
            after_t = after if isinstance(after, torch.Tensor) else _scalar(after)
            before = before.to(torch.promote_types(before.dtype, after_t.dtype))
        _check_carry(name, before, after, info)
        final.append(before)
    return tuple(final)


def _return_placeholder(returned, info):
    """The carried return value before any iteration returned: zeros of the returned type.

    Read only where the loop's return flag is true, which the iteration that returns sets
    together with the value; so the zeros never reach an output.
    """
    if _is_number(returned):
        returned = _scalar(returned)
    if not isinstance(returned, torch.Tensor):
        _fail(f"{info.kind}: return inside a data-dependent loop returns a "
              f"{type(returned).__name__ if returned is not None else 'value on no path'}, not a tensor", info,
              "return one tensor from inside the loop, or assign the result to a variable, break, and return after the loop")
    return torch.zeros_like(returned, memory_format=torch.contiguous_format)


def _number_to_tensor(value):
    if isinstance(value, torch.SymInt):
        return _as_int64(value)
    if isinstance(value, torch.SymBool):
        return torch.full((), value, dtype=torch.bool)
    if isinstance(value, torch.SymFloat):
        return torch.full((), value, dtype=torch.get_default_dtype())
    if _is_number(value):
        return _scalar(value)
    return value


def _allocate(appender: _Appender, probed, rng, info):
    values = probed.probe if isinstance(probed, _Appender) else []
    if not values:
        _fail(f"{info.kind}: could not learn the element type of list {appender.name!r} (no append on the first "
              "iteration)", info, "append on every iteration or preallocate a buffer and write buf[i] = ...")
    element = values[0]
    trips = rng.trip_count()
    if isinstance(trips, torch.Tensor):
        trips = trips.item()
        torch._check(trips >= 0)
    buf = torch.zeros((trips,) + tuple(element.shape), dtype=element.dtype)
    result = _Appender(appender.name, appender.initial, buf, torch.zeros((), dtype=torch.int64))
    return result


def _check_carry(name, before, after, info):
    if isinstance(before, torch.Tensor):
        if isinstance(after, Undefined) or after is None:
            _fail(f"{info.kind}: loop variable {name!r} has no value after an iteration", info,
                  f"assign {name!r} on every path of the loop body")
        after_t = after if isinstance(after, torch.Tensor) else _scalar(after)
        if after_t.dtype != before.dtype:
            _fail(f"{info.kind}: loop variable {name!r} changes dtype from {_dtype(before)} to {_dtype(after_t)}",
                  info, f"cast {name!r} to one dtype before the loop")
        if after_t.dim() != before.dim() or not all(_same_size(a, b) for a, b in zip(after_t.shape, before.shape)):
            grown = after_t.dim() == before.dim()
            _fail(f"{info.kind}: loop variable {name!r} changes shape from {tuple(before.shape)} to "
                  f"{tuple(after_t.shape)}" + (" (grown without bound)" if grown else ""), info,
                  "preallocate a buffer and write buf[i] = ..., or append to a list and torch.stack it")
    elif not isinstance(before, _Appender) and after is not before and not (_is_number(before) and before == after):
        _fail(f"{info.kind}: loop variable {name!r} is a {type(before).__name__} that changes in a data-dependent loop",
              info, "carry tensors only")


class _Layout:
    """Maps loop state (tensors, appenders, constants) to the flat tuple of carried tensors."""

    def __init__(self, names, state):
        self.names = names
        self.kinds = []
        self.constants = {}
        for i, value in enumerate(state):
            if isinstance(value, _Appender):
                self.kinds.append(("appender", value.name, value.initial))
            elif isinstance(value, torch.Tensor):
                self.kinds.append(("tensor", value.dtype, value.dim()))
            else:
                self.kinds.append(("constant",))
                self.constants[i] = value

    def pack(self, values, info) -> tuple:
        flat = []
        for i, (kind, value) in enumerate(zip(self.kinds, values)):
            name = self.names[i]
            if kind[0] == "appender":
                if not isinstance(value, _Appender):
                    _fail(f"{info.kind}: list {name!r} is replaced inside a data-dependent loop", info, "only append to it")
                flat.extend([value.buf, value.length])
            elif kind[0] == "tensor":
                tensor = value if isinstance(value, torch.Tensor) else _number_tensor(name, value, kind[1], info)
                if tensor.dtype != kind[1]:
                    _fail(f"{info.kind}: loop variable {name!r} changes dtype from {_dtype_name(kind[1])} to "
                          f"{_dtype(tensor)}", info, f"cast {name!r} to one dtype before the loop")
                flat.append(tensor)
            elif value is not self.constants[i] and not (_is_number(value) and value == self.constants[i]):
                _fail(f"{info.kind}: loop variable {name!r} is a {type(value).__name__} that changes in a "
                      "data-dependent loop", info, "carry tensors only")
        return tuple(flat)

    def unpack(self, carried, with_counter: bool, fresh: bool = False, mutated=()):
        carried = list(carried)
        counter = carried.pop(0) if with_counter else None
        values = []
        for i, kind in enumerate(self.kinds):
            if kind[0] == "appender":
                values.append(_Appender(kind[1], kind[2], carried.pop(0), carried.pop(0)))
            elif kind[0] == "tensor":
                tensor = carried.pop(0)
                values.append(tensor.clone() if fresh and self.names[i] in mutated else tensor)
            else:
                values.append(self.constants[i])
        return counter, values


def _number_tensor(name, value, dtype, info):
    if isinstance(value, (Undefined, type(None))):
        _fail(f"{info.kind}: loop variable {name!r} has no value after an iteration", info,
              f"assign {name!r} on every path of the loop body")
    if isinstance(value, torch.SymBool):
        return torch.full((), value, dtype=dtype)
    if isinstance(value, (torch.SymInt, torch.SymFloat)):
        return torch.full((), value, dtype=dtype)
    return _scalar(value, dtype)


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _finish_appenders(values, info):
    finished = []
    for value in values:
        if isinstance(value, _Appender):
            value.exact = info.kind == "for" and value.name in info.exact_appends and not info.break_flag
        finished.append(value)
    return finished
