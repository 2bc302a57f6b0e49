"""Call sites in converted code: ``f(x)`` runs the converted version of a user function.

The converter itself lives on the compiler side; it registers itself with
:func:`use_converter`, so these operators import nothing from it. :data:`CONVERTED` caches
``original function → converted function`` (``None``: not user code, called as is).

Example::

    >>> from fxport.controlflow.operators.calls import call
    >>> call(len)([1, 2])                    # not user code: called as is
    2
"""

from __future__ import annotations

import builtins
import functools
import time
import types
from typing import Callable

import torch
import torch.utils._pytree as pytree

from fxport.controlflow.operators.lists.appender import Appender, stack
from fxport.controlflow.operators.lists.tensor_items import TensorItems
from fxport.controlflow.operators.optional import call_with_optionals, has_optional
from fxport.controlflow.operators.values import as_int64, is_number, is_traced, scalar

#: original function → converted function (None: not user code, left alone)
CONVERTED: dict[Callable, Callable | None] = {}
_CONVERTER: list[Callable] = []


def use_converter(converter: Callable[[Callable], Callable | None]) -> None:
    """Convert user functions met at call sites with ``converter`` (``fn → converted or None``)."""
    _CONVERTER[:] = [converter]


def call(f):
    """The converted version of a user function/method ``f`` (lazily), else ``f`` itself (a
    module or a library function: called through :func:`none_aware`)."""
    if isinstance(f, types.MethodType):
        converted = _lookup(f.__func__)
        # functools.partial rather than MethodType: dynamo traces partial, not method construction
        return functools.partial(converted, f.__self__) if converted is not None else none_aware(f)
    if isinstance(f, types.FunctionType):
        converted = _lookup(f)
        return converted if converted is not None else none_aware(f)
    if isinstance(f, functools.partial) and isinstance(f.func, (types.FunctionType, types.MethodType)):
        inner = call(f.func)
        return f if inner is f.func else functools.partial(inner, *f.args, **f.keywords)
    if isinstance(f, torch.nn.Module) and "forward" not in f.__dict__:  # not a user module converted in place
        return none_aware(f)
    if _is_plain_class(f):
        init = _lookup(f.__init__)
        return f if init is None else functools.partial(_constructed, f, init)
    for read, clock in _CLOCKS:  # by identity: dynamo cannot hash a builtin
        if f is read:
            return clock
    return f


def _is_plain_class(f) -> bool:
    """A class of the user's code made as Python makes plain objects (``type`` its metaclass,
    ``object.__new__``, its own ``__init__`` in Python; not a module): its ``__init__`` is user
    code a converted body may call with traced values (``q = priorityQ_torch(i)`` whose
    ``__init__`` builds ``torch.tensor([[val, 0]])`` from a loop's counter)."""
    return (type(f) is type and not issubclass(f, torch.nn.Module) and f.__new__ is object.__new__
            and isinstance(f.__dict__.get("__init__"), types.FunctionType))


def _constructed(cls, init, *args, **kwargs):
    """``cls(*args, **kwargs)`` with its converted ``__init__``."""
    obj = object.__new__(cls)
    init(obj, *args, **kwargs)
    return obj


def _clock(read):
    """A clock (``time.time``, ``time.perf_counter``) as converted code calls it: read as
    usual, except inside a body torch traces (a while_loop body, a cond branch), which cannot
    call the clock: there it gives the last reading from outside, the same number every time
    (an ONNX file has no clock; in the loops people write the clock times a print or a log).

    >>> _clock(time.monotonic)() > 0
    True
    """
    last = [0.0]

    def clock():
        if torch.compiler.is_dynamo_compiling():
            return last[0]
        last[0] = read()
        return last[0]

    return clock


#: the clocks a model reads to time itself, and their converted calls
_CLOCKS = tuple((read, _clock(read)) for read in (time.time, time.perf_counter, time.monotonic, time.process_time))


def none_aware(f):
    """``f`` (code fxport does not convert: a module, a library function), run with and without
    an argument that is None on some paths and selected by its flag when one is passed
    (:func:`~fxport.controlflow.operators.optional.call_with_optionals`)."""

    def run(*args, **kwargs):
        if has_optional(args, kwargs):
            return call_with_optionals(f, args, kwargs)
        return f(*args, **kwargs)

    return run


def _lookup(fn):
    if fn in CONVERTED:
        return CONVERTED[fn]
    if torch.compiler.is_dynamo_compiling() or not _CONVERTER:
        return None
    return _CONVERTER[0](fn)


#: converted function → how to make it again with other values of the variables it reads from
#: the function around it: ``(factory, runtime, key, names, values)``, the generated factory is
#: called as ``factory(runtime, key, *values)`` (registered by the converter)
REBUILDS: dict[Callable, tuple] = {}


def bound(fn, values: dict, written: tuple = ()):
    """``fn``, a function defined inside the converted function, where a converted branch or
    loop body uses it: converted, and reading ``values`` (name → the body's value) for the
    variables of the enclosing function it reads — the body's own copies of them, which the
    loop carries, not the enclosing function's. A function it reads that reads them too is bound
    the same way. ``written``: the values it writes in place (for the analysis; unused here).

    >>> bound(len, {})([1, 2])               # not user code: called as is
    2
    """
    converted = _lookup(fn) if isinstance(fn, types.FunctionType) else None
    if converted is None:
        return call(fn)
    return _rebuilt(converted, values, ())


def _rebuilt(converted, values: dict, seen: tuple):
    """``converted`` made again with ``values`` for the variables it reads from outside."""
    recipe = REBUILDS.get(converted)
    if recipe is None:
        return converted
    factory, runtime, key, names, cells = recipe
    seen = seen + (converted,)
    new = []
    for name, cell in zip(names, cells):
        if name in values:
            new.append(values[name])
            continue
        inner = _lookup(cell) if isinstance(cell, types.FunctionType) else None
        if inner is not None and not any(inner is s for s in seen):
            cell = _rebuilt(inner, values, seen)  # a nested function it calls, bound too
        new.append(cell)
    return factory(runtime, key, *new)


def _same_shape(a: torch.Tensor, b: torch.Tensor):
    """True/False where the shapes are known equal or different, else None (sizes only known at run time)."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    if a.dim() != b.dim():
        return False
    if all(statically_known_true(x == y) for x, y in zip(a.shape, b.shape)):
        return True
    if any(statically_known_true(x != y) for x, y in zip(a.shape, b.shape)):
        return False
    return None


def equal(a, b):
    """``torch.equal(a, b)`` in converted code: while exporting, a 0-d bool tensor (the same
    answer, kept a tensor so that ``if``/``while`` on it converts instead of guarding)."""
    if not (is_traced(a) and is_traced(b)):
        return torch.equal(a, b)
    same = _same_shape(a, b)
    if same is None:  # sizes known at run time only (a value carried by a loop, another computed in it)
        return _equal_at_run_time(a, b)
    return (a == b).all() if same else torch.zeros((), dtype=torch.bool)


def _equal_at_run_time(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``torch.equal`` of two tensors of one rank whose sizes torch cannot compare: the sizes
    compared as tensors, and the values over the shorter of the two flattened lengths."""
    sizes = torch.stack([as_int64(x) == as_int64(y) for x, y in zip(a.shape, b.shape)]).all() if a.dim() else \
        torch.ones((), dtype=torch.bool)
    common = torch.sym_min(a.numel(), b.numel())
    values = (a.reshape(-1)[:common] == b.reshape(-1)[:common]).all()
    return sizes & values


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``torch.allclose(a, b, ...)`` in converted code: a 0-d bool tensor while exporting. Shapes
    broadcast as ``allclose`` broadcasts them (``(1,)`` against ``()``)."""
    if not (is_traced(a) and is_traced(b)):
        return torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    return torch.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan).all()


def equal_method(a, b):
    """``a.equal(b)`` in converted code: :func:`equal` for tensors, the method for anything else."""
    return equal(a, b) if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) else a.equal(b)


def allclose_method(a, b, *args, **kwargs):
    """``a.allclose(b, ...)`` in converted code: :func:`allclose` for tensors."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return allclose(a, b, *args, **kwargs)
    return a.allclose(b, *args, **kwargs)


def tensor_(data, *args, **kwargs):
    """``torch.tensor(data, ...)`` in converted code: where ``data`` holds traced values (a loop
    counter, a number read from a tensor), the tensor is built from them (``stack`` of 0-d
    tensors, the dtype Python's numbers would give) instead of reading their values.

    >>> tensor_([[1, 0]])
    tensor([[1, 0]])
    """
    if isinstance(data, TensorItems):  # t.tolist() of a vector of dynamic length: t's ints
        data = data.tensor
        return data.to(kwargs["dtype"]) if kwargs.get("dtype") is not None else data
    if isinstance(data, Appender):  # a list grown in a loop or appended under a tensor condition
        rows = stack(data)
        return rows.to(kwargs["dtype"]) if kwargs.get("dtype") is not None else rows
    leaves = pytree.tree_leaves(data, is_leaf=lambda v: isinstance(v, Appender))
    leaves = [stack(v) if isinstance(v, Appender) else v for v in leaves]
    if args or not leaves or not any(is_traced(v) for v in leaves):
        return torch.tensor(data, *args, **kwargs)
    dtype = kwargs.pop("dtype", None) or python_dtype(leaves)
    return _stacked(data, dtype).to(**({"device": kwargs.pop("device")} if "device" in kwargs else {}))


def new_tensor_(base, data, *args, **kwargs):
    """``base.new_tensor(data, ...)`` in converted code: data holding traced values (a number read
    from a tensor in a loop body, ``new_tensor([[int(tok.item())]])``) is built as :func:`tensor_`
    builds it, in ``base``'s dtype unless ``dtype=`` is given and on its device, as
    ``new_tensor`` does; anything else (a tensor, constants, another object's method) as written.

    >>> new_tensor_(torch.zeros(2), [[1, 2]])
    tensor([[1., 2.]])
    """
    if not isinstance(base, torch.Tensor) or args or not _holds_traced(data):
        return base.new_tensor(data, *args, **kwargs)
    dtype = kwargs.get("dtype") or base.dtype
    return tensor_(data, dtype=dtype, device=kwargs.get("device") or base.device)


def as_tensor_(data, *args, **kwargs):
    """``torch.as_tensor(data, ...)`` in converted code: data holding traced values (not a tensor
    itself, which ``as_tensor`` returns as it is) is built as :func:`tensor_` builds it.

    >>> as_tensor_([1.5, 2])
    tensor([1.5000, 2.0000])
    """
    if args or not _holds_traced(data):
        return torch.as_tensor(data, *args, **kwargs)
    return tensor_(data, **{k: v for k, v in kwargs.items() if v is not None and k in ("dtype", "device")})


def new_full_(base, size, fill_value, *args, **kwargs):
    """``base.new_full(size, fill_value, ...)`` in converted code: a traced fill value (a number
    read from a tensor in a loop body) is expanded to ``size`` in ``base``'s dtype (or ``dtype=``)
    instead of being read as a number; anything else as written.

    >>> new_full_(torch.zeros(1, dtype=torch.long), (2,), 7)
    tensor([7, 7])
    """
    one_element = isinstance(fill_value, torch.Tensor) and fill_value.numel() == 1
    if not isinstance(base, torch.Tensor) or args or not (is_traced(fill_value) and (one_element or is_number(fill_value))):
        return base.new_full(size, fill_value, *args, **kwargs)
    value = fill_value.reshape(()) if isinstance(fill_value, torch.Tensor) else scalar(fill_value)
    dtype = kwargs.get("dtype") or base.dtype
    size = tuple(size) if isinstance(size, (list, tuple, torch.Size)) else (size,)
    return value.to(dtype=dtype, device=kwargs.get("device") or base.device).expand(size).clone()


def _holds_traced(data) -> bool:
    """Data for a new tensor (not a tensor itself) with a traced value among its leaves."""
    if isinstance(data, torch.Tensor):
        return False
    if isinstance(data, Appender):
        return True
    leaves = pytree.tree_leaves(data, is_leaf=lambda v: isinstance(v, Appender))
    return any(isinstance(v, Appender) or is_traced(v) for v in leaves)


def legacy_tensor_(constructor, data, dtype):
    """``torch.LongTensor(data)`` in converted code: data (a list, a list grown in a loop) is
    built as :func:`tensor_` builds it; anything else (a size, a tensor) goes to the constructor."""
    if isinstance(data, (list, tuple, Appender)):
        return tensor_(data, dtype=dtype)
    return constructor(data)


def python_dtype(leaves) -> torch.dtype:
    """The dtype ``torch.tensor`` gives ``leaves``: their promotion, a Python bool counting as
    bool, an int as int64, a float as the default dtype, a tensor as its dtype."""
    def dtype_of(value):
        if isinstance(value, torch.Tensor):
            return value.dtype
        if isinstance(value, (bool, torch.SymBool)):
            return torch.bool
        return torch.int64 if isinstance(value, (int, torch.SymInt)) else torch.get_default_dtype()

    return functools.reduce(torch.promote_types, [dtype_of(v) for v in leaves])


def _stacked(data, dtype):
    if isinstance(data, Appender):  # torch.tensor([hyp[-2:]]): a grown list inside the data
        return stack(data).to(dtype)
    if isinstance(data, (list, tuple)):
        return torch.stack([_stacked(item, dtype) for item in data]) if data else torch.zeros(0, dtype=dtype)
    if isinstance(data, torch.Tensor):
        return data.to(dtype).reshape(()) if data.numel() == 1 else data.to(dtype)
    return torch.full((), data, dtype=dtype)


def all_(values):
    """The builtin ``all(values)``: of a traced tensor whose rows hold one value each, a 0-d bool
    tensor (the same answer; ``if all(lens.le(t)): break`` converts instead of guarding).

    >>> all_(torch.tensor([1, 2])), all_([1, 0])     # eagerly: the builtin's answer
    (True, False)
    """
    if _rows_of_one_value(values):
        return values.reshape(values.shape[0]).bool().all()
    return builtins.all(values)


def any_(values):
    """The builtin ``any(values)``: a 0-d bool tensor for a traced tensor, as :func:`all_`."""
    if _rows_of_one_value(values):
        return values.reshape(values.shape[0]).bool().any()
    return builtins.any(values)


def _rows_of_one_value(values) -> bool:
    """A tensor of rank ≥ 1 whose rows each hold one element (eager takes ``bool`` of each row)."""
    return (isinstance(values, torch.Tensor) and values.dim() >= 1
            and all(size == 1 for size in values.shape[1:]) and is_traced(values))


def print_(arguments: Callable[[], tuple]) -> None:
    """``print(...)`` inside a converted branch or loop body: printed when the code runs eagerly,
    left out while exporting (an ONNX file cannot print; its outputs are the same either way).
    ``arguments`` builds ``(args, kwargs)`` only when printing, so formatting a traced tensor never
    reads its value."""
    if torch.compiler.is_exporting() or torch.compiler.is_dynamo_compiling():
        return None
    args, kwargs = arguments()
    print(*args, **kwargs)
    return None
