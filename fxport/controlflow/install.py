"""Apply the converter to a module for the duration of a ``with`` block.

Example::

    >>> import torch
    >>> from examples.gated_mlp import GatedMLP
    >>> from fxport.controlflow import convert_control_flow
    >>> model = GatedMLP()
    >>> with convert_control_flow(model, strategy="auto") as records:
    ...     ep = torch.export.export(model, (torch.randn(3, 8),), strict=False)
    >>> [r.rule for r in records]
    ['if-to-cond', 'ifexp-to-where']
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import types
from typing import Callable, Iterable, Iterator

import torch
import torch.fx.proxy

from fxport.engine.choices import IF_STRATEGIES
from fxport.controlflow import operators
from fxport.controlflow.operators.containers import register_library_containers
from fxport.controlflow.operators.lists.carried import check_not_returned
from fxport.controlflow.operators.optional import check_no_maybe_none
from fxport.controlflow.engine import convert_function
from fxport.errors import ControlFlowError, SourceLocation, UsageError
from fxport.common.frames import is_user_file
from fxport.report.result import AppliedRewrite

STRATEGIES = IF_STRATEGIES  # one definition, shared with the CLI (fxport/engine/choices.py)

# original function -> converted function (None: not user code, left alone); shared with the
# call operator, which converts the user functions it meets through converted_function
_CONVERTED: dict[Callable, Callable | None] = operators.CONVERTED
# functions met at call sites that are not user code (called as they are). Kept apart from
# _CONVERTED, which dynamo reads (and guards on) when it traces a call site in a cond branch or
# loop body: a library method first met while dynamo traces such a body (a transformers cache's
# update) would otherwise enter _CONVERTED during that trace and fail dynamo's guard on it
_LEFT_ALONE: set = set()


def _code_file(fn) -> str | None:
    code = getattr(fn, "__code__", None)
    return code.co_filename if code is not None else None


def converted_function(fn: Callable) -> Callable | None:
    """The converted version of a user function (cached), or None when ``fn`` is not user code.

    Example::

        >>> conv = converted_function(Net.forward)            # doctest: +SKIP
        >>> conv(net, x)                                      # doctest: +SKIP
    """
    if fn in _CONVERTED:
        return _CONVERTED[fn]
    if getattr(fn, "__fxport_source__", None) is not None:  # converted already (a module's installed forward)
        return fn
    if fn in _LEFT_ALONE:
        return None
    original = fn
    fn = inspect.unwrap(fn) if isinstance(fn, types.FunctionType) else fn
    if not _convertible(fn):
        _LEFT_ALONE.add(original)
        return None
    _CONVERTED[original] = None  # recursion guard: a recursive call site uses the original meanwhile
    converted = _build(fn)
    _CONVERTED[original] = _CONVERTED[fn] = converted
    _prewarm(fn)
    return converted


operators.use_converter(converted_function)  # call sites in converted code convert user functions lazily


def _convertible(fn) -> bool:
    """User-defined plain functions; not lambdas, generators or coroutines."""
    if not isinstance(fn, types.FunctionType) or fn.__name__ == "<lambda>":
        return False
    if fn.__code__.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        return False
    return is_user_file(_code_file(fn))


def _build(fn: types.FunctionType) -> Callable:
    try:
        inspect.getsourcelines(fn)
    except (OSError, TypeError):
        raise ControlFlowError(
            f"cannot convert {fn.__qualname__}: its source code is not available",
            where=SourceLocation(fn.__code__.co_filename, fn.__code__.co_firstlineno, fn.__qualname__),
            hint="define it in a .py file (not the REPL or exec) so fxport can read it",
        ) from None
    try:
        result = convert_function(fn)
        code = compile(result.module, result.source.filename, "exec")
    except ControlFlowError:
        raise
    except Exception as exc:  # an unsupported construct: say where, never a bare traceback
        raise ControlFlowError(
            f"cannot convert {fn.__qualname__}: {type(exc).__name__}: {exc}",
            where=SourceLocation(fn.__code__.co_filename, fn.__code__.co_firstlineno, fn.__qualname__),
            hint="simplify the function's control flow or report this to fxport",
        ) from exc
    _register_stack_trace_anchors(code, result.factory_name)
    namespace: dict = {}
    exec(code, fn.__globals__, namespace)
    cells = [_cell_value(c, name) for c, name in zip(fn.__closure__ or (), result.freevars)]
    factory, key = namespace[result.factory_name], operators.info.register(result.infos)
    converted = factory(operators, key, *cells)
    if cells and fn.__defaults__ is None and fn.__kwdefaults__ is None:  # made again bound to a body's values
        operators.calls.REBUILDS[converted] = (factory, operators, key, result.freevars, tuple(cells))
    converted.__name__, converted.__qualname__ = fn.__name__, fn.__qualname__  # engine._factory may rename it
    converted.__defaults__ = fn.__defaults__
    converted.__kwdefaults__ = fn.__kwdefaults__
    converted.__wrapped_original__ = fn
    converted.__fxport_source__ = result.source
    return converted


def _register_stack_trace_anchors(code: types.CodeType, factory_name: str) -> None:
    """Keep the converted function and its outlined branches/bodies in node stack traces.

    torch.export keeps only frames named ``forward`` (or registered anchors) in
    ``node.meta["stack_trace"]``; registering the generated code objects makes the innermost
    frame the user's own line inside a branch or loop body.
    """
    register = getattr(torch.fx.proxy, "_register_stack_trace_anchor", None)
    if register is None:
        return
    todo = [c for c in code.co_consts if isinstance(c, types.CodeType)]
    while todo:
        current = todo.pop()
        if current.co_name not in (factory_name, "<lambda>"):
            register(types.SimpleNamespace(__code__=current))
        todo.extend(c for c in current.co_consts if isinstance(c, types.CodeType))


def _cell_value(cell, name: str):
    try:
        return cell.cell_contents
    except ValueError:
        return operators.Undefined(name)


def _prewarm(fn: types.FunctionType) -> None:
    """Convert the user functions ``fn`` calls by global name now, not inside a traced body."""
    for name in fn.__code__.co_names:
        target = fn.__globals__.get(name)
        if isinstance(target, types.FunctionType):
            converted_function(target)


def _prewarm_methods(module: torch.nn.Module, fn: types.FunctionType, seen: set | None = None) -> None:
    """Convert the methods ``fn`` calls on ``self`` (and theirs) before tracing starts."""
    seen = seen if seen is not None else {fn}
    for name in fn.__code__.co_names:
        target = inspect.getattr_static(type(module), name, None)
        if isinstance(target, (staticmethod, classmethod)):
            target = target.__func__
        if isinstance(target, types.FunctionType) and target not in seen:
            seen.add(target)
            if converted_function(target) is not None:
                _prewarm_methods(module, target, seen)


def _outputs_checked(converted: Callable) -> Callable:
    """The root module's converted forward, refusing a data-sized list among its outputs."""
    @functools.wraps(converted)
    def forward(*args, **kwargs):
        outputs = converted(*args, **kwargs)
        check_not_returned(outputs)
        check_no_maybe_none(outputs, converted)
        return outputs

    return forward


def converted_source(fn: Callable) -> str:
    """The source of ``fn`` after control-flow conversion (what ``fxport diff`` shows).

    Example::

        >>> print(converted_source(Net.forward))   # doctest: +SKIP
        def forward(self, x):
            def _fx_true_0(y): ...
    """
    fn = getattr(fn, "__func__", fn)
    fn = inspect.unwrap(fn)
    return convert_function(fn).source.after


def _user_modules(root: torch.nn.Module) -> Iterator[torch.nn.Module]:
    for module in root.modules():
        forward = inspect.getattr_static(type(module), "forward", None)
        if "forward" in module.__dict__ or not isinstance(forward, types.FunctionType):
            continue
        if is_user_file(_code_file(inspect.unwrap(forward))):
            yield module


@contextlib.contextmanager
def convert_control_flow(module: torch.nn.Module, strategy: str = "auto",
                         disabled: Iterable[str] = frozenset()) -> Iterator[list[AppliedRewrite]]:
    """Install converted forwards on ``module`` and its user submodules while the block runs.

    ``strategy``: ``"auto"`` (where for pure cheap branches, cond otherwise), ``"where"`` or
    ``"cond"`` (forced). Yields the list of :class:`~fxport.report.result.AppliedRewrite` records,
    filled while the model is captured. The module is restored on exit, even on error.

    ``disabled``: names from :data:`~fxport.controlflow.CONTROL_FLOW_RULES` whose conversion
    is switched off (unknown names are a UsageError). A disabled conversion is never produced,
    whatever the strategy: the statement gets what ``"auto"`` would give without it, and is
    left as written when nothing is left — it then runs as plain Python, so a capture fails on
    its tensor condition exactly as it would without fxport. So ``if-to-where`` disabled makes
    such ifs ``torch.cond``; ``if-to-cond`` disabled leaves an if that needs cond as Python
    (cheap pure branches still become where); ``while-to-while_loop`` / ``for-to-while_loop``
    disabled leave data-dependent loops as Python loops; inside a traced cond/while_loop body
    the rules are ``if-in-traced-body`` (also for ``a if c else b``), ``while-in-traced-body``
    and ``for-in-traced-body``. ``item-predicate-to-tensor`` is a graph pass of the rule set,
    accepted here and not acted on.

    Example::

        >>> with convert_control_flow(model, disabled={"if-to-where"}) as records:   # doctest: +SKIP
        ...     ep = torch.export.export(model, (x,), strict=False)
    """
    if strategy not in STRATEGIES:
        raise UsageError(f"unknown control-flow strategy {strategy!r}", hint=f"use one of {', '.join(STRATEGIES)}")
    disabled = frozenset(disabled)
    unknown = sorted(disabled - set(operators.CONTROL_FLOW_RULES))
    if unknown:
        raise UsageError(f"unknown control-flow rule {unknown[0]!r}",
                         hint=f"use one of {', '.join(operators.CONTROL_FLOW_RULES)}")
    register_library_containers()
    records: list[AppliedRewrite] = []
    installed: list[torch.nn.Module] = []
    try:
        for sub in _user_modules(module):
            forward = inspect.getattr_static(type(sub), "forward")
            converted = converted_function(forward)
            _prewarm_methods(sub, inspect.unwrap(forward))
            if converted is not None:
                if sub is module:
                    converted = _outputs_checked(converted)
                sub.__dict__["forward"] = types.MethodType(converted, sub)
                installed.append(sub)
        with operators.session(strategy, records, disabled):
            yield records
    finally:
        for sub in installed:
            sub.__dict__.pop("forward", None)
