"""Recurrent layers' cached flat weights, refreshed where a capture may write them.

``nn.RNNBase`` keeps a list of its weights (``_flat_weights``) and rebuilds it in ``forward`` when
the weights were swapped (``_update_flat_weights``). ``torch.export`` swaps in its own tensors,
so an LSTM, GRU or RNN whose first call in the trace is inside a ``torch.cond`` branch (or a
``while_loop`` body) rebuilds that list there: an attribute write, which dynamo refuses inside the
branch ("Mutating a variable from outside the scope of this HOP"). Refreshed before any branch,
at the start of the captured forward, it is an ordinary write the capture sees, and the call in
the branch finds it current.

Example::

    >>> import torch
    >>> lstm = torch.nn.LSTM(2, 2)
    >>> refresh_recurrent_weights(lstm)
    >>> with refreshed_at_each_call(torch.nn.Sequential(lstm)):
    ...     pass
"""

from __future__ import annotations

import contextlib

import torch


def refresh_recurrent_weights(modules: torch.nn.Module) -> None:
    """Point each ``nn.RNNBase``'s cached flat weights in ``modules`` at its current tensors."""
    for module in modules.modules():
        if isinstance(module, torch.nn.RNNBase):
            module._update_flat_weights()


@contextlib.contextmanager
def refreshed_at_each_call(module: torch.nn.Module):
    """While open, every call of ``module`` first refreshes its recurrent layers' flat weights (a
    forward pre-hook, only where ``module`` holds a recurrent layer); removed on exit."""
    if not any(isinstance(m, torch.nn.RNNBase) for m in module.modules()):
        yield
        return
    handle = module.register_forward_pre_hook(lambda mod, args: refresh_recurrent_weights(mod))
    try:
        yield
    finally:
        handle.remove()
