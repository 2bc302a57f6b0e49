"""Lower a data-dependent loop to ``torch._higher_order_ops.while_loop`` (ONNX ``Loop``).

Ranges get an int64 counter, lists grown with ``.append`` become an
:class:`~fxport.controlflow.operators.lists.appender.Appender` (a preallocated buffer plus a length
for a range; for a ``while`` loop or elements that change size, a count whose rows a second run
of the loop writes when the list is stacked: :class:`_Loop` runs it), carried Python numbers
become 0-d tensors of the dtype the body gives them. The body is run once outside the loop
(a *probe*, on copies of every tensor) to learn those types; its ops are dead code and get
removed. A tensor the probe wrote in place that the converter did not see written (a function
the body calls writes it) is carried too (:class:`_Writes`: the loop starts again carrying it).

Size: the probe, the carried-state preparation and the loop's two runs share their state
(``_Loop``, and :class:`_Writes`, which the probe's findings reshape); the kinds of state have
their own modules (appender.py, growing.py, peeling.py, optional.py), what stays here is the one
lowering that sequences them.

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

import dataclasses

import torch
import torch.utils._pytree as pytree
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols, statically_known_true
from torch.multiprocessing.reductions import StorageWeakRef

from fxport.controlflow.operators.size_tests import body_knowing_sizes
from fxport.controlflow.operators.lists.appender import Appender, SelectedBefore
from fxport.controlflow.operators.lists.selected import joined_after, lists_selected_before
from fxport.controlflow.operators.containers import is_container
from fxport.controlflow.operators.counters import note_counter
from fxport.controlflow.operators.failures import check_side_effects, fail, find_error, writes_an_input
from fxport.controlflow.operators.loops.growing import grown_loop, loops_made_so_far
from fxport.controlflow.operators.loops.module_state import carrying_module_state
from fxport.controlflow.operators.indexing import getitem
from fxport.controlflow.operators.lists.carried import allocate, allocate_growing, finish, finish_grown
from fxport.controlflow.operators.logical import not_
from fxport.controlflow.operators.loops.peeling import FirstTripReshapes, peeled_loop, reshapes
from fxport.controlflow.operators.optional import (as_optional, has_unset_entries, is_optional, placeholder,
                                                   shaped_like, unset, with_unset_entries)
from fxport.controlflow.operators.rule_names import rule_name
from fxport.controlflow.operators.state import is_probing, probing, record
from fxport.controlflow.operators.targets import probe_copy, versions, written_into
from fxport.controlflow.operators.values import (
    Undefined,
    as_bool_tensor,
    as_int64,
    dense,
    dtype_name,
    is_number,
    is_symbolic,
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
    if rng is None and test_fn is not None:  # a while on a size: its body knows that size is >= 1
        body_fn = body_knowing_sizes(test_fn, body_fn)
    values = carrying_module_state(  # attributes of modules the body reaches, written by what it calls
        info, state, free, body_fn, test_fn, rng is not None,
        lambda info, state, free, body_fn, test_fn: _carrying_writes(info, state, free, body_fn, test_fn, rng,
                                                                      item_from_rows))
    return joined_after(values, selected_before)


def _lowered(info, state, free, body_fn, test_fn, rng, item_from_rows) -> tuple:
    """The loop's final state: its first trip peeled where that sets a None or changes the rank
    of a carried tensor (seen when the probe of ``_tensor_loop`` refuses it), then while_loop."""
    values = peeled_loop(info, state, free, body_fn, test_fn, rng, item_from_rows, _rest_of_loop)
    if values is not None:
        return values
    try:
        return _tensor_loop(info, state, free, body_fn, test_fn, rng, item_from_rows)
    except FirstTripReshapes as changed:  # the probe saw a carried tensor change rank
        if changed.info is not info:  # a loop inside the body, or the rest of a peeled loop
            raise
        reshaped = changed
    # outside the except: an error of the peeled loop must not carry this one as its context
    # (find_error would report it)
    try:
        return peeled_loop(info, state, free, body_fn, test_fn, rng, item_from_rows, _rest_of_loop, reshaped)
    except _BodyWrote:  # the first trip already wrote the state it would start again from
        fail(f"{info.kind}: a function the loop body calls writes a carried tensor in place from the second "
             f"iteration on, in a loop whose first iteration runs on its own (it changes the shape of "
             f"{reshaped.name!r} from {reshaped.before} to {reshaped.after})", info,
             f"give {reshaped.name!r} the shape {reshaped.after} before the loop")


# --- tensors a function the body calls writes in place ------------------------------------------

#: the attribute of a loop's StatementInfo holding what probes of its body saw written in place
#: (set outside any traced body; a loop nested in a body dynamo traces reads it there)
_SEEN = "_fx_seen_written"
#: the state a loop carries for a tensor its body rebinds after a called function wrote it: what
#: the first trip left in the tensor it started from, and whether a trip ran
FIRST, TRIPPED = "_fx_first_", "_fx_tripped"


class _BodyWrote(Exception):
    """A probe of a loop body wrote carried tensors in place that the loop's StatementInfo does
    not name as written (a function the body calls wrote them): ``names``; ``kept``: the state
    names the body gave back as the very object it got (not rebound)."""

    def __init__(self, token, names, kept):
        super().__init__("a loop body wrote carried tensors in place")
        self.token, self.names, self.kept = token, frozenset(names), frozenset(kept)


def _carrying_writes(info, state, free, body_fn, test_fn, rng, item_from_rows) -> tuple:
    """The loop's final state, carrying every tensor its body writes in place, also where a
    function it calls writes it (``state[5*i+1] = x`` in a method the body calls with ``state``).

    The probe of the body runs on copies of every tensor (:func:`probe_copy`); one it wrote that
    the StatementInfo does not name makes the loop start again as a loop that carries it
    (:class:`_Writes`): a tensor the body only read (the enclosing function's) becomes loop state,
    each trip writes its own clone, and after the loop the tensor the loop started from takes the
    value eager leaves in it (``copy_``: its aliases, views and the caller see it). What the
    probes of this run found is kept on the StatementInfo for the same loop met again inside a
    body dynamo traces, where no probe can start the loop again."""
    traced = torch.compiler.is_dynamo_compiling()
    writes = (getattr(info, _SEEN, None) if traced else None) or _Writes(info)
    while True:
        token = None if traced else object()  # no probe raises in a traced body
        entry, entry_free = writes.entry(state, free)
        try:
            values = _lowered(writes.info, entry, entry_free, writes.body(body_fn, token, rng is not None),
                              writes.test(test_fn), rng, item_from_rows)
        except _BodyWrote as wrote:
            if wrote.token is not token:
                raise
            _refuse_shared_memory(info, wrote.names, state, free)
            writes = writes.widened(wrote, state)
            continue
        if not traced:
            setattr(info, _SEEN, writes)
        return writes.written_back(values, state, free)


def _refuse_shared_memory(info, written, state, free) -> None:
    """Refuse a tensor a called function writes in place that shares memory with another value
    the loop carries (``row = y[0]`` both read and written there): each is carried on its own, so
    the other would not see the write."""
    values = dict(zip(info.params, tuple(state) + tuple(free)))
    for name in sorted(written):
        for other, value in values.items():
            if other != name and _share_memory(values.get(name), value):
                fail(f"{info.kind}: {name!r} and {other!r} share memory (one is a view of the other, or they are one "
                     f"tensor), and a function the loop body calls writes {name!r} in place", info,
                     f"pass one of them only, or a copy (.clone()) of {other!r}")


def _share_memory(a, b) -> bool:
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    try:
        return StorageWeakRef(a.untyped_storage()) == StorageWeakRef(b.untyped_storage())
    except (RuntimeError, NotImplementedError):  # a tensor without storage (sparse): taken as apart
        return a is b


class _Writes:
    """A loop as it carries the tensors probes saw its body write in place (``written``): a free
    tensor (``moved``) becomes loop state; a state tensor the converter did not see written is
    cloned per trip, and the tensor it started from takes the final value after the loop when the
    body gives it back (``kept``, ``back``), or what the first trip wrote into it when the body
    rebinds it (``first``: carried as ``_fx_first_<name>`` beside a ``_fx_tripped`` flag)."""

    def __init__(self, info, written=frozenset(), kept=frozenset(), first=frozenset()):
        own = tuple(info.params[len(info.names):])
        self.original, self.written, self.kept = info, frozenset(written), frozenset(kept) - frozenset(first)
        self.moved = tuple(n for n in own if n in written)
        unseen = [n for n in info.names if n in written and n not in info.mutated]
        self.first = tuple(n for n in unseen if n in first)
        self.back = tuple(n for n in unseen if n in self.kept)
        extra = self.moved + tuple(FIRST + n for n in self.first) + ((TRIPPED,) if self.first else ())
        names = tuple(info.names) + extra
        self.extended = bool(extra)  # the loop carries more than the original's names
        self.params = names + tuple(n for n in own if n not in self.moved)
        mutated = tuple(sorted(set(info.mutated) | (self.written & set(names))))
        self.info = info if names == tuple(info.names) and mutated == tuple(info.mutated) else \
            dataclasses.replace(info, names=names, params=self.params, mutated=mutated)

    def widened(self, wrote: _BodyWrote, state) -> "_Writes":
        """These writes and what a probe found besides (``wrote``); ``state``: the loop's entry.
        A state name one probe saw rebound is no longer kept (the first trip's write is what stays)."""
        info = self.original
        rebound = {n for n in wrote.names - wrote.kept if n in info.names}
        first = set(self.first) | {n for n in rebound if isinstance(state[info.names.index(n)], torch.Tensor)}
        return _Writes(info, self.written | wrote.names, (self.kept | wrote.kept) - rebound, first)

    def entry(self, state, free) -> tuple:
        """(state, free) the loop starts from: the moved tensors and the first trip's snapshots
        after the state, the rest of ``free`` (and what follows the body's own values) after."""
        info = self.original
        if not self.extended:
            return tuple(state), tuple(free)
        own = len(info.params) - len(info.names)
        by_name = dict(zip(info.params[len(info.names):], free[:own]))
        snapshots = tuple(state[info.names.index(n)] for n in self.first)
        flag = (torch.zeros((), dtype=torch.bool),) if self.first else ()
        rest = tuple(v for n, v in by_name.items() if n not in self.moved) + tuple(free[own:])
        return tuple(state) + tuple(by_name[n] for n in self.moved) + snapshots + flag, rest

    def body(self, body_fn, token, counted: bool):
        """``body_fn`` on this loop's values: the original order in, the moved tensors (as the
        trip wrote them) and the snapshots appended to what it returns; a probe's unseen writes raise."""
        original = self.original

        def body(*args):
            item, values = (args[:1], args[1:]) if counted else ((), args)
            by_name = dict(zip(self.params, values))
            watched = versions(values) if is_probing() else None
            outs = tuple(body_fn(*item, *(by_name[p] for p in original.params)))
            if watched is not None:
                self._check(token, values, watched, outs)
            if not self.extended:
                return outs
            tripped = by_name.get(TRIPPED)
            snapshots = tuple(torch.where(tripped, by_name[FIRST + n], by_name[n]) for n in self.first)
            flag = (torch.ones((), dtype=torch.bool),) if self.first else ()
            return outs + tuple(by_name[n] for n in self.moved) + snapshots + flag

        return body

    def _check(self, token, values, before, outs) -> None:
        """Raise when a probe wrote a tensor these writes do not carry, or rebound one they keep."""
        original = self.original
        written = {p for p, v, b in zip(self.params, values, before) if b is not None and v._version != b}
        found = frozenset(written & set(original.params)) - set(original.mutated)
        kept = frozenset(n for n, v, o in zip(original.names, values, outs) if o is v) & found
        if found - self.written or (found - kept) & self.kept:
            raise _BodyWrote(token, found, kept)

    def test(self, test_fn):
        """``test_fn`` on this loop's values (the original order)."""
        if test_fn is None or not self.extended:
            return test_fn
        original = self.original

        def test(*values):
            by_name = dict(zip(self.params, values))
            return test_fn(*(by_name[p] for p in original.params))

        return test

    def written_back(self, values, state, free) -> tuple:
        """The original loop's final state; the tensors it started from given what eager leaves in them."""
        info, values = self.original, list(values)
        count = len(info.names)
        by_name = dict(zip(info.params[count:], free))
        for offset, name in enumerate(self.moved):
            written_into(by_name[name], values[count + offset])
        for name in self.back:
            index = info.names.index(name)
            values[index] = written_into(state[index], values[index])
        for offset, name in enumerate(self.first):
            index = info.names.index(name)
            written_into(state[index], values[count + len(self.moved) + offset])
        return tuple(values[:count])


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
        apart = _ConstantsApart(info, state, free, body_fn, test_fn, rng is not None, growing)
        final = grown_loop(apart.info, apart.state, apart.free, body_fn=apart.body, test_fn=apart.test, rng=rng,
                           item_from_rows=item_from_rows, growing=apart.growing)
        return finish_grown(apart.rebuilt(final))
    loop = _Loop(info, free, body_fn, test_fn, rng, item_from_rows)
    values = finish(loop.run(state), state, info, loop)
    two_pass = any(isinstance(v, Appender) and v.mode == "count" for v in values)
    lowering = "while_loop (ONNX Loop)" + (
        " twice (count, then write the appended rows)" if two_pass else " + preallocated buffer" if info.appended else "")
    counter_text = "int64 counter over a data-dependent range" if rng is not None else "tensor condition"
    record(info, rule_name(kind, "while_loop"), f"{lowering}: {counter_text}; carries {', '.join(names) or 'nothing'}",
           lowering=lowering, carried=list(names), least_trips=rng.least_trips() if rng is not None and test_fn is None else 0)
    return tuple(values)


class _ConstantsApart:
    """A loop whose state grows, with the state values that hold no tensor and that every trip
    gives back equal (:func:`same_plain_value`; the probe checked it: x-transformers' ``cache``, a
    dataclass of empty lists) passed to the body as the constants they are instead of carried:
    the ONNX ``Loop`` around a separately exported body carries tensors only."""

    def __init__(self, info, state, free, body_fn, test_fn, counted: bool, growing: dict):
        self.constant = [i for i, v in enumerate(state) if _plain(v)]
        self.entry = tuple(state)
        self.info, self.state, self.free, self.body, self.test, self.growing = info, state, free, body_fn, test_fn, growing
        if not self.constant:
            return
        kept = [i for i in range(len(state)) if i not in self.constant]
        names = tuple(info.names[i] for i in kept)
        moved = tuple(info.names[i] for i in self.constant)
        params = names + moved + tuple(info.params[len(info.names):])
        order = [params.index(p) for p in info.params]
        self.info = dataclasses.replace(info, names=names, params=params,
                                        written_first=tuple(n for n in info.written_first if n not in moved))
        self.state = tuple(state[i] for i in kept)
        self.free = tuple(state[i] for i in self.constant) + tuple(free)
        self.growing = {kept.index(i): axes for i, axes in growing.items()}
        self.body = self._body(body_fn, order, counted, kept)
        self.test = None if test_fn is None else (lambda *values: test_fn(*(values[k] for k in order)))

    def _body(self, body_fn, order, counted, kept):
        def body(*args):
            item, values = (args[:1], args[1:]) if counted else ((), args)
            outs = tuple(body_fn(*item, *(values[k] for k in order)))
            for i in self.constant:
                if not (outs[i] is self.entry[i] or same_plain_value(self.entry[i], outs[i])):
                    fail(f"{self.info.kind}: loop variable {self.info.params[order[i]]!r} is a "
                         f"{type(outs[i]).__name__} that changes in a data-dependent loop", self.info, "carry tensors only")
            return tuple(outs[i] for i in kept)

        return body

    def rebuilt(self, final) -> tuple:
        """The loop's final state in the original order (the constants as they were)."""
        final, values = list(final), []
        for i, value in enumerate(self.entry):
            values.append(value if i in self.constant else final.pop(0))
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
        stop_in_body = _stop_in_body(carried, rng)

        def cond_fn(*carried):
            restore_size_relations(carried, relations)
            counter, stop, rest = self._split(carried)
            return self._keep_going(counter, layout.unpack(rest), stop)

        def step_fn(*carried):
            restore_size_relations(carried, relations)
            body_stop = stop_in_body(carried)  # for counters.py
            counter, stop, rest = self._split(carried)
            return self._step(counter, stop, layout, layout.unpack(rest, fresh=True, mutated=self.info.mutated), body_stop)

        try:
            final = while_loop(cond_fn, step_fn, carried)
        except Exception as exc:
            inner = find_error(exc)
            if inner is not None:
                raise inner from None
            if writes_an_input(exc):
                fail(f"{self.info.kind}: the loop body writes in place into a tensor it reaches other than through "
                     "the loop's variables (an attribute or buffer, a container's entry, or a variable of a "
                     "function it calls)", self.info,
                     "pass the tensor to the function that writes it and take it back (buf = f(buf, x)), or keep it "
                     "in a local variable of the loop")
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

    def _step(self, counter, stop, layout, values, body_stop=None):
        info, count = self.info, len(self.info.names)
        params = values[: len(info.params)]
        if self.rng is not None:
            item = getitem(values[-1], counter) if self.item_from_rows else counter.clone()
            if not self.item_from_rows and body_stop is not None:
                note_counter(item, self.rng.start, body_stop)  # start <= item < stop: counters.py
            new_state = self.body_fn(item, *params)
        else:
            new_state = self.body_fn(*params)
        packed = layout.pack(tuple(new_state) + tuple(values[count:]), info, previous=values)
        if self.rng is not None:
            packed = (counter + self.rng.step, stop) + packed
        return tuple(dense(t) for t in packed)


def _stop_in_body(carried: tuple, rng):
    """A function of the body's carried values giving the stop of a counting-up range as the body
    sees it (None where it cannot tell): a Python int as it is; a symbolic size as the body's own
    symbol of a carried tensor's dimension torch knows equals it."""
    stop = rng.stop if rng is not None and rng.step > 0 else None
    if stop is None or isinstance(stop, torch.Tensor):
        return lambda values: None
    if not is_symbolic(stop):
        return lambda values: stop
    for position, value in enumerate(carried):
        if isinstance(value, torch.Tensor):
            for axis, dim in enumerate(value.shape):
                if statically_known_true(dim == stop):
                    return lambda values: values[position].shape[axis]
    return lambda values: None


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
    # copies of every tensor: a function the body calls may write one in place (seen after the probe)
    probe_in = [v.copy() if isinstance(v, Appender) else probe_copy(v) for v in promoted]
    params = tuple(probe_in) + tuple(probe_copy(v) for v in free[: len(info.params) - len(info.names)])
    with probing():
        if rng is not None:
            first = as_int64(rng.start)
            if not item_from_rows and rng.step > 0:
                note_counter(first, rng.start, rng.stop)  # the probe's trip is one the loop runs
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
        before, after = _tuple_entry(before, after, info)  # None entries of a tuple the body sets
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
    """The carried return value before any iteration returned: zeros of the returned type (a
    tuple of tensors or numbers: a tuple of zeros).

    Read only where the loop's return flag is true, which the iteration that returns sets
    together with the value; so the zeros never reach an output.
    """
    if isinstance(returned, (tuple, list)) and all(
            is_number(v) or isinstance(v, torch.Tensor) for v in returned):  # return (middle, *other)
        return type(returned)(_return_placeholder(v, info) for v in returned)
    if is_number(returned):
        returned = scalar(returned)
    if not isinstance(returned, torch.Tensor):
        fail(f"{info.kind}: return inside a data-dependent loop returns a "
             f"{type(returned).__name__ if returned is not None else 'value on no path'}, not a tensor "
             "or a tuple of tensors", info,
             "return tensors from inside the loop, or assign the result to a variable, break, and return after the loop")
    return torch.zeros_like(returned, memory_format=torch.contiguous_format)


def _unbound_placeholder(name: str, assigned, info):
    """A variable the loop body binds before reading it, with no value before the loop: zeros of
    the type the body gives it (a tuple of tensors or numbers: a tuple of zeros). The body overwrites them before any read; after the loop they
    remain only where the loop ran no iteration, where eager raises (the name is unbound)."""
    if isinstance(assigned, (tuple, list)) and all(
            is_number(v) or isinstance(v, torch.Tensor) for v in assigned):  # other = vals[2:]
        return type(assigned)(_unbound_placeholder(name, v, info) for v in assigned)
    if is_number(assigned):
        assigned = scalar(assigned)
    if not isinstance(assigned, torch.Tensor):
        fail(f"{info.kind}: variable {name!r} is first defined inside a data-dependent loop and holds a "
             f"{type(assigned).__name__}, not a tensor, a number or a tuple of them", info,
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
            what = (f"{info.kind}: loop variable {name!r} changes shape from {tuple(before.shape)} to "
                    f"{tuple(after_t.shape)}" + (" (grown without bound)" if grown else ""))
            hint = "preallocate a buffer and write buf[i] = ..., or append to a list and torch.stack it"
            if not grown:  # another rank: the loop may still be one whose first trip differs (peeled)
                reshapes(what, info, hint, name, tuple(before.shape), tuple(after_t.shape))
            fail(what, info, hint)
    elif may_grow and _tensor_tree(before) and _tensor_tree(after):  # a KV cache per layer: a list of tensors
        return _check_tree_carry(name, before, after, info)
    elif is_tensor_tuple(before):  # an LSTM's (h, c): each leaf carried like a tensor
        _check_tuple_carry(name, before, after, info)
    elif (not isinstance(before, Appender) and after is not before and not (is_number(before) and before == after)
          and not same_plain_value(before, after)):
        fail(f"{info.kind}: loop variable {name!r} is a {type(before).__name__} that changes in a data-dependent loop",
             info, "carry tensors only")


def same_plain_value(before, after) -> bool:
    """Whether a trip gave back a value equal to the one it started from that holds no tensor
    or symbolic number (x-transformers' ``cache``, a dataclass of empty lists rebuilt by every
    call): the loop carries it as the constant it is on every trip.

    >>> same_plain_value([1, (2, "a")], [1, (2, "a")]), same_plain_value([1], [2])
    (True, False)
    """
    if type(before) is not type(after) or not (_plain(before) and _plain(after)):
        return False
    try:
        return (before == after) is True
    except Exception:  # noqa: BLE001 - a value that cannot be compared is no constant
        return False


def _plain(value, depth: int = 0) -> bool:
    """A value made of None, strings, Python numbers, lists, tuples, dicts and dataclasses of them."""
    if depth > 8:
        return False
    if value is None or isinstance(value, (str, bytes, bool, int, float)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(_plain(k, depth + 1) and _plain(v, depth + 1) for k, v in value.items())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return all(_plain(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value))
    return False


def is_tensor_tuple(value) -> bool:
    """A tuple or list (nested) of tensors: ``(h, c)`` of an LSTM, a list of per-layer states;
    entries may be ``None`` (a fixed part of its structure) or a
    :class:`~fxport.controlflow.operators.optional.MaybeNone` (an entry None before the loop that
    an iteration sets: :func:`_tuple_entry`)."""
    if not isinstance(value, (tuple, list)) or is_container(value):
        return False
    leaves = pytree.tree_leaves(value)
    return (any(isinstance(leaf, torch.Tensor) for leaf in leaves)
            and all(leaf is None or isinstance(leaf, torch.Tensor) for leaf in leaves))


def _tuple_entry(before, after, info):
    """A tuple (or list) holding ``None`` before the loop whose entries an iteration sets
    (SpeechBrain's ``memory = (None, c)``, then ``memory = (hs, c)``; ``hidden_cell`` None inside
    a tuple of per-layer states): each such entry is carried as an unset MaybeNone of the type
    the body (the probe) gives it, a value and a flag per entry, so ``hs is None`` in the body is
    that flag and a callee given ``hs`` runs as for a variable None on some paths. ``after`` in
    that structure. Anything else as it is."""
    if not isinstance(before, (tuple, list)) or is_container(before) or None not in pytree.tree_leaves(before):
        return before, after
    before = with_unset_entries(before, after, info.location)
    return before, shaped_like(before, after)


def _check_tuple_carry(name, before, after, info) -> None:
    """A carried tuple of tensors keeps its structure (its None entries too); each leaf its dtype and shape."""
    after = shaped_like(before, after)
    leaves_before, spec_before = pytree.tree_flatten(before)
    leaves_after, spec_after = pytree.tree_flatten(after)
    if spec_before != spec_after or _none_positions(leaves_before) != _none_positions(leaves_after):
        fail(f"{info.kind}: loop variable {name!r} is a {type(before).__name__} that changes in a data-dependent loop "
             "(another structure after an iteration)", info, f"give {name!r} one structure (as many tensors) on every path")
    for index, (leaf_before, leaf_after) in enumerate(zip(leaves_before, leaves_after)):
        if leaf_before is not None:
            _check_carry(f"{name}[{index}]" if len(leaves_before) > 1 else name, leaf_before, leaf_after, info)


def _none_positions(leaves) -> tuple:
    return tuple(i for i, leaf in enumerate(leaves) if leaf is None)


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
            elif is_tensor_tuple(value):
                leaves, spec = pytree.tree_flatten(value)
                self.kinds.append(("tuple", spec, tuple(leaf.dtype for leaf in leaves if leaf is not None),
                                   _none_positions(leaves)))
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
            elif kind[0] == "tuple":
                if previous is not None and has_unset_entries(previous[i]):  # an entry None set to None again
                    value = shaped_like(previous[i], value)                   # keeps its placeholder
                leaves, spec = pytree.tree_flatten(value) if is_tensor_tuple(value) else ([], None)
                tensors = [leaf for leaf in leaves if leaf is not None]
                if (spec != kind[1] or _none_positions(leaves) != kind[3]
                        or tuple(leaf.dtype for leaf in tensors) != kind[2]):
                    fail(f"{info.kind}: loop variable {name!r} is a {getattr(kind[1].type, '__name__', 'tuple')} that "
                         "changes in a data-dependent loop (another structure or dtype after an iteration)", info,
                         f"give {name!r} one structure and dtype on every path")
                flat.extend(tensors)
            elif kind[0] == "tensor":
                tensor = value if isinstance(value, torch.Tensor) else _number_tensor(name, value, kind[1], info)
                if tensor.dtype != kind[1]:
                    fail(f"{info.kind}: loop variable {name!r} changes dtype from {dtype_name(kind[1])} to "
                         f"{dtype_name(tensor)}", info, f"cast {name!r} to one dtype before the loop")
                flat.append(tensor)
            elif (value is not self.constants[i] and not (is_number(value) and value == self.constants[i])
                  and not same_plain_value(self.constants[i], value)):
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
            elif kind[0] == "tuple":
                tensors = [carried.pop(0) for _ in range(kind[1].num_leaves - len(kind[3]))]
                if fresh and self.names[i] in mutated:
                    tensors = [leaf.clone() for leaf in tensors]
                leaves = [None if j in kind[3] else tensors.pop(0) for j in range(kind[1].num_leaves)]
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
