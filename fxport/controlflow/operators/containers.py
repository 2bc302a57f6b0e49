"""Library objects that loop and branch state may hold, made pytrees of their tensors.

A converted ``if`` or loop carries tensors. A library object passed from one step of a
decoding loop to the next (a cache holding one key and one value tensor per layer), once
registered here, is carried as its leaves: the converted ``if`` carries them and rebuilds the
object inside each branch, and a loop whose state grows carries them as growing state.

The runtime names no library. A library's objects come in through two hooks:
:func:`register_container` makes one class a pytree of its tensors (left alone when it is one
already: the library's own export support or the user's registration), and
:func:`container_registrar` adds a function that registers a library's classes once that
library is loaded; :func:`register_library_containers` runs those before each conversion.
The caches generated models pass from step to step are registered this way by
:mod:`fxport.generation.caches`.

Example::

    >>> class Pair:
    ...     def __init__(self, a, b):
    ...         self.a, self.b = a, b
    >>> register_container(Pair, lambda p: ([p.a, p.b], None), lambda leaves, _: Pair(*leaves))
    True
    >>> is_container(Pair(torch.zeros(1), torch.ones(1)))
    True
    >>> register_container(Pair, lambda p: ([p.a], None), lambda leaves, _: Pair(*leaves))  # once
    False
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.utils._pytree as pytree

from fxport.controlflow.operators.failures import fail

#: Functions that register a library's container classes (:func:`register_container`) when that
#: library is loaded, and do nothing otherwise; run before each conversion.
_REGISTRARS: list[Callable[[], None]] = []


def register_container(cls: type, flatten: Callable[[Any], tuple[list, Any]], unflatten: Callable[[list, Any], Any],
                       *, serialized_type_name: str | None = None) -> bool:
    """Carry ``cls`` objects through converted ifs and loops as their tensors.

    ``flatten(obj)`` returns ``(tensors, context)`` (raising ValueError for a kind of the object
    the registration does not cover); ``unflatten(tensors, context)`` rebuilds the object. Once
    per class: a class that is a pytree already is left as it is (False).
    """
    if cls in pytree.SUPPORTED_NODES:
        return False
    pytree.register_pytree_node(cls, flatten, unflatten, flatten_with_keys_fn=_numbered(flatten),
                                serialized_type_name=serialized_type_name)
    return True


def container_registrar(registrar: Callable[[], None]) -> Callable[[], None]:
    """Run ``registrar`` before each conversion (:func:`register_library_containers`): a function
    that registers a library's classes with :func:`register_container` once the library is loaded
    (it may be imported after fxport). Added once; returns ``registrar`` (a decorator)."""
    if registrar not in _REGISTRARS:
        _REGISTRARS.append(registrar)
    return registrar


def register_library_containers() -> None:
    """Register the loaded libraries' container classes as pytrees (idempotent)."""
    for registrar in list(_REGISTRARS):
        registrar()


def _numbered(flatten):
    """``flatten`` with each leaf keyed by its position (the keyed flatten pytree asks for)."""

    def flatten_with_keys(cache):
        values, context = flatten(cache)
        return [(pytree.SequenceKey(i), value) for i, value in enumerate(values)], context

    return flatten_with_keys


def is_container(value) -> bool:
    """True for a registered library object (not a list, tuple or dict) whose leaves are tensors.

    >>> is_container([1]), is_container(object())
    (False, False)
    """
    if isinstance(value, (list, tuple, dict)) or type(value) not in pytree.SUPPORTED_NODES:
        return False
    try:
        leaves = pytree.tree_leaves(value)
    except ValueError:  # a kind of the object the registration does not cover
        return False
    return bool(leaves) and all(hasattr(leaf, "shape") for leaf in leaves)


def fresh_copy(value):
    """The object rebuilt from clones of its tensors (one per branch: a branch that updates it,
    in place or not, leaves the other's untouched)."""
    leaves, spec = pytree.tree_flatten(value)
    return pytree.tree_unflatten([leaf.clone() for leaf in leaves], spec)


def run_branch(fn, args: list, info, side: str):
    """``fn(*args)``, refusing a branch that changes a library object the ``if`` does not assign
    (``cache.update(k, v, 0)`` with no ``cache = ...``): the change could not leave the branch."""
    before = {name: pytree.tree_leaves(a) for name, a in zip(info.params, args)
              if is_container(a) and name not in info.names}
    outs = fn(*args)
    for name, leaves in before.items():
        after = pytree.tree_leaves(args[info.params.index(name)])
        if len(after) != len(leaves) or any(a is not b for a, b in zip(after, leaves)):
            kind = type(args[info.params.index(name)]).__name__
            fail(f"if on a tensor condition changes the {kind} {name!r} in place in its {side} branch", info,
                 f"assign it in the branch ({name} = <the updated object>, e.g. the model's past_key_values) "
                 "so fxport carries it, or update it outside the if")
    return outs


def operand_spec(value):
    """None for a tensor; the pytree spec of a library object carried as its leaves."""
    return None if isinstance(value, torch.Tensor) else pytree.tree_flatten(value)[1]


def assigned_specs(args: tuple, info) -> dict:
    """``{name: spec}`` of the library objects the ``if`` assigns and had before it."""
    incoming = dict(zip(info.params, args))
    return {name: pytree.tree_flatten(incoming[name])[1] for name in info.names
            if name in incoming and is_container(incoming[name])}


def leaves_out(name: str, value, specs: dict, info, side: str):
    """A library object leaves a branch as the list of its leaves, rebuilt after the cond with
    the structure it had before the ``if`` (a cache keeps its layers)."""
    if not is_container(value):
        return value
    leaves = pytree.tree_leaves(value)
    if name not in specs or len(leaves) != specs[name].num_leaves:
        fail(f"if: {name!r} becomes a {type(value).__name__} of another structure in the {side} branch", info,
             f"give {name!r} its layers before the if (run the first step, the prefill, before the loop)")
    return leaves


def rebuilt(outs: tuple, specs: dict, info) -> tuple:
    return tuple(pytree.tree_unflatten(list(value), specs[name]) if name in specs else value
                 for name, value in zip(info.names, outs))
