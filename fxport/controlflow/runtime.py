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

import contextlib
import functools
import types
import dataclasses
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree

from fxport.errors import ControlFlowError
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


def _record(info, rule: str, detail: str, **data) -> None:
    if not _SESSION or info is None or torch.compiler.is_dynamo_compiling():
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


def maybe(thunk: Callable[[], Any], name: str):
    """The variable's value, or :class:`Undefined` when it is not bound yet."""
    try:
        return thunk()
    except NameError:
        return Undefined(name)


def _is_traced(value) -> bool:
    """True for a SymBool/SymInt, or a tensor seen while exporting (not eager)."""
    if isinstance(value, (torch.SymBool, torch.SymInt, torch.SymFloat)):
        return True
    if isinstance(value, torch.Tensor):
        return torch.compiler.is_exporting() or torch.compiler.is_dynamo_compiling()
    return False


def _fail(what: str, info, hint: str):
    raise ControlFlowError(what, where=info.location if info is not None else None, hint=hint)


def _predicate(pred, info):
    """A bool scalar tensor (or SymBool) for a traced condition."""
    if isinstance(pred, torch.SymBool):
        return pred
    if isinstance(pred, (torch.SymInt, torch.SymFloat)):
        return pred != 0
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
    if isinstance(pred, torch.SymBool):
        return torch.full((), pred, dtype=torch.bool)
    if isinstance(pred, torch.Tensor):
        return pred.reshape(()).to(torch.bool) if pred.dtype != torch.bool else pred.reshape(())
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
    if isinstance(value, torch.SymBool):
        return torch.sym_not(value)
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
    elif torch.compiler.is_dynamo_compiling() and strategy != "where":
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
    true_out = true_fn(*_fresh(args, info))
    false_out = false_fn(*_fresh(args, info))
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
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    return statically_known_true(x == y)


def _select(mask, a, b):
    """``torch.where(mask, a, b)``; bool values use logic ops (onnxruntime has no bool Where)."""
    if a is b:
        return a
    a_is_tensor, b_is_tensor = isinstance(a, torch.Tensor), isinstance(b, torch.Tensor)
    if not a_is_tensor and not b_is_tensor:
        symbolic = (torch.SymInt, torch.SymFloat, torch.SymBool)
        if not isinstance(a, symbolic) and not isinstance(b, symbolic) and a == b and type(a) is type(b):
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

    def branch(fn, side):
        def run(*tensors):
            full = list(args)
            for slot, tensor in zip(tensor_slots, tensors):
                full[slot] = tensor.clone() if info.params[slot] in info.mutated else tensor
            outs = fn(*full)
            return tuple(
                pytree.tree_map(lambda leaf, name=name: _cond_leaf(name, leaf, tensors, info, side), value, is_leaf=_is_none)
                for name, value in zip(info.names, outs)
            )

        return run

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
        _fail(f"if: {name!r} is None in the {side} branch", info, "give both branches a tensor value")
    if _is_number(leaf):
        return _scalar(leaf)
    if not isinstance(leaf, torch.Tensor):
        _fail(f"if: {name!r} is a {type(leaf).__name__}, which torch.cond cannot return", info,
              "return tensors from data-dependent branches")
    return _dense(leaf)  # outputs may not alias inputs or closed-over tensors


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


# --- loops --------------------------------------------------------------------------------------


class TensorRange:
    """``range(start, stop, step)`` whose bounds are traced (tensor or SymInt); step is a Python int."""

    def __init__(self, start, stop, step: int):
        self.start, self.stop, self.step = start, stop, step

    def trip_count(self):
        """Number of iterations as a SymInt/int when the bounds allow it, else a 0-d tensor."""
        start, stop, step = self.start, self.stop, self.step
        if any(isinstance(v, torch.Tensor) for v in (start, stop)):
            diff = _as_int64(stop) - _as_int64(start)
            return torch.clamp((diff + (step - 1 if step > 0 else step + 1)) // step, min=0)
        count = (stop - start + (step - 1 if step > 0 else step + 1)) // step
        return torch.sym_max(count, 0)


def _as_int64(value):
    if isinstance(value, torch.Tensor):
        return value.reshape(()).to(torch.int64)
    if isinstance(value, torch.SymInt):
        return torch.full((), value, dtype=torch.int64)
    return torch.full((), int(value), dtype=torch.int64)


def int_(value):
    """``int(t)``: a traced tensor gives a SymInt (``t.item()``) instead of a guard on its value."""
    if isinstance(value, torch.Tensor) and _is_traced(value) and value.numel() == 1:
        if torch.compiler.is_dynamo_compiling():  # inside a traced body: keep it a tensor
            return value.reshape(()).to(torch.int64)
        return value.reshape(()).to(torch.int64).item()
    return int(value)


def range_(*args):
    """``range(...)`` in a ``for`` header: a Python range, or a :class:`TensorRange` when traced."""
    if not any(_is_traced(a) for a in args):
        return range(*(int(a) if isinstance(a, torch.Tensor) else a for a in args))
    start, stop, step = (0, args[0], 1) if len(args) == 1 else (args[0], args[1], args[2] if len(args) > 2 else 1)
    if _is_traced(step):
        raise ControlFlowError("range() with a data-dependent step is not supported", hint="use a constant step")
    if step == 0:
        raise ValueError("range() arg 3 must not be zero")
    return TensorRange(start, stop, int(step))


class _Appender:
    """A list grown with ``.append`` inside a tensor loop: a preallocated buffer plus a length."""

    def __init__(self, name: str, initial: list, buf=None, length=None):
        self.name, self.initial, self.buf, self.length = name, initial, buf, length
        self.probe: list = []

    def append(self, value):
        value = value if isinstance(value, torch.Tensor) else _scalar(value)
        if self.buf is None:  # probing: learn the element type
            self.probe.append(value)
            return
        position = self.length.reshape(1)
        self.buf = torch.index_put(self.buf, (position,), value.to(self.buf.dtype).unsqueeze(0))
        self.length = self.length + 1

    def copy(self):
        clone = _Appender(self.name, self.initial, self.buf, self.length)
        clone.probe = self.probe
        clone.exact = getattr(self, "exact", False)
        return clone

    def __iter__(self):
        raise ControlFlowError(
            f"list {self.name!r} grown in a data-dependent loop can only be used with torch.stack/torch.cat",
            hint="stack or concatenate it right after the loop",
        )

    def __bool__(self):
        raise ControlFlowError(
            f"truth value of list {self.name!r} grown in a data-dependent loop is not known while exporting",
            hint="make the list non-empty on every path (e.g. append before the break)",
        )

    def __len__(self):
        raise TypeError(f"len() of list {self.name!r} grown in a data-dependent loop; use torch.stack(...).shape[0]")


class _Ref:
    """Compares by identity, so a pytree context holding a list of tensors stays comparable."""

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, _Ref) and other.value is self.value

    def __hash__(self):
        return id(self.value)


def _appender_flatten(appender):
    return [appender.buf, appender.length], (appender.name, _Ref(appender.initial), getattr(appender, "exact", False))


def _appender_unflatten(children, context):
    name, initial, exact = context
    result = _Appender(name, initial.value, children[0], children[1])
    result.exact = exact
    return result


pytree.register_pytree_node(_Appender, _appender_flatten, _appender_unflatten)


def stack(tensors, dim: int = 0, *, out=None):
    """``torch.stack``, also for lists grown in a data-dependent loop."""
    if not isinstance(tensors, _Appender):
        return torch.stack(tensors, dim) if out is None else torch.stack(tensors, dim, out=out)
    return torch.movedim(_stacked(tensors), 0, dim)


def cat(tensors, dim: int = 0, *, out=None):
    """``torch.cat``, also for lists grown in a data-dependent loop."""
    if not isinstance(tensors, _Appender):
        return torch.cat(tensors, dim) if out is None else torch.cat(tensors, dim, out=out)
    stacked = _stacked(tensors)
    moved = torch.movedim(stacked, 0, dim if dim >= 0 else stacked.dim() - 1 + dim)
    shape = list(moved.shape)
    d = dim if dim >= 0 else stacked.dim() - 1 + dim
    return moved.reshape(shape[:d] + [shape[d] * shape[d + 1]] + shape[d + 2 :])


def _stacked(appender: _Appender):
    buf = appender.buf
    if getattr(appender, "exact", False):
        rows = buf
    else:
        count = appender.length.item()
        torch._check(count >= 0)
        torch._check(count <= buf.shape[0])
        rows = buf.narrow(0, 0, count)
    if appender.initial:
        rows = torch.cat([torch.stack(appender.initial).to(rows.dtype), rows])
    return rows


def while_stmt(test_fn: Callable, body_fn: Callable, args: tuple, info):
    """Run an outlined ``while``: a Python loop, or ``while_loop`` once the test is traced."""
    count = len(info.names)
    state, free = tuple(args[:count]), tuple(args[count:])
    trips = 0
    while True:
        test = test_fn(*state, *free)
        if _is_traced(test):
            return _tensor_loop(info, state, free, test_fn=test_fn, body_fn=body_fn)
        if not test:
            _note(info, trips)
            return state
        state = tuple(body_fn(*state, *free))
        trips += 1


def for_stmt(iterable, body_fn: Callable, args: tuple, info):
    """Run an outlined ``for``: a Python loop (static trip count), or ``while_loop``."""
    count = len(info.names)
    state, free = tuple(args[:count]), tuple(args[count:])
    if isinstance(iterable, TensorRange):
        return _tensor_loop(info, state, free, body_fn=body_fn, rng=iterable)
    if isinstance(iterable, torch.Tensor) and _is_traced(iterable) and iterable.dim() > 0 and _is_dynamic(iterable.shape[0]):
        rows = TensorRange(0, iterable.shape[0], 1)
        return _tensor_loop(info, state, free + (iterable,), body_fn=body_fn, rng=rows, item_from_rows=True)
    if info.break_flag and info.appended and isinstance(iterable, range) and torch.compiler.is_exporting():
        # a data-dependent break would leave appends under a tensor condition: loop on tensors
        return _tensor_loop(info, state, free, body_fn=body_fn, rng=TensorRange(iterable.start, iterable.stop, iterable.step))
    flag_slot = info.names.index(info.break_flag) if info is not None and info.break_flag else None
    trips = 0
    for position, item in enumerate(iterable):
        if flag_slot is not None:
            flag = state[flag_slot]
            if _is_traced(flag):
                return _continue_as_tensor_loop(iterable, position, body_fn, state, free, info)
            if flag:
                break
        state = tuple(body_fn(item, *state, *free))
        trips += 1
    _note(info, trips)
    return state


def _is_dynamic(size) -> bool:
    from torch.fx.experimental.symbolic_shapes import is_concrete_int

    return isinstance(size, torch.SymInt) and not is_concrete_int(size)


def _continue_as_tensor_loop(iterable, position, body_fn, state, free, info):
    if not isinstance(iterable, range):
        _fail(f"for: break on a tensor condition in a loop over a {type(iterable).__name__}", info,
              "loop over range(...) so the remaining iterations can become a while_loop")
    rest = iterable[position:]
    return _tensor_loop(info, state, free, body_fn=body_fn, rng=TensorRange(rest.start, rest.stop, rest.step))


def _tensor_loop(info, state, free, *, body_fn, test_fn=None, rng=None, item_from_rows=False):
    """Lower a loop to ``torch._higher_order_ops.while_loop`` with an int64 counter for ranges.

    Carried: (counter,) + loop state + the enclosing function's values the body reads (passed
    through unchanged, so the body closes over no traced tensor).
    """
    from torch._higher_order_ops.while_loop import while_loop

    kind = info.kind
    _check_side_effects(info, kind)
    names = info.names
    count = len(names)
    state = _loop_entry_state(state, info, rng)
    state = _promote_numbers(state, free, info, rng, body_fn, item_from_rows)
    all_names = tuple(info.params) + (("_fx_rows",) if item_from_rows else ())
    layout = _Layout(all_names, tuple(state) + tuple(free))
    counter0 = _as_int64(rng.start) if rng is not None else None
    flag_slot = names.index(info.break_flag) if info.break_flag else None
    stop_value = _as_int64(rng.stop) if rng is not None else None
    layout_free = len(free)

    def keep_going(counter, values, stop):
        ok = None
        if rng is not None:
            ok = _in_range(counter, stop, rng.step)
        if flag_slot is not None:
            ok = _and(ok, not_(values[flag_slot]))
        if test_fn is not None:
            ok = _and(ok, test_fn(*values[:count], *values[count:count + len(info.params) - count]))
        return _as_bool_tensor(ok)

    def split(carried):
        carried = list(carried)
        counter = stop = None
        if rng is not None:
            counter, stop = carried.pop(0), carried.pop(0)
        return counter, stop, carried

    def cond_fn(*carried):
        counter, stop, rest = split(carried)
        _, values = layout.unpack(rest, False)
        return keep_going(counter, values, stop)

    def step_fn(*carried):
        counter, stop, rest = split(carried)
        _, values = layout.unpack(rest, False, fresh=True, mutated=info.mutated)
        params = values[: len(info.params)]
        if rng is not None:
            item = getitem(values[-1], counter) if item_from_rows else counter.clone()
            new_state = body_fn(item, *params)
        else:
            new_state = body_fn(*params)
        packed = layout.pack(tuple(new_state) + tuple(values[count:]), info)
        if rng is not None:
            packed = (counter + rng.step, stop) + packed
        return tuple(_dense(t) for t in packed)

    carried = tuple(_dense(t) for t in layout.pack(tuple(state) + tuple(free), info))
    if rng is not None:
        carried = (counter0, stop_value) + carried
    try:
        final = while_loop(cond_fn, step_fn, carried)
    except Exception as exc:
        inner = _find_error(exc)
        if inner is not None:
            raise inner from None
        raise
    _, _, rest = split(tuple(final))
    _, values = layout.unpack(rest, False)
    values = _finish_appenders(values[:count], info)
    lowering = "while_loop (ONNX Loop)" + (" + preallocated buffer" if info.appended else "")
    counter_text = "int64 counter over a data-dependent range" if rng is not None else "tensor condition"
    _record(info, f"{kind}-to-while_loop", f"{lowering}: {counter_text}; carries {', '.join(names) or 'nothing'}",
            lowering=lowering, carried=list(names))
    return tuple(values)


def _dense(tensor):
    """A fresh contiguous copy: no aliasing, and static strides (dynamo cannot lift a view with
    symbolic strides into a higher-order op)."""
    return tensor.clone(memory_format=torch.contiguous_format)


def _in_range(counter, stop, step: int):
    """The loop test of ``range``: the counter has not reached ``stop``."""
    return counter < stop if step > 0 else counter > stop


def _and(a, b):
    if a is None:
        return b
    return torch.logical_and(_as_bool_tensor(a), _as_bool_tensor(b))


def _loop_entry_state(state, info, rng):
    checked = []
    for name, value in zip(info.names, state):
        if isinstance(value, Undefined):
            _fail(f"{info.kind}: variable {name!r} is first defined inside a data-dependent loop and read "
                  f"after it or in the next iteration, with no value before the loop", info,
                  f"give {name!r} an initial value before the loop")
        if value is None:
            if name == "_fx_retval":
                _fail(f"{info.kind}: return inside a data-dependent loop", info,
                      "assign the result to a variable, break, and return after the loop")
            _fail(f"{info.kind}: loop variable {name!r} is None before a data-dependent loop", info,
                  f"initialise {name!r} with a tensor of the shape and dtype the loop produces")
        if name in info.appended:
            if not isinstance(value, list):
                _fail(f"{info.kind}: {name!r} is appended to but is not a list", info, "use a list")
            if torch.compiler.is_dynamo_compiling():
                _fail(f"{info.kind}: list {name!r} is appended to in a data-dependent loop nested in another traced body",
                      info, "preallocate a buffer before the outer loop and write buf[i] = ...")
            if rng is None:
                _fail(f"{info.kind}: list {name!r} grows without bound in a while loop with a data-dependent condition",
                      info, "loop over range(max_steps) with a break, or preallocate a buffer and write buf[i] = ...")
            value = _Appender(name, list(value))
        checked.append(value)
    return tuple(checked)


def _promote_numbers(state, free, info, rng, body_fn, item_from_rows):
    """Carried Python numbers → 0-d tensors of the dtype the body gives them; size appenders.

    Runs the body once outside the loop (a probe; its ops are dead code and get removed) to
    learn the dtypes, shapes and list elements the loop produces, and to check them.
    """
    promoted = [_number_to_tensor(v) for v in state]
    probe_in = [
        v.copy() if isinstance(v, _Appender) else (v.clone() if isinstance(v, torch.Tensor) and n in info.mutated else v)
        for n, v in zip(info.names, promoted)
    ]
    params = tuple(probe_in) + tuple(free[: len(info.params) - len(info.names)])
    if rng is not None:
        first = _as_int64(rng.start)
        item = getitem(free[-1], first) if item_from_rows else first
        outs = body_fn(item, *params)
    else:
        outs = body_fn(*params)
    final = []
    for name, before, original, after in zip(info.names, promoted, state, outs):
        if isinstance(before, _Appender):
            final.append(_allocate(before, after, rng, info))
            continue
        if isinstance(before, torch.Tensor) and _is_number(original):
            after_t = after if isinstance(after, torch.Tensor) else _scalar(after)
            before = before.to(torch.promote_types(before.dtype, after_t.dtype))
        _check_carry(name, before, after, info)
        final.append(before)
    return tuple(final)


def _number_to_tensor(value):
    if isinstance(value, torch.SymInt):
        return _as_int64(value)
    if isinstance(value, torch.SymBool):
        return torch.full((), value, dtype=torch.bool)
    if isinstance(value, torch.SymFloat):
        return torch.full((), value, dtype=torch.get_default_dtype())
    if _is_number(value):
        return _scalar(value)
    return value


def _allocate(appender: _Appender, probed, rng, info):
    values = probed.probe if isinstance(probed, _Appender) else []
    if not values:
        _fail(f"{info.kind}: could not learn the element type of list {appender.name!r} (no append on the first "
              "iteration)", info, "append on every iteration or preallocate a buffer and write buf[i] = ...")
    element = values[0]
    trips = rng.trip_count()
    if isinstance(trips, torch.Tensor):
        trips = trips.item()
        torch._check(trips >= 0)
    buf = torch.zeros((trips,) + tuple(element.shape), dtype=element.dtype)
    result = _Appender(appender.name, appender.initial, buf, torch.zeros((), dtype=torch.int64))
    return result


def _check_carry(name, before, after, info):
    if isinstance(before, torch.Tensor):
        if isinstance(after, Undefined) or after is None:
            _fail(f"{info.kind}: loop variable {name!r} has no value after an iteration", info,
                  f"assign {name!r} on every path of the loop body")
        after_t = after if isinstance(after, torch.Tensor) else _scalar(after)
        if after_t.dtype != before.dtype:
            _fail(f"{info.kind}: loop variable {name!r} changes dtype from {_dtype(before)} to {_dtype(after_t)}",
                  info, f"cast {name!r} to one dtype before the loop")
        if after_t.dim() != before.dim() or not all(_same_size(a, b) for a, b in zip(after_t.shape, before.shape)):
            grown = after_t.dim() == before.dim()
            _fail(f"{info.kind}: loop variable {name!r} changes shape from {tuple(before.shape)} to "
                  f"{tuple(after_t.shape)}" + (" (grown without bound)" if grown else ""), info,
                  "preallocate a buffer and write buf[i] = ..., or append to a list and torch.stack it")
    elif not isinstance(before, _Appender) and after is not before and not (_is_number(before) and before == after):
        _fail(f"{info.kind}: loop variable {name!r} is a {type(before).__name__} that changes in a data-dependent loop",
              info, "carry tensors only")


class _Layout:
    """Maps loop state (tensors, appenders, constants) to the flat tuple of carried tensors."""

    def __init__(self, names, state):
        self.names = names
        self.kinds = []
        self.constants = {}
        for i, value in enumerate(state):
            if isinstance(value, _Appender):
                self.kinds.append(("appender", value.name, value.initial))
            elif isinstance(value, torch.Tensor):
                self.kinds.append(("tensor", value.dtype, value.dim()))
            else:
                self.kinds.append(("constant",))
                self.constants[i] = value

    def pack(self, values, info) -> tuple:
        flat = []
        for i, (kind, value) in enumerate(zip(self.kinds, values)):
            name = self.names[i]
            if kind[0] == "appender":
                if not isinstance(value, _Appender):
                    _fail(f"{info.kind}: list {name!r} is replaced inside a data-dependent loop", info, "only append to it")
                flat.extend([value.buf, value.length])
            elif kind[0] == "tensor":
                tensor = value if isinstance(value, torch.Tensor) else _number_tensor(name, value, kind[1], info)
                if tensor.dtype != kind[1]:
                    _fail(f"{info.kind}: loop variable {name!r} changes dtype from {_dtype_name(kind[1])} to "
                          f"{_dtype(tensor)}", info, f"cast {name!r} to one dtype before the loop")
                flat.append(tensor)
            elif value is not self.constants[i] and not (_is_number(value) and value == self.constants[i]):
                _fail(f"{info.kind}: loop variable {name!r} is a {type(value).__name__} that changes in a "
                      "data-dependent loop", info, "carry tensors only")
        return tuple(flat)

    def unpack(self, carried, with_counter: bool, fresh: bool = False, mutated=()):
        carried = list(carried)
        counter = carried.pop(0) if with_counter else None
        values = []
        for i, kind in enumerate(self.kinds):
            if kind[0] == "appender":
                values.append(_Appender(kind[1], kind[2], carried.pop(0), carried.pop(0)))
            elif kind[0] == "tensor":
                tensor = carried.pop(0)
                values.append(tensor.clone() if fresh and self.names[i] in mutated else tensor)
            else:
                values.append(self.constants[i])
        return counter, values


def _number_tensor(name, value, dtype, info):
    if isinstance(value, (Undefined, type(None))):
        _fail(f"{info.kind}: loop variable {name!r} has no value after an iteration", info,
              f"assign {name!r} on every path of the loop body")
    if isinstance(value, torch.SymBool):
        return torch.full((), value, dtype=dtype)
    if isinstance(value, (torch.SymInt, torch.SymFloat)):
        return torch.full((), value, dtype=dtype)
    return _scalar(value, dtype)


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _finish_appenders(values, info):
    finished = []
    for value in values:
        if isinstance(value, _Appender):
            value.exact = info.kind == "for" and value.name in info.exact_appends and not info.break_flag
        finished.append(value)
    return finished
