"""Library objects that loop and branch state may hold, made pytrees of their tensors.

A converted ``if`` or loop carries tensors. A transformers ``DynamicCache`` passed from one
step of a decoding loop to the next is an object holding one key and one value tensor per
layer; registered as a pytree (its keys, then its values, as transformers' own export support
lays them out; that registration is kept where the user made it), the converted ``if`` carries
its leaves and rebuilds the object inside each branch, and a loop whose state grows carries
them as growing state. A cache with layers of another kind (sliding window) is not carried.
Nothing is imported: a library that is not loaded is skipped.

Example::

    >>> register_library_containers()   # idempotent; a no-op without transformers loaded
"""

from __future__ import annotations

import sys

import torch
import torch.utils._pytree as pytree

from fxport.controlflow.operators.failures import fail


def register_library_containers() -> None:
    """Register the loaded libraries' cache objects as pytrees (once)."""
    if "transformers" in sys.modules:
        _register_transformers_caches()


def _register_transformers_caches() -> None:
    try:
        from transformers.cache_utils import DynamicCache, DynamicLayer
    except ImportError:  # an older or partial transformers: its caches stay plain objects
        return
    if DynamicCache in pytree.SUPPORTED_NODES:  # the user registered transformers' own support, or done
        _register_encoder_decoder_cache()
        _register_static_cache()
        return

    def flatten(cache):
        layers = list(cache.layers)
        if any(type(layer) is not DynamicLayer or not layer.is_initialized for layer in layers):
            raise ValueError("a DynamicCache with layers other than initialized DynamicLayers")
        return [layer.keys for layer in layers] + [layer.values for layer in layers], len(layers)

    def unflatten(values, count):
        cache = DynamicCache()
        cache.layers = [_dynamic_layer(DynamicLayer, k, v) for k, v in zip(values[:count], values[count:])]
        return cache

    pytree.register_pytree_node(DynamicCache, flatten, unflatten, flatten_with_keys_fn=_numbered(flatten),
                                serialized_type_name="transformers.cache_utils.DynamicCache")
    _register_encoder_decoder_cache()
    _register_static_cache()


def _register_encoder_decoder_cache() -> None:
    """transformers' ``EncoderDecoderCache`` (T5, BART, Whisper): the self-attention cache's
    tensors, then the cross-attention cache's; which layers' cross-attention is filled stays
    in the spec (it is set once, at the first decoder call)."""
    try:
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache
    except ImportError:
        return
    if EncoderDecoderCache in pytree.SUPPORTED_NODES:
        return

    def flatten(cache):
        own, own_spec = pytree.tree_flatten(cache.self_attention_cache)
        cross, cross_spec = pytree.tree_flatten(cache.cross_attention_cache)
        if not all(isinstance(spec.type, type) and issubclass(spec.type, DynamicCache) for spec in (own_spec, cross_spec)):
            raise ValueError("an EncoderDecoderCache of caches other than DynamicCache")
        return own + cross, (len(own), own_spec, cross_spec, tuple(sorted(cache.is_updated.items())))

    def unflatten(values, context):
        count, own_spec, cross_spec, updated = context
        cache = EncoderDecoderCache.__new__(EncoderDecoderCache)  # __init__ would ask each layer's length again
        cache.self_attention_cache = pytree.tree_unflatten(list(values[:count]), own_spec)
        cache.cross_attention_cache = pytree.tree_unflatten(list(values[count:]), cross_spec)
        cache.is_updated = dict(updated)
        return cache

    pytree.register_pytree_node(EncoderDecoderCache, flatten, unflatten, flatten_with_keys_fn=_numbered(flatten),
                                serialized_type_name="transformers.cache_utils.EncoderDecoderCache")


def _register_static_cache() -> None:
    """transformers' ``StaticCache`` (full-attention ``StaticLayer``s, allocated): each layer's
    keys, values and filled length. The layers update them in place (``index_copy_``,
    ``add_``), so the rebuilt layers hold copies — the step's own tensors, not the loop's
    inputs — and take their length from the keys' shape (a size of the loop's own state, not a
    number of the graph around it)."""
    try:
        from transformers.cache_utils import StaticCache, StaticLayer
    except ImportError:
        return
    if StaticCache in pytree.SUPPORTED_NODES:
        return

    def flatten(cache):
        layers = list(cache.layers)
        if any(type(layer) is not StaticLayer or not layer.is_initialized for layer in layers):
            raise ValueError("a StaticCache with layers other than initialized full-attention StaticLayers")
        leaves = [tensor for layer in layers for tensor in (layer.keys, layer.values, layer.cumulative_length)]
        return leaves, len(layers)

    def unflatten(values, count):
        from transformers.cache_utils import Cache

        cache = StaticCache.__new__(StaticCache)  # its __init__ reads a config; the layers say everything
        Cache.__init__(cache, layers=[_static_layer(*values[3 * i: 3 * i + 3]) for i in range(count)])
        return cache

    pytree.register_pytree_node(StaticCache, flatten, unflatten, flatten_with_keys_fn=_numbered(flatten),
                                serialized_type_name="transformers.cache_utils.StaticCache")


def _static_layer(keys, values, filled):
    """An initialized ``StaticLayer`` over copies of ``keys``, ``values`` and ``filled``."""
    from transformers.cache_utils import StaticLayer

    layer = StaticLayer.__new__(StaticLayer)
    layer.keys, layer.values, layer.cumulative_length = keys.clone(), values.clone(), filled.clone()
    layer.max_cache_len = keys.shape[2]
    layer.batch_size, layer.num_heads, layer.k_head_dim = keys.shape[0], keys.shape[1], keys.shape[3]
    layer.v_head_dim = values.shape[3]
    layer.dtype, layer.device = keys.dtype, keys.device
    layer.is_initialized = True
    return layer


def _numbered(flatten):
    """``flatten`` with each leaf keyed by its position (the keyed flatten pytree asks for)."""

    def flatten_with_keys(cache):
        values, context = flatten(cache)
        return [(pytree.SequenceKey(i), value) for i, value in enumerate(values)], context

    return flatten_with_keys


def _dynamic_layer(layer_class, keys, values):
    """An initialized layer holding ``keys`` and ``values``, made without ``update``: its lazy
    initialisation creates ``torch.tensor([])``, which inside a traced branch is a fake constant
    the capture refuses."""
    layer = layer_class()
    layer.keys, layer.values = keys, values
    layer.dtype, layer.device = keys.dtype, keys.device
    layer.is_initialized = True
    return layer


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
