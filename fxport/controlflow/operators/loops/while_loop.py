"""Lower a data-dependent loop to ``torch._higher_order_ops.while_loop`` (ONNX ``Loop``).

Ranges get an int64 counter, lists grown with ``.append`` become an
:class:`~fxport.controlflow.operators.lists.appender.Appender` (a preallocated buffer plus a length
for a range; for a ``while`` loop or elements that change size, a count whose rows a second run
of the loop writes when the list is stacked: :class:`_Loop` runs it), carried Python numbers
become 0-d tensors of the dtype the body gives them. The body is run once outside the loop
(a *probe*) to learn those types; its ops are dead code and get removed.

Size: the probe, the carried-state preparation and the loop's two runs share their state
(``_Loop``); the kinds of state have their own modules (appender.py, growing.py, peeling.py,
optional.py), what stays here is the one lowering that sequences them.

Example::

    >>> import torch
    >>> from fxport.controlflow.operators import StatementInfo
    >>> from fxport.controlflow.operators.loops.while_loop import tensor_loop
    >>> from fxport.controlflow.operators.loops.statements import TensorRange
    >>> info = StatementInfo("for", None, ("acc",), params=("acc",))
    >>> tensor_loop(info, (torch.tensor(0),), (), body_fn=lambda i, acc: (acc + i,), rng=TensorRange(0, 4, 1))
    (tensor(6),)
"""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from fxport.controlflow.operators.lists.appender import Appender, SelectedBefore
from fxport.controlflow.operators.lists.selected import joined_after, lists_selected_before
from fxport.controlflow.operators.containers import fresh_copy, is_container
from fxport.controlflow.operators.failures import check_side_effects, fail, find_error
from fxport.controlflow.operators.loops.growing import grown_loop, loops_made_so_far
from fxport.controlflow.operators.indexing import getitem
from fxport.controlflow.operators.lists.carried import allocate, allocate_growing, finish, finish_grown
from fxport.controlflow.operators.logical import not_
from fxport.controlflow.operators.loops.peeling import peeled_loop
from fxport.controlflow.operators.optional import as_optional, is_optional, placeholder, unset
from fxport.controlflow.operators.rule_names import rule_name
from fxport.controlflow.operators.state import probing, record
from fxport.controlflow.operators.values import (
    Undefined,
    as_bool_tensor,
    as_int64,
    dense,
    dtype_name,
    is_number,
    numbers_as_tensors,
    restore_size_relations,
    same_size,
    scalar,
    size_relations,
)


def tensor_loop(info, state, free, *, body_fn, test_fn=None, rng=None, item_from_rows=False):
    """Lower a loop to ``while_loop`` with an int64 counter for ranges.

    Carried: (counter, stop) + loop state + the enclosing function's values the body reads
    (passed through unchanged, so the body closes over no traced tensor).
    """
    kind = info.kind
    check_side_effects(info, kind)
    state, selected_before = lists_selected_before(state)
    free = tuple(as_int64(v) if _read_from_data(v) else v for v in free)  # while_loop takes no unbacked number
    values = peeled_loop(info, state, free, body_fn, test_fn, rng, item_from_rows, _rest_of_loop)
    if values is None:
        values = _tensor_loop(info, state, free, body_fn, test_fn, rng, item_from_rows)
    return joined_after(values, selected_before)


def _rest_of_loop(info, state, free, body_fn, test_fn, rng, item_from_rows) -> tuple:
    """The loop after its peeled first trip (:mod:`~fxport.controlflow.operators.loops.peeling`)."""
    return _tensor_loop(info, state, free, body_fn, test_fn, rng, item_from_rows)


def _read_from_data(value) -> bool:
    """A number read from a tensor while exporting (``idx.item()``): an unbacked SymInt/SymFloat."""
    return isinstance(value, (torch.SymInt, torch.SymFloat)) and bool(free_unbacked_symbols(value))


def _tensor_loop(info, state, free, body_fn, test_fn, rng, item_from_rows) -> tuple:
    kind, names = info.kind, info.names
    none_before = frozenset(n for n, v in zip(info.names, state) if v is None)
    state = _loop_entry_state(state, info, rng)
    growing, made = {}, loops_made_so_far()
    state = _promote_numbers(state, free, info, rng, body_fn, item_from_rows, growing, made, none_before)
    if growing or loops_made_so_far() > made:  # carried shapes change, here or in a loop of the body
        return finish_grown(grown_loop(info, state, free, body_fn=body_fn, test_fn=test_fn, rng=rng,
                                       item_from_rows=item_from_rows, growing=growing))
    loop = _Loop(info, free, body_fn, test_fn, rng, item_from_rows)
    values = finish(loop.run(state), state, info, loop)
    two_pass = any(isinstance(v, Appender) and v.mode == "count" for v in values)
    lowering = "while_loop (ONNX Loop)" + (
        " twice (count, then write the appended rows)" if two_pass else " + preallocated buffer" if info.appended else "")
    counter_text = "int64 counter over a data-dependent range" if rng is not None else "tensor condition"
    record(info, rule_name(kind, "while_loop"), f"{lowering}: {counter_text}; carries {', '.join(names) or 'nothing'}",
           lowering=lowering, carried=list(names), least_trips=rng.least_trips() if rng is not None and test_fn is None else 0)
    return tuple(values)


class _Loop:
    """One lowered loop; :meth:`run` emits a ``while_loop`` for a given entry state (the second
    pass of a grown list runs it again with the list in ``write`` mode)."""

    def __init__(self, info, free, body_fn, test_fn, rng, item_from_rows):
        self.info, self.free, self.body_fn, self.test_fn = info, tuple(free), body_fn, test_fn
        self.rng, self.item_from_rows = rng, item_from_rows
        self.names = tuple(info.params) + (("_fx_rows",) if item_from_rows else ())

    def run(self, state, free=None) -> list:
        """The loop state after a ``while_loop`` that starts from ``state`` (and ``free``, the
        values the body reads; by default those the loop was built with)."""
        from torch._higher_order_ops.while_loop import while_loop

        rng, free = self.rng, self.free if free is None else tuple(free)
        layout = _Layout(self.names, tuple(state) + free)
        carried = tuple(dense(t) for t in layout.pack(tuple(state) + free, self.info))
        if rng is not None:
            carried = (as_int64(rng.start), as_int64(rng.stop)) + carried
        relations = size_relations(carried)

        def cond_fn(*carried):
            restore_size_relations(carried, relations)
            counter, stop, rest = self._split(carried)
            return self._keep_going(counter, layout.unpack(rest), stop)

        def step_fn(*carried):
            restore_size_relations(carried, relations)
            counter, stop, rest = self._split(carried)
            return self._step(counter, stop, layout, layout.unpack(rest, fresh=True, mutated=self.info.mutated))

        try:
            final = while_loop(cond_fn, step_fn, carried)
        except Exception as exc:
            inner = find_error(exc)
            if inner is not None:
                raise inner from None
            raise
        # fresh tensors: an in-place write into a view of an output (view = h[:, 1:3]; view.mul_(2)
        # after the loop) is refused by autograd for the outputs of a multi-output op (fuzzer find)
        _, _, rest = self._split(tuple(dense(t) if isinstance(t, torch.Tensor) else t for t in final))
        return layout.unpack(rest)[: len(self.info.names)]

    def _split(self, carried):
        carried = list(carried)
        counter = stop = None
        if self.rng is not None:
            counter, stop = carried.pop(0), carried.pop(0)
        return counter, stop, carried

    def _keep_going(self, counter, values, stop):
        info, count, ok = self.info, len(self.info.names), None
        if self.rng is not None:
            ok = _in_range(counter, stop, self.rng.step)
        if info.break_flag:
            ok = _and(ok, not_(values[info.names.index(info.break_flag)]))
        if self.test_fn is not None:
            ok = _and(ok, self.test_fn(*values[:count], *values[count:len(info.params)]))
        return as_bool_tensor(ok)

    def _step(self, counter, stop, layout, values):
        info, count = self.info, len(self.info.names)
        params = values[: len(info.params)]
        if self.rng is not None:
            item = getitem(values[-1], counter) if self.item_from_rows else counter.clone()
            new_state = self.body_fn(item, *params)
        else:
            new_state = self.body_fn(*params)
        packed = layout.pack(tuple(new_state) + tuple(values[count:]), info, previous=values)
        if self.rng is not None:
            packed = (counter + self.rng.step, stop) + packed
        return tuple(dense(t) for t in packed)


def _in_range(counter, stop, step: int):
    """The loop test of ``range``: the counter has not reached ``stop``."""
    return counter < stop if step > 0 else counter > stop


def _and(a, b):
    if a is None:
        return b
    return torch.logical_and(as_bool_tensor(a), as_bool_tensor(b))


def _loop_entry_state(state, info, rng):
    checked = []
    for name, value in zip(info.names, state):
        if isinstance(value, Undefined) and name in info.written_first:
            checked.append(None)  # a placeholder the probe shapes; no iteration reads it (eager: unbound)
            continue
        if isinstance(value, Undefined):
            fail(f"{info.kind}: variable {name!r} is first defined inside a data-dependent loop and read "
                 f"after it or in the next iteration, with no value before the loop", info,
                 f"give {name!r} an initial value before the loop")
        if value is None:  # a return value, or a variable None until an iteration sets it: the probe
            checked.append(value)  # learns the value's type (a MaybeNone placeholder, _promote_numbers)
            continue
        if name in info.appended:
            if isinstance(value, Appender):
                fail(f"{info.kind}: list {name!r} is appended to in nested data-dependent loops", info,
                     f"collect the inner loop's rows in a list of its own and append torch.stack/torch.cat of it to {name!r}")
            if not isinstance(value, list):
                fail(f"{info.kind}: {name!r} is appended to but is not a list", info, "use a list")
            # numbers among the initial elements as 0-d tensors: an unbacked one (idx.item()) in
            # a list dynamo reads as a constant is refused ("Unbacked SymInt input")
            value = Appender(name, value if isinstance(value, SelectedBefore) else numbers_as_tensors(value))
            value.location = info.location
        checked.append(value)
    return tuple(checked)


def _promote_numbers(state, free, info, rng, body_fn, item_from_rows, growing=None, made=None, none_before=frozenset()):
    """Carried Python numbers → 0-d tensors of the dtype the body gives them; size appenders.

    Runs the body once outside the loop (a probe; its ops are dead code and get removed) to
    learn the dtypes, shapes and list elements the loop produces, and to check them. A variable
    in ``none_before`` (None, not unbound, before the loop) that the body sets becomes a MaybeNone
    (zeros after no trip would not be None). A tensor
    that grows (same rank, other sizes) is noted in ``growing`` (state index → axes) instead of
    refused when ``growing`` is given; the lists of such a loop, or of one whose body made a
    grown loop (more than ``made`` so far), grow too.
    """
    promoted = [_number_to_tensor(v) for v in state]
    probe_in = [
        v.copy() if isinstance(v, Appender) else fresh_copy(v) if is_container(v) else
        (v.clone() if isinstance(v, torch.Tensor) and n in info.mutated else v)
        for n, v in zip(info.names, promoted)
    ]
    params = tuple(probe_in) + tuple(free[: len(info.params) - len(info.names)])
    with probing():
        if rng is not None:
            first = as_int64(rng.start)
            item = getitem(free[-1], first) if item_from_rows else first
            outs = body_fn(item, *params)
        else:
            outs = body_fn(*params)
    final, lists = [], {}
    for name, before, original, after in zip(info.names, promoted, state, outs):
        if isinstance(before, Appender):
            lists[len(final)] = (before, after)
            final.append(allocate(before, after, rng, info))
            continue
        if before is None and name == info.retval:
            before = _return_placeholder(after, info)
        elif before is None and name in none_before and after is not None:
            before = _none_placeholder(name, after, info)
        elif before is None and name in info.written_first:
            before = _unbound_placeholder(name, after, info)
        if is_optional(before):
            _check_optional_carry(name, before, as_optional(after, before), info)
            final.append(before)
            continue
        if isinstance(before, torch.Tensor) and is_number(original):
            after_t = after if isinstance(after, torch.Tensor) else scalar(after)
            before = before.to(torch.promote_types(before.dtype, after_t.dtype))
        axes = _check_carry(name, before, after, info, growing is not None)
        if axes:
            growing[len(final)] = axes
        final.append(before)
    read_inside = any(getattr(after, "read_inside", False) for _, after in lists.values())
    if growing or read_inside or (made is not None and loops_made_so_far() > made):  # lists: stacks, a row per append
        for index, (before, after) in lists.items():
            final[index], growing[index] = allocate_growing(before, after, info), {0: (0,)}
    return tuple(final)


def _return_placeholder(returned, info):
    """The carried return value before any iteration returned: zeros of the returned type.

    Read only where the loop's return flag is true, which the iteration that returns sets
    together with the value; so the zeros never reach an output.
    """
    if is_number(returned):
        returned = scalar(returned)
    if not isinstance(returned, torch.Tensor):
        fail(f"{info.kind}: return inside a data-dependent loop returns a "
             f"{type(returned).__name__ if returned is not None else 'value on no path'}, not a tensor", info,
             "return one tensor from inside the loop, or assign the result to a variable, break, and return after the loop")
    return torch.zeros_like(returned, memory_format=torch.contiguous_format)


def _unbound_placeholder(name: str, assigned, info):
    """A variable the loop body binds before reading it, with no value before the loop: zeros of
    the type the body gives it. The body overwrites them before any read; after the loop they
    remain only where the loop ran no iteration, where eager raises (the name is unbound)."""
    if is_number(assigned):
        assigned = scalar(assigned)
    if not isinstance(assigned, torch.Tensor):
        fail(f"{info.kind}: variable {name!r} is first defined inside a data-dependent loop and holds a "
             f"{type(assigned).__name__}, not a tensor or number", info,
             f"give {name!r} an initial value before the loop")
    return torch.zeros_like(assigned, memory_format=torch.contiguous_format)


def _none_placeholder(name: str, assigned, info):
    """A variable None before the loop that an iteration sets: an unset
    :class:`~fxport.controlflow.operators.optional.MaybeNone` whose placeholder has the type the
    body gives it; ``x is None`` in the body and after the loop is its flag."""
    if is_number(assigned):
        fail(f"{info.kind}: loop variable {name!r} is None before a data-dependent loop that sets it to a number",
             info, f"initialise {name!r} with a number before the loop")
    leaves = pytree.tree_leaves(placeholder(assigned))
    if not leaves or not all(isinstance(leaf, torch.Tensor) for leaf in leaves):
        fail(f"{info.kind}: loop variable {name!r} is None before a data-dependent loop that sets it to a "
             f"{type(assigned).__name__}", info, f"initialise {name!r} with a tensor of the shape and dtype the loop produces")
    return unset(assigned, info.location)


def _check_optional_carry(name, before, after, info) -> None:
    """A variable None on some paths keeps one structure, dtypes and shapes from one iteration to the next."""
    leaves_b, spec_b = pytree.tree_flatten(before.value)
    leaves_a, spec_a = pytree.tree_flatten(after.value)
    if spec_a != spec_b:
        fail(f"{info.kind}: loop variable {name!r}, None before the loop, holds values of different structures in "
             "the loop", info, f"initialise {name!r} before the loop with the value the loop gives it")
    for leaf_b, leaf_a in zip(leaves_b, leaves_a):
        _check_carry(name, leaf_b, leaf_a, info)


def _number_to_tensor(value):
    if isinstance(value, torch.SymInt):
        return as_int64(value)
    if isinstance(value, torch.SymBool):
        return torch.full((), value, dtype=torch.bool)
    if isinstance(value, torch.SymFloat):
        return torch.full((), value, dtype=torch.get_default_dtype())
    if is_number(value):
        return scalar(value)
    return value


def _check_carry(name, before, after, info, may_grow: bool = False):
    """Refuse a carried value whose type changes; with ``may_grow``, return the axes along
    which a tensor of one rank changes size (a loop whose state grows)."""
    if isinstance(before, torch.Tensor):
        if isinstance(after, Undefined) or after is None:
            fail(f"{info.kind}: loop variable {name!r} has no value after an iteration", info,
                 f"assign {name!r} on every path of the loop body")
        after_t = after if isinstance(after, torch.Tensor) else scalar(after)
        if after_t.dtype != before.dtype:
            fail(f"{info.kind}: loop variable {name!r} changes dtype from {dtype_name(before)} to {dtype_name(after_t)}",
                 info, f"cast {name!r} to one dtype before the loop")
        if after_t.dim() != before.dim() or not all(same_size(a, b) for a, b in zip(after_t.shape, before.shape)):
            grown = after_t.dim() == before.dim()
            if grown and may_grow:
                return tuple(i for i, (a, b) in enumerate(zip(after_t.shape, before.shape)) if not same_size(a, b))
            fail(f"{info.kind}: loop variable {name!r} changes shape from {tuple(before.shape)} to "
                 f"{tuple(after_t.shape)}" + (" (grown without bound)" if grown else ""), info,
                 "preallocate a buffer and write buf[i] = ..., or append to a list and torch.stack it")
    elif may_grow and _tensor_tree(before) and _tensor_tree(after):  # a KV cache per layer: a list of tensors
        return _check_tree_carry(name, before, after, info)
    elif not isinstance(before, Appender) and after is not before and not (is_number(before) and before == after):
        fail(f"{info.kind}: loop variable {name!r} is a {type(before).__name__} that changes in a data-dependent loop",
             info, "carry tensors only")


def _tensor_tree(value) -> bool:
    """A list or tuple (nested) of tensors, or a library object (a transformers cache)."""
    if not isinstance(value, (list, tuple)):
        return is_container(value)
    leaves = pytree.tree_leaves(value)
    return bool(leaves) and all(isinstance(leaf, torch.Tensor) for leaf in leaves)


def _check_tree_carry(name, before, after, info) -> dict | None:
    """``{leaf: axes}`` of the growing leaves of a carried list of tensors (None: none grows,
    and the list cannot be carried by ``while_loop``, which refuses it as before)."""
    leaves_before, spec_before = pytree.tree_flatten(before)
    leaves_after, spec_after = pytree.tree_flatten(after)
    if spec_before != spec_after:
        return None
    axes = {}
    for leaf, (b, a) in enumerate(zip(leaves_before, leaves_after)):
        grown = _check_carry(f"{name}{pytree.keystr(pytree.tree_flatten_with_path(before)[0][leaf][0])}", b, a, info, True)
        if grown:
            axes[leaf] = grown
    return axes or None


class _Layout:
    """Maps loop state (tensors, appenders, constants) to the flat tuple of carried tensors."""

    def __init__(self, names, state):
        self.names = names
        self.kinds = []
        self.constants = {}
        for i, value in enumerate(state):
            if isinstance(value, Appender):
                self.kinds.append(("appender", value))
            elif is_optional(value):
                self.kinds.append(("optional", pytree.tree_flatten(value)[1]))
            elif isinstance(value, torch.Tensor):
                self.kinds.append(("tensor", value.dtype, value.dim()))
            else:
                self.kinds.append(("constant",))
                self.constants[i] = value

    def pack(self, values, info, previous=None) -> tuple:
        """The carried tensors of ``values``; ``previous``: the values an iteration started from
        (a variable None on some paths that the iteration set to None keeps its placeholder)."""
        flat = []
        for i, (kind, value) in enumerate(zip(self.kinds, values)):
            name = self.names[i]
            if kind[0] == "optional":
                if value is not None and not is_optional(value) and not _leaves_are_tensors(value):
                    fail(f"{info.kind}: loop variable {name!r}, None on some paths, gets a {type(value).__name__}",
                         info, f"give {name!r} tensors only")
                template = previous[i] if previous is not None else None
                if value is None and template is None:
                    fail(f"{info.kind}: loop variable {name!r} has no value after an iteration", info,
                         f"assign {name!r} on every path of the loop body")
                leaves = pytree.tree_leaves(as_optional(value, template))
                if len(leaves) != kind[1].num_leaves:
                    fail(f"{info.kind}: loop variable {name!r}, None before the loop, holds values of different "
                         "structures in the loop", info, f"initialise {name!r} before the loop with the value the loop gives it")
                flat.extend(leaves)
            elif kind[0] == "appender":
                if not isinstance(value, Appender):
                    fail(f"{info.kind}: list {name!r} is replaced inside a data-dependent loop", info, "only append to it")
                flat.extend([value.data, value.length])
            elif kind[0] == "tensor":
                tensor = value if isinstance(value, torch.Tensor) else _number_tensor(name, value, kind[1], info)
                if tensor.dtype != kind[1]:
                    fail(f"{info.kind}: loop variable {name!r} changes dtype from {dtype_name(kind[1])} to "
                         f"{dtype_name(tensor)}", info, f"cast {name!r} to one dtype before the loop")
                flat.append(tensor)
            elif value is not self.constants[i] and not (is_number(value) and value == self.constants[i]):
                fail(f"{info.kind}: loop variable {name!r} is a {type(value).__name__} that changes in a "
                     "data-dependent loop", info, "carry tensors only")
        return tuple(flat)

    def unpack(self, carried, fresh: bool = False, mutated=()) -> list:
        carried = list(carried)
        values = []
        for i, kind in enumerate(self.kinds):
            if kind[0] == "appender":
                values.append(kind[1].rebuilt(carried.pop(0), carried.pop(0)))
            elif kind[0] == "optional":
                leaves = [carried.pop(0) for _ in range(kind[1].num_leaves)]
                values.append(pytree.tree_unflatten(leaves, kind[1]))
            elif kind[0] == "tensor":
                tensor = carried.pop(0)
                values.append(tensor.clone() if fresh and self.names[i] in mutated else tensor)
            else:
                values.append(self.constants[i])
        return values


def _leaves_are_tensors(value) -> bool:
    leaves = pytree.tree_leaves(value)
    return bool(leaves) and all(isinstance(leaf, torch.Tensor) for leaf in leaves)


def _number_tensor(name, value, dtype, info):
    if isinstance(value, (Undefined, type(None))):
        fail(f"{info.kind}: loop variable {name!r} has no value after an iteration", info,
             f"assign {name!r} on every path of the loop body")
    if isinstance(value, (torch.SymBool, torch.SymInt, torch.SymFloat)):
        return torch.full((), value, dtype=dtype)
    return scalar(value, dtype)
