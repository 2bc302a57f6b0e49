"""Sampling made reproducible: the random numbers are an input, ``random_draws``.

``generate(do_sample=True)`` draws each token with ``torch.multinomial`` from the distribution
its logits processors and warpers (temperature, top-k, top-p, min-p, typical-p) leave. An ONNX
file cannot reproduce torch's random number generator, so fxport's generator takes the draws
as an input instead: ``random_draws``, float32, shape ``(batch, max_new_tokens)``, uniform in
``[0, 1)``. Step ``t`` of row ``b`` takes the first token (in vocabulary order) at which the
cumulative probability exceeds ``random_draws[b, t]`` — inverse-transform sampling, so uniform
draws give tokens with exactly the warped distribution. The same draws give the same ids in
eager PyTorch and in the file.

:func:`sampling_draws` makes transformers' own ``generate()`` sample that way, for the eager
reference and for ``generate()`` called in a model's ``forward``::

    >>> import torch
    >>> draws = torch.rand(2, 8)                       # (batch, max_new_tokens), one per step
    >>> with sampling_draws(draws):                    # doctest: +SKIP
    ...     ids = lm.generate(input_ids, attention_mask=mask, do_sample=True, top_k=20, max_new_tokens=8)

A user running the file passes fresh draws for each call, e.g. with numpy:
``np.random.default_rng(seed).random((batch, max_new_tokens), dtype=np.float32)``.
"""

from __future__ import annotations

import contextlib
import unittest.mock
from collections.abc import Iterator

import torch

from fxport.errors import UsageError

__all__ = ["active_draws", "drawn_tokens", "sampling_draws"]

_ACTIVE: list[torch.Tensor] = []


def drawn_tokens(probabilities: torch.Tensor, draws: torch.Tensor) -> torch.Tensor:
    """The token each row's draw in ``[0, 1)`` picks from ``probabilities`` (rows, vocab): the
    first at which the cumulative probability exceeds the draw (scaled by the total, which
    float32 rounding keeps near 1); never a token of probability 0.

    >>> drawn_tokens(torch.tensor([[0.5, 0.0, 0.5], [0.2, 0.3, 0.5]]), torch.tensor([0.7, 0.1])).tolist()
    [2, 0]
    """
    cumulative = torch.cumsum(probabilities, -1)
    threshold = draws.to(cumulative.dtype)[:, None] * cumulative[:, -1:]
    chosen = (cumulative <= threshold).sum(-1)
    vocabulary = probabilities.shape[-1]
    last_possible = vocabulary - 1 - (probabilities > 0).flip(-1).int().argmax(-1)
    return torch.minimum(chosen, last_possible)


@contextlib.contextmanager
def sampling_draws(draws: torch.Tensor) -> Iterator[None]:
    """Sampling in the block takes its random numbers from ``draws`` (batch, steps): each
    ``torch.multinomial`` call (one per ``generate()`` step) takes the next column, through
    :func:`drawn_tokens`; while fxport captures, ``generate(do_sample=True)`` in the block
    becomes fxport's generator with ``draws`` as its ``random_draws``.

    Example::

        >>> with sampling_draws(torch.rand(1, 4)):     # doctest: +SKIP
        ...     ids = lm.generate(input_ids, do_sample=True, max_new_tokens=4)
    """
    columns = iter(draws.unbind(1))

    def multinomial(probabilities, num_samples, replacement=False, *, generator=None, out=None):
        if num_samples != 1:
            raise UsageError(f"torch.multinomial(num_samples={num_samples}) inside sampling_draws: "
                             "only one draw per row and step is taken from the draws",
                             hint="sample one token per row (beam sampling is not converted)")
        column = next(columns, None)
        if column is None:
            raise UsageError(f"sampling_draws: more sampling steps than the draws' {draws.shape[1]} columns",
                             hint="pass draws of shape (batch, max_new_tokens)")
        return drawn_tokens(probabilities, column)[:, None]

    _ACTIVE.append(draws)
    try:
        with unittest.mock.patch.object(torch, "multinomial", multinomial):
            yield
    finally:
        _ACTIVE.pop()


def active_draws() -> torch.Tensor | None:
    """The draws of the innermost :func:`sampling_draws` block, or ``None`` outside one."""
    return _ACTIVE[-1] if _ACTIVE else None
