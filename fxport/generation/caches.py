"""transformers' cache objects as containers of the control-flow runtime: carried through a
converted ``if`` or a loop whose state grows as their tensors.

The runtime names no library (:mod:`fxport.controlflow.operators.containers`); this module
registers transformers' ``DynamicCache``, ``EncoderDecoderCache`` and ``StaticCache`` through
its generic hook (:func:`~fxport.controlflow.operators.containers.register_container`), in the
layout transformers' own export support uses (keys, then values). A class the user already
registered (transformers' ``register_dynamic_cache_export_support``) keeps that registration. A
cache with layers of another kind (sliding window) is not carried. Nothing is imported: without
transformers loaded, :func:`register_transformers_caches` does nothing. Importing this module
adds it to the hooks the runtime runs before each conversion (``fxport.engine.pipeline`` imports it,
so it is in place before the first capture); the beam strategy calls it for the caches it
reorders.

Example::

    >>> register_transformers_caches()   # idempotent; a no-op without transformers loaded
"""

from __future__ import annotations

import sys

import torch.utils._pytree as pytree

from fxport.controlflow.operators.containers import container_registrar, register_container


def register_transformers_caches() -> None:
    """Register transformers' cache classes as containers, once transformers is loaded."""
    if "transformers" not in sys.modules:
        return
    try:
        from transformers.cache_utils import DynamicCache, DynamicLayer  # noqa: F401
    except ImportError:  # an older or partial transformers: its caches stay plain objects
        return
    _register_dynamic_cache()
    _register_encoder_decoder_cache()
    _register_static_cache()


def _register_dynamic_cache() -> None:
    """``DynamicCache`` of initialized ``DynamicLayer``s: every layer's keys, then every layer's values."""
    from transformers.cache_utils import DynamicCache, DynamicLayer

    def flatten(cache):
        layers = list(cache.layers)
        if any(type(layer) is not DynamicLayer or not layer.is_initialized for layer in layers):
            raise ValueError("a DynamicCache with layers other than initialized DynamicLayers")
        return [layer.keys for layer in layers] + [layer.values for layer in layers], len(layers)

    def unflatten(values, count):
        cache = DynamicCache()
        cache.layers = [_dynamic_layer(DynamicLayer, k, v) for k, v in zip(values[:count], values[count:])]
        return cache

    register_container(DynamicCache, flatten, unflatten, serialized_type_name="transformers.cache_utils.DynamicCache")


def _register_encoder_decoder_cache() -> None:
    """transformers' ``EncoderDecoderCache`` (T5, BART, Whisper): the self-attention cache's
    tensors, then the cross-attention cache's; which layers' cross-attention is filled stays
    in the spec (it is set once, at the first decoder call)."""
    try:
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache
    except ImportError:
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

    register_container(EncoderDecoderCache, flatten, unflatten,
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

    register_container(StaticCache, flatten, unflatten, serialized_type_name="transformers.cache_utils.StaticCache")


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


def _dynamic_layer(layer_class, keys, values):
    """An initialized layer holding ``keys`` and ``values``, made without ``update``: its lazy
    initialisation creates ``torch.tensor([])``, which inside a traced branch is a fake constant
    the capture refuses."""
    layer = layer_class()
    layer.keys, layer.values = keys, values
    layer.dtype, layer.device = keys.dtype, keys.device
    layer.is_initialized = True
    return layer


container_registrar(register_transformers_caches)  # before each conversion (see the module doc)
