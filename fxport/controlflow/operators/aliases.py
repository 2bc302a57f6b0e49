"""Two names for one tensor when a converted statement may rebind one of them.

``b_ref = b``, then a data-dependent loop that rebinds ``b`` on some paths only, then
``b_ref += 1``: in Python the write reaches ``b`` exactly when the loop left ``b`` alone. A
converted loop returns new tensors, so that identity is gone after it; the converter
(``converters/aliases.py``) carries it as a flag instead — :func:`same` after each rebinding,
a bool tensor where dynamo traces — and after every in-place write to one name :func:`follow`
gives the other name the written value where the flag says they are still one tensor.

Example::

    >>> import torch
    >>> b = torch.zeros(2); b_ref = b
    >>> flag = same(b_ref, b)
    >>> flag
    True
    >>> b_ref += 1
    >>> follow(flag, b_ref, b, "b_ref", "b") is b    # outside export Python kept the identity
    True
"""

from __future__ import annotations

import torch

from fxport.controlflow.operators.values import same_layout
from fxport.controlflow.operators.failures import refuse_here


def same(x, y):
    """Whether ``x`` and ``y`` are one object now: a Python bool where Python runs the code (the
    objects keep their identity), a bool tensor in a body dynamo traces (a cond branch, a
    while_loop body), which the statement then carries."""
    if torch.compiler.is_dynamo_compiling():
        return torch.tensor(x is y)
    return x is y


def follow(flag, written, other, written_text: str, other_text: str):
    """``other`` after an in-place write to ``written``: updated to the written value where
    ``flag`` (from :func:`same`) says the two names are one tensor, unchanged elsewhere.

    A flag that is a Python bool means Python ran every statement since it was set, so the
    objects themselves carry the identity and ``other`` is returned as is; :func:`same` makes a
    tensor only in a body dynamo traces, that is, while exporting.
    """
    if written is other or not (isinstance(written, torch.Tensor) and isinstance(other, torch.Tensor)):
        return other
    if not isinstance(flag, torch.Tensor):
        return other
    if not same_layout(written, other):
        refuse_here(f"{other_text} may still be the tensor {written_text} names (a converted statement rebinds one of "
                    f"them on some paths only), and the two differ in shape or dtype, so the write to {written_text} "
                    f"cannot be followed",
                    f"assign a copy (.clone()) where one of {written_text} and {other_text} is set from the other, "
                    "or rebind both names")
    other.copy_(torch.where(flag, written, other))
    return other
