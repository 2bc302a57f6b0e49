"""``nn.Transformer``'s causal-mask hint without reading the mask's values.

``nn.TransformerEncoder.forward`` and ``nn.TransformerDecoder.forward`` call
``_detect_is_causal_mask(mask, is_causal, size)`` when the caller gives a mask and no
``is_causal``: it compares the mask with a causal one and reads the answer as a Python bool
(``bool((mask == causal).all())``). While exporting, a mask built from a dynamic size
(``generate_square_subsequent_mask(ys.size(0))`` in every greedy decoding loop around
``nn.Transformer``) has values torch does not know, so capture stops in torch's own file
("data-dependent control flow ... cannot be captured at <the user's encode/decode call>").

The answer is only a hint: with ``is_causal=True`` attention applies a causal mask instead of
the given one, which the check has just found equal to it; with ``False`` it applies the given
mask. Both compute the same attention, so this rule answers ``False`` whenever the caller gave
no hint (the mask itself is used, and written into the file as the attention's mask), and the
caller's own ``is_causal`` otherwise. Eager (outside capture) never sees the patch.
"""

from __future__ import annotations

import fxport


@fxport.patch("torch.nn.modules.transformer._detect_is_causal_mask", name="transformer-mask-hint-unread",
              priority=fxport.rules.BUILTIN_PRIORITY)
def detect_is_causal_mask(mask=None, is_causal=None, size=None):
    """The caller's ``is_causal`` as given; ``False`` (apply the mask itself) when it gave none."""
    return is_causal is True
