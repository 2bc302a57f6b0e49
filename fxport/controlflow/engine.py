"""Convert one function: apply the converters in order around the analysis.

1. parse the function (:class:`~fxport.controlflow.context.Context`);
2. canonicalisations (``return``, ``break``/``continue`` → flags);
3. facts of every ``if``/``while``/``for`` (:func:`fxport.controlflow.facts.analyze`) — the
   cost of running both branches is judged here, on the statements as written;
4. expression converters (``a if c else b``, ``and``/``or``/``not``, indexing, call sites);
5. facts refreshed on the rewritten expressions (names read/written, liveness);
6. statement converters, dispatched by statement type over the blocks;
7. finalisations of the converted function (``del`` of names bound in outlined blocks only);
8. a factory ``_fx_factory(_fx, _fx_meta, *closure cells)`` returning the converted function.

The converters are :data:`fxport.controlflow.converters.CONVERTERS`; nothing here names one.

Example::

    >>> def f(x):
    ...     return x if x > 0 else -x
    >>> result = convert_function(f)
    >>> result.factory_name, [info.kind for info in result.infos]
    ('_fx_factory', ['ifexp'])
"""

from __future__ import annotations

import ast
import copy
import dataclasses

from fxport.controlflow import facts
from fxport.controlflow.astutil import META, RUNTIME, at, function, located, name
from fxport.controlflow.context import Context
from fxport.controlflow.converters import CONVERTERS
from fxport.controlflow.operators.info import FunctionSource, StatementInfo


@dataclasses.dataclass
class ConvertedCode:
    """The result of converting one function: compiled factory code plus its metadata."""

    module: ast.Module
    factory_name: str
    freevars: tuple[str, ...]
    infos: list[StatementInfo]
    source: FunctionSource


def convert_function(fn, converters: list[type] = CONVERTERS) -> ConvertedCode:
    """Parse and convert ``fn``'s source (see the module docstring)."""
    ctx = Context(fn)
    for converter in _of_stage(converters, "canonicalize"):
        converter(ctx).apply()
    ctx.facts = facts.analyze(ctx.fdef, ctx.break_flags)
    for converter in _of_stage(converters, "expressions"):
        converter(ctx).apply()
    ctx.facts = ctx.facts.refreshed(ctx.fdef)
    ctx.statement_converters = {c.node_type: c(ctx) for c in _of_stage(converters, "statements")}
    fdef = ctx.fdef
    fdef.body = ctx.convert_block(fdef.body, set(ctx.params))
    for converter in _of_stage(converters, "finalize"):
        converter(ctx).apply()
    freevars = tuple(fn.__code__.co_freevars)
    factory = _factory(fdef, freevars)
    module = ast.Module(body=[factory], type_ignores=[])
    located(module, fdef)
    ast.fix_missing_locations(module)
    ctx.function_source.after = ast.unparse(fdef)
    return ConvertedCode(module, factory.name, freevars, ctx.infos, ctx.function_source)


def _of_stage(converters: list[type], stage: str) -> list[type]:
    return [c for c in converters if c.stage == stage]


def _factory(fdef: ast.FunctionDef, freevars: tuple[str, ...]) -> ast.FunctionDef:
    """``def _fx_factory(_fx, _fx_meta, *freevars): <fdef>; return <fdef.name>``.

    A function whose body reads its own name (a method ``maxmul`` calling the module's function
    ``maxmul``) is defined in the factory as ``_fx_def_<name>``: under its own name it would be a
    local of the factory, and the body's ``maxmul`` would call the method itself instead of the
    global Python finds (install.py gives the function its name back)."""
    inner = fdef
    if any(isinstance(n, ast.Name) and n.id == fdef.name and isinstance(n.ctx, ast.Load) for n in ast.walk(fdef)):
        inner = copy.copy(fdef)  # the same body under another name; converted_source shows fdef
        inner.name = f"_fx_def_{fdef.name}"
    ret = at(ast.Return(value=name(inner.name)), fdef)
    return function("_fx_factory", (RUNTIME, META) + freevars, [inner, ret], fdef)
