"""Plain objects of the user's classes carried through a converted ``if`` as their fields.

A branch on a tensor condition may give a variable (or the return value) an instance of a class
the user defined, holding tensors, numbers and None (mmdetection's ``return AssignResult(num_gts,
gt_inds, max_overlaps, labels=labels)`` on both sides). Both sides' objects become
:class:`Fields` — a pytree of the values in their ``__dict__`` — so ``where`` selects them field
by field and ``torch.cond`` returns their tensors and numbers (numbers as 0-d tensors); after the
``if`` the object is rebuilt, of the same class, without calling its ``__init__`` again. Fields
that are not tensors or numbers (a string, None, an empty dict) are part of the structure and
must be equal on both sides. For a ``cond`` the structure is learned by running one side once
outside it (dead code, as a loop probe's); each branch is then read field by field against it.

Example::

    >>> import torch
    >>> class Result:
    ...     def __init__(self, n, scores, labels=None):
    ...         self.n, self.scores, self.labels = n, scores, labels
    >>> Result.__module__ = "user_model"  # a class of the user's file (doctest classes are not)
    >>> fields = as_fields(Result(2, torch.ones(2)), user=lambda cls: True)
    >>> import torch.utils._pytree as pytree
    >>> leaves, spec = pytree.tree_flatten(fields)
    >>> obj = objects_rebuilt(pytree.tree_unflatten([3, torch.zeros(2), None], spec))
    >>> type(obj).__name__, obj.n, obj.scores.tolist(), obj.labels
    ('Result', 3, [0.0, 0.0], None)
"""

from __future__ import annotations

import sys

import torch
import torch.utils._pytree as pytree

_PLAIN = (torch.Tensor, torch.nn.Module, int, float, bool, complex, str, bytes, list, tuple, dict, set, frozenset,
          type(None), torch.SymInt, torch.SymFloat, torch.SymBool, torch.device, torch.dtype)


class Fields:
    """A user object's class and the values of its fields (a pytree node: the values are its
    children, the class and the field names its context)."""

    __slots__ = ("cls", "names", "values")

    def __init__(self, cls: type, names: tuple, values: list):
        self.cls, self.names, self.values = cls, names, values


def _flatten(fields: Fields):
    return list(fields.values), (fields.cls, fields.names)


def _unflatten(values, context) -> Fields:
    return Fields(context[0], context[1], list(values))


pytree.register_pytree_node(Fields, _flatten, _unflatten,
                            flatten_with_keys_fn=lambda f: ([(pytree.MappingKey(n), v) for n, v in zip(f.names, f.values)],
                                                            (f.cls, f.names)))


def _in_user_file(cls: type) -> bool:
    from fxport.common.frames import is_user_file

    module = sys.modules.get(cls.__module__)
    return is_user_file(getattr(module, "__file__", None))


def is_user_object(value, user=_in_user_file) -> bool:
    """An instance of a class defined in the user's code that keeps its state in ``__dict__`` (no
    registered pytree, no module, no tensor, no builtin)."""
    cls = type(value)
    return (not isinstance(value, _PLAIN) and not isinstance(value, type) and not callable(value)
            and cls not in pytree.SUPPORTED_NODES and hasattr(value, "__dict__")
            and not hasattr(cls, "__slots__") and user(cls))


def as_fields(tree, user=_in_user_file):
    """``tree`` with every user object in it (nested ones too) replaced by its :class:`Fields`."""

    def convert(value):
        if is_user_object(value, user):
            names = tuple(vars(value))
            return Fields(type(value), names, [as_fields(vars(value)[n], user) for n in names])
        return value

    return pytree.tree_map(convert, tree, is_leaf=lambda v: is_user_object(v, user))


def holds_fields(tree) -> bool:
    return any(isinstance(v, Fields) for v in pytree.tree_leaves(tree, is_leaf=lambda v: isinstance(v, Fields)))


def objects_rebuilt(tree):
    """``tree`` with every :class:`Fields` made an object of its class again (``__init__`` is not
    called: the fields are the values the branch's object had)."""

    def rebuild(value):
        if not isinstance(value, Fields):
            return value
        obj = value.cls.__new__(value.cls)
        obj.__dict__.update({name: objects_rebuilt(v) for name, v in zip(value.names, value.values)})
        return obj

    return pytree.tree_map(rebuild, tree, is_leaf=lambda v: isinstance(v, Fields))


class ObjectSpec:
    """How a cond returns one variable holding user objects: the value one side gave it when run
    outside the cond (its template: classes, field names, which fields are tensors or numbers),
    read field by field in each branch, the tensors and numbers returned, the rest checked equal
    to the template's and kept."""

    def __init__(self, template):
        self.template = as_fields(template)

    def carried(self, value, fail_with) -> list:
        """A branch's value as the leaves the cond returns (``fail_with(text)`` where its
        structure is not the template's)."""
        return _leaves_by(self.template, value, fail_with)

    def rebuilt(self, carried) -> object:
        """The variable after the cond, from the leaves it returned."""
        return _built(self.template, list(carried))


def _leaves_by(template, value, fail_with) -> list:
    if isinstance(template, Fields):
        if type(value) is not template.cls:
            fail_with(f"is a {template.cls.__name__} on one side and a {type(value).__name__} on the other")
        return [leaf for name, field in zip(template.names, template.values)
                for leaf in _leaves_by(field, getattr(value, name), fail_with)]
    if isinstance(template, (list, tuple)):
        if not isinstance(value, type(template)) or len(value) != len(template):
            fail_with("holds objects whose fields differ between the sides")
        return [leaf for t, v in zip(template, value) for leaf in _leaves_by(t, v, fail_with)]
    if isinstance(template, dict):
        if not isinstance(value, dict) or list(value) != list(template):
            fail_with("holds objects whose fields differ between the sides")
        return [leaf for k in template for leaf in _leaves_by(template[k], value[k], fail_with)]
    if _carried_kind(template):
        if not _carried_kind(value):
            fail_with(f"holds a field that is a {type(template).__name__} on one side and a {type(value).__name__} on the other")
        return [value]
    if value is not template and not (type(value) is type(template) and value == template):
        fail_with("holds a field that is not a tensor or number and differs between the sides")
    return []


def _built(template, carried: list):
    if isinstance(template, Fields):
        obj = template.cls.__new__(template.cls)
        for name, field in zip(template.names, template.values):
            obj.__dict__[name] = _built(field, carried)
        return obj
    if isinstance(template, (list, tuple)):
        return type(template)(_built(t, carried) for t in template)
    if isinstance(template, dict):
        return {k: _built(v, carried) for k, v in template.items()}
    return carried.pop(0) if _carried_kind(template) else template


def _carried_kind(value) -> bool:
    """Tensors and numbers leave a cond (numbers as 0-d tensors)."""
    return isinstance(value, (torch.Tensor, int, float, torch.SymInt, torch.SymFloat)) and not isinstance(value, bool)


def object_spec(value) -> ObjectSpec | None:
    """The :class:`ObjectSpec` of a variable a side gave a value holding user objects (run
    outside the cond), else None."""
    return ObjectSpec(value) if holds_fields(as_fields(value)) else None
