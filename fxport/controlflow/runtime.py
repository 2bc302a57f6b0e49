"""Trace-time operators called by converted code (``_fx.if_stmt`` and friends).

Dispatch happens when the code runs, not when it is converted: a predicate that is a Python
bool (or a tensor outside of export) runs as plain Python; a tensor or SymBool predicate seen
while exporting becomes ``torch.where`` / ``torch.cond`` / ``while_loop``.

Example::

    >>> import torch
    >>> from fxport.controlflow import runtime as _fx
    >>> _fx.if_stmt(True, lambda x: (x + 1,), lambda x: (x - 1,), (1,), None)
    (2,)
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import re
import types
from typing import Callable

import torch
import torch.utils._pytree as pytree
from torch.fx.experimental.symbolic_shapes import has_static_value, statically_known_true

from fxport.controlflow.canonicalize import RETVAL
from fxport.errors import ControlFlowError, SourceLocation
from fxport.report import AppliedRewrite

# --- session state ----------------------------------------------------------------------------


@dataclasses.dataclass
class _Session:
    strategy: str = "auto"
    records: list = dataclasses.field(default_factory=list)
    seen: set = dataclasses.field(default_factory=set)


_SESSION: list[_Session] = []


@contextlib.contextmanager
def session(strategy: str, records: list):
    """Make ``strategy`` and ``records`` current while converted code runs."""
    _SESSION.append(_Session(strategy, records))
    try:
        yield
    finally:
        _SESSION.pop()


@contextlib.contextmanager
def records_rolled_back_on_failure():
    """Drop the records made in the block when it raises (a capture attempt that is retried)."""
    if not _SESSION:
        yield
        return
    current = _SESSION[-1]
    count, seen = len(current.records), set(current.seen)
    try:
        yield
    except BaseException:
        del current.records[count:]
        current.seen = seen
        raise


_COVERAGE: list[list] = []


@contextlib.contextmanager
def coverage():
    """Collect ``(location, outcome)`` for statements run as plain Python (eager), e.g. in tests.

    Outcome is ``True``/``False`` for an ``if`` and the trip count for a loop.
    """
    seen: list = []
    _COVERAGE.append(seen)
    try:
        yield seen
    finally:
        _COVERAGE.pop()


def _note(info, outcome) -> None:
    if _COVERAGE and info is not None:
        _COVERAGE[-1].append((info.kind, info.location, outcome))


def _strategy() -> str:
    return _SESSION[-1].strategy if _SESSION else "auto"


_PROBING = [0]  # > 0 while a loop body runs once outside the loop to learn its types


@contextlib.contextmanager
def probing():
    """Run a loop body as the loop will (nested ifs select with where), without recording."""
    if torch.compiler.is_dynamo_compiling():  # already in a traced body; no state to change
        yield
        return
    _PROBING[0] += 1
    try:
        yield
    finally:
        _PROBING[0] -= 1


def _in_traced_body() -> bool:
    return torch.compiler.is_dynamo_compiling() or _PROBING[0] > 0


def _record(info, rule: str, detail: str, **data) -> None:
    if not _SESSION or info is None or _in_traced_body():
        return
    current = _SESSION[-1]
    key = (id(info), rule, detail)
    if key in current.seen:
        return
    current.seen.add(key)
    payload = {"construct": info.kind, "variables": list(info.names), **data}
    if info.function is not None:
        payload["source_before"] = info.function.before
        payload["source_after"] = info.function.after
    current.records.append(
        AppliedRewrite(rule=rule, tier="control-flow", location=info.location, detail=detail, data=payload)
    )
    for child in getattr(info, "children", ()):
        outer = rule.split("-to-")[-1]
        _record(child, f"{child.kind}-in-traced-body", f"dispatched inside the {outer} body of line {info.location.lineno}",
                lowering=f"decided while {outer} traced its body (where/while_loop)", carried=list(child.names))


# --- values -----------------------------------------------------------------------------------


class Undefined:
    """Stands for a variable that has no value yet on this path; any use is an error."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"Undefined({self.name!r})"

    def __bool__(self):
        raise NameError(f"local variable {self.name!r} is not defined on this path")

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise NameError(f"local variable {self.name!r} is not defined on this path")


_SCALAR_TYPES = (bool, int, float, torch.SymBool, torch.SymInt, torch.SymFloat)


def _is_symbolic(value) -> bool:
    """True for a SymBool/SymInt/SymFloat whose value is not fixed (e.g. ``x.shape[0] > 3``).

    Inside a body dynamo traces (a cond branch, a while_loop body) a symbolic scalar passes
    ``isinstance(v, bool/int/float)`` and fails ``isinstance(v, torch.SymBool)``, and Python's
    ``if v:`` would silently specialise it to the example's value. torch's ``has_static_value``
    answers correctly in both worlds, so every check goes through here.
    """
    if isinstance(value, torch.Tensor) or not isinstance(value, _SCALAR_TYPES):
        return False
    return not has_static_value(value)


def _is_bool_like(value) -> bool:
    return isinstance(value, (bool, torch.SymBool))


def _is_traced(value) -> bool:
    """True for a symbolic scalar (:func:`_is_symbolic`), or a tensor seen while exporting."""
    if isinstance(value, torch.Tensor):
        return torch.compiler.is_exporting() or torch.compiler.is_dynamo_compiling()
    return _is_symbolic(value)


class _FailureInTracedBody(Exception):
    """A :class:`ControlFlowError` raised inside a body dynamo traces (a cond branch).

    Dynamo cannot build fxport's error there, and it reports a raised exception only by its
    repr, so the parts travel as constant args that :func:`_find_error` reads back.
    """


def _fail(what: str, info, hint: str):
    where = info.location if info is not None else None
    if torch.compiler.is_dynamo_compiling():
        parts = (where.filename, where.lineno, where.function) if where is not None else (None, None, None)
        raise _FailureInTracedBody(what, *parts, hint)
    raise ControlFlowError(what, where=where, hint=hint)


_TRACED_FAILURE = re.compile(r"raised exception _FailureInTracedBody(\(.*\))")


def _failure_from_text(text: str) -> ControlFlowError | None:
    """The ControlFlowError a traced body raised, read back from dynamo's report of it."""
    match = _TRACED_FAILURE.search(text)
    if match is None:
        return None
    try:
        return _error_from_parts(*ast.literal_eval(match.group(1)))
    except (ValueError, SyntaxError, TypeError):
        return None


def _error_from_parts(what: str, filename, lineno, function, hint) -> ControlFlowError:
    """The ControlFlowError whose parts ``_fail`` raised as ``_FailureInTracedBody`` args."""
    where = SourceLocation(filename, lineno, function) if filename is not None else None
    return ControlFlowError(what, where=where, hint=hint)


def _predicate(pred, info):
    """A bool scalar tensor (or SymBool) for a traced condition."""
    if not isinstance(pred, torch.Tensor):
        return pred if _is_bool_like(pred) else pred != 0
    if pred.dim() > 0 and not all(isinstance(s, int) and s == 1 for s in pred.shape):
        _fail(f"{info.kind} condition is a tensor of shape {tuple(pred.shape)}, not a single value", info,
              "reduce it with .any()/.all() or compare a single element")
    pred = pred.reshape(())
    return pred if pred.dtype == torch.bool else pred != 0


def _scalar(value, dtype=None):
    """A 0-d tensor for a Python/Sym number, built with ``full`` (a pure op, unlike as_tensor)."""
    if dtype is None:
        if isinstance(value, (bool, torch.SymBool)):
            dtype = torch.bool
        elif isinstance(value, (int, torch.SymInt)):
            dtype = torch.int64
        else:
            dtype = torch.get_default_dtype()
    return torch.full((), value, dtype=dtype)


def _as_bool_tensor(pred):
    if isinstance(pred, torch.Tensor):
        return pred.reshape(()).to(torch.bool) if pred.dtype != torch.bool else pred.reshape(())
    if _is_symbolic(pred):
        return torch.full((), pred if _is_bool_like(pred) else pred != 0, dtype=torch.bool)
    return torch.full((), bool(pred), dtype=torch.bool)


# --- boolean operators ------------------------------------------------------------------------


def and_(left: Callable, right: Callable):
    """``a and b``: Python semantics for Python values, logical_and for traced tensors."""
    a = left()
    if not _is_traced(a):
        return a and right()
    b = right()
    return torch.logical_and(_as_bool_tensor(a), _as_bool_tensor(b))


def or_(left: Callable, right: Callable):
    """``a or b``: Python semantics for Python values, logical_or for traced tensors."""
    a = left()
    if not _is_traced(a):
        return a or right()
    b = right()
    return torch.logical_or(_as_bool_tensor(a), _as_bool_tensor(b))


def not_(value):
    """``not a``."""
    if _is_symbolic(value):
        return torch.sym_not(value) if _is_bool_like(value) else value == 0
    if _is_traced(value):
        return torch.logical_not(_as_bool_tensor(value))
    return not value


# --- if -----------------------------------------------------------------------------------------


def ifexp(pred, true_thunk: Callable, false_thunk: Callable, info):
    """``a if c else b``."""
    if not _is_traced(pred):
        _note(info, bool(pred))
        return true_thunk() if pred else false_thunk()
    (out,) = if_stmt(pred, lambda: (true_thunk(),), lambda: (false_thunk(),), (), info)
    return out


def if_stmt(pred, true_fn: Callable, false_fn: Callable, args: tuple, info):
    """Run an outlined ``if``: plain Python, ``torch.where`` or ``torch.cond`` (see module doc)."""
    if not _is_traced(pred):
        _note(info, bool(pred))
        return true_fn(*args) if pred else false_fn(*args)
    _check_side_effects(info, "if")
    pred = _predicate(pred, info)
    _check_defined_in_both(args, info)
    _check_appends(args, info)
    strategy = _strategy()
    reason = None
    if any(isinstance(a, _Appender) for a in args):
        strategy = "where"  # appends under a condition: select buffer and length
    elif _in_traced_body() and strategy != "where":
        return _if_in_loop_body(pred, true_fn, false_fn, args, info)
    if strategy == "where" or (strategy == "auto" and not info.expensive):
        outs = _if_where(pred, true_fn, false_fn, args, info, forced=strategy == "where")
        if not isinstance(outs, str):
            return outs
        reason = outs
    elif strategy == "cond":
        reason = "forced by strategy='cond'"
    else:
        reason = "; ".join(info.expensive)
    return _if_cond(pred, true_fn, false_fn, args, info, reason)


def _check_side_effects(info, construct: str) -> None:
    if info is not None and info.side_effects:
        _fail(f"{construct} on a tensor condition has a side effect the converter cannot carry "
              f"({info.side_effects[0]})", info,
              "move the side effect out of the branch or make the condition a Python value")


def _if_in_loop_body(pred, true_fn, false_fn, args, info):
    """Inside a traced cond/while_loop body: select with where.

    torch.onnx (2.13) cannot export a cond nested in a while_loop body, so nested ifs are
    lowered with where whenever the branches have the same shape.
    """
    outs = _if_where(pred, true_fn, false_fn, args, info, forced=False,
                     detail="where: nested in a traced cond/while_loop body (torch.onnx cannot export If inside Loop)")
    if isinstance(outs, str):
        _fail(f"if inside a data-dependent loop has branches of different shapes ({outs})", info,
              "make both branches produce the same shape (torch.onnx cannot export If nested in Loop)")
    return outs


def _check_appends(args: tuple, info) -> None:
    for name, value in zip(info.params, args):
        if name in info.appended and not isinstance(value, _Appender):
            _fail(f"if on a tensor condition appends to the outer list {name!r}", info,
                  "append unconditionally inside a loop, or select the value with torch.where before appending")


def _check_defined_in_both(args: tuple, info) -> None:
    defined_in = getattr(info, "branch_writes", None)
    if defined_in is None:
        return
    true_writes, false_writes = defined_in
    incoming = dict(zip(info.params, args))
    for name in info.names:
        undefined_before = isinstance(incoming.get(name), Undefined)
        in_true, in_false = name in true_writes, name in false_writes
        if undefined_before and not (in_true and in_false):
            branch = "true" if in_true else "false"
            other = "else" if in_true else "if"
            _fail(f"if: variable {name!r} is defined only in the {branch} branch and used afterwards", info,
                  f"give {name!r} a value before the if or in the {other} branch too")


def _fresh(args: tuple, info) -> list:
    """Branch inputs; in-place mutated tensors are cloned so the other branch sees the original."""
    mutated = set(info.mutated)
    fresh = []
    for name, a in zip(info.params, args):
        if isinstance(a, _Appender):
            a = a.copy()
        elif isinstance(a, torch.Tensor) and name in mutated:
            a = a.clone()
        fresh.append(a)
    return fresh


def _if_where(pred, true_fn, false_fn, args, info, forced: bool, detail: str | None = None):
    true_out, false_out = _return_value_on_both_paths(true_fn(*_fresh(args, info)), false_fn(*_fresh(args, info)), info)
    leaves_t, spec_t = pytree.tree_flatten(true_out)
    leaves_f, spec_f = pytree.tree_flatten(false_out)
    names = _leaf_names(true_out, info)
    if spec_t != spec_f:
        _fail(f"if: the branches produce differently structured values for {_first_diff(spec_t, spec_f, info)!r}", info,
              "make both branches assign values of the same structure")
    mask = _as_bool_tensor(pred)
    selected = []
    for name, a, b in zip(names, leaves_t, leaves_f):
        _check_pair(name, a, b, info)
        shape_problem = _shape_mismatch(a, b)
        if shape_problem:
            if forced:
                _fail(f"if: strategy='where' is impossible: {name!r} has shape {shape_problem}", info,
                      "use strategy='auto' or 'cond'")
            return f"{name!r} has shape {shape_problem}"
        selected.append(_select(mask, a, b))
    detail = detail or ("where: forced by strategy='where'" if forced else "where: pure cheap branches, same dtype and shape")
    _record(info, f"{info.kind}-to-where", detail, lowering="torch.where")
    return pytree.tree_unflatten(selected, spec_t)


def _return_value_on_both_paths(true_out, false_out, info):
    """A ``return`` inside a loop sets the return value on one path only (None on the other).

    The value is read only where the return flag set with it is true, so the path that did not
    return may carry the other path's value: the select then needs no value that does not exist.
    """
    if RETVAL not in info.names:
        return true_out, false_out
    slot = info.names.index(RETVAL)
    a, b = true_out[slot], false_out[slot]
    if (a is None) == (b is None):
        return true_out, false_out
    value = b if a is None else a
    return _replaced(true_out, slot, value), _replaced(false_out, slot, value)


def _replaced(outs, slot: int, value) -> tuple:
    outs = list(outs)
    outs[slot] = value
    return tuple(outs)


def _leaf_names(outs, info) -> list[str]:
    names = []
    for name, value in zip(info.names, outs):
        count = len(pytree.tree_leaves(value))
        names.extend([name] * count if count != 1 else [name])
    return names


def _first_diff(spec_t, spec_f, info) -> str:
    for name, a, b in zip(info.names, spec_t.children_specs, spec_f.children_specs):
        if a != b:
            return name
    return info.names[0] if info.names else "?"


def _check_pair(name: str, a, b, info) -> None:
    for side, value in (("true", a), ("false", b)):
        if isinstance(value, Undefined):
            _fail(f"if: variable {name!r} is not defined in the {side} branch and used afterwards", info,
                  f"give {name!r} a value before the if or in both branches")
    if (a is None) != (b is None):
        side = "true" if a is None else "false"
        _fail(f"if: {name!r} is None in the {side} branch but a value in the other", info,
              "give both branches a value of the same kind")
    ta, tb = isinstance(a, torch.Tensor), isinstance(b, torch.Tensor)
    if ta and tb and a.dtype != b.dtype:
        _fail(f"if: {name!r} is {_dtype(a)} in the true branch but {_dtype(b)} in the false branch", info,
              "cast both branches to the same dtype")
    if ta != tb and not (_is_number(a) or _is_number(b)):
        _fail(f"if: {name!r} is a tensor in one branch and {type(b if ta else a).__name__} in the other", info,
              "give both branches a tensor")
    if ta != tb:
        tensor, number = (a, b) if ta else (b, a)
        if isinstance(number, (float, torch.SymFloat)) and not tensor.dtype.is_floating_point:
            _fail(f"if: {name!r} is {_dtype(tensor)} in one branch but a Python {type(number).__name__} in the other", info,
                  "use the same dtype in both branches")
    if not ta and not tb and not (_is_number(a) and _is_number(b)) and a is not b and a != b:
        _fail(f"if: {name!r} is a Python {type(a).__name__} that differs between the branches", info,
              "make it a tensor or keep it the same in both branches")


def _dtype(t) -> str:
    return str(t.dtype).replace("torch.", "")


def _is_number(value) -> bool:
    return isinstance(value, (bool, int, float, torch.SymInt, torch.SymFloat, torch.SymBool))


def _shape_mismatch(a, b) -> str | None:
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return None
    if a.dim() != b.dim() or not all(_same_size(x, y) for x, y in zip(a.shape, b.shape)):
        return f"{tuple(a.shape)} in the true branch but {tuple(b.shape)} in the false branch"
    return None


def _same_size(x, y) -> bool:
    return statically_known_true(x == y)


def size_relations(tensors) -> list[tuple[int, int, int, int]]:
    """``(i, axis_i, j, axis_j)`` for symbolic sizes of ``tensors`` known equal here.

    torch traces a cond branch or while_loop body with dynamo, which gives each operand fresh
    size symbols: inside, ``x.shape[0] == g.shape[0]`` is no longer known even when both are
    the batch size outside. :func:`restore_size_relations` re-states these facts in the body.
    """
    known: list[tuple[int, int, object]] = []
    relations = []
    for i, tensor in enumerate(tensors):
        if not isinstance(tensor, torch.Tensor):
            continue
        for axis, size in enumerate(tensor.shape):
            if not _is_symbolic(size):
                continue
            match = next(((j, axis_j) for j, axis_j, other in known if _same_size(size, other)), None)
            if match is None:
                known.append((i, axis, size))
            else:
                relations.append((i, axis) + match)
    return relations


def restore_size_relations(tensors, relations) -> None:
    """Inside a traced body: ``torch._check`` the size equalities that held outside."""
    for i, axis_i, j, axis_j in relations:
        torch._check(tensors[i].shape[axis_i] == tensors[j].shape[axis_j])


def _select(mask, a, b):
    """``torch.where(mask, a, b)``; bool values use logic ops (onnxruntime has no bool Where)."""
    if a is b:
        return a
    a_is_tensor, b_is_tensor = isinstance(a, torch.Tensor), isinstance(b, torch.Tensor)
    if not a_is_tensor and not b_is_tensor:
        if not _is_symbolic(a) and not _is_symbolic(b) and a == b and type(a) is type(b):
            return a
        a, b = _scalar(a), _scalar(b)
        a, b = a.to(torch.promote_types(a.dtype, b.dtype)), b.to(torch.promote_types(a.dtype, b.dtype))
    elif not a_is_tensor:
        a = _scalar(a, b.dtype)
    elif not b_is_tensor:
        b = _scalar(b, a.dtype)
    if a.dtype == torch.bool:
        return torch.logical_or(torch.logical_and(mask, a), torch.logical_and(torch.logical_not(mask), b))
    return torch.where(mask, a, b)


def _if_cond(pred, true_fn, false_fn, args, info, reason: str):
    tensor_slots = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
    operands = tuple(_dense(args[i]) for i in tensor_slots)
    relations = size_relations(operands)

    def branch(fn, side):
        def run(*tensors):
            restore_size_relations(tensors, relations)
            full = list(args)
            for slot, tensor in zip(tensor_slots, tensors):
                full[slot] = tensor.clone() if info.params[slot] in info.mutated else tensor
            outs = fn(*full)
            return tuple(
                pytree.tree_map(lambda leaf, name=name: _cond_leaf(name, leaf, tensors, info, side), value, is_leaf=_is_none)
                for name, value in zip(info.names, outs)
            )

        return run

    if isinstance(pred, torch.Tensor):
        pred = _dense(pred)  # a view of a while_loop output cannot be lifted by dynamo (fuzzer find)
    try:
        outs = torch.cond(pred, branch(true_fn, "true"), branch(false_fn, "false"), operands)
    except Exception as exc:  # surface our own error raised while torch traced a branch
        inner = _find_error(exc)
        if inner is not None:
            raise inner from None
        raise
    _record(info, f"{info.kind}-to-cond", f"cond: {reason}", lowering="torch.cond")
    return tuple(outs)


def _is_none(value) -> bool:
    return value is None


def _cond_leaf(name, leaf, inputs, info, side):
    if isinstance(leaf, Undefined):
        _fail(f"if: variable {name!r} is not defined in the {side} branch and used afterwards", info,
              f"give {name!r} a value before the if or in both branches")
    if leaf is None:
        if name == RETVAL:  # where-selected ifs borrow the other path's value; a cond branch cannot
            _fail("if: a return under a tensor condition inside a loop returns on one path and goes on on the other, "
                  "which a traced loop body cannot express", info,
                  "assign the result to a variable, break, and return once after the loop")
        _fail(f"if: {name!r} is None in the {side} branch", info, "give both branches a tensor value")
    if _is_number(leaf):
        return _scalar(leaf)
    if not isinstance(leaf, torch.Tensor):
        _fail(f"if: {name!r} is a {type(leaf).__name__}, which torch.cond cannot return", info,
              "return tensors from data-dependent branches")
    return _dense(leaf)  # outputs may not alias inputs or closed-over tensors


def _dense(tensor):
    """A fresh contiguous copy: no aliasing, and static strides (dynamo cannot lift a view with
    symbolic strides into a higher-order op)."""
    return tensor.clone(memory_format=torch.contiguous_format)


def _find_error(exc: BaseException):
    seen = set()
    todo = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, ControlFlowError):
            return current
        if isinstance(current, _FailureInTracedBody):
            return _error_from_parts(*current.args)
        from_text = _failure_from_text(str(current))
        if from_text is not None:
            return from_text
        todo.extend([current.__cause__, current.__context__])
        for arg in getattr(current, "args", ()):
            if isinstance(arg, BaseException):
                todo.append(arg)
    return None


# --- calls --------------------------------------------------------------------------------------

_CONVERTED: dict = {}


def call(f):
    """The converted version of a user function/method ``f`` (lazily), else ``f`` itself."""
    if isinstance(f, types.MethodType):
        converted = _lookup(f.__func__)
        # functools.partial rather than MethodType: dynamo traces partial, not method construction
        return functools.partial(converted, f.__self__) if converted is not None else f
    if isinstance(f, types.FunctionType):
        converted = _lookup(f)
        return converted if converted is not None else f
    if isinstance(f, functools.partial) and isinstance(f.func, (types.FunctionType, types.MethodType)):
        inner = call(f.func)
        return f if inner is f.func else functools.partial(inner, *f.args, **f.keywords)
    return f


def _lookup(fn):
    if fn in _CONVERTED:
        return _CONVERTED[fn]
    if torch.compiler.is_dynamo_compiling():
        return None
    from fxport.controlflow.install import converted_function

    return converted_function(fn)


# --- indexing -----------------------------------------------------------------------------------


def _is_traced_index(index) -> bool:
    return (
        isinstance(index, torch.Tensor)
        and _is_traced(index)
        and index.dim() == 0
        and not index.dtype.is_floating_point
        and index.dtype != torch.bool
    )


def getitem(value, index):
    """``value[index]``; a traced 0-d integer index becomes index_select (no .item() guard)."""
    if not isinstance(value, torch.Tensor):
        return value[index]
    parts = index if isinstance(index, tuple) else (index,)
    if not any(_is_traced_index(p) for p in parts):
        return value[index]
    result, dim = value, 0
    squeeze = []
    for part in parts:
        if _is_traced_index(part):
            size = result.shape[dim]
            position = torch.where(part < 0, part + size, part).reshape(1).to(torch.int64)
            result = torch.index_select(result, dim, position)
            squeeze.append(dim)
            dim += 1
        elif isinstance(part, slice):
            result = result[(slice(None),) * dim + (part,)]
            dim += 1
        elif isinstance(part, int):
            result = torch.narrow(result, dim, part if part >= 0 else part + result.shape[dim], 1)
            squeeze.append(dim)
            dim += 1
        else:
            return value[index]
    for d in reversed(squeeze):
        result = result.squeeze(d)
    return result


def setitem(target, index, value):
    """``target[index] = value``; with a traced 0-d index the tensor is updated functionally."""
    if isinstance(target, torch.Tensor) and _is_traced_index(index):
        position = torch.where(index < 0, index + target.shape[0], index).reshape(1).to(torch.int64)
        value = _scalar(value, target.dtype) if not isinstance(value, torch.Tensor) else value.to(target.dtype)
        return torch.index_put(target, (position,), value.unsqueeze(0) if value.dim() else value)
    if not isinstance(target, torch.Tensor) and (_is_traced(index) or _is_traced(value)) and torch.compiler.is_dynamo_compiling():
        from fxport.errors import here

        raise ControlFlowError(
            f"a {type(target).__name__} is changed with [...] = inside a data-dependent loop or branch",
            where=here(),
            hint="use a preallocated tensor (buf[i] = v) or append to a list and torch.stack it",
        )
    target[index] = value
    return target


# --- loops (kept in loops.py; re-exported so generated code only needs `_fx`) ----------------

from fxport.controlflow.loops import (  # noqa: E402  (loops uses the helpers above)
    TensorRange,
    _Appender,
    cat,
    for_stmt,
    int_,
    range_,
    stack,
    while_stmt,
)
