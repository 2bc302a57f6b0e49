"""Lists grown with ``.append`` inside a data-dependent loop.

The loop lowering replaces such a list by an :class:`Appender` (a pytree node, so it is
carried through ``while_loop`` as two tensors); :func:`stack` and :func:`cat` read it back
after the loop. On a plain list they are ``torch.stack``/``torch.cat``. Modes:

* ``rows`` — a ``for`` over a range whose elements have one shape: a buffer of trip-count rows
  plus a length, written at the length (one pass).
* ``count`` — a ``while`` loop, or elements whose size varies between iterations (``x[:k]``,
  ``x[mask]``): the loop carries the number of appends and the sum of each dimension of the
  elements (pass 1). ``stack``/``cat`` then allocate a buffer of exactly that many rows and
  run the loop again (:class:`Replay`) in ``write`` mode, each element written at its running
  offset (pass 2).
* ``grow`` — in a loop whose state grows (an ONNX ``Loop`` around its exported body): the stack
  of the elements so far, one row longer after each append, read and indexed inside the loop too.
* ``concat`` — in a loop whose state grows, elements whose length along one axis is data (each
  row's backtrack, ``x[i, :n[i]]``, a list grown by a loop inside this one): the concatenation of
  the elements so far along that axis (``axis``, moved to the front), and their number
  (``length``). Read only whole: ``torch.cat`` of it, of ``torch.tensor(z) for z in`` it
  (ragged.py), ``len()``; any read of one element is refused at its line.

A list appended as an element (``paths.append(path)``, ``path`` a list a data-dependent loop grew)
is its stack, one tensor, in every mode; the list is then marked as a list of lists
(:attr:`Appender.of_lists`), which ragged.py reads back as its elements' concatenation.

Inside its loop, ``xs[-k]``, ``xs[-k:]``, ``xs == []`` and ``if xs`` read the rows at the count
(in_loop.py). A list grown with ``insert(0, v)`` (front.py) keeps its rows in the order they came
and is read last first: its elements are the loop's rows reversed, then those it held before.

Size: over 400 lines because the class and its readers (``stack``, ``cat``, ``len_``, the index
tensor it makes of itself in ``t[parts, :]``) dispatch on one set of modes; split by mode, each
mode's invariants would live in two files.

Example::

    >>> import torch
    >>> from fxport.controlflow.operators.lists.appender import Appender, stack
    >>> grown = Appender("ys", [], torch.zeros(3, 2), torch.zeros((), dtype=torch.int64))
    >>> grown.append(torch.ones(2)); grown.append(torch.full((2,), 2.0))
    >>> stack(grown)
    tensor([[1., 1.],
            [2., 2.]])
"""

from __future__ import annotations

import torch
import torch.utils._pytree as pytree
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols, statically_known_true

from fxport.controlflow.operators.failures import fail, refuse_here
from fxport.controlflow.operators.lists import in_loop
from fxport.controlflow.operators.lists.elements import as_element, element_rows
from fxport.controlflow.operators.lists.front import AtFront, refuse_both_ends
from fxport.controlflow.operators.lists.repeated import Repeated
from fxport.controlflow.operators.lists.tensor_items import TensorItems
from fxport.controlflow.operators.optional import known_set
from fxport.controlflow.operators.values import as_int64, is_row_of_numbers, row_of_numbers, scalar


class SelectedBefore(list):
    """The (empty) ``initial`` of a loop's list that held elements appended under a tensor
    condition before the loop (selected_list.py): they are put back in front after the loop, and
    their number is not known inside it. ``selected``: that list (a SelectedList), where one is
    known; read inside the loop (:meth:`mark_read`, GPT2-chitchat's ``set(generated)`` after a
    peeled first trip appended under the ``[SEP]`` test), the loop's stack starts with its kept
    rows instead (:class:`SelectedContinued`, carried.py)."""

    def __init__(self, selected=None):
        super().__init__()
        self.selected = selected
        self.state = {"read": False}

    @property
    def read(self) -> bool:
        return self.state["read"]

    def mark_read(self) -> None:
        self.state["read"] = True


class NestedIn(SelectedBefore):
    """The (empty) ``initial`` of a list that a data-dependent loop appends to while another
    data-dependent loop around it (or before it) grows it too (carried.py): the inner loop grows a
    list of its own, which then extends the outer one; the outer one's elements are not read
    inside the inner loop. One empty instance, :data:`NESTED_IN`, serves every loop (dynamo cannot
    build a list subclass inside a body it traces); nothing appends to it, the loop's list does."""


NESTED_IN = NestedIn()


class Continues(NestedIn):
    """The (empty) ``initial`` of a list that a data-dependent loop appends to while a loop around
    it grows it too, made outside dynamo only (NeMo's ``label[-1]`` in the ``while`` over symbols
    inside the ``for`` over frames): it holds the outer list's elements so far, ``items`` (the
    outer loop's probe: Python elements) or ``rows`` (the stack the outer loop carries). Not read
    inside the inner loop, it is a :class:`NestedIn`. Read there (:meth:`mark_read`), the outer
    loop carries its stack too, the inner loop carries the stack of all the elements starting from
    these (:class:`Continued`), and after it that stack is the outer list (carried.extended)."""

    continues_outer = True  # (in_loop.py tells it by this, importing nothing from here)

    def __init__(self, outer: "Appender"):
        super().__init__()
        self.outer_shared = outer._shared
        self.items = list(outer.initial) + list(outer.probe) if outer.mode == "probe" else None
        self.rows = outer.data if outer.mode == "grow" else None

    def mark_read(self) -> None:
        super().mark_read()
        self.outer_shared["read_inside"] = True

    @staticmethod
    def of(outer: "Appender"):
        """A :class:`Continues` for ``outer`` where one can be made, else :data:`NESTED_IN`."""
        if (torch.compiler.is_dynamo_compiling() or outer.finished or outer.mode not in ("probe", "grow")
                or type(outer.initial) is not list or (outer.mode == "grow" and outer.initial)):
            return NESTED_IN
        return Continues(outer)


class Continued(list):
    """The (empty) ``initial`` of a list whose loop's stack starts with the elements a loop around
    it appended before (a read :class:`Continues`): the stack holds all the elements."""


class SelectedContinued(Continued):
    """The (empty) ``initial`` of a list whose loop's stack starts with the rows kept of a list
    appended to under a tensor condition before the loop (a read :class:`SelectedBefore`): the
    stack holds all the elements, and after the loop it is the list."""


class Appender:
    """A list grown with ``.append`` inside a tensor loop (see the module doc for the modes).

    ``data`` is the buffer (``rows``, ``write``) or the per-dimension size sums (``count``);
    ``length`` the number of appends (``rows``, ``count``), or ``[next row, appends]`` (``write``).
    ``exact``: every iteration appended exactly once (``rows``: the buffer is the stacked list).
    ``tail``: elements appended after the loop. ``axis``: ``write``'s layout (``None``: stack,
    else the cat dimension moved to the front). ``replay``: reruns the loop (``count``).
    ``extended``: the probe saw a loop nested in this one append to it (carried.py), so the
    loop appends a data-dependent number of elements per trip and carries a count.
    """

    def __init__(self, name: str, initial: list, buf=None, length=None, *, mode: str | None = None,
                 axis: int | None = None, replay: "Replay | None" = None):
        self.name, self.initial = name, initial
        self._cell = [buf, length]  # see `data`
        self.mode = mode or ("probe" if buf is None else "rows")
        self.axis, self.replay = axis, replay
        self.location = None  # the loop's (refusals from inside its body point there)
        self.probe: list = []
        self.tail: list = []
        self.exact = False
        self.finished = False
        self._shared = {"extended": False, "read_inside": False, "asked_empty": False,  # one for the copies a probe's branches make
                        "front": False, "at_end": False}

    @property
    def data(self):
        """The buffer or size sums. Kept in a list cell, not an attribute: torch 2.13's dynamo
        drops attribute writes made after a nested while_loop in a traced body (an append after
        an inner loop was lost), while list item writes survive."""
        return self._cell[0]

    @data.setter
    def data(self, value):
        self._cell[0] = value

    @property
    def length(self):
        return self._cell[1]

    @length.setter
    def length(self, value):
        self._cell[1] = value

    @property
    def buf(self):
        return self.data

    @property
    def read_inside(self) -> bool:
        """Indexed inside its loop (seen by the probe, in any copy a branch made of it): the loop
        then carries the stack of its elements."""
        return self._shared["read_inside"]

    @read_inside.setter
    def read_inside(self, value: bool) -> None:
        self._shared["read_inside"] = value

    @property
    def asked_empty(self) -> bool:
        """The probe tested whether the list is empty (``xs == []``, ``if xs``): a later trip may read
        it where the first did not (in_loop.py)."""
        return self._shared.get("asked_empty", False)

    @asked_empty.setter
    def asked_empty(self, value: bool) -> None:
        self._shared["asked_empty"] = value

    @property
    def front(self) -> bool:
        """Grown with ``insert(0, v)`` in its loop (front.py): the loop's rows are read last first."""
        return self._shared.get("front", False)

    def _grown_at(self, front: bool) -> None:
        """Note the end a trip grows the list at; both ends in one loop are refused (front.py)."""
        if self._shared.get("at_end" if front else "front", False):
            refuse_both_ends(self, front)
        if not self._shared.get("front" if front else "at_end", False):  # (set by the probe: no write in a traced body)
            self._shared["front" if front else "at_end"] = True

    def insert_at_front(self, value, append) -> None:
        """``xs.insert(0, value)`` (front.py): inside the loop, ``append`` (the user's
        ``xs.append``, which the loop's facts see) gets the element marked :class:`AtFront`; after
        the loop the list becomes one stack with the element before it."""
        if self.mode == "select" or isinstance(self.initial, (SelectedBefore, Continued)):
            where = "appended to under a tensor condition" if self.mode == "select" or (
                type(self.initial) is SelectedBefore) else "grown by a data-dependent loop around this one as well"
            self._refuse(f"insert(0, ...) on list {self.name!r}, {where}, is not supported",
                         f"collect the elements in a list of their own with append and join it to {self.name!r} in the "
                         "order you need after the loop")
        if self.finished:
            self.put_first(value)
            return
        append(AtFront(value))

    def put_first(self, value) -> None:
        """After the loop, ``xs.insert(0, value)``: the stack of the elements with ``value`` first."""
        self._materialize("insert(0, ...)")
        row = as_element(known_set(value))
        self.data = torch.cat([row.to(self.data.dtype).unsqueeze(0), self.data])

    @property
    def extended(self) -> bool:
        return self._shared["extended"]

    @extended.setter
    def extended(self, value: bool) -> None:
        self._shared["extended"] = value

    def append(self, value):
        front = isinstance(value, AtFront)  # xs.insert(0, v) (front.py)
        value = value.value if front else value
        if not self.finished and self.mode != "select":
            self._grown_at(front)
        value = known_set(value)  # None on some paths: the list is read back as tensors, where None would raise
        if is_row_of_numbers(value):
            if hasattr(type(value), "_fields") and "record" not in self._shared and not torch.compiler.is_dynamo_compiling():
                self._shared["record"] = value  # Point(j, t, prob): its fields name the row's columns (columns.py)
            value = row_of_numbers(value)  # xs.append([i, j]): what torch.tensor(xs) reads back as a row
        if isinstance(value, Appender):  # a list of lists: each one's length may be data
            value = self._list_as_element(value)
        if not isinstance(value, (torch.Tensor, int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)):
            fail(f"list {self.name!r} grown in a data-dependent loop gets a {type(value).__name__}, not a tensor or "
                 "number", self, f"append torch.stack(...) of it (one tensor per iteration) to {self.name!r}")
        value = value if isinstance(value, torch.Tensor) else scalar(value)
        if self.finished:  # after the loop: kept as a Python list, added after the loop's elements
            self.tail.append(value)
        elif self.mode == "probe":  # learn the element type
            self.probe.append(value)
        elif self.mode == "rows":
            position = self.length.reshape(1)
            self.data = torch.index_put(self.data, (position,), value.to(self.data.dtype).unsqueeze(0))
            self.length = self.length + 1
        elif self.mode == "count":
            self._count(value)
        elif self.mode == "grow":  # a loop whose state grows: the stack so far, one row longer
            self.data = torch.cat([self.data, value.to(self.data.dtype).unsqueeze(0)])
        elif self.mode == "concat":  # the concatenation so far, one element longer along the axis
            pieces = [self.piece_of(value), self.data] if front else [self.data, self.piece_of(value)]
            self.data = torch.cat(pieces)  # insert(0, v) puts it first: the pieces stay in the list's order
            self.length = self.length + 1
        else:
            self._write(value)

    def _list_as_element(self, inner: "Appender") -> torch.Tensor:
        """``xs.append(ys)``, ``ys`` a list a data-dependent loop grew (a list of lists, whose lengths
        are data): the stack of ``ys``'s elements, and ``xs`` noted a list of lists (:attr:`of_lists`).
        An element with no initial or later elements may be empty (:attr:`may_hold_empty_lists`)."""
        if not inner.finished:
            fail(f"list {inner.name!r} is appended to list {self.name!r} inside the data-dependent loop that grows "
                 f"{inner.name!r}", inner, f"append {inner.name!r} to {self.name!r} after that loop")
        if not torch.compiler.is_dynamo_compiling():  # (the probe notes it; no write in a traced body)
            self._shared["of_lists"] = True
            if not inner.initial and not inner.tail:
                self._shared["empty_lists"] = True
        return stack(inner)

    @property
    def of_lists(self) -> bool:
        """Its elements are lists a data-dependent loop grew, each held as its stack (ragged.py)."""
        return self._shared.get("of_lists", False)

    @property
    def may_hold_empty_lists(self) -> bool:
        """An element list may be empty (it had no element before its loop): ``torch.tensor`` of it
        is then float32 in eager PyTorch, whatever the others hold."""
        return self._shared.get("empty_lists", False)

    def piece_of(self, value: torch.Tensor) -> torch.Tensor:
        """``concat`` mode: an element as rows of the concatenation (its ``axis`` moved to the front),
        its other sizes stated equal to the concatenation's (torch.cat requires it; eager raises else)."""
        if value.dim() != self.data.dim():
            self._refuse(f"list {self.name!r} grown in a data-dependent loop gets elements of {value.dim()} and "
                         f"{self.data.dim()} dimensions", "append tensors of one rank")
        piece = value.to(self.data.dtype).movedim(self.axis, 0).contiguous()
        for got, want in zip(piece.shape[1:], self.data.shape[1:]):
            torch._check(got == want)
        return piece

    def _count(self, value):
        if value.dim() != self.data.shape[0]:
            fail(f"list {self.name!r} grown in a data-dependent loop gets elements of {value.dim()} and "
                 f"{self.data.shape[0]} dimensions", self, "append tensors of one rank")
        if value.dim():
            self.data = self.data + torch.stack([as_int64(s) for s in value.shape])
        self.length = self.length + 1

    def _write(self, value):
        self.write_rows(value.unsqueeze(0) if self.axis is None else value.movedim(self.axis, 0), 1)

    def write_rows(self, rows, appends) -> None:
        """``write`` mode: ``rows`` (along ``axis`` moved to the front) written at the running
        offset, as ``appends`` elements (one per append; a nested loop's list writes all of its)."""
        rows = rows.to(self.data.dtype).contiguous()  # a moved view's strides are symbolic: no ONNX op reads them
        for got, want in zip(rows.shape[1:], self.data.shape[1:]):
            torch._check(got == want)
        end = self.data.shape[0] - 1  # the last row takes writes past the end (an untaken append)
        index = torch.clamp(self.length[0] + torch.arange(rows.shape[0]), max=end)
        self.data = torch.index_put(self.data, (index,), rows)
        self.length = self.length + torch.stack([as_int64(rows.shape[0]), as_int64(appends)])  # next row, appends

    def rebuilt(self, data, length) -> "Appender":
        """The same list with other tensors (a loop's carried values)."""
        clone = Appender(self.name, self.initial, data, length, mode=self.mode, axis=self.axis, replay=self.replay)
        clone.probe, clone.tail, clone.exact, clone.finished = self.probe, list(self.tail), self.exact, self.finished
        clone.location = self.location
        clone._shared = self._shared
        return clone

    def copy(self) -> "Appender":
        return self.rebuilt(self.data, self.length)

    def __getitem__(self, index):
        """Inside its loop, ``parts[-k]``/``parts[-k:]`` read the rows so far at the count
        (in_loop.py); after the loop, ``parts[i]`` of elements of one shape is
        ``torch.stack(parts)[i]``, and ``parts[a:b]`` / ``parts[::-1]`` a list of those rows."""
        if self.mode == "concat" or self.of_lists:
            self.refuse_element_read(f"{self.name}[{_index_text(index)}]")
        if self.finished and isinstance(index, slice):  # path[::-1] (torchaudio's backtrack): a list again
            return self.sliced(_rows_sliced(stack(self), index, self))
        if self.mode == "grow" and self.finished:  # the stack of all the elements
            return stack(self)[index]
        if self.mode == "probe":  # the loop will carry the stack (list_lowering.allocate_growing)
            _check_prefix_known(self, "indexing")
            self.read_inside = True
            if in_loop.continued_rows(self) is not None:  # the outer loop's stack: its count is data
                return in_loop.read(self, index)
            items = in_loop.probe_items(self)
            if isinstance(index, int) and not -len(items) <= index < len(items):
                refuse_here(f"list {self.name!r} grown in a data-dependent loop is read at position {index} inside the "
                            f"loop on its first trip, where it holds {len(items)} element(s) (eager raises "
                            "IndexError there unless a test guards the read)",
                            f"guard the read with a test of the list ({self.name} == [], if {self.name}, "
                            f"len({self.name}) > {abs(index) - 1 if index < 0 else index}), or keep the value you need "
                            "in a variable of its own (last = k where you append k)")
            if isinstance(index, (int, slice)):
                return items[index]  # a slice: a Python list, which torch.stack reads
            return torch.stack(element_rows(items))[index]  # parts[k], k a tensor counter
        if not self.finished:  # the rows so far at the carried count
            if self.mode == "grow":
                _check_prefix_known(self, "indexing")
            return in_loop.read(self, index)
        problem = self._unreadable("inside the loop") or (
            None if isinstance(index, int) else f"with a {type(index).__name__} index")
        if problem is not None:
            fail(f"indexing list {self.name!r} grown in a data-dependent loop {problem} is not supported", self,
                 "keep the value you need in a variable of its own, or torch.stack/torch.cat the list and index that")
        if 0 <= index < len(self.initial) and not self.front:
            return self.initial[index]
        if -len(self.tail) <= index < 0:
            return self.tail[index]
        return stack(self)[index]

    @property
    def record(self):
        """An element as it was appended when the elements are records (``Point(j, t, score)``, a
        tuple of numbers), whose fields name the rows' columns (columns.py); else None."""
        return self._shared.get("record") or next((e for e in self.initial if isinstance(e, tuple) and e), None)

    def keep_record(self, *sources: "Appender") -> None:
        """Take the :attr:`record` of the first of ``sources`` that has one (a list made of them)."""
        record = next((s.record for s in sources if s.record is not None), None)
        if record is not None and not torch.compiler.is_dynamo_compiling():
            self._shared["record"] = record

    def sliced(self, rows: torch.Tensor) -> "Appender":
        """After the loop, ``parts[a:b]``: a list of these rows (the sliced stack of its elements)."""
        part = Appender(self.name, [], rows, torch.zeros((), dtype=torch.int64), mode="grow")
        part.location, part.finished = self.location, True
        part.keep_record(self)
        return part

    def pop(self, index: int = -1):
        """After the loop, ``parts.pop()``: the last element, the list one shorter."""
        if index != -1:
            fail(f"list {self.name!r} grown in a data-dependent loop: pop({index}) is not supported", self,
                 f"use {self.name}.pop() (the last element), or torch.stack the list and index that")
        self._materialize("pop()")
        last = self.data[-1]
        self.data = self.data[:-1]
        return last

    def reverse(self) -> None:
        """After the loop, ``parts.reverse()``: the rows in the other order."""
        self._materialize("reverse()")
        self.data = self.data.flip(0)

    def as_inputs(self) -> "Appender":
        """What the body of a later loop captured on its own (a loop whose state grows) reads of this
        finished list: a finished ``grow`` list holding the stack of its elements (``concat``: its
        concatenation), whose two tensors become that body's inputs (loops/grown_inputs.py); the list
        itself where no such copy holds it (elements that change size, a list of lists, a list
        appended to under a tensor condition)."""
        if self.mode == "concat" or (self.mode == "grow" and not (self.initial or self.tail or self.front)):
            return self
        if not self.finished or self.mode == "select" or self.of_lists or not self._one_shape():
            return self
        clone = self.copy()
        clone._materialize("reading it in a later loop")
        return clone

    def _materialize(self, what: str) -> None:
        """Make a finished list the stack of all its elements (``grow`` mode), to change it."""
        if not self.finished:
            fail(f"{what} of list {self.name!r} inside the data-dependent loop that grows it is not supported", self,
                 "change the list after the loop, or keep what you need in a tensor")
        if self.mode == "concat" or self.of_lists:
            self.refuse_element_read(what)
        if self.mode != "grow" or self.initial or self.tail or self.front:
            self.data, self.length = stack(self), torch.zeros((), dtype=torch.int64)
            self.mode, self.initial, self.tail = "grow", [], []
            self._shared = dict(self._shared, front=False, at_end=False)  # the stack holds the elements in order

    def __add__(self, other):
        """After the loop, ``parts + [h]``: the same list with ``h`` after the loop's elements."""
        if not isinstance(other, (list, tuple)):
            return NotImplemented
        clone = self._finished_copy(f"{self.name} + [...]")
        clone.tail = list(self.tail) + list(other)
        return clone

    def __radd__(self, other):
        """After the loop, ``[h] + parts``: the same list with ``h`` before its elements."""
        if not isinstance(other, (list, tuple)):
            return NotImplemented
        clone = self._finished_copy(f"[...] + {self.name}")
        if clone.front:  # its elements before the loop come after the loop's: one stack in order
            clone._materialize(f"[...] + {self.name}")
        clone.initial = list(other) + list(clone.initial)
        return clone

    def _finished_copy(self, what: str) -> "Appender":
        if not self.finished:
            fail(f"{what}: list {self.name!r} is grown in a data-dependent loop and used inside it", self,
                 f"concatenate after the loop, or append to {self.name!r} instead")
        return self.copy()

    def _one_shape(self) -> bool:
        if self.mode == "concat":
            return False
        return self.mode in ("rows", "grow") or not any(varies(s) for s in self.replay.element.shape)

    def refuse_element_read(self, what: str) -> None:
        """Refuse ``what``, a read of one element of a list whose elements' lengths are data (a
        ``concat`` list, or a list of lists): only the whole list can be read, as its concatenation."""
        kind = "lists" if self.of_lists else "tensors"
        whole = f"torch.cat([torch.tensor(z) for z in {self.name}])" if self.of_lists else f"torch.cat({self.name})"
        self._refuse(f"{what} of list {self.name!r}, grown in a data-dependent loop with {kind} of different lengths as "
                     "elements, is not supported: only their concatenation is kept",
                     f"read the list whole as {whole}, or keep what you need of each element (its length, a padded "
                     "row) in a tensor of its own as you append")

    def _unreadable(self, inside: str) -> str | None:
        """Why the elements cannot be read as the rows of one stack (``inside``: the words for a
        list still being grown), or None."""
        if not self.finished:
            return inside
        return None if self._one_shape() else "with elements that change size"

    def rows(self) -> torch.Tensor:
        """What ``for p in parts:`` after the loop iterates: ``torch.stack(parts)`` (elements of
        one shape), whose rows a data-dependent loop then reads one by one."""
        if self.mode == "concat" or self.of_lists:
            self.refuse_element_read("iterating over the elements")
        problem = self._unreadable("inside the loop that grows it")
        if problem is not None:
            fail(f"iterating over list {self.name!r} grown in a data-dependent loop {problem} is not supported",
                 self, "torch.stack/torch.cat the list and iterate over that, or keep what you need in a tensor")
        return stack(self)

    def as_index(self, bare: bool) -> torch.Tensor:
        """The list as part of a tuple index (``t[parts, :]``, ``t[:, parts]``): the 1-d tensor of
        its elements, numbers, as torch makes it of a list there. A bare ``t[parts]`` means
        that only for Python numbers; for tensors (``.item()`` stays one in a converted body)
        torch reads it as a tuple of indices, one per dimension, which fxport cannot tell apart."""
        if bare:
            self._refuse(f"t[{self.name}] with list {self.name!r} grown in a data-dependent loop as the whole index: torch "
                         "reads a list of Python numbers there as an index tensor but a list of tensors as one index per "
                         "dimension, and inside converted code its numbers are tensors",
                         f"write t[{self.name}, ...] or t[torch.tensor({self.name})]")
        rows = self._index_rows()
        if not _integer_vector(rows):
            self._refuse(f"a tensor is indexed by list {self.name!r} grown in a data-dependent loop, whose elements are "
                         f"{'bools' if rows.dtype == torch.bool else 'not integers' if rows.dim() == 1 else 'not numbers'}",
                         f"index with a tensor built from {self.name!r} (torch.stack({self.name}) or torch.cat({self.name}))")
        return rows

    def _index_rows(self, what: str = "as a tensor index") -> torch.Tensor:
        """The stacked elements for :meth:`as_index`; inside its loop the stack so far (the probe
        marks the list read inside, so the loop carries that stack)."""
        if self.mode == "probe":
            _check_prefix_known(self, what)
            self.read_inside = True
            items = element_rows(in_loop.probe_items(self))
            return torch.stack(items) if items else torch.zeros(0, dtype=torch.int64)
        if self.mode == "select":
            return stack(self) if self.data is not None or self.initial else torch.zeros(0, dtype=torch.int64)
        if self.mode == "grow" and not self.finished:
            _check_prefix_known(self, what)
        problem = None if self.mode == "grow" else self._unreadable("inside the loop that grows it")
        if problem is not None:
            fail(f"indexing a tensor by list {self.name!r} grown in a data-dependent loop {problem} is not supported",
                 self, f"index with a tensor you keep beside {self.name!r}, or index after the loop")
        return stack(self)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """``t[parts, :]``, ``t[parts]`` and ``t[parts] = v`` with a grown list in the index: the
        list as an index tensor (:meth:`as_index`). No other torch function takes a grown list."""
        if func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__) and len(args) >= 2:
            target, index, *rest = args
            index = index.as_index(bare=True) if isinstance(index, Appender) else tuple(
                p.as_index(bare=False) if isinstance(p, Appender) else p for p in index) if isinstance(index, tuple) else index
            return func(target, index, *rest, **(kwargs or {}))
        grown = next((v for v in pytree.tree_leaves((args, kwargs), is_leaf=lambda v: isinstance(v, Appender))
                      if isinstance(v, Appender)), None)
        if grown is None:
            return NotImplemented
        name = getattr(func, "__name__", str(func))
        grown._refuse(f"list {grown.name!r} grown in a data-dependent loop is passed to {name}, which takes tensors",
                      f"pass torch.stack({grown.name}) or torch.cat({grown.name})")

    def __iter__(self):
        if not self.finished:
            self._refuse(f"iterating over list {self.name!r} inside the data-dependent loop that grows it (for v in "
                         f"{self.name}, set({self.name}), list({self.name})) is not supported: how many elements it "
                         "holds there is data", "keep what the loop needs in a tensor beside the list (for a set of "
                         "ids: a mask, seen[v] = True where you append v), or read its last elements by position")
        if self.mode == "concat" or self.of_lists:
            self.refuse_element_read("iterating over the elements")
        self._refuse(f"list {self.name!r} grown in a data-dependent loop can only be used with torch.stack/torch.cat",
                     "stack or concatenate it right after the loop")

    def __eq__(self, other):
        """``xs == []``: whether the list is empty (in_loop.py), a tensor inside its loop."""
        if not isinstance(other, (list, tuple)) or isinstance(other, Appender):
            return NotImplemented
        if len(other):
            self._refuse(f"list {self.name!r} grown in a data-dependent loop is compared with a list of "
                         f"{len(other)} element(s)", f"compare torch.stack({self.name}) with a tensor, or test {self.name} == []")
        return in_loop.is_empty(self)

    def __ne__(self, other):
        empty = self.__eq__(other)
        if empty is NotImplemented or isinstance(empty, bool):
            return empty if empty is NotImplemented else not empty
        return torch.logical_not(empty)

    __hash__ = object.__hash__  # compared by contents with lists only; hashed by identity as before

    def check_prefix_known(self, what: str) -> None:
        """Refuse a read that needs elements before the loop the loop does not count (in_loop.py)."""
        _check_prefix_known(self, what)

    def distinct_so_far(self) -> torch.Tensor:
        """``set(xs)`` inside the loop that grows it, of integer elements: the distinct values so
        far, ascending, as a 1-d tensor (the probe marks the list read inside, so the loop carries
        its stack); iterated, a data-dependent loop over its rows (lists/distinct.py)."""
        rows = self._index_rows(f"set({self.name})")
        if not _integer_vector(rows):
            self._refuse(f"set({self.name}) inside the data-dependent loop that grows it, of elements that are not "
                         "integers", f"keep a tensor beside {self.name!r} (a mask, seen[v] = True where you append v)")
        return torch.unique(rows, sorted=True)

    def contains(self, value):
        """``value in xs``: whether an element equals ``value``, a bool tensor (inside the loop that
        grows the list, of the elements so far: the probe marks it read, so the loop carries its
        stack). Elements of one value each (numbers, 0-d tensors), as Python's ``in`` compares them."""
        rows = self._index_rows(f"{type(value).__name__} in {self.name}")
        if rows.dim() != 1:
            self._refuse(f"'in' on list {self.name!r} grown in a data-dependent loop, whose elements are tensors of "
                         "several values (Python's == of two such tensors has no single truth)",
                         f"compare with torch.stack({self.name}) and reduce with .all(-1).any()")
        return (rows == value).any()

    def len_after_loop(self):
        """``len(xs)`` (:func:`len_`), for in_loop.py."""
        return len_(self)

    def truth(self):
        """``if xs:`` (conditionals.py, through selected.truth_of_selected): not empty, a tensor
        inside its loop; after it the list itself (whose ``bool()`` refuses, as before)."""
        if self.finished:
            return self
        empty = in_loop.is_empty(self)
        return (not empty) if isinstance(empty, bool) else torch.logical_not(empty)

    def __bool__(self):
        if not self.finished:
            self._refuse(f"truth value of list {self.name!r} inside the data-dependent loop that grows it is not a "
                         "Python bool (not, and, or, while of the list)",
                         f"test it as {self.name} == [] or {self.name} != [] (a tensor condition there)")
        self._refuse(f"truth value of list {self.name!r} grown in a data-dependent loop is not known while exporting",
                     "make the list non-empty on every path (e.g. append before the break)")

    def __len__(self):
        where = "inside the loop that grows it" if not self.finished else "here"
        self._refuse(f"len() of list {self.name!r} grown in a data-dependent loop is not a Python int {where}",
                     f"count the appends in a tensor, or take len({self.name}) after the loop")

    def _refuse(self, what: str, hint: str):
        """A refusal at the user's line; inside a body dynamo traces (a cond branch after a loop
        that returns) at the loop that grew the list, whose location is known without reading
        the call stack (dynamo cannot trace that, and the refusal came out as a generic capture
        failure)."""
        if torch.compiler.is_dynamo_compiling():
            fail(what, self, hint)
        refuse_here(what, hint)


class Replay:
    """Runs a lowered loop again with one list in ``write`` mode (pass 2 of ``count``).

    ``run(state, free)`` is the loop (state in, state out); ``state`` and ``free`` the loop's
    entry state and the values its body reads, as they were when the loop ran; ``element`` the
    element the probe appended (its dtype, rank and which sizes are fixed).
    """

    def __init__(self, run, state: tuple, free: tuple, element: torch.Tensor):
        self.run, self.state, self.free, self.element = run, state, free, element

    def written(self, name: str, writer: Appender) -> torch.Tensor:
        """The buffer ``writer`` holds after the loop ran with it in place of list ``name``."""
        state = tuple(writer if isinstance(v, Appender) and v.name == name else v for v in self.state)
        final = self.run(state, self.free)
        return next(v for v in final if isinstance(v, Appender) and v.name == name).data


class ByIdentity:
    """Compares by identity, so a pytree context holding a list of tensors stays comparable."""

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, ByIdentity) and other.value is self.value

    def __hash__(self):
        return id(self.value)


def _appender_flatten(appender):
    context = (appender.name, ByIdentity(appender.initial), appender.exact, appender.mode, appender.axis,
               ByIdentity(appender.replay), appender.finished, ByIdentity(appender.tail) if appender.tail else None,
               ByIdentity(appender.probe), appender.location, ByIdentity(appender._shared))
    return [appender.data, appender.length], context


def _appender_unflatten(children, context):
    name, initial, exact, mode, axis, replay, finished, tail, probe, location, extended = context
    result = Appender(name, initial.value, children[0], children[1], mode=mode, axis=axis, replay=replay.value)
    result.exact, result.finished = exact, finished
    result.tail = list(tail.value) if tail is not None else []
    result.probe, result.location = probe.value, location
    result._shared = extended.value
    return result


pytree.register_pytree_node(Appender, _appender_flatten, _appender_unflatten)


def stack(tensors, dim: int = 0, *, out=None):
    """``torch.stack``, also for lists grown in a data-dependent loop and lists repeated a
    dynamic number of times (:mod:`~fxport.controlflow.operators.lists.repeated`)."""
    if isinstance(tensors, Repeated):
        return tensors.stacked(dim) if out is None else torch.stack(tensors.as_written(), dim, out=out)
    if not isinstance(tensors, Appender):
        return torch.stack(tensors, dim) if out is None else torch.stack(tensors, dim, out=out)
    grown = tensors
    if grown.mode == "select":  # appended under a tensor condition (selected_list.py)
        return grown.stacked(dim)
    if grown.mode == "concat":
        grown.refuse_element_read("torch.stack")
    rank = _element_rank(grown)
    dim = dim + rank + 1 if dim < 0 else dim
    rows = grown.data if grown.mode == "grow" else _stacked(grown) if grown.mode == "rows" else _two_pass(grown, None)
    before = [torch.stack(element_rows(grown.initial))] if grown.initial else []
    pieces = [rows.flip(0)] + before if grown.front else before + [rows]  # grown at the front: last first
    pieces += [torch.stack(grown.tail)] if grown.tail else []
    _check_sizes_agree(pieces, skip=0)
    return torch.movedim(torch.cat(pieces) if len(pieces) > 1 else pieces[0], 0, dim)  # cat promotes dtypes


def cat(tensors, dim: int = 0, *, out=None):
    """``torch.cat``, also for lists grown in a data-dependent loop and lists repeated a dynamic
    number of times (:mod:`~fxport.controlflow.operators.lists.repeated`)."""
    if isinstance(tensors, Repeated):
        return tensors.catted(dim) if out is None else torch.cat(tensors.as_written(), dim, out=out)
    if not isinstance(tensors, Appender):
        return torch.cat(tensors, dim) if out is None else torch.cat(tensors, dim, out=out)
    grown = tensors
    if grown.mode == "select":
        return grown.catted(dim)
    if grown.mode == "concat":
        return _concatenation(grown, dim)
    rank = _element_rank(grown)
    if rank == 0:
        refuse_here(f"torch.cat of list {grown.name!r}: zero-dimensional tensors cannot be concatenated",
                    "use torch.stack")
    dim = dim + rank if dim < 0 else dim
    if grown.front:
        loop_part = _cat_rows(_front_rows(grown), dim)
    elif grown.mode in ("rows", "grow"):
        loop_part = _cat_rows(grown.data if grown.mode == "grow" else _stacked(grown), dim)
    else:
        loop_part = torch.movedim(_two_pass(grown, dim), 0, dim)
    before = element_rows(grown.initial)
    pieces = ([loop_part] + before if grown.front else before + [loop_part]) + list(grown.tail)
    _check_sizes_agree(pieces, skip=dim)
    return torch.cat(pieces, dim) if len(pieces) > 1 else loop_part


def _concatenation(grown: Appender, dim: int) -> torch.Tensor:
    """``torch.cat`` of a ``concat`` list: the elements before the loop, the loop's concatenation,
    those after it, along ``dim``, which must be the axis the loop concatenated along (the one
    whose length is data: along another, eager raises unless every length happens to agree)."""
    rank = grown.data.dim()
    dim = dim + rank if dim < 0 else dim
    if dim != grown.axis:
        grown._refuse(f"torch.cat of list {grown.name!r} along dimension {dim}: its elements' lengths along dimension "
                      f"{grown.axis} are data, so they are concatenated along that one",
                      f"torch.cat({grown.name}, dim={grown.axis})")
    if not grown.finished:
        grown._refuse(f"torch.cat of list {grown.name!r} inside the data-dependent loop that grows it is not supported",
                      f"torch.cat({grown.name}) after the loop")
    loop_part = torch.movedim(grown.data, 0, dim)  # (the elements before the loop are its first rows)
    pieces = element_rows(grown.initial) + [loop_part] + list(grown.tail)  # [h] + xs, xs + [h] after the loop
    _check_sizes_agree(pieces, skip=dim)
    return torch.cat(pieces, dim) if len(pieces) > 1 else loop_part  # cat promotes dtypes, as eager's


def _front_rows(grown: Appender) -> torch.Tensor:
    """The loop's rows of a list grown at the front, last first (their stack; elements of one shape)."""
    if not grown._one_shape():
        grown._refuse(f"torch.cat of list {grown.name!r}, grown at the front (insert(0, ...)) with elements that change "
                      "size, is not supported", f"append to {grown.name!r} and torch.cat the list reversed after the loop")
    rows = grown.data if grown.mode == "grow" else _stacked(grown) if grown.mode == "rows" else _two_pass(grown, None)
    return rows.flip(0)


def _check_sizes_agree(pieces: list, skip: int) -> None:
    """The pieces' sizes other than along ``skip`` are equal, as torch.stack/torch.cat require of
    the elements (where they are not, eager raises): stated, so that rows whose sizes were read
    from the data (:func:`data_sized`) join the elements before and after the loop."""
    first = pieces[0]
    for piece in pieces[1:]:
        if piece.dim() != first.dim():
            continue  # torch.cat says what is wrong
        for axis, (a, b) in enumerate(zip(first.shape, piece.shape)):
            if axis != skip and not (isinstance(a, int) and isinstance(b, int)):
                torch._check(a == b)


def len_(value):
    """``len(parts)`` of a list grown in a data-dependent loop: after the loop, the number of
    elements (a SymInt while exporting); inside it, the number so far as a 0-d int64 tensor
    (``if len(parts) >= k: break`` is then a tensor condition)."""
    if isinstance(value, TensorItems):
        return value.length()
    if isinstance(value, torch.Tensor) and value.dim() > 0:
        return value.shape[0]  # a dynamic size stays a size (Python's len() would fix it to the example's)
    if not isinstance(value, Appender):
        return len(value)
    if value.mode == "select":
        return value.count()
    if value.mode == "concat":  # the number of elements is carried beside their concatenation
        count = value.length if not value.finished else _size(value.length)
        return count + len(value.initial) + len(value.tail)
    if value.mode == "grow":  # the stack so far: its length is a size, inside the loop too
        if not value.finished:
            _check_prefix_known(value, "len()")
        return len(value.initial) + value.data.shape[0] + len(value.tail)
    if not value.finished:
        return _length_so_far(value)
    if torch.compiler.is_dynamo_compiling():
        fail(f"len() of list {value.name!r} grown in a data-dependent loop inside a converted branch (or after a "
             "loop that returns) is not a Python int", value, "count the appends in a tensor")
    grown = value.copy()
    if grown.mode == "rows" and grown.exact:
        count = grown.data.shape[0]
    else:
        count = _size(grown.length)
    return len(grown.initial) + count + len(grown.tail)


def _length_so_far(grown: Appender):
    """Inside the loop: the initial elements plus the appends so far."""
    _check_prefix_known(grown, "len()")
    if grown.mode == "probe":
        if in_loop.continued_rows(grown) is not None:
            return in_loop.count_so_far(grown)
        return len(in_loop.probe_items(grown))
    appends = grown.length[1] if grown.mode == "write" else grown.length
    return appends + len(grown.initial)


def _index_text(index) -> str:
    """An index as the user wrote it, near enough for a message (``i`` for a traced one)."""
    if isinstance(index, slice):
        return ":".join("" if v is None else str(v) for v in (index.start, index.stop, index.step)).rstrip(":") or ":"
    return str(index) if isinstance(index, int) else "i"


def _integer_vector(rows: torch.Tensor) -> bool:
    """A 1-d tensor of integers (not bools): what indexes a tensor, or a set of ids."""
    return rows.dim() == 1 and rows.dtype != torch.bool and not rows.dtype.is_floating_point and not rows.dtype.is_complex


def _rows_sliced(rows: torch.Tensor, index: slice, grown: Appender) -> torch.Tensor:
    """``rows[index]`` with Python's meaning of a negative step on the whole list (``[::-1]``,
    ``[::-2]``: the rows last first), which a tensor slice does not take."""
    if index.step is None or index.step > 0:
        return rows[index]
    if index.start is not None or index.stop is not None:
        refuse_here(f"list {grown.name!r} grown in a data-dependent loop is sliced with a negative step and bounds "
                    f"([{index.start}:{index.stop}:{index.step}])", f"slice the reversed list instead ({grown.name}[::-1][...])")
    return rows.flip(0)[::-index.step]


def _check_prefix_known(grown: Appender, what: str) -> None:
    known = isinstance(grown.initial, Continues) or (
        type(grown.initial) is SelectedBefore and grown.initial.selected is not None)
    if known and grown.mode == "probe":
        grown.initial.mark_read()  # the loop (and one around it) will carry the stack of all the elements, those before first
        grown.read_inside = True
        return
    if isinstance(grown.initial, Continued):
        return
    if isinstance(grown.initial, NestedIn):
        fail(f"list {grown.name!r} is read ({what}) inside a data-dependent loop nested in another one that grows it, "
             "which is not supported", grown, "count the elements in a tensor, or collect the inner loop's elements in a list of its "
             f"own and append to {grown.name!r} after it")
    if isinstance(grown.initial, SelectedBefore):
        fail(f"list {grown.name!r} is read ({what}) inside a data-dependent loop after appends under a tensor "
             "condition before the loop (a peeled first trip, or an if), which is not supported", grown,
             "count the elements in a tensor, or start a new list for the loop and join them after it")


def _element_rank(grown: Appender) -> int:
    if grown.mode == "count":
        return grown.replay.element.dim()
    return grown.data.dim() - 1


def _cat_rows(stacked, dim: int):
    """``cat`` of equal-shape elements from their stack (rows along dimension 0)."""
    moved = torch.movedim(stacked, 0, dim)
    shape = list(moved.shape)
    return moved.reshape(shape[:dim] + [shape[dim] * shape[dim + 1]] + shape[dim + 2:])


def _stacked(appender: Appender):
    """``rows`` mode: the rows the loop wrote (all of the buffer when every iteration appended)."""
    buf = appender.data
    if appender.exact:
        return buf
    count = _size(appender.length)
    torch._check(count <= buf.shape[0])
    return buf.narrow(0, 0, count)


def _two_pass(grown: Appender, axis: int | None):
    """``count`` mode: allocate the exact rows from pass 1, run the loop again writing them.

    The rows are along dimension 0: ``(count, *element)`` for a stack (``axis=None``), the
    element with ``axis`` moved to the front and the sizes along it summed for a cat.
    """
    element = grown.replay.element
    count = _size(grown.length)
    shape = [_element_size(grown, j, count) for j in range(element.dim())]
    if axis is None:
        rows, rest = count, shape
    else:
        rows = _size(grown.data[axis]) if data_sized(element.shape[axis]) else count * shape[axis]
        rest = shape[:axis] + shape[axis + 1:]
    buf = torch.zeros([rows + 1] + rest, dtype=element.dtype)  # + 1: the row for untaken writes
    # the initial elements are not written (stack/cat put them first), but len() in the body counts them
    writer = Appender(grown.name, grown.initial, buf, torch.zeros(2, dtype=torch.int64), mode="write", axis=axis)
    writer.location = grown.location
    writer._shared.update(front=grown.front, at_end=grown._shared.get("at_end", False))  # the ends pass 1 grew it at
    return grown.replay.written(grown.name, writer).narrow(0, 0, rows)


def _element_size(grown: Appender, j: int, count):
    """Size ``j`` of the elements: the probe's when it is fixed, else the mean of pass 1's sums."""
    size = grown.replay.element.shape[j]
    if not varies(size):  # in a body dynamo traces too: where eager stacks, every element has the probe's size
        return size
    return _size(grown.data[j] // torch.clamp(grown.length, min=1))


def varies(size) -> bool:
    """A size from data (an unbacked symbol): it may change between iterations."""
    return isinstance(size, torch.SymInt) and bool(free_unbacked_symbols(size))


def data_sized(size) -> bool:
    """A size of the elements that may change from one to the next (the cat dimension's rows then
    come from pass 1's sums, and a ``for`` counts instead of writing one row per trip): one read
    from a tensor (:func:`varies`), and inside a body dynamo traces (a loop nested in a converted
    loop or branch) every size not known to be one number, since dynamo shows a size read from a
    tensor there as a Python int (the probe's size was taken for every element's: a wrong file)."""
    if varies(size):
        return True
    return torch.compiler.is_dynamo_compiling() and not _one_value(size)


def _one_value(size) -> bool:
    """The size is statically one number: bounded above, and its least bound also a lower bound
    (bounds are what dynamo answers about a size; a constant has the tightest)."""
    top = 2 ** 62
    if not statically_known_true(size <= top):
        return False
    low, high = 0, top
    while low < high:
        middle = (low + high) // 2
        if statically_known_true(size <= middle):
            high = middle
        else:
            low = middle + 1
    return statically_known_true(size >= low)


def _size(value: torch.Tensor):
    """A non-negative size read from a 0-d int64 tensor (a SymInt while exporting)."""
    size = value.item()
    torch._check(size >= 0)
    return size
