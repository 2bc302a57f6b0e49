"""A list grown in a data-dependent loop, read back whole: ``torch.cat([torch.tensor(z) for z in zs])``.

pytorch_HMM's and pytorch-crf's Viterbi decoders backtrack each batch row into a list of its own,
``T[i]`` tags long, and collect the rows' lists in one list; the decoder's caller reads them back
concatenated: ``torch.cat([torch.tensor(z, dtype=torch.long) for z in z_star])``. How many
elements that list holds and how long each is are data, so the comprehension cannot run element
by element. A grown list is carried as its elements' concatenation where their lengths differ
(appender.py: ``concat`` mode, or ``count`` mode's two passes), each list element as its stack,
and the comprehension's element commutes with concatenation when it is the element itself, a
dtype conversion of it (``z.long()``, ``z.to(d)``: the loop's tensors) or a tensor made of it
(``torch.tensor(z, ...)``, ``torch.as_tensor``, ``torch.LongTensor``, ``torch.stack(z)``): it is
evaluated once on the concatenation, which gives every element at once. The converter sends only
such comprehensions here (converters/call_trees.py); a plain list runs the comprehension as written.

``torch.tensor([])`` is float32: where an element list may be empty (it held nothing before its
loop) and ``torch.tensor`` gets no ``dtype``, eager's result is float32 exactly when some row's
list is empty, which no one file gives; that read is refused at its line.

Example::

    >>> import torch
    >>> from fxport.controlflow.operators.calls import tensor_     # torch.tensor, as converted code calls it
    >>> from fxport.controlflow.operators.lists.appender import Appender
    >>> paths = Appender("paths", [], torch.zeros(0, dtype=torch.int64), torch.zeros((), dtype=torch.int64),
    ...                  mode="concat", axis=0)
    >>> paths.append(torch.tensor([2, 0, 1])); paths.append(torch.tensor([4])); paths.finished = True
    >>> cat_each(lambda z: tensor_(z, dtype=torch.long), paths, kind="constructor").tolist()
    [2, 0, 1, 4]
"""

from __future__ import annotations

import torch

from fxport.controlflow.operators.failures import refuse_here
from fxport.controlflow.operators.lists.appender import Appender, cat

#: what the comprehension's element is, as the converter saw it: ``tensor`` (the element, or a dtype
#: conversion of it), ``constructor`` (torch.tensor / as_tensor / LongTensor of it), ``stack``
KINDS = ("tensor", "constructor", "stack")


def cat_each(element, elements, *args, kind: str, **kwargs):
    """``torch.cat([element(z) for z in elements], *args, **kwargs)``; of a list a data-dependent
    loop grew, ``element`` evaluated once on the elements' concatenation (see the module doc)."""
    if not isinstance(elements, Appender):
        return cat([element(z) for z in elements], *args, **kwargs)
    dim = _dim(args, kwargs)
    if kind == "tensor":
        return element(cat(elements, dim))
    flat = _flattened(elements, dim)
    made = element(flat)
    _check_empty_elements_agree(element, elements, made, kind)
    return made


def flat_tensor(rows, listed, **kwargs):
    """``torch.tensor([t for r in rows for t in r], **kwargs)`` (``listed``: that call as written):
    of a list a data-dependent loop grew with lists as elements, the tensor of their
    concatenation, which holds the same numbers in the same order (:func:`cat_each`); of a Python
    list holding such lists, with a ``dtype``, the tensors of its elements concatenated; anything
    else as written."""
    from fxport.controlflow.operators.calls import tensor_

    if isinstance(rows, Appender):
        return cat_each(lambda r: tensor_(r, **kwargs), rows, kind="constructor")
    if (kwargs.get("dtype") is not None and type(rows) in (list, tuple) and rows
            and any(isinstance(r, Appender) for r in rows)):
        return torch.cat([tensor_(r, **kwargs) for r in rows])
    return listed()


def _dim(args: tuple, kwargs: dict) -> int:
    """The ``dim`` torch.cat was given (positionally or by name), 0 by default."""
    if kwargs.keys() - {"dim"} or len(args) > 1:
        refuse_here(f"torch.cat of a comprehension over a list grown in a data-dependent loop takes only dim= here "
                    f"(got {sorted(kwargs) or len(args)})", "write the result into a tensor after torch.cat")
    dim = args[0] if args else kwargs.get("dim", 0)
    if not isinstance(dim, int):
        refuse_here(f"torch.cat's dim must be an int here, not {type(dim).__name__}", "pass dim as an int")
    return dim


def _flattened(elements: Appender, dim: int) -> Appender:
    """The elements' rows as one finished list (``grow`` mode: its stack is their concatenation
    along dimension 0), which ``torch.tensor`` and ``torch.stack`` read as every element at once."""
    rows = cat(elements, 0)
    if (dim + rows.dim() if dim < 0 else dim) != 0:
        refuse_here(f"torch.cat of tensors made of the elements of list {elements.name!r} along dimension {dim}: "
                    "their lengths along dimension 0 are data, so they are concatenated along that one",
                    "concatenate along dim=0")
    flat = Appender(elements.name, [], rows, torch.zeros((), dtype=torch.int64), mode="grow")
    flat.location, flat.finished = elements.location, True
    return flat


def _check_empty_elements_agree(element, elements: Appender, made: torch.Tensor, kind: str) -> None:
    """Refuse where an element list may be empty and ``element`` of an empty list has another dtype
    than of the others (``torch.tensor([])`` is float32): eager's dtype would then depend on the data."""
    if kind != "constructor" or not elements.of_lists or not elements.may_hold_empty_lists:
        return
    empty = element([])
    if empty.dtype != made.dtype:
        refuse_here(f"torch.cat of torch.tensor(z) for z in {elements.name!r}: an element list may be empty, and "
                    f"torch.tensor of an empty list is {str(empty.dtype).replace('torch.', '')}, so eager's result is "
                    f"{str(empty.dtype).replace('torch.', '')} or {str(made.dtype).replace('torch.', '')} by the data",
                    f"pass dtype={made.dtype} to torch.tensor")
