"""Functions whose closures hold tensors, read by a body that is captured on its own.

The body of a loop whose state grows (and a branch holding such a loop) is captured by a
``torch.export`` of its own, after the enclosing capture. A function the body calls that it
received as a value — ``anderson(lambda z: self.f(z, x), x0)`` in a Deep Equilibrium model —
reaches that capture with the enclosing trace's tensors and sizes in its closure cells (``x``,
of the enclosing batch size): torch meets a size symbol of another trace ("vr must not be None
for symbol s22"), and the file would bake in the example's tensor. So such a function is passed
like a list of tensors: :func:`closure_tree` makes it a pytree node whose children are its
cells' values (tensors, sizes, the modules whose weights it reads, nested closures), the body's
inputs carry them, and unflattening rebuilds the function with cells holding the body's own
values. A function that rebinds a variable of its closure (``nonlocal``) is left as it is:
cells of its own would hide those writes.

Example::

    >>> import torch
    >>> def adding(x):
    ...     return lambda z: z + x
    >>> tree = closure_tree(adding(torch.ones(2)))
    >>> leaves, spec = torch.utils._pytree.tree_flatten(tree)
    >>> again = torch.utils._pytree.tree_unflatten([torch.zeros(2)], spec)
    >>> again(torch.ones(2))
    tensor([1., 1.])
"""

from __future__ import annotations

import dis
import types

import torch
import torch.utils._pytree as pytree

from fxport.controlflow.operators.values import is_symbolic


class Closure:
    """A function as a pytree node: its children are its closure cells' values."""

    def __init__(self, function: types.FunctionType, cells: list):
        self.function, self.cells = function, cells


def _rebuilt(function: types.FunctionType, cells) -> types.FunctionType:
    """``function`` with new closure cells holding ``cells`` (defaults and attributes kept)."""
    again = types.FunctionType(function.__code__, function.__globals__, function.__name__, function.__defaults__,
                               tuple(types.CellType(value) for value in cells))
    again.__kwdefaults__ = function.__kwdefaults__
    again.__dict__.update(function.__dict__)
    again.__qualname__ = function.__qualname__
    return again


pytree.register_pytree_node(Closure, lambda node: (list(node.cells), node.function),
                            lambda cells, function: _rebuilt(function, cells))


def closure_tree(value):
    """``value`` as a :class:`Closure` tree when it is a function whose closure holds (directly or
    in nested functions, lists, tuples, dicts) a tensor, a traced size or a module; else None."""
    tree = _as_tree(value, depth=0)
    return tree if isinstance(tree, Closure) else None


def closure_modules(value) -> list:
    """The modules held by the closure of ``value`` (:func:`closure_tree`), outermost first."""
    tree = closure_tree(value)
    if tree is None:
        return []
    leaves = pytree.tree_leaves(tree)
    return [leaf for leaf in leaves if isinstance(leaf, torch.nn.Module)]


def _as_tree(value, depth: int):
    """``value`` with each function that holds traced values replaced by a :class:`Closure`
    (containers rebuilt only where something inside them was replaced)."""
    if depth > 4:
        return value
    if isinstance(value, types.FunctionType):
        cells = _cell_values(value)
        if cells is None:
            return value
        children = [_as_tree(cell, depth + 1) for cell in cells]
        return Closure(value, children) if any(_holds_traced(child) for child in children) else value
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        children = [_as_tree(item, depth + 1) for item in value]
        return type(value)(children) if any(c is not v for c, v in zip(children, value)) else value
    return value


def _holds_traced(value) -> bool:
    """A tensor, a traced number, a module or a :class:`Closure`, or a list or tuple holding one."""
    if isinstance(value, (torch.Tensor, torch.nn.Module, Closure)):
        return True
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return is_symbolic(value)
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return any(_holds_traced(item) for item in value)
    return False


def _cell_values(function: types.FunctionType):
    """The values of ``function``'s closure cells; None without a closure, with an empty cell, or
    when the function rebinds one of them (``nonlocal``)."""
    cells = function.__closure__
    if not cells or _rebinds_free_variables(function.__code__):
        return None
    try:
        return [cell.cell_contents for cell in cells]
    except ValueError:  # an empty cell (a variable assigned after the function was made)
        return None


def _rebinds_free_variables(code: types.CodeType) -> bool:
    """``code`` (or a function defined in it) stores into or deletes a variable of its closure."""
    free = set(code.co_freevars)
    for instruction in dis.get_instructions(code):
        if instruction.opname in ("STORE_DEREF", "DELETE_DEREF") and instruction.argval in free:
            return True
    return any(_rebinds_free_variables(const) for const in code.co_consts if isinstance(const, types.CodeType)
               and set(const.co_freevars) & free)
