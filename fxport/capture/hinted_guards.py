"""The guards a ``Dim.DYNAMIC`` capture kept but its ranges do not enforce.

With a named ``Dim``, torch.export fails a capture whose guards do not hold over the declared
range. With a ``Dim.DYNAMIC`` hint it narrows the range where it can word the guard as a bound
and *keeps* the other guards without enforcing them: the program says it is valid for sizes
where the model takes another path. swin_t pads each stage to its 7×7 windows and turns its
shifted windows off where a stage is no larger than one window; captured at 224 with hints,
torch reports heights 8..inf while the trace holds only for 116..227.

:func:`sizes_where_guards_hold` evaluates the kept guards size by size along each dynamic
dimension, the others at the example's sizes, and returns the interval around the example
where all of them hold; :func:`guard_narrowings` lists the dimensions whose interval is
narrower than the program's range, with the guard that fails just outside it and the user's
line that made it.

Example::

    >>> class Windows(torch.nn.Module):
    ...     def forward(self, x):  # pads to 7-row windows; shifts where there are 3 or more
    ...         y = torch.nn.functional.pad(x, (0, 0, 0, (7 - x.shape[1] % 7) % 7))
    ...         return y.roll(3, 1) if y.shape[1] // 7 > 2 else y
    >>> program = torch.export.export(Windows(), (torch.randn(2, 30, 4),),
    ...                               dynamic_shapes=({1: Dim.DYNAMIC},), strict=False)
    >>> [(n.index, n.axis, n.low, n.exported[0], n.failing_size) for n in guard_narrowings(program)]
    [(0, 1, 15, 2, 14)]
    >>> guard_narrowings(program)[0].guard
    "((L['x'].size()[1] + ((7 + (-1)*(L['x'].size()[1] % 7)) % 7)) // 7) > 2"
"""

from __future__ import annotations

import dataclasses
from typing import Any

import sympy
import torch
from torch.export import Dim  # noqa: F401  (the example)
from torch.utils._sympy.printers import PythonPrinter

from fxport.capture.dynamic_dims import (
    UNBOUNDED,
    DimRange,
    _declared_range,
    _user_input_values,
    _valid_range,
    dim_name,
)
from fxport.capture.sources import is_model_file
from fxport.errors import CaptureError
from fxport.common.frames import SourceLocation

#: How far above the example a dimension is walked: twice the example and a few windows more
#: (window and stride arithmetic repeats within that), or up to the range's end when nearer.
_WALK_FACTOR, _WALK_MARGIN = 2, 64



@dataclasses.dataclass(frozen=True)
class GuardNarrowing:
    """Dimension ``axis`` of tensor input ``index``: the trace holds for ``low..high`` only, not
    for the range torch ``exported`` it for; ``guard`` (Python, over the inputs' sizes) fails at
    ``failing_size``; ``where``: the model's line that made the guard, when known."""

    index: int
    axis: int
    low: int
    high: int
    exported: tuple[int, int]
    failing_size: int
    guard: str
    where: Any = None


def refuse_unenforced_guards(program: torch.export.ExportedProgram, dims: dict[int, dict[int, tuple]]) -> None:
    """Raise a CaptureError when a guard torch kept holds on less than a dimension's range.

    ``dims``: :func:`fxport.capture.dynamic_dims.dims_by_input` of the spec (the dimensions' names).
    The file would take the example's path at sizes where the model takes another one; the
    message gives the sizes around the example where the trace holds, to declare as the range.
    """
    narrowings = guard_narrowings(program)
    if not narrowings:
        return
    parts = []
    for narrowing in narrowings:
        spec = dims.get(narrowing.index, {}).get(narrowing.axis)
        name = dim_name(spec[0], spec[1], narrowing.axis) if spec else f"input{narrowing.index}_{narrowing.axis}"
        declared = _declared_range(spec[0]) if spec else narrowing.exported
        parts.append((name, narrowing, declared))
    name, first, declared = parts[0]
    ranges = ", ".join(f"{n!r} {DimRange(found.low, found.high).describe()}" for n, found, _ in parts)
    fixes = ", ".join(f"torch.export.Dim({n!r}, min={found.low}" + (f", max={found.high})" if found.high < UNBOUNDED else ")")
                      for n, found, _ in parts)
    raise CaptureError(
        f"the capture holds only for {ranges}, not the declared {DimRange(*declared).describe()}: the model takes "
        f"another path where its size condition {_shortened(first.guard)} fails ({name}={first.failing_size})",
        where=first.where,
        hint=f"declare the range the model is used at ({fixes}) or leave the dimension static")


def _shortened(text: str, most: int = 120) -> str:
    return text if len(text) <= most else f"{text[:most // 2]} … {text[-most // 2:]}"


def guard_narrowings(program: torch.export.ExportedProgram) -> list[GuardNarrowing]:
    """Every dynamic input dimension whose kept guards hold on less than the program's range.

    Only the guards the model's own code made count (torch records the frame: the model's
    ``if window_size >= pad_H:``), not those of torch's kernels and layout checks (``view``'s
    contiguity, a convolution's backend), which decide nothing the ONNX file computes
    differently; nor those that only exclude sizes 0 and 1 (:func:`excludes_only_sizes_zero_and_one`).
    Verification still runs every dimension at its edges."""
    shape_env = _shape_env(program)
    if shape_env is None or not shape_env.guards:
        return []
    dims = _dynamic_dims(program)
    symbols = {symbol for symbol, _ in dims.values()}
    guards = [guard for guard in shape_env.guards if guard.expr.free_symbols and guard.expr.free_symbols <= symbols
              and _model_line(guard) is not None and not excludes_only_sizes_zero_and_one(guard.expr)]
    if not guards:
        return []
    example = {symbol: int(shape_env.backed_var_to_val[symbol]) for symbol in symbols}
    checks = _printed(guards)
    found = []
    for (index, axis), (symbol, (low, high)) in dims.items():
        holds = sizes_where_guards_hold(checks, symbol, example, low, high)
        if holds == (low, high):
            continue
        failing = holds[0] - 1 if holds[0] > low else holds[1] + 1
        guard = _first_failing(guards, checks, {**example, symbol: failing})
        found.append(GuardNarrowing(index, axis, holds[0], holds[1], (low, high), failing,
                                    _in_source_names(shape_env, guard.expr), _model_line(guard)))
    return found


def sizes_where_guards_hold(checks: list, symbol: sympy.Symbol, example: dict, low: int, high: int) -> tuple[int, int]:
    """The interval around ``example[symbol]`` inside ``low..high`` where every check holds, the
    other symbols at ``example``; walked size by size (above the example up to twice it and a
    margin, ``high`` kept when nothing fails up to there)."""
    start = example[symbol]
    top = min(high, max(start * _WALK_FACTOR + _WALK_MARGIN, low))
    names = {str(name): value for name, value in example.items()}
    every = compile(" and ".join(f"({code})" for code in checks) or "True", "<guards>", "eval")

    def holds(size: int) -> bool:
        names[str(symbol)] = size
        return _holds(every, names)

    upper = start
    while upper < top and holds(upper + 1):
        upper += 1
    lower = start
    while lower > low and holds(lower - 1):
        lower -= 1
    return lower, high if upper >= top else upper


#: Per relation, the constants ``k`` of a guard ``c·(E + k) ≠ 0`` / ``> 0`` / ``≥ 0`` that only
#: say "``E`` is not 0 or 1".
_ZERO_ONE_CONSTANTS = {sympy.Ne: (0, 1, -1), sympy.StrictGreaterThan: (0, -1), sympy.StrictLessThan: (0, -1),
                       sympy.GreaterThan: (0, -1, -2), sympy.LessThan: (0, -1, -2)}


def excludes_only_sizes_zero_and_one(guard) -> bool:
    """Whether ``guard`` is torch's 0/1 specialisation of a size expression ``E``: ``E != 1``,
    ``8*E != 8``, ``E > 1``, ``1 < 96*E``. Every capture that is not size-oblivious assumes sizes
    of at least 2; the file still computes the general case there, and verification runs the
    sizes where an input's own dimension is 0 or 1. Other guards (``E > 7``, ``E == 7``) are
    paths the model takes.

    Example::

        >>> s = sympy.Symbol("s", integer=True, positive=True)
        >>> excludes_only_sizes_zero_and_one(sympy.Ne(8 * s, 8)), excludes_only_sizes_zero_and_one(sympy.Gt(s, 7))
        (True, False)
    """
    for relation, constants in _ZERO_ONE_CONSTANTS.items():
        if isinstance(guard, relation):
            lower_first = isinstance(guard, (sympy.StrictLessThan, sympy.LessThan))
            difference = guard.rhs - guard.lhs if lower_first else guard.lhs - guard.rhs
            constant, _ = difference.as_content_primitive()[1].as_coeff_Add()
            return bool(constant.is_Integer) and int(constant) in constants
    return False


def _printed(guards) -> list[str]:
    """Each guard as Python over its symbols' names (``s53``), for :func:`_holds`."""
    printer = PythonPrinter()
    return [printer.doprint(guard.expr) for guard in guards]


def _holds(code, names: dict) -> bool:
    from torch.fx.experimental.symbolic_shapes import SYMPY_INTERP

    try:
        return bool(eval(code, SYMPY_INTERP, names))
    except (ZeroDivisionError, ValueError):  # a window count of 0: the guard cannot hold there
        return False


def _first_failing(guards, checks, sizes: dict):
    """The first guard that fails at ``sizes`` (there is one: the walk stopped there)."""
    names = {str(name): value for name, value in sizes.items()}
    return next(guard for guard, code in zip(guards, checks) if not _holds(code, names))


def _in_source_names(shape_env, expr) -> str:
    """``expr`` printed over the inputs' sizes (``L['x'].size()[1]``), as torch words guards."""
    names = {symbol: sympy.Symbol(shape_env.var_to_sources[symbol][0].name)
             for symbol in expr.free_symbols if shape_env.var_to_sources.get(symbol)}
    return PythonPrinter().doprint(expr.xreplace(names))


def _dynamic_dims(program) -> dict[tuple[int, int], tuple[sympy.Symbol, tuple[int, int]]]:
    """(tensor input index, axis) → (its size symbol, the program's range for it)."""
    dims = {}
    for index, _, value in _user_input_values(program):
        for axis, size in enumerate(value.shape):
            if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol):
                dims[(index, axis)] = (size.node.expr, _valid_range(size))
    return dims


def _shape_env(program):
    for _, _, value in _user_input_values(program):
        for size in value.shape:
            if isinstance(size, torch.SymInt):
                return size.node.shape_env
    return None


def _model_line(guard) -> SourceLocation | None:
    """The frame torch recorded for ``guard`` when it is the model's code, else None (torch
    records the innermost frame outside a short list of its own files: its kernels' and
    layout checks' frames are torch's)."""
    frame = getattr(getattr(guard, "sloc", None), "framework_loc", None)
    if not hasattr(frame, "filename") or not frame.lineno or not is_model_file(frame.filename):
        return None
    return SourceLocation(frame.filename, frame.lineno, getattr(frame, "name", None))
