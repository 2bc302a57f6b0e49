"""A variable that is ``None`` on some paths and a value on others, once that is data.

``x = None`` before a data-dependent loop that may assign it (``cur_substr = None; while start <
end: ... if found.numel() > 0: cur_substr = found[0]; break``), or ``mask = None; if seqlen > 1:
mask = ...`` on a traced condition: whether ``x`` is None is known only at run time. Such a
variable becomes a :class:`MaybeNone`, a pair (``value``: what it holds where it is set, a
placeholder of the same type elsewhere; ``is_set``: a 0-d bool tensor). It is a pytree of those
tensors, so converted ``if``s and loops carry it like any other state.

What the program does with it decides what it means:

* ``x is None`` / ``x is not None`` (converted code calls :func:`is_none` / :func:`is_not_none`)
  and ``if x:`` of a container value (:func:`truth`) are the flag, a tensor condition;
* an operation None does not have (``x + 1``, ``x.shape``, ``x[0]``, ``x.item()``) reads
  ``value``: on None eager would raise there, so where eager runs, the value is set;
* a call of code that is not converted (a torch module, a library model) with it as an argument
  runs twice, once with the value and once with ``None``, and selects by the flag
  (:func:`call_with_optionals`): ``nn.LSTM(x, None)`` means zeros, ``model(past_key_values=None)``
  a fresh cache, and neither needs to be known;
* anything else (``x == y``, returning it from the model) is refused in one line.

Size: just over 400 lines, because the value-and-flag pair, its placeholders (a whole value, or
the entries of a tuple that are None before a loop) and the calls that run twice are one idea.

Example::

    >>> import torch
    >>> m = merged(torch.tensor(True), torch.tensor([1.0, 2.0]), None)
    >>> is_not_none(m), m + 1
    (tensor(True), tensor([2., 3.]))
    >>> is_none(None), is_none(3)
    (True, False)
"""

from __future__ import annotations

import inspect
import types

import torch
import torch.utils._pytree as pytree

from fxport.controlflow.operators.failures import fail


class MaybeNone:
    """``value`` where ``is_set`` is true, None elsewhere (``value`` is then a placeholder of
    the same type, which no operation eager runs reads); ``origin``: the user's line (a
    SourceLocation) of the ``if`` or loop that made it, for errors."""

    def __init__(self, value, is_set, origin=None):
        self.value, self.is_set, self.origin = value, is_set, origin

    def __repr__(self) -> str:
        return f"MaybeNone({self.value!r}, is_set={self.is_set!r})"

    def __getattr__(self, attr):  # x.shape, x.item(): None has neither, so eager reads them where set
        if attr.startswith("__") or attr in ("value", "is_set", "origin"):
            raise AttributeError(attr)
        return getattr(self.value, attr)

    def __getitem__(self, index):
        return self.value[index]

    def __eq__(self, other):
        raise TypeError("a value that is None on some paths compared with == (compare with 'is None')")

    __ne__ = __eq__
    __hash__ = object.__hash__

    def __bool__(self):
        raise TypeError("the truth value of a value that is None on some paths is a tensor (use if x is not None:)")

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        """A torch function given it as its input (``torch.add(x, 1)``, in ``torch.stack([x, y])``)
        or an operand of an operator (``scores + x``) reads the value: None would raise there. Anywhere else (``F.linear(x, w,
        bias)``), None may mean something of its own: refused in one line."""
        kwargs = kwargs or {}
        if func in _ARITHMETIC:  # x + y, torch.mul(a, y): no None operand
            return func(*[known_set(a) for a in args], **{k: known_set(v) for k, v in kwargs.items()})
        if args and isinstance(args[0], (list, tuple)):  # torch.stack([x, y]): a list of tensors holds no None
            args = (type(args[0])(known_set(v) for v in args[0]), *args[1:])
            if not any(isinstance(v, MaybeNone) for v in (*args[1:], *kwargs.values())):
                return func(*args, **kwargs)
        rest = (*args[1:], *kwargs.values())
        if not args or not isinstance(args[0], MaybeNone) or any(isinstance(v, MaybeNone) for v in rest):
            fail(f"a value that is None on some paths is passed to {getattr(func, '__name__', func)} beside its "
                 "input, where None may mean something of its own", _call_site(),
                 "give it a value before the loop or branch that may leave it None")
        return func(args[0].value, *args[1:], **kwargs)


def _arithmetic() -> frozenset:
    """The torch functions and Tensor methods/operators of two operands that take no None for
    either (``scores + mask`` dispatches as one of them)."""
    names = ("add sub subtract mul multiply div divide true_divide floor_divide remainder fmod pow matmul rsub eq ne "
             "lt le gt ge logical_and logical_or logical_xor bitwise_and bitwise_or bitwise_xor maximum minimum").split()
    dunders = "add radd sub rsub mul rmul truediv rtruediv floordiv rfloordiv mod rmod pow rpow matmul rmatmul " \
              "and rand or ror xor rxor eq ne lt le gt ge iadd isub imul itruediv".split()
    found = [getattr(owner, n, None) for owner in (torch, torch.Tensor) for n in names]
    found += [getattr(torch.Tensor, f"__{n}__", None) for n in dunders]
    return frozenset(f for f in found if f is not None)


#: see :func:`_arithmetic`
_ARITHMETIC = _arithmetic()


def _binary(name: str):
    def operator(self, *others):
        return getattr(self.value, name)(*others)
    operator.__name__ = name
    return operator


for _name in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv", "rfloordiv",
              "mod", "rmod", "pow", "rpow", "matmul", "rmatmul", "and", "rand", "or", "ror", "xor", "rxor",
              "lt", "le", "gt", "ge", "neg", "invert", "abs", "len", "iter", "float", "int", "index"):
    setattr(MaybeNone, f"__{_name}__", _binary(f"__{_name}__"))


def _flatten(maybe: MaybeNone):
    return [maybe.value, maybe.is_set], maybe.origin


def _unflatten(children, origin) -> MaybeNone:
    return MaybeNone(children[0], children[1], origin)


pytree.register_pytree_node(MaybeNone, _flatten, _unflatten, serialized_type_name="fxport.MaybeNone",
                            flatten_with_keys_fn=lambda m: ([(pytree.SequenceKey(0), m.value),
                                                             (pytree.SequenceKey(1), m.is_set)], m.origin))


def is_none(value):
    """``value is None``: a bool tensor for a :class:`MaybeNone`, a Python bool otherwise."""
    if isinstance(value, MaybeNone):
        return torch.logical_not(value.is_set)
    return value is None


def is_not_none(value):
    """``value is not None``: a bool tensor for a :class:`MaybeNone`, a Python bool otherwise."""
    if isinstance(value, MaybeNone):
        return value.is_set
    return value is not None


def equals_none(value):
    """``value == None``: :func:`is_none` for a :class:`MaybeNone`, Python's ``==`` otherwise."""
    return is_none(value) if isinstance(value, MaybeNone) else value == None  # noqa: E711 - as written


def differs_from_none(value):
    """``value != None``: :func:`is_not_none` for a :class:`MaybeNone`, Python's ``!=`` otherwise."""
    return is_not_none(value) if isinstance(value, MaybeNone) else value != None  # noqa: E711 - as written


def known_set(value):
    """``value`` where a None-check said it is set (``if x is not None:``'s body): a
    :class:`MaybeNone`'s value (read only on the paths where it is set), anything else itself."""
    return value.value if isinstance(value, MaybeNone) else value


def truth(value):
    """``if x:`` of a :class:`MaybeNone` holding a container (a tuple of tensors, a cache): true
    exactly where it is set (None is false, a non-empty container true); other values as they are."""
    if not isinstance(value, MaybeNone):
        return value
    if isinstance(value.value, torch.Tensor) or not _always_true(value.value):
        fail("the truth value of a tensor that is None on some paths is both its value and whether it is set",
             _call_site(), "write 'if x is not None and x:' (or 'if x is not None:')")
    return value.is_set


def _always_true(value) -> bool:
    try:
        return bool(value)
    except Exception:
        return False


def is_optional(value) -> bool:
    return isinstance(value, MaybeNone)


def placeholder(value):
    """A value of ``value``'s type and shapes (zeros) that stands where a variable is None.

    ``torch.zeros(shape)``, not ``zeros_like``: the exported ``zeros_like`` of a loop probe's value
    reads that value's shape in the file, which keeps the probe's ops (dead code otherwise) in
    the graph, and they fail in ONNX Runtime where the loop runs no trip (``x[i]`` of no rows)."""
    if isinstance(value, MaybeNone):
        return value.value
    return pytree.tree_map(lambda leaf: torch.zeros(leaf.shape, dtype=leaf.dtype, device=leaf.device)
                           if isinstance(leaf, torch.Tensor) else leaf, value)


def as_optional(value, template: MaybeNone | None = None, origin=None):
    """``value`` as a :class:`MaybeNone`: a value is set; None is the ``template``'s placeholder,
    unset. ``origin``: where it became one (else the template's)."""
    if isinstance(value, MaybeNone):
        return value
    origin = origin if origin is not None else getattr(template, "origin", None)
    if value is None:
        return MaybeNone(template.value, torch.zeros((), dtype=torch.bool), origin)
    return MaybeNone(value, torch.ones((), dtype=torch.bool), origin)


def unset(value, origin) -> MaybeNone:
    """An unset :class:`MaybeNone` whose placeholder has ``value``'s type (zeros; of a MaybeNone's
    value too: a probe's value as the placeholder would keep the probe's ops, dead code otherwise,
    in the graph, and they may fail where the loop runs no trip)."""
    value = value.value if isinstance(value, MaybeNone) else value
    return MaybeNone(placeholder(value), torch.zeros((), dtype=torch.bool), origin)


def with_unset_entries(before, after, origin):
    """``before``, a tuple or list (nested) holding ``None`` entries (SpeechBrain's ``memory =
    (None, c)`` before a loop whose body sets ``memory = (hs, c)``), with each ``None`` entry that
    ``after`` (what an iteration gives) holds tensors at replaced by an unset :class:`MaybeNone`
    whose placeholder has their type; an entry ``after`` leaves ``None``, or of another
    structure, stays as it is (the caller's structure check refuses the latter). ``origin``: the
    loop's line.

    >>> import torch
    >>> m, c = with_unset_entries((None, torch.zeros(1)), (torch.ones(2), torch.ones(1)), None)
    >>> m
    MaybeNone(tensor([0., 0.]), is_set=tensor(False))
    """
    if before is None:
        leaves = pytree.tree_leaves(after)
        if after is None or not leaves or not all(isinstance(leaf, torch.Tensor) for leaf in leaves):
            return before
        return unset(after, origin)
    if _same_sequence(before, after):
        return _rebuilt(before, [with_unset_entries(b, a, origin) for b, a in zip(before, after)])
    return before


def shaped_like(template, value):
    """``value`` (an iteration's tuple or list) in the structure of ``template``: where ``template``
    holds a :class:`MaybeNone` (:func:`with_unset_entries`), ``value``'s entry as one (a value is
    set, ``None`` is unset with the template's placeholder), with the template's origin, so the
    two flatten alike; everything else as it is."""
    if isinstance(template, MaybeNone):
        if isinstance(value, MaybeNone):
            return MaybeNone(value.value, value.is_set, template.origin)
        return as_optional(value, template)
    if _same_sequence(template, value) and any(has_unset_entries(t) for t in template):
        return _rebuilt(value, [shaped_like(t, v) for t, v in zip(template, value)])
    return value


def has_unset_entries(value) -> bool:
    """A :class:`MaybeNone` or a tuple or list (nested) holding one."""
    if isinstance(value, MaybeNone):
        return True
    return isinstance(value, (tuple, list)) and any(has_unset_entries(v) for v in value)


def _same_sequence(a, b) -> bool:
    return isinstance(a, (tuple, list)) and type(a) is type(b) and len(a) == len(b)


def _rebuilt(like, items):
    """A sequence of ``like``'s type (a tuple, a namedtuple, a list) holding ``items``."""
    if isinstance(like, tuple) and hasattr(like, "_fields"):
        return type(like)(*items)
    return type(like)(items)


def one_side_none(a, b) -> bool:
    """The two sides of an ``if`` give a value that is None (or possibly None) on at least one side
    and a value on the other: the result is a :class:`MaybeNone`."""
    kinds = {_kind(a), _kind(b)}
    return "none" in kinds and len(kinds) > 1 or "maybe" in kinds


def _kind(value) -> str:
    return "none" if value is None else "maybe" if isinstance(value, MaybeNone) else "value"


def merged(pred, a, b, select=None, origin=None):
    """The value of a variable after a where-selected ``if`` whose sides give ``a`` and ``b``, one
    of them None (or a :class:`MaybeNone`): a MaybeNone set where the side taken set it.
    ``select(mask, x, y)``: how one tensor pair is selected (``torch.where`` by default);
    ``origin``: the ``if``'s line, unless a side was a MaybeNone already."""
    select = select or torch.where
    origin = next((v.origin for v in (a, b) if isinstance(v, MaybeNone) and v.origin is not None), origin)
    template = a if b is None else b if a is None else a
    template = template if isinstance(template, MaybeNone) else MaybeNone(template, None)
    a, b = as_optional(a, template, origin), as_optional(b, template, origin)
    leaves_a, spec_a = pytree.tree_flatten(a.value)
    leaves_b, spec_b = pytree.tree_flatten(b.value)
    if spec_a != spec_b:
        raise TypeError("the two sides hold values of different structures")
    mask = pred.reshape(()) if isinstance(pred, torch.Tensor) else torch.full((), pred, dtype=torch.bool)
    values = [x if x is y else select(mask, x, y) for x, y in zip(leaves_a, leaves_b)]
    is_set = torch.logical_or(torch.logical_and(mask, a.is_set), torch.logical_and(torch.logical_not(mask), b.is_set))
    return MaybeNone(pytree.tree_unflatten(values, spec_a), is_set, origin)


def check_no_maybe_none(outputs, forward) -> None:
    """A model output may not be None on some inputs and a tensor on others: an ONNX graph's
    outputs are tensors on every input."""
    returned = [v for v in pytree.tree_leaves(outputs, is_leaf=lambda v: isinstance(v, MaybeNone))
                if isinstance(v, MaybeNone)]
    if returned:
        location = returned[0].origin
        if location is None and getattr(forward, "__code__", None) is not None:
            from fxport.errors import SourceLocation
            code = forward.__code__
            location = SourceLocation(code.co_filename, code.co_firstlineno, code.co_name)
        fail("the model returns a value that this statement leaves None on some inputs and a tensor on others",
             types.SimpleNamespace(location=location),
             "return a tensor on every path (e.g. zeros, and a flag saying whether it was set)")


def has_optional(args, kwargs) -> bool:
    return any(isinstance(v, MaybeNone) for v in (*args, *kwargs.values()))


def call_with_optionals(f, args: tuple, kwargs: dict, where=None):
    """``f(*args, **kwargs)`` for code fxport does not convert, where an argument may be None:
    ``f`` runs with the value and with ``None`` for it, and the flag selects the result (see the
    module doc). The two results must have one structure and shapes; otherwise, and where ``f``
    takes no ``None`` there, a one-line refusal."""
    slot, maybe = _first_optional(args, kwargs)
    name = _callable_name(f)
    where = where or _call_site()
    if sum(isinstance(v, MaybeNone) for v in (*args, *kwargs.values())) > 1:
        fail(f"two values that are None on some paths are passed to {name}", where,
             "give one of them a value before the loop or branch that may leave it None")
    if not _accepts_none(f, slot, len(args)):
        fail(f"a value that is None on some paths (argument {slot}) is passed to {name}, which does not take None there",
             where, "give it a value before the loop or branch that may leave it None (e.g. a tensor of zeros)")
    with_value = f(*_replaced(args, slot, maybe.value), **_replaced(kwargs, slot, maybe.value))
    with_none = f(*_replaced(args, slot, None), **_replaced(kwargs, slot, None))
    leaves_v, spec_v = pytree.tree_flatten(with_value)
    leaves_n, spec_n = pytree.tree_flatten(with_none)
    if spec_v != spec_n or not all(_same_tensor_type(x, y) for x, y in zip(leaves_v, leaves_n)):
        fail(f"{name} gives results of different shapes for an argument that is None on some paths and a value on "
             f"others", where, "run the step that sets it (the first iteration, the prefill) before the loop")
    mask = maybe.is_set
    return pytree.tree_unflatten([x if x is y else torch.where(mask, x, y) if isinstance(x, torch.Tensor) else x
                                  for x, y in zip(leaves_v, leaves_n)], spec_v)


def _call_site():
    """The user's line making the call (outside a body dynamo traces, which cannot walk the stack)."""
    if torch.compiler.is_dynamo_compiling():
        return None
    from fxport.common.frames import here
    return types.SimpleNamespace(location=here())


def _first_optional(args, kwargs):
    for i, v in enumerate(args):
        if isinstance(v, MaybeNone):
            return i, v
    for k, v in kwargs.items():
        if isinstance(v, MaybeNone):
            return k, v
    raise AssertionError("no MaybeNone argument")


def _replaced(values, slot, value):
    if isinstance(values, dict):
        return {k: (value if k == slot else v) for k, v in values.items()}
    return tuple(value if i == slot else v for i, v in enumerate(values))


def _accepts_none(f, slot, positional: int) -> bool:
    """``f``'s parameter at ``slot`` (a position or a keyword) defaults to None: the callee
    gives None a meaning of its own (``hx=None``, ``past_key_values=None``).

    A Python function or method is read from its code object (:func:`_code_parameters`):
    inside a ``torch.cond`` branch dynamo traces this, and it cannot build
    ``inspect.signature(...).parameters`` there ("'Signature' object has no attribute
    '_parameters'", an LSTM given a hidden state that is None on some paths)."""
    target = f.forward if isinstance(f, torch.nn.Module) else f
    found = _code_parameters(target)
    if found is None:
        try:
            found = _signature_parameters(inspect.signature(target))
        except (TypeError, ValueError):
            return False
    named, defaults, var_positional, var_keyword = found
    if isinstance(slot, int):
        name = named[slot] if slot < len(named) else None
        rest = var_positional
    else:
        name = slot if slot in named else None
        rest = var_keyword
    return defaults.get(name, _NO_DEFAULT) is None if name is not None else rest  # **kwargs: kwargs.get(...)


_NO_DEFAULT = object()


def _code_parameters(target):
    """``(names, {name: default}, takes *args, takes **kwargs)`` of a Python function or bound
    method, from its code object (``self`` left out of a bound method's names); None for other
    callables."""
    bound = isinstance(target, types.MethodType)
    function = target.__func__ if bound else target
    if not isinstance(function, types.FunctionType):
        return None
    code = function.__code__
    count, kwonly = code.co_argcount, code.co_kwonlyargcount
    positional = list(code.co_varnames[:count])
    names = positional + list(code.co_varnames[count:count + kwonly])
    defaults = dict(zip(positional[count - len(function.__defaults__ or ()):], function.__defaults__ or ()))
    defaults.update(function.__kwdefaults__ or {})
    flags = code.co_flags
    return (names[1:] if bound else names), defaults, bool(flags & inspect.CO_VARARGS), \
        bool(flags & inspect.CO_VARKEYWORDS)


def _signature_parameters(signature):
    """What :func:`_code_parameters` gives, from an ``inspect.Signature`` (builtins, classes)."""
    params = list(signature.parameters.values())
    named = [p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    defaults = {p.name: p.default for p in params if p.default is not p.empty}
    return named, defaults, any(p.kind == p.VAR_POSITIONAL for p in params), \
        any(p.kind == p.VAR_KEYWORD for p in params)


def _same_tensor_type(a, b) -> bool:
    if isinstance(a, torch.Tensor) != isinstance(b, torch.Tensor):
        return False
    if not isinstance(a, torch.Tensor):
        return a is b or a == b
    from fxport.controlflow.operators.values import same_size
    return a.dtype == b.dtype and a.dim() == b.dim() and all(same_size(x, y) for x, y in zip(a.shape, b.shape))


def _callable_name(f) -> str:
    return type(f).__name__ if isinstance(f, torch.nn.Module) else getattr(f, "__qualname__", repr(f))
