"""Lists used as a stack or a queue of scalars: one tensor of their items, its length the list's.

``stack = [source]; while stack: node = stack.pop(); ...; stack.append(nb)`` (an iterative DFS,
a BFS queue popped at the front) keeps a Python list whose length is data once a data-dependent
loop or branch pushes onto it: torch cannot carry such a list. The converter
(:mod:`~fxport.controlflow.converters.list_stacks`) sends a list here when every use of its name
is a creation from a list display, ``pop()`` / ``pop(0)`` / ``popleft()``, ``append`` /
``extend``, ``len()``, an item read or a test of its emptiness, and rewrites each of them as a
rebinding (``node, stack = _fx.lists.stacks.take_last(stack)``).

At run time the list is a 1-D tensor of its items (:func:`new`) once a tensor is among them: a
0-d tensor, or a Python int where the items are int64 (exact); the tensor's length is the list's,
so a loop carries it as any tensor whose length changes (an ONNX ``Loop`` whose carried value
grows and shrinks), and ``len(stack) > 0`` is a size test. :func:`take_last` reads the last item
and keeps the rest, :func:`take_first` the first; a pop of an empty stack reads a zero where eager
raises IndexError (outside what the file promises), never out of range. An item of another dtype
or shape pushed onto it is refused in one line; a list of anything else stays Python's list,
every operation as written (a list of Python ints stays one until a tensor is pushed onto it).

Example::

    >>> import torch
    >>> xs = new([torch.tensor(3)])
    >>> xs = push(xs, 4); item, xs = take_last(xs); int(item), xs.tolist()
    (4, [3])
    >>> take_last(new([1, 2]))
    (2, [1])
"""

from __future__ import annotations

import collections

import torch

from fxport.controlflow.operators.failures import refuse_here
from fxport.controlflow.operators.values import is_symbolic

_PYTHON_DTYPES = {bool: torch.bool, int: torch.int64, float: torch.float64}


def _python_dtype(value):
    """The dtype a Python number (or SymInt) is held in exactly, else None."""
    if isinstance(value, torch.SymInt):
        return torch.int64
    if isinstance(value, (torch.SymBool, torch.SymFloat)):
        return None
    return _PYTHON_DTYPES.get(type(value))


def _dtype_of(items) -> torch.dtype | None:
    """The dtype of a stack of ``items`` (with a 0-d tensor among them), or None where one tensor
    cannot hold them exactly: tensors of other shapes or dtypes, numbers of another kind."""
    tensors = [v for v in items if isinstance(v, torch.Tensor)]
    if not tensors or any(t.dim() != 0 for t in tensors):
        return None
    dtype = tensors[0].dtype
    if any(t.dtype != dtype for t in tensors):
        return None
    numbers = [v for v in items if not isinstance(v, torch.Tensor)]
    return dtype if all(_python_dtype(v) == dtype for v in numbers) else None


def _item(value, dtype) -> torch.Tensor:
    """``value`` as a 1-item tensor of ``dtype``."""
    if isinstance(value, torch.Tensor):
        return value.reshape(1)
    return torch.full((1,), value, dtype=dtype)


def _stacked(items, dtype) -> torch.Tensor:
    return torch.cat([_item(v, dtype) for v in items])


def new(items: list, kind=list):
    """``[items...]`` (``kind`` ``collections.deque`` for ``deque([items...])``): the tensor of the
    items where a tensor is among them and one dtype holds them all, else ``kind(items)``.

    >>> new([1, 2]), new([torch.tensor(1), 2])
    ([1, 2], tensor([1, 2]))
    """
    if kind is not list and kind is not collections.deque:
        return kind(items)
    dtype = _dtype_of(items)
    return kind(items) if dtype is None else _stacked(items, dtype)


def _refuse_item(value, stack: torch.Tensor, name: str):
    kind = (f"a {value.dtype} tensor of shape {tuple(value.shape)}" if isinstance(value, torch.Tensor)
            else f"a {type(value).__name__}")
    refuse_here(f"{kind} is pushed onto list '{name}', held as a {stack.dtype} tensor of its items "
                "(a stack or queue of scalars)",
                "push items of one kind: 0-d tensors of one dtype (Python ints where they are int64)")


def _fits(value, dtype) -> bool:
    if isinstance(value, torch.Tensor):
        return value.dim() == 0 and value.dtype == dtype
    return _python_dtype(value) == dtype


def push(stack, value, name: str = "the list"):
    """``stack.append(value)``, giving the stack after it (a tensor one item longer).

    >>> push(torch.tensor([1]), 2)
    tensor([1, 2])
    """
    if not isinstance(stack, torch.Tensor):
        if isinstance(value, torch.Tensor) and _dtype_of([*stack, value]) is not None:
            return new([*stack, value])  # a tensor pushed onto Python's numbers: the stack from here on
        stack.append(value)
        return stack
    if not _fits(value, stack.dtype):
        _refuse_item(value, stack, name)
    return torch.cat([stack, _item(value, stack.dtype)])


def push_all(stack, values, name: str = "the list"):
    """``stack.extend(values)``: a 1-D tensor of the stack's dtype joined at once, any other
    iterable item by item.

    >>> push_all([1], torch.tensor([2, 3]))
    tensor([1, 2, 3])
    """
    if isinstance(values, torch.Tensor) and values.dim() == 1:
        if not isinstance(stack, torch.Tensor):
            if any(isinstance(v, torch.Tensor) for v in stack) or _dtype_of([*stack, values[:0].sum()]) is None:
                stack.extend(values)
                return stack
            stack = _stacked(stack, values.dtype) if stack else values[:0]
        if values.dtype != stack.dtype:
            _refuse_item(values[:0].sum(), stack, name)
        return torch.cat([stack, values])
    for value in list(values):
        stack = push(stack, value, name)
    return stack


def _length(stack: torch.Tensor):
    length = stack.shape[0]
    if not is_symbolic(length) and length == 0:
        raise IndexError("pop from empty list")
    return length


def take_last(stack, *index):
    """``item = stack.pop()`` (``pop(-1)`` too; ``pop(0)`` is :func:`take_first`): ``(item, stack)``.

    >>> take_last(torch.tensor([5, 6]))
    (tensor(6), tensor([5]))
    """
    if not isinstance(stack, torch.Tensor):
        return stack.pop(*index), stack
    if index and index[0] == 0:
        return take_first(stack)
    length = _length(stack)
    last = torch.cat([stack[:0].new_zeros(1), stack])[-1]  # a zero where the stack is empty
    return last, stack[: torch.sym_max(length - 1, 0)]


def take_first(stack):
    """``item = queue.pop(0)`` / ``queue.popleft()``: ``(item, queue)``.

    >>> take_first(torch.tensor([5, 6]))
    (tensor(5), tensor([6]))
    """
    if not isinstance(stack, torch.Tensor):
        return (stack.popleft() if isinstance(stack, collections.deque) else stack.pop(0)), stack
    _length(stack)
    first = torch.cat([stack, stack[:0].new_zeros(1)])[0]  # a zero where the queue is empty
    return first, stack[1:]
