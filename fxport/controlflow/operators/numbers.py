"""``float(t)`` and ``t.tolist()``: numbers read from tensors inside converted code.

Python's ``float(t)`` on a traced tensor reads the value (``.item()``) and then guards on it,
which torch.export cannot capture: the value is not known while tracing, at the function's top
level as in a ``cond`` branch, a ``while_loop`` body or a branch run for ``where``. In converted
code the number stays symbolic instead: ``float_`` reads it with ``.item()`` (a SymFloat: a
double, as in Python, usable in arithmetic and comparisons, which become tensor ops), ``float``
of an integer tensor is ``sym_float`` of its ``.item()``. RWKV's ``cutoff =
float(sorted_probs[...])`` then ``probs[probs < cutoff] = 0`` exports as the comparison it is.
A use that needs the number itself (a format, a Python list's length) still fails, at its line.
``int(t)`` is :func:`~fxport.controlflow.operators.loops.statements.int_`.

``t.data`` inside converted code is ``t.detach()`` while exporting (the same values; ``.data`` of a
tensor traced into a loop body is a tensor the body's tracer does not know, which export then
fails on as a "fake tensor in the constants"). ``t.numpy()`` of a tensor being exported is
refused in one line at the user's line; ``int(t.numpy())``, ``float(t.numpy())``,
``t.numpy().item()`` and ``t.numpy().tolist()`` read the number from ``t`` itself.

Example::

    >>> import torch
    >>> from fxport.controlflow.operators.numbers import float_, tolist
    >>> float_(torch.tensor(3)), float_(2), tolist(torch.tensor(2.5)), tolist(torch.tensor([1, 2]))
    (3.0, 2.0, 2.5, [1, 2])
"""

from __future__ import annotations

import functools
import math

import torch
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols, optimization_hint, statically_known_true

from fxport.controlflow.operators.state import in_traced_body
from fxport.controlflow.operators.values import as_int64, is_number, is_symbolic, is_traced, scalar
from fxport.controlflow.operators.failures import refuse_here
from fxport.controlflow.operators.lists import tensor_items


def float_(value):
    """``float(value)``; a traced one-element tensor gives a SymFloat, no guard."""
    if is_symbolic(value):  # float(t.item()) / float(n) of a traced number: no guard on its value
        return value if isinstance(value, (float, torch.SymFloat)) else torch.sym_float(value)
    if not _reads_symbolically(value):
        return float(value)
    number = value.reshape(()).item()
    return number if value.dtype.is_floating_point else torch.sym_float(number)


def tolist(value):
    """``value.tolist()``; a traced 0-d tensor gives its number without a guard. A traced integer
    vector or matrix whose length is symbolic (a dynamic size, or read from data) gives
    :class:`~fxport.controlflow.operators.lists.tensor_items.TensorItems` (the list read as the
    tensor: Python's list would fix the size). Any other traced tensor whose length the data decides (``predictions.tolist()`` after a ``narrow`` by
    a number read from a tensor) is refused at the user's line: no file holds a Python list of as
    many numbers as the values say."""
    if isinstance(value, torch.Tensor) and value.dim() == 0 and _reads_symbolically(value):
        return value.item()
    if tensor_items.holds_items(value, dims=(1, 2)):  # a length not fixed: the list read as the tensor
        return tensor_items.of(value)
    if isinstance(value, torch.Tensor) and is_traced(value) and _length_read_from_data(value.numel()):
        refuse_here(".tolist() of a tensor whose length is read from the data (a slice, narrow or mask by a "
                    "number read from a tensor): the exported file cannot hold a Python list whose length "
                    "the input's values decide",
                    "compute on the tensor itself (a boolean mask rather than filter(), "
                    "torch.unique_consecutive rather than itertools.groupby), or give it a fixed length")
    return value.tolist()


def _length_read_from_data(numel) -> bool:
    """A number of elements that is symbolic through a number read from data (inside a body dynamo
    traces: any symbolic number, which ``tolist`` cannot iterate there either)."""
    if not is_symbolic(numel):
        return False
    return torch.compiler.is_dynamo_compiling() or bool(free_unbacked_symbols(numel))


def _reads_symbolically(value) -> bool:
    """A traced one-element real tensor."""
    return (
        isinstance(value, torch.Tensor)
        and is_traced(value)
        and statically_known_true(value.numel() == 1)
        and not value.is_complex()
    )


def data_(value, nested: bool = True):
    """``value.data``; a traced tensor in converted code gives ``value.detach()`` (same values):
    torch's non-strict export cannot trace ``.data`` (the tensor it makes is untracked and
    becomes a fake constant, "a fake tensor in the exported program constant's list"), in a
    body or in the code around it (a loop's peeled first trip, the method it calls)."""
    if isinstance(value, torch.Tensor) and is_traced(value):
        return value.detach()
    return value.data


def numpy_(value):
    """``value.numpy()``: refused in one line for a tensor being exported (the file cannot hold a
    numpy array); as written otherwise."""
    if isinstance(value, torch.Tensor) and is_traced(value):
        refuse_here(".numpy() of a tensor being exported: an ONNX file computes with tensors only, and the numpy "
                    "array would be read once, while exporting",
                    "compute with the tensor (drop .numpy(); int(t.numpy()) reads the number from t itself)")
    return value.numpy()


def without_numpy(value):
    """The tensor under ``t.numpy()`` read as a number (``int(t.numpy())``): ``t`` itself while
    exporting, where Python reads the same number from either; the array otherwise."""
    if isinstance(value, torch.Tensor) and is_traced(value):
        return value
    return value.numpy()


# --- Python's number functions of numbers read from tensors ------------------------------------
#
# Inside a converted body a number read from a tensor is a 0-d tensor (``int(t)``, ``t.item()``
# of an integer) or an unbacked SymInt/SymFloat. Python's builtins and ``math`` read such a value
# as a Python number, which guards on it; these give the same number as a tensor op instead.
# A backed size (``x.shape[0]``) alone is not such a number: the builtin runs as written.


def min_(function, *values, **kwargs):
    """``min(...)`` as written (``function``: what the name ``min`` is where it was called); the
    builtin of numbers one of which was read from a tensor (``min(k + 1, n - 1)``) gives the first
    smallest, chosen with ``where`` as Python's loop chooses it (NaN included).

    >>> min_(min, 3, 1, 2), min_(min, [4, 5])
    (1, 4)
    """
    return _extreme(function, values, kwargs, min, torch.lt, torch.sym_min)


def max_(function, *values, **kwargs):
    """``max(...)``, as :func:`min_`."""
    return _extreme(function, values, kwargs, max, torch.gt, torch.sym_max)


def _extreme(function, values, kwargs, builtin, better, sym_pick):
    # a builtin is compared with this module's global name for it: dynamo finds ``max is builtins.max`` False
    numbers = None if kwargs or function is not builtin else _read_numbers(values[0] if len(values) == 1 else values)
    if numbers is None:
        return function(*values, **kwargs)
    if not any(isinstance(v, torch.Tensor) for v in numbers) and all(_is_int(v) for v in numbers):
        return functools.reduce(sym_pick, numbers)  # unbacked SymInts: exact, no guard
    tensors = _as_common_tensors(numbers)
    best = tensors[0]
    for value in tensors[1:]:
        best = torch.where(better(value, best), value, best)
    return best if any(isinstance(v, torch.Tensor) for v in numbers) else best.item()


def divmod_(function, a, b):
    """``divmod(a, b)``: where the builtin gets a number read from a tensor, ``(a // b, a % b)``
    (Python's floor division and remainder, which torch's ``//`` and ``%`` compute too).

    >>> divmod_(divmod, 7, -2)
    (-4, -1)
    """
    numbers = _read_numbers((a, b)) if function is divmod else None
    if numbers is None:
        return function(a, b)
    if any(isinstance(v, torch.Tensor) for v in numbers):
        a, b = _as_common_tensors(numbers)
    return a // b, a % b


def bool_(function, value):
    """``bool(value)``: where the builtin gets a number read from a tensor in a traced body (a 0-d
    tensor, an unbacked symbol), ``value != 0`` (a bool tensor: ``if``/``and`` on it convert)
    instead of a guard.

    >>> bool_(bool, 2), bool_(bool, [])
    (True, False)
    """
    if function is not bool:
        return function(value)
    if isinstance(value, torch.Tensor) and value.dim() == 0 and is_traced(value) and in_traced_body():
        return value if value.dtype == torch.bool else value != 0
    if is_symbolic(value) and _unbacked(value):
        return value if isinstance(value, (bool, torch.SymBool)) else value != 0
    return bool(value)


def round_(function, value, *ndigits, **kwargs):
    """``round(value)``: where the builtin gets a number read from a tensor (a 0-d tensor, no
    ``ndigits``), the nearest integer, ties to even as Python rounds, as a 0-d int64 tensor."""
    if (function is round and not ndigits and not kwargs and isinstance(value, torch.Tensor)
            and _read_numbers((value,)) is not None):
        return value.round().to(torch.int64) if value.dtype.is_floating_point else value.to(torch.int64)
    return function(value, *ndigits, **kwargs)


#: math's functions of real numbers that give a float → the torch function computing it in float64
_MATH_FLOATS = {
    "sqrt": torch.sqrt, "exp": torch.exp, "expm1": torch.expm1, "log2": torch.log2, "log10": torch.log10,
    "log1p": torch.log1p, "sin": torch.sin, "cos": torch.cos, "tan": torch.tan, "asin": torch.asin,
    "acos": torch.acos, "atan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh, "tanh": torch.tanh,
    "asinh": torch.asinh, "acosh": torch.acosh, "atanh": torch.atanh, "erf": torch.erf, "erfc": torch.erfc,
    "fabs": torch.abs, "degrees": torch.rad2deg, "radians": torch.deg2rad, "lgamma": torch.lgamma,
    "pow": torch.pow, "atan2": torch.atan2, "fmod": torch.fmod, "copysign": torch.copysign, "hypot": torch.hypot,
}
#: math's functions giving a Python int, or a bool
_MATH_INTS = {"floor": torch.floor, "ceil": torch.ceil, "trunc": torch.trunc}
_MATH_BOOLS = {"isnan": torch.isnan, "isinf": torch.isinf, "isfinite": torch.isfinite}
#: the ``math`` functions :func:`math_` computes (the converter rewrites ``math.<name>(...)`` of these)
MATH_FUNCTIONS = frozenset(_MATH_FLOATS) | frozenset(_MATH_INTS) | frozenset(_MATH_BOOLS) | {"log"}


def math_(function, *args):
    """``math.<name>(*args)`` of a number read from a tensor: computed in float64 by torch (a
    SymFloat, as :func:`float_` gives); ``floor``/``ceil``/``trunc`` of a 0-d tensor give a 0-d
    int64 tensor, ``isnan``/``isinf``/``isfinite`` a 0-d bool tensor. Anything else as written.

    >>> math_(math.sqrt, 4), math_(math.floor, 2.5)
    (2.0, 2)
    """
    name = getattr(function, "__name__", None)
    numbers = _read_numbers(args) if name in MATH_FUNCTIONS and getattr(math, name) is function else None
    if numbers is None:
        return function(*args)
    if name in _MATH_INTS:
        if not isinstance(args[0], torch.Tensor) or len(args) != 1:
            return function(*args)
        value = args[0]
        return (_MATH_INTS[name](value) if value.dtype.is_floating_point else value).to(torch.int64)
    doubles = [_as_double(v) for v in numbers]
    if name in _MATH_BOOLS:
        return _MATH_BOOLS[name](*doubles)
    if name == "log":
        result = torch.log(doubles[0]) / torch.log(doubles[1]) if len(doubles) == 2 else torch.log(doubles[0])
    else:
        result = _MATH_FLOATS[name](*doubles)
    return result.item()


def ints_read_as_tensors(values: tuple) -> tuple:
    """``values`` with each int read from data (a loop counter in its body, ``t.item()``: a symbol
    with no size behind it) as a 0-d int64 tensor: ``torch.cond`` takes no such number into its
    branches ("Unbacked SymInt input is not supported yet"), and inside them it computes as a
    tensor, as ``int(t)`` does there. Sizes (``x.shape[0]``) stay numbers.

    >>> ints_read_as_tensors((1, 2.5))
    (1, 2.5)
    """
    return tuple(as_int64(v) if int_read_from_data(v) else v for v in values)


#: two stand-ins for a number read from data, far apart and of opposite signs (see int_read_from_data)
_STAND_INS = (-1_000_003, 1_000_033)


def int_read_from_data(value) -> bool:
    """A symbolic int whose value depends on a number read from data. torch's ``optimization_hint``
    puts ``fallback`` in for each such number (a size has its own hint), and dynamo answers it
    inside a body it traces too, where ``free_unbacked_symbols`` cannot be asked: the value
    depends on one when two stand-ins far apart give two answers (``u - 1``, ``min(u, 5)``, ``u % m``)."""
    if isinstance(value, (bool, float, torch.SymBool, torch.SymFloat)) or not is_symbolic(value):
        return False
    low, high = (optimization_hint(value, fallback=stand_in) for stand_in in _STAND_INS)
    return low != high


def _read_numbers(values):
    """``values`` as a list when each is a number or a 0-d real tensor and one was read from a
    tensor (a traced 0-d tensor, an unbacked symbol); None otherwise."""
    if not isinstance(values, (list, tuple)) or not values:
        return None
    items = list(values)
    for v in items:
        if isinstance(v, torch.Tensor):
            if v.dim() != 0 or v.is_complex():
                return None
        elif not is_number(v):
            return None
    read = any(is_traced(v) if isinstance(v, torch.Tensor) else is_symbolic(v) and _unbacked(v) for v in items)
    return items if read else None


def _unbacked(value) -> bool:
    """A symbolic number with a symbol read from data (``t.item()``), not only sizes; inside a body
    dynamo traces, any symbolic number (dynamo itself would read sizes there as torch's ``sym_``
    functions do)."""
    return torch.compiler.is_dynamo_compiling() or bool(free_unbacked_symbols(value))


def _is_int(value) -> bool:
    return isinstance(value, (int, torch.SymInt)) and not isinstance(value, (bool, torch.SymBool))


def _as_common_tensors(numbers) -> list:
    """0-d tensors of one dtype for ``numbers``: the tensors' dtypes promoted, Python numbers
    weak as in ``tensor + 1.5`` (a float makes an integer result float; symbolic floats are
    doubles where no tensor says otherwise)."""
    tensors = [v for v in numbers if isinstance(v, torch.Tensor)]
    if tensors:
        dtype = functools.reduce(torch.promote_types, [t.dtype for t in tensors])
    else:
        dtype = torch.bool
    if any(isinstance(v, (float, torch.SymFloat)) for v in numbers) and not dtype.is_floating_point:
        dtype = torch.get_default_dtype() if tensors else torch.float64
    elif any(_is_int(v) for v in numbers) and dtype == torch.bool:
        dtype = torch.int64
    return [v.to(dtype) if isinstance(v, torch.Tensor) else scalar(v, dtype) for v in numbers]


def _as_double(value) -> torch.Tensor:
    return value.to(torch.float64) if isinstance(value, torch.Tensor) else scalar(value, torch.float64)
