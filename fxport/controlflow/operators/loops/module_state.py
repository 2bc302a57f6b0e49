"""Tensors in attributes of the modules a loop body reaches, written by the code the body calls.

meta-llama's ``Llama.generate`` loops ``for cur_pos in range(min_prompt_len, total_len)`` over
``self.model.forward(tokens[:, prev_pos:cur_pos], prev_pos)``, and each layer's
``Attention.forward`` writes its static KV cache in place, ``self.cache_k[:bsz, start_pos:start_pos
+ seqlen] = xk`` (``cache_k`` a plain tensor attribute made in ``__init__``), then reads
``self.cache_k[:bsz, : start_pos + seqlen]``. No statement of the loop body shows the write: it
is calls away, into an attribute of a submodule, where the source-level carrying
(converters/state_targets.py, converters/method_state.py) cannot see it. Yet each trip reads what
the trips before it wrote, so the loop must carry the buffer.

The loop finds such state at run time. Its *candidates* are the buffers and plain tensor
attributes of each module among the values the body reads (``self``, passed to the body) and of
their submodules. The body's probe (one run outside the loop whose ops are dead code) runs with
every candidate replaced by a clone on its module (put back after); a candidate the probe wrote
into (the clone, or by position: targets.item_written), or an attribute of the module itself it
rebound to a tensor of its shape, is loop state from then on: the loop starts again carrying it (as ``while_loop._Writes`` does for tensors a called function writes). Each
trip then runs the body on an overlay (:class:`~fxport.controlflow.operators.targets.Overlay`):
the module handed to the body, and each submodule on the way to a carried attribute, is an
overlay holding the carried values (a clone where the code writes into one, so the trip's input
stays unwritten); calling an overlaid submodule runs its converted forward on the overlay. What
the overlays hold after the trip is the next trip's state; after the loop each attribute takes
the final value as a construct's result is stored (:func:`~fxport.controlflow.operators.targets.store`:
a buffer in place, a module's plain tensor attribute rebound).

Example::

    >>> import torch
    >>> from fxport.controlflow.operators.loops.module_state import Slot, tensor_keys
    >>> attention = torch.nn.Module(); attention.cache_k = torch.zeros(2, 8)
    >>> attention.register_buffer("positions", torch.arange(8)); attention.wk = torch.nn.Linear(8, 8)
    >>> tensor_keys(attention), Slot("self", ("attention",), "cache_k").text   # the weights are no candidates
    (['positions', 'cache_k'], 'self.attention.cache_k')
"""

from __future__ import annotations

import dataclasses
import sys

import torch

from fxport.common.frames import is_user_file
from fxport.controlflow.operators.failures import fail
from fxport.controlflow.operators.state import is_probing
from fxport.controlflow.operators.targets import WRITTEN_INTO, Overlay, overlay, store
from fxport.controlflow.operators.values import same_layout


@dataclasses.dataclass(frozen=True)
class Slot:
    """One candidate: the tensor at ``owner.key``, ``owner`` the submodule at ``path`` (attribute
    names) below the module the body's parameter ``param`` holds."""

    param: str
    path: tuple[str, ...]
    key: str

    @property
    def text(self) -> str:
        """``self.attention.cache_k``: the name the loop carries it by (messages, records)."""
        return ".".join((self.param, *self.path, self.key))

    def owner(self, module):
        """The module holding the attribute, reached from ``module`` (the parameter's value)."""
        for name in self.path:
            module = getattr(module, name)
        return module


def candidates(params: tuple, values: tuple) -> list[Slot]:
    """The buffers and plain tensor attributes of the modules among ``values`` (the body's free
    values, named ``params``) and of their submodules whose class is the user's, each module once
    (torch's own modules change their buffers in train mode only, and no code of theirs writes
    one at a traced position)."""
    slots, seen = [], set()
    for param, value in zip(params, values):
        if not isinstance(value, torch.nn.Module):
            continue
        for path, module in value.named_modules():
            if id(module) in seen or not _is_users(type(module)):
                continue
            seen.add(id(module))
            steps = tuple(path.split(".")) if path else ()
            slots.extend(Slot(param, steps, key) for key in tensor_keys(module))
    return slots


def _is_users(cls: type) -> bool:
    """A class defined in the user's code (not torch's, fxport's or an installed library's)."""
    return is_user_file(getattr(sys.modules.get(cls.__module__), "__file__", None))


def tensor_keys(module: torch.nn.Module) -> list[str]:
    """The names of ``module``'s buffers and plain tensor attributes (not parameters)."""
    keys = [key for key, tensor in module._buffers.items() if tensor is not None]
    return keys + [key for key, value in vars(module).items()
                   if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter)]


class _AttributesWritten(Exception):
    """A probe of a loop body wrote, or rebound, candidates the loop does not carry yet:
    ``found`` maps each to whether it was written into (else only rebound)."""

    def __init__(self, token, found: dict):
        super().__init__("a loop body wrote tensors held in module attributes")
        self.token, self.found = token, found


def carrying_module_state(info, state, free, body_fn, test_fn, counted: bool, lower):
    """The loop's final state (``info.names``), carrying the module attributes its body writes
    through the functions it calls (see the module doc). ``lower(info, state, free, body_fn,
    test_fn)`` lowers a loop; ``counted``: the body takes the range's item first."""
    own = len(info.params) - len(info.names)
    params, values = tuple(info.params[len(info.names):]), tuple(free[:own])
    found = candidates(params, values) if not torch.compiler.is_dynamo_compiling() else []
    if not found:  # no module among the body's values, or inside a body dynamo traces (no probe restarts)
        return lower(info, state, free, body_fn, test_fn)
    carried = _Carried(info, found, {})
    while True:
        token = object()
        try:
            values = lower(carried.info, carried.entry(state, free), free, carried.body(body_fn, token, counted),
                           carried.test(test_fn))
        except _AttributesWritten as wrote:
            if wrote.token is not token:
                raise
            carried = carried.widened(wrote.found)
            continue
        return carried.written_back(values, free)


class _Carried:
    """A loop as it carries the module attributes ``written`` (slot → written into, else only
    rebound), after its own state: the attributes are named by their text."""

    def __init__(self, info, found: list[Slot], written: dict):
        self.original, self.found, self.written = info, found, dict(written)
        self.slots = tuple(slot for slot in found if slot in self.written)
        count, own = len(info.names), len(info.params) - len(info.names)
        self.free_params = tuple(info.params[count:])
        names = tuple(info.names) + tuple(slot.text for slot in self.slots)
        self.info = info if not self.slots else dataclasses.replace(info, names=names, params=names + self.free_params)
        self.own = own

    def widened(self, found: dict) -> "_Carried":
        """These attributes and the ones a probe found written besides."""
        return _Carried(self.original, self.found, {**self.written, **found})

    def entry(self, state, free) -> tuple:
        """The loop's entry state: its own, then the carried attributes' values now."""
        modules = dict(zip(self.free_params, free[:self.own]))
        return tuple(state) + tuple(getattr(slot.owner(modules[slot.param]), slot.key) for slot in self.slots)

    def body(self, body_fn, token, counted: bool):
        """``body_fn`` run on overlays of the carried attributes; their values after the trip are
        returned after its own state. In a probe, the other candidates are swapped for clones on
        their modules and a write into one raises :class:`_AttributesWritten`."""
        count, carried = len(self.original.names), len(self.slots)

        def body(*args):
            item, values = (args[:1], args[1:]) if counted else ((), args)
            state, attributes, rest = values[:count], values[count:count + carried], values[count + carried:]
            modules = dict(zip(self.free_params, rest))  # the modules themselves, before any overlay
            overlays = self._overlays(rest, attributes, copies=True)
            rest = self._overlaid(rest, overlays)
            if is_probing() and not torch.compiler.is_dynamo_compiling():
                with _Swapped(self._unwatched(), modules) as swapped:
                    outs = tuple(body_fn(*item, *state, *rest))
                if swapped.found:
                    raise _AttributesWritten(token, swapped.found)
            else:
                outs = tuple(body_fn(*item, *state, *rest))
            return outs + self._read_back(overlays)

        return body

    def test(self, test_fn):
        """``test_fn`` on the loop's own values, the modules overlaid with the carried attributes."""
        if test_fn is None or not self.slots:
            return test_fn
        count, carried = len(self.original.names), len(self.slots)

        def test(*values):
            state, attributes, rest = values[:count], values[count:count + carried], values[count + carried:]
            overlays = self._overlays(rest, attributes, copies=False)
            rest = self._overlaid(rest, overlays)
            return test_fn(*state, *rest)

        return test

    def _overlaid(self, rest: tuple, overlays: dict) -> tuple:
        """The body's free values, each module holding a carried attribute given as its overlay."""
        return tuple(overlays.get(p, v) for p, v in zip(self.free_params, rest)) + tuple(rest[len(self.free_params):])

    def _unwatched(self) -> list[Slot]:
        return [slot for slot in self.found if slot not in self.written]

    def _overlays(self, rest, attributes, copies: bool) -> dict:
        """``{param: overlay}`` for each module parameter holding a carried attribute: the module
        and the submodules on the way to each carried attribute overlaid, the carried values in
        them (cloned where ``copies`` and the code writes into the attribute)."""
        modules = dict(zip(self.free_params, rest))
        values = dict(zip(self.slots, attributes))
        return {param: self._overlay(modules[param], param, (), values, copies)
                for param in dict.fromkeys(slot.param for slot in self.slots)}

    def _overlay(self, module, param: str, path: tuple, values: dict, copies: bool) -> Overlay:
        here = [slot for slot in self.slots if slot.param == param and slot.path == path]
        below = dict.fromkeys(slot.path[len(path)] for slot in self.slots
                              if slot.param == param and len(slot.path) > len(path) and slot.path[:len(path)] == path)
        children = []
        for name in below:
            child = getattr(module, name)
            _check_no_hooks(child, ".".join((param, *path, name)), self.original)
            children.append(self._overlay(child, param, path + (name,), values, copies))
        names = tuple(slot.key for slot in here) + tuple(below)
        held = tuple(values[slot] for slot in here) + tuple(children)
        copied = tuple(copies and self.written[slot] for slot in here) + (False,) * len(children)
        return overlay(module, names, held, copied)

    def _read_back(self, overlays: dict) -> tuple:
        """The carried attributes' values in the overlays after a trip."""
        values = []
        for slot in self.slots:
            holder = overlays[slot.param]
            for name in slot.path:
                holder = getattr(holder, name)
            values.append(getattr(holder, slot.key))
        return tuple(values)

    def written_back(self, values, free) -> tuple:
        """The loop's own final state; each carried attribute given its final value."""
        count = len(self.original.names)
        modules = dict(zip(self.free_params, free[:self.own]))
        for slot, value in zip(self.slots, values[count:]):
            store(slot.owner(modules[slot.param]), slot.key, "attr", value, self.written[slot], slot.text)
        return tuple(values[:count])


def _check_no_hooks(module, text: str, info) -> None:
    """Refuse an overlaid submodule with forward hooks: calling the overlay runs forward only."""
    if getattr(module, "_forward_hooks", None) or getattr(module, "_forward_pre_hooks", None):
        fail(f"{info.kind}: the loop body writes a tensor held by {text}, a module with forward hooks, through "
             "the functions it calls", info, f"remove the hooks of {text} before converting, or pass the tensor "
             "to the function that writes it and take it back")


class _Swapped:
    """While the block runs, each slot's tensor replaced by a clone on its module (``modules``:
    the body's parameters' values); after it, ``found`` maps the slots written into (True: the
    clone, or by position through targets.item_written) and the attributes of the module itself
    rebound to a tensor of their shape and dtype (False), and the tensors are put back. A
    submodule's attribute only rebound (espnet's ``self.attn``, a record of the last step that
    code may reach through ``named_modules()``, which no overlay covers) is left as written."""

    def __init__(self, slots: list[Slot], modules: dict):
        self.slots, self.modules, self.found = slots, modules, {}
        self.saved: list = []

    def __enter__(self) -> "_Swapped":
        for slot in self.slots:
            module = self.modules.get(slot.param)
            if not isinstance(module, torch.nn.Module):
                continue
            owner = slot.owner(module)
            original = getattr(owner, slot.key)
            clone = original.clone()
            _put(owner, slot.key, clone)
            self.saved.append((slot, owner, original, clone, clone._version))
        return self

    def __exit__(self, *exc) -> None:
        for slot, owner, original, clone, version in self.saved:
            now = getattr(owner, slot.key, None)
            if clone._version != version or now is not clone and getattr(now, WRITTEN_INTO, False):
                self.found[slot] = True
            elif now is not clone and not slot.path and isinstance(now, torch.Tensor) and same_layout(original, now):
                self.found[slot] = False
            _put(owner, slot.key, original)


def _put(owner: torch.nn.Module, key: str, value: torch.Tensor) -> None:
    """Set ``owner.key`` without torch's checks: a buffer stays a buffer, an attribute an attribute."""
    if key in owner._buffers:
        owner._buffers[key] = value
    else:
        owner.__dict__[key] = value
