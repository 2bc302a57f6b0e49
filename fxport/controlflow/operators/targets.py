"""State held outside the converted statement's locals: attributes, buffers, dict/list entries.

A converted ``if``/loop that writes ``self.running.mul_(0.9)``, ``self.h = ...``,
``d["k"].add_(1)`` or ``y.add_(1)`` (``y`` possibly a caller's input or a view) works on a local
copy that the construct carries (``cond`` / ``where`` / ``while_loop`` return it); before the
construct the generated code reads the target with :func:`load`, after it writes the result
back with :func:`store` (an attribute or entry) or :func:`into` (a local name), in place where
the user wrote in place, so buffers, the caller's inputs and aliases see the new value (and
torch.export records a buffer or input mutation).

Size: loads, stores, the writes into an item and the overlay a loop's trip runs on share one
rule for where a value lives and how it is written back (``_keeps_identity``), so they stay one
module.

Example::

    >>> import torch
    >>> from fxport.controlflow.operators import targets
    >>> net = torch.nn.Module(); net.register_buffer("running", torch.ones(2))
    >>> buf = net.running
    >>> new = targets.load(net, "running", "attr", "self.running") * 3
    >>> targets.store(net, "running", "attr", new, True, "self.running")
    >>> net.running is buf, buf
    (True, tensor([3., 3.]))
"""

from __future__ import annotations

import functools
import sys
import types

import torch

from fxport.controlflow.operators.calls import call
from fxport.controlflow.operators.containers import fresh_copy, is_container
from fxport.controlflow.operators.indexing import TensorSlice, getitem, setitem
from fxport.controlflow.operators.values import Undefined, is_traced, same_layout
from fxport.controlflow.operators.failures import refuse_here
from fxport.controlflow.operators.state import in_traced_body


class Missing(Undefined):
    """An attribute or entry with no value before the statement that assigns it (``line``)."""

    def __init__(self, text: str, line: int | None = None):
        super().__init__(text)
        self.line = line

    def assignment(self) -> str:
        """``assignment to self.seen at line 12``: the side effect a one-sided value is."""
        return f"assignment to {self.name}" + (f" at line {self.line}" if self.line else "")


def load(owner, key, kind: str, text: str, line: int | None = None):
    """``owner.key`` (kind ``"attr"``) or ``owner[key]`` (``"item"``); :class:`Missing` when
    there is none (``line``: where the statement assigns it)."""
    if _is_traced_data(owner, key, kind):
        view = owner.detach()  # t.data while exporting: the same storage, tracked (numbers.data_)
        view._fx_data_of = owner  # store() then knows an untouched view (a tensor takes attributes in a trace)
        return view
    try:
        return getattr(owner, key) if kind == "attr" else owner[key]
    except (AttributeError, KeyError, IndexError):
        return Missing(text, line)


def _is_traced_data(owner, key, kind: str) -> bool:
    """``t.data`` of a tensor being exported: torch's non-strict export cannot trace the tensor
    ``.data`` makes (it became "a fake tensor in the exported program constant's list")."""
    return kind == "attr" and key == "data" and isinstance(owner, torch.Tensor) and is_traced(owner)


def store(owner, key, kind: str, value, in_place: bool, text: str) -> None:
    """Write the construct's result back into ``owner.key`` / ``owner[key]``.

    ``in_place``: the user wrote into the object (``self.buf.add_(1)``, ``d["k"][0] = v``):
    a tensor is updated with ``copy_`` (a buffer keeps its identity; torch.export records the
    mutation). Otherwise the attribute or entry is rebound, as ``self.h = ...`` does.
    """
    if isinstance(value, Undefined):
        return  # never assigned on the path taken (the branch checks already refused a one-sided value)
    if _is_traced_data(owner, key, kind):
        if getattr(value, "_fx_data_of", None) is not owner:  # the view itself: written in place already, or not at all
            owner.copy_(value)  # t.data.masked_fill_(m, v) in a branch: written into t, as eager writes its storage
        return
    current = load(owner, key, kind, text)
    if value is current:
        return  # plain Python ran on the object itself
    if _number_becomes_tensor(current, value) and not _count_of_users_object(owner, kind, current, value):
        refuse_here(f"{text} is a Python {type(current).__name__} changed under a tensor condition or in a "
                    "data-dependent loop",
                    f"keep {text} a tensor (register_buffer) or change it outside the branch or loop")
    if isinstance(owner, torch.Tensor) and kind == "item":
        owner[key] = value  # a write into the owner's element (a view): x[i].add_(1)
    elif in_place and _keeps_identity(owner, key, kind, current, value):
        current.copy_(value)
    elif kind == "attr":
        setattr(owner, key, value)
    else:
        owner[key] = value


def item_written(owner, key: str, index, value) -> None:
    """``owner.key[index] = value`` in a function's own body (converters/slices.py): as Python
    writes it, except into a tensor at a traced position (``self.cache_k[:bsz, pos:pos + t] = xk``
    in a module a converted loop's body calls): written by position (indexing.setitem) and stored
    as :func:`store` stores a write into the object (a buffer in place, a plain tensor attribute
    rebound), or rebound on an overlay (a module as a loop's trip sees it; the loop writes it after).

    >>> net = torch.nn.Module(); net.cache = torch.zeros(2, 3)
    >>> item_written(net, "cache", (slice(None), torch.tensor(1)), 5.0); net.cache
    tensor([[0., 5., 0.],
            [0., 5., 0.]])
    """
    target = getattr(owner, key)
    if not isinstance(target, torch.Tensor):  # a list, a dict: as written
        target[index] = value
        return
    written = setitem(target, index, value)
    if written is target:
        return
    if isinstance(owner, Overlay):
        setattr(owner, key, written)
        return
    setattr(written, WRITTEN_INTO, True)  # rebound, yet written into as the user wrote: a loop carries it
    store(owner, key, "attr", written, True, key)


#: the attribute a tensor that :func:`item_written` stored holds (loops/module_state.py reads it)
WRITTEN_INTO = "_fx_written_into"


def _number_becomes_tensor(current, value) -> bool:
    """Whether writing ``value`` would turn a Python value (a number, a flag, a string) into a
    traced tensor, which changes what later Python code reads. ``None`` is no such value: the
    construct that produced a plain tensor for it has decided it is a tensor on every path (a
    value ``None`` on some paths comes back as an optional, see optional.py), as ``self.cache =
    None`` before a loop that sets it on its first trip."""
    if current is None or isinstance(current, (torch.Tensor, Undefined)):
        return False
    return isinstance(value, torch.Tensor) and is_traced(value)


def _count_of_users_object(owner, kind: str, current, value) -> bool:
    """A Python int attribute of an object of the user's class (a plain object or a module the
    user defined; not torch's) given a traced 0-d integer tensor: the value the data decided
    (``fade.fade_in_len = 2`` under ``if start == 0`` in a loop), kept as an int64 tensor. Its
    uses in converted code then take it use by use as any number read from a tensor ("Numbers
    used as numbers"): exactly where they can, refused in one line where a use needs a Python
    int. A float, a flag or a string stays refused (a float32 tensor is not a Python float, and
    a flag as a tensor tested by ``is`` would differ)."""
    if kind != "attr" or type(current) is not int or isinstance(owner, torch.Tensor):
        return False
    if not (isinstance(value, torch.Tensor) and value.dim() == 0 and not value.dtype.is_floating_point
            and value.dtype != torch.bool and not value.is_complex()):
        return False
    cls = type(owner._fx_owner if isinstance(owner, Overlay) else owner)
    return _in_user_file(cls)


def _in_user_file(cls: type) -> bool:
    from fxport.common.frames import is_user_file

    return is_user_file(getattr(sys.modules.get(cls.__module__), "__file__", None))


def _keeps_identity(owner, key, kind: str, current, value) -> bool:
    """Whether ``current`` can take ``value`` in place: two tensors of one shape and dtype, and
    not a module's plain tensor attribute (torch.export makes those constants, which the ONNX
    exporter refuses to see mutated; they are rebound instead)."""
    if not (isinstance(current, torch.Tensor) and isinstance(value, torch.Tensor)):
        return False
    if isinstance(owner, torch.nn.Module) and kind == "attr" and key not in owner._buffers and key not in owner._parameters:
        return False
    return same_layout(current, value)


class Overlay:
    """``self`` as the methods a converted statement calls see it: the attributes the
    statement carries as locals hold the locals' values (and take the methods' writes, read
    back by :func:`overlaid`); every other attribute is the object's, and a method of its
    class is bound to the overlay, so the methods it calls see the overlay too.

    >>> class Decoder:
    ...     scale = 2.0
    ...     def step(self, x):
    ...         self.h = self.h * self.scale + x
    ...         return self.h
    >>> decoder = Decoder(); decoder.h = torch.zeros(1)
    >>> seen = overlay(decoder, ("h",), (torch.ones(1),), (False,))
    >>> seen.step(torch.ones(1)), overlaid(seen, ("h",)), decoder.h
    (tensor([3.]), (tensor([3.]),), tensor([0.]))
    """

    def __init__(self, owner, names: tuple, values: tuple, copied: tuple):
        self._fx_owner = owner
        for key, value, copy in zip(names, values, copied):
            # a value a method writes into (``self.h += x``) is a copy: the carried value stays an input
            setattr(self, key, value.clone() if copy and isinstance(value, torch.Tensor) else value)

    def __call__(self, *args, **kwargs):
        """A module called on the overlay: its forward (converted where user code) on the overlay."""
        owner = self.__dict__["_fx_owner"]
        if getattr(owner, "_forward_hooks", None) or getattr(owner, "_forward_pre_hooks", None):
            refuse_here(f"a converted loop or branch carries attributes of a {type(owner).__name__} module with forward "
                        "hooks, and calls it", "remove the hooks before converting, or change its attributes outside "
                        "the loop or branch")
        return call(self.forward)(*args, **kwargs)

    def __iter__(self):
        """A container module (``nn.ModuleList``) iterated: its modules, overlaid ones as overlays."""
        return iter([self[i] for i in range(len(self))])

    def __len__(self):
        return len(self.__dict__["_fx_owner"])

    def __getitem__(self, index):
        owner = self.__dict__["_fx_owner"]
        if isinstance(owner, torch.nn.Module) and isinstance(index, int) and hasattr(owner, "_modules"):
            name = list(owner._modules)[index]
            return self.__dict__.get(name, owner._modules[name])
        return owner[index]

    def __getattr__(self, key):
        owner = self.__dict__["_fx_owner"]
        member = getattr(type(owner), key, None)
        if isinstance(member, types.FunctionType) and not isinstance(owner.__dict__.get(key, None), types.FunctionType):
            return functools.partial(member, self)  # partial, not MethodType: dynamo traces partial
        return getattr(owner, key)


def overlay(owner, names: tuple, values: tuple, copied: tuple) -> Overlay:
    """``owner`` with ``names`` standing for ``values`` (see :class:`Overlay`)."""
    return Overlay(owner, names, values, copied)


def overlaid(seen: Overlay, names: tuple) -> tuple:
    """The values of ``names`` after the methods ran on the overlay ``seen``."""
    return tuple(getattr(seen, key) for key in names)


def into(original, value):
    """The value of a local written in place (``y.add_(1)``) after the construct: ``original``
    updated with ``copy_``, so views, aliases and the caller's input see the write.

    >>> y = torch.zeros(2); alias = y
    >>> into(y, torch.ones(2)) is alias, alias
    (True, tensor([1., 1.]))
    """
    if _list_written_back(original, value):
        original[:] = value  # the entries a converted loop carried: every name for the list sees them
        return original
    if value is original or not (isinstance(original, torch.Tensor) and isinstance(value, torch.Tensor)):
        return value
    if not same_layout(original, value):
        return value
    original.copy_(value)
    return original


def _list_written_back(original, value) -> bool:
    """A Python list whose entries a construct rebound (:func:`entry_written`), outside any traced
    body (there the list is the body's own, carried out by its name)."""
    return (type(original) is list and type(value) is list and value is not original
            and len(original) == len(value) and not in_traced_body())


def entry_written(target, index, value, static: bool = False):
    """``target[index] = value`` in a converted loop's body, ``target`` a list the loop
    writes into by index (converters/state_targets.py): the new ``target``.

    A Python list at a position known at trace time (an int: a constant, the counter of a static
    inner loop over layers, ``hs[i] = cell(x, hs[i])``) is its entries, carried like several
    variables: where the construct traces its body (a ``while_loop`` body, a loop's probe, a
    ``cond`` branch) the write gives a new list with that entry replaced, which the loop carries
    by the name it is bound to; elsewhere the list is written as Python writes it. A tensor (or a
    position read from data) is written as ``x[i] = v`` is everywhere: in place (``static``: the
    index as written) or by :func:`~fxport.controlflow.operators.indexing.setitem`.

    >>> hs = [torch.zeros(1), torch.zeros(1)]
    >>> entry_written(hs, 1, torch.ones(1)) is hs, hs[1]
    (True, tensor([1.]))
    """
    if type(target) is list and type(index) is int:
        if in_traced_body():
            target = list(target)
        target[index] = value
        return target
    if static and not isinstance(target, list):
        target[index] = value
        return target
    return setitem(target, index, value)


def effect_here(text: str) -> None:
    """Before an attribute assignment in an inner ``if``/``for``/``while`` of a loop body (``text``:
    ``assignment to o.a at line N``): refused where the loop traces its body (a ``while_loop``
    body, its probe, a ``cond`` branch), which cannot carry it; nothing where the statement runs
    as Python, or where it is never reached (a ``for`` over an empty list).

    >>> effect_here("assignment to o.a at line 3")
    """
    if in_traced_body():
        refuse_here(f"a data-dependent loop's body reaches an {text}, which the loop cannot carry",
                    "assign a local or a tensor attribute the loop carries instead, or move the assignment out of the loop")


def into_enclosing(original, value, text: str) -> None:
    """A variable of the enclosing function written in place by a nested function's construct
    (``def find(i): while parent[i] != i: parent[i] = ...``): ``original`` updated with
    ``copy_``, since the nested function cannot rebind it.

    >>> parent = torch.arange(3)
    >>> into_enclosing(parent, torch.tensor([1, 1, 2]), "parent"); parent
    tensor([1, 1, 2])
    """
    if value is original:
        return
    if isinstance(original, torch.Tensor) and isinstance(value, torch.Tensor) and same_layout(original, value):
        original.copy_(value)
        return
    refuse_here(f"{text!r}, a variable of the enclosing function, is replaced by a converted statement of a nested "
                "function", f"write into {text} in place with values of its shape and dtype, or pass it as an argument")


def apart(originals: tuple, values: tuple, texts: tuple) -> None:
    """Refuse writing back two locals that share memory (``row = y[0]``, then ``y.mul_(3)`` on
    one side and ``row.add_(1)`` on the other): each copy-back would undo the other's write.

    >>> y = torch.zeros(2, 2)
    >>> apart((y, y[0]), (y, y[0]), ("y", "row"))     # plain Python wrote the objects themselves
    """
    changed = [(o, t) for o, v, t in zip(originals, values, texts)
               if isinstance(o, torch.Tensor) and isinstance(v, torch.Tensor) and v is not o]
    seen: dict[int, str] = {}
    for original, text in changed:
        base = original._base if original._base is not None else original
        if id(base) in seen:
            refuse_here(f"{seen[id(base)]} and {text} share memory (one is a view of the other) and are both "
                        "written in place under a tensor condition or in a data-dependent loop",
                        "write through one of them only, or clone the view")
        seen[id(base)] = text


def probe_copy(value):
    """What a probe of a loop body (one run outside the loop, whose ops are dead code) gets for
    ``value``: a tensor cloned, a library object rebuilt from clones, anything else as it is. A
    function the body calls may write a tensor in place where the converter cannot see it; the
    probe then writes only its copy, and :func:`versions` tell which copies it wrote.

    >>> x = torch.zeros(2); probe_copy(x) is x, probe_copy(3)
    (False, 3)
    """
    if isinstance(value, torch.Tensor):
        return value.clone()
    return fresh_copy(value) if is_container(value) else value


def versions(values) -> tuple:
    """The version counter of each tensor among ``values`` (None for anything else): an in-place
    write into a tensor, or into a view of it, advances it.

    >>> y = torch.zeros(3); before = versions([y, 1]); y[0] = 1
    >>> [n for n, b, a in zip("ab", before, versions([y, 1])) if a != b]
    ['a']
    """
    return tuple(v._version if isinstance(v, torch.Tensor) else None for v in values)


def written_into(original, value):
    """``original`` (a tensor the converter did not know a loop writes: a function its body
    calls writes it) given the loop's ``value`` for it with ``copy_``, whatever its layout (a
    view, a caller's input, a buffer: every alias sees it, as in eager); ``original``.

    >>> y = torch.zeros(2); row = y[0:1]
    >>> written_into(row, torch.ones(1)) is row, y
    (True, tensor([1., 0.]))
    """
    if isinstance(original, torch.Tensor) and isinstance(value, torch.Tensor) and value is not original:
        original.copy_(value)
    return original if isinstance(original, torch.Tensor) else value


def chained_setitem(target, indices: tuple, value):
    """``target[i][j] = value`` (``indices``: ``(i, j)``, as many as written): the new target.

    Where an index picks one position (an int, a 0-d integer tensor, a tuple of those),
    ``target[i]`` is a view in eager and the write reaches ``target``. So the write goes down
    one position at a time: through the view itself where the position is a Python number, and
    where it is traced (a loop counter, a count read from a tensor) through the row read at it,
    written, and put back at it (no value of the index is read). An index that does not pick one
    position applies as written (a slice is a view too; a mask or an index tensor makes a copy,
    which eager writes in vain).

    >>> m = torch.zeros(2, 3)
    >>> chained_setitem(m, (1, torch.tensor(2)), 5.0)[1]
    tensor([0., 0., 5.])
    """
    first, rest = _first_position(indices)
    if first is None:
        return setitem(target, indices[0], value) if len(indices) == 1 else _chained_as_written(target, indices, value)
    if not rest:
        return setitem(target, first, value)
    if isinstance(target, torch.Tensor) and is_traced(first):
        return setitem(target, first, chained_setitem(getitem(target, first), rest, value))
    view = target[first] if isinstance(target, torch.Tensor) else getitem(target, first)
    written = chained_setitem(view, rest, value)
    if written is not view and isinstance(view, torch.Tensor):
        view.copy_(written)  # written functionally below (a traced position): back into the view
    return target


def _first_position(indices: tuple):
    """``(p, rest)``: the first index when it picks one position (from a tuple, its first part)
    and the indices after it; ``(None, indices)`` when it does not."""
    head = indices[0]
    if isinstance(head, tuple):
        if not head or not _one_position(head[0]):
            return None, indices
        tail = head[1:]
        return head[0], ((tail[0] if len(tail) == 1 else tail,) if tail else ()) + tuple(indices[1:])
    return (head, tuple(indices[1:])) if _one_position(head) else (None, indices)


def _chained_as_written(target, indices: tuple, value):
    """``target[i][j] = value`` applied one index after the other, as Python does."""
    view = target
    for index in indices[:-1]:
        if isinstance(view, torch.Tensor) and _traced_slice(index):
            refuse_here("an assignment through chained indexing (x[a][b] = v) whose first index slices by a bound "
                        "computed at run time", "write it with one index, x[a, b] = v")
        view = getitem(view, index) if not isinstance(view, torch.Tensor) else view[index]  # a copy where eager makes one
    written = setitem(view, indices[-1], value)
    if written is not view and isinstance(view, torch.Tensor):
        view.copy_(written)
    return target


def _one_position(index) -> bool:
    """An index that picks one position along one dimension (``x[i]`` is a view)."""
    if isinstance(index, (bool, torch.SymBool)):
        return False
    if isinstance(index, (int, torch.SymInt)):
        return True
    return (isinstance(index, torch.Tensor) and index.dim() == 0 and not index.dtype.is_floating_point
            and index.dtype not in (torch.bool, torch.uint8) and not index.is_complex())


def _traced_slice(index) -> bool:
    """A slice by a traced bound (a view in eager, which reading it by its bound could not be)."""
    return any(isinstance(p, TensorSlice) for p in (index if isinstance(index, tuple) else (index,)))
