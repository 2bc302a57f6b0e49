"""Comparisons of dynamic sizes in ``if``/``while`` tests, decided where the file runs.

The first capture keeps sizes symbolic down to 0 and 1 (torch's ``backed_size_oblivious``),
and torch then answers some size questions as if every size were at least 2, without a guard:
``x.shape[0] > 0`` is a plain ``True``, and so is ``i < x.shape[0]`` with ``i = 0``. Taken as
written, ``if x.shape[0] > 0:`` keeps only its true branch and ``while i < x.shape[0]:`` runs
its first step outside the loop, and the file is wrong at size 0 although the exported range
includes it. :func:`compare` (what the converter makes of a comparison that reads a size in
such a test) keeps torch's answer where it holds over the size's whole range and otherwise
returns the comparison as a 0-d bool tensor, which the ``if``/``while`` converts like any
tensor condition (``Where``/``If``/``Loop``).

Example::

    >>> import torch
    >>> compare(3, ">", 0)                      # outside export: Python's answer
    True
    >>> compare(torch.tensor([1, 5]), "<", 2)   # tensors as they are
    tensor([ True, False])
"""

from __future__ import annotations

import operator

import torch

from fxport.controlflow.operators.counters import decided, over_range
from fxport.controlflow.operators.values import as_int64, is_symbolic

_OPERATORS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
              "==": operator.eq, "!=": operator.ne}


def compare(left, op: str, right):
    """``left <op> right``; a 0-d bool tensor where torch decided a symbolic size comparison
    that the size's range leaves open; Python's answer where a loop counter's range decides it
    (``t == 0`` from a loop's second trip on: operators/counters.py)."""
    known = decided(left, op, right)
    if known is not None:
        return known
    result = _OPERATORS[op](left, right)
    if not isinstance(result, (bool, torch.SymBool)) or is_symbolic(result):
        return result
    sizes = [v for v in (left, right) if isinstance(v, torch.SymInt) and is_symbolic(v)]
    if not sizes or not (torch.compiler.is_exporting() or torch.compiler.is_dynamo_compiling()):
        return result
    if _holds_over_range(sizes[0].node.shape_env, left - right, op, bool(result)):
        return result
    return _OPERATORS[op](as_int64(left), as_int64(right))


def _holds_over_range(shape_env, difference, op: str, answer: bool) -> bool:
    """Whether ``difference <op> 0`` is ``answer`` for every value the sizes' ranges allow."""
    import sympy

    expr = difference.node.expr if isinstance(difference, torch.SymInt) else sympy.Integer(int(difference))
    try:
        bounds = shape_env.bound_sympy(expr)
    except Exception:  # an expression torch cannot bound: decide at run time
        return False
    return over_range(bounds.lower, bounds.upper, op) is answer
