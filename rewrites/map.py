"""``torch._higher_order_ops.map`` → ``scan`` (ONNX ``Scan``): the stock exporter refuses map.

torch.export captures ``map(f, xs, *args)`` as the higher-order op ``map_impl``, which torch.onnx
2.13 has no translation for ("No ONNX function found for <...MapImpl object at 0x...>"). Its
``scan`` has one (ONNX ``Scan``), and a map is a scan whose carry never changes: each step
returns ``f(slice, *args)`` as its per-step output. This patch rule replaces ``map_impl`` while
fxport captures the model, so the program holds a ``scan`` and lowers to one ``Scan`` node (the
body traced once; the first dimension may be dynamic).

Why a patch and not an op rule: an op rule translates an aten or custom op with an onnxscript
function of the op's schema; ``map_impl`` is a higher-order op whose body is a graph, not a
schema argument an onnxscript function can receive. Patching the one function the public
``map`` calls (``map_impl``, looked up at call time) keeps the rule on fxport's public API and
lets the exporter's own ``scan`` lowering do the rest.

The carry is a 0-d placeholder (``scan`` needs one); the optimiser removes what it can.
Eager (outside capture) never sees the patch.
"""

from __future__ import annotations

import torch

import fxport


@fxport.patch("torch._higher_order_ops.map.map_impl", name="map-to-scan",
              priority=fxport.rules.BUILTIN_PRIORITY)
def map_impl(f, xs, pos_args):
    """map(f, xs, *args) as scan with an unchanged carry: ONNX Scan instead of a refusal."""
    from torch._higher_order_ops.scan import scan

    def step(carry, slices):
        out = f(*slices, *pos_args)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        return carry.clone(), outs

    _, ys = scan(step, torch.zeros((), device=xs[0].device), list(xs))
    return ys
