"""``if`` and ``a if c else b``: plain Python, ``torch.where`` or ``torch.cond``.

A condition that is a Python value runs the taken branch as Python. A traced condition runs
both outlined branches and selects with ``torch.where`` when they are pure and cheap (the
converter's facts say so) and give values of one dtype and shape; otherwise the ``if`` becomes
``torch.cond``, inside a traced loop body as well (an ``If`` nested in the ``Loop``).
Disabled conversions (``convert_control_flow(disabled=...)``) are never produced: the statement
gets what ``auto`` would give without them, or runs as written when nothing is left.

Size: one strategy choice over several kinds of branch state (tensors, selected lists, values
None on some paths, containers); each kind's merge lives in its own module (selected_list.py,
optional.py, containers.py) and this one only dispatches, so splitting it would split the choice.

Example::

    >>> from fxport.controlflow.operators.conditionals import if_stmt, ifexp
    >>> if_stmt(True, lambda x: (x + 1,), lambda x: (x - 1,), (1,), None)
    (2,)
    >>> ifexp(0, lambda: "yes", lambda: "no", None)
    'no'
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.utils._pytree as pytree
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from fxport.errors import ControlFlowError
from fxport.controlflow.operators.containers import (assigned_specs, fresh_copy, is_container, leaves_out,
                                                    operand_spec, rebuilt, run_branch)
from fxport.controlflow.operators.lists.appender import Appender
from fxport.controlflow.operators.lists import tensor_items
from fxport.controlflow.operators.loops.growing import GROWN_IN_A_BODY
from fxport.controlflow.operators.loops.grown_branches import grown_cond
from fxport.controlflow.operators.numbers import ints_read_as_tensors
from fxport.controlflow.operators.failures import check_side_effects, fail, find_error, writes_an_input
from fxport.controlflow.operators.optional import as_optional, is_optional, merged, one_side_none, truth, unset
from fxport.controlflow.operators.rule_names import rule_name
from fxport.controlflow.operators.lists.selected import (LIST_WRITTEN, aligned_outputs, is_written_list, lists_written,
                                                        selected_lists, truth_of_selected, written_back)
from fxport.controlflow.operators.size_one import specialised
from fxport.controlflow.operators.size_tests import guarded, padded_size_one, positive_side
from fxport.controlflow.operators.size_zero_sides import marked, side_kept, zero_side_dims
from fxport.controlflow.operators.sized_select import can_select_sized, select_sized
from fxport.controlflow.operators.targets import Missing, versions
from fxport.controlflow.operators.user_objects import as_fields, object_spec, objects_rebuilt
from fxport.controlflow.operators.state import (
    grows_in_body,
    in_traced_body,
    is_disabled,
    note,
    probing,
    record,
    strategy,
)
from fxport.controlflow.operators.values import (
    Undefined,
    as_bool_tensor,
    dense,
    dtype_name,
    is_number,
    is_symbolic,
    is_traced,
    predicate,
    bound_merged_sizes,
    restore_size_relations,
    same_size,
    scalar,
    size_relations,
)


def ifexp(pred, true_thunk: Callable, false_thunk: Callable, info):
    """``a if c else b``."""
    pred = truth(truth_of_selected(pred))
    if not is_traced(pred):
        note(info, bool(pred))
        return true_thunk() if pred else false_thunk()
    (out,) = if_stmt(pred, lambda: (true_thunk(),), lambda: (false_thunk(),), (), info)
    return out


def if_stmt(pred, true_fn: Callable, false_fn: Callable, args: tuple, info):
    """Run an outlined ``if``: plain Python, ``torch.where`` or ``torch.cond`` (see module doc)."""
    pred = truth(truth_of_selected(pred))
    if not is_traced(pred):
        note(info, bool(pred))
        return true_fn(*args) if pred else false_fn(*args)
    if not in_traced_body():  # before predicate() copies it
        kept = side_kept(pred)
        if kept is not None:  # only the size 0 the capture excludes takes the other side
            note(info, kept)
            return true_fn(*args) if kept else false_fn(*args)
    zero_dims = zero_side_dims(pred) if not in_traced_body() else ((), ())
    try:
        passing = tensor_items.passing_branch(args, info)  # t.tolist() of a dynamic length: carried as t
        if passing:
            return passing.results(_if_traced(pred, passing.fn(true_fn), passing.fn(false_fn), passing.args, info))
        return _if_traced(pred, true_fn, false_fn, args, info)
    except ControlFlowError as error:
        marked(error, info, zero_dims)  # the capture may export again without size 0 of them
        raise


def _if_traced(pred, true_fn: Callable, false_fn: Callable, args: tuple, info):
    """An ``if`` on a traced condition: ``torch.where`` or ``torch.cond`` (see module doc)."""
    # before predicate() makes a new tensor of it; only where a branch reads a position (x[0]):
    # elsewhere a padded size (max(1, u)) would only add size questions for torch to answer
    size_test = positive_side(pred) if any(r.endswith(_FAULTS) for r in info.expensive) else None
    nested = in_traced_body()
    where_ok = not is_disabled(rule_name(info.kind, "where"))
    cond_ok = not is_disabled(rule_name(info.kind, "cond"))
    chosen = strategy()
    if _left_as_written(info, nested, chosen, where_ok, cond_ok):
        return _as_written(pred, true_fn, false_fn, args)
    check_side_effects(info, "if")
    _check_no_container_written(args, info)
    pred = predicate(pred, info)
    _check_defined_in_both(args, info)
    args = selected_lists(args, info)
    raw = true_fn, false_fn
    true_fn, false_fn = specialised(pred, true_fn, false_fn, args, lambda fn: fn(*_fresh(args, info)))
    true_fn, false_fn = padded_size_one(pred, true_fn, false_fn, args, lambda fn: fn(*_fresh(args, info)))
    true_fn, false_fn = guarded(size_test, true_fn, false_fn, args)  # found[0] under found.numel() > 0
    true_fn, false_fn = _keeping_raw(raw, true_fn, false_fn)
    if any(isinstance(a, Appender) for a in args):  # appends under a condition: select buffer and length
        faults = _faults_a_cond_avoids(args, info, chosen, cond_ok)
        if faults:  # a side would fail where it is not taken: an If carries the lists as their tensors
            return _if_cond(pred, true_fn, false_fn, args, info, f"{faults} (the grown lists carried as their tensors)")
        return _if_where(pred, true_fn, false_fn, args, info, forced=_APPENDER_READ)
    if lists_written(args, info):  # out[i] = v under the condition: each branch writes its copy, entries selected
        return written_back(_if_where(pred, true_fn, false_fn, args, info, forced=LIST_WRITTEN), args, info)
    if nested:
        return _if_in_loop_body(pred, true_fn, false_fn, args, info, forced=chosen == "where")
    if grows_in_body(info.names) and cond_ok and chosen != "where":
        # the branches may grow it by different amounts where the capture saw one (``g[:1]`` is 0
        # rows at batch 0): an If keeps each branch's own length, a where would need them equal
        return _if_cond(pred, true_fn, false_fn, args, info, "assigns a value the loop grows")
    if chosen == "where" and where_ok:
        return _if_where(pred, true_fn, false_fn, args, info, forced=True)
    if chosen == "cond" and cond_ok:
        return _if_cond(pred, true_fn, false_fn, args, info, "forced by strategy='cond'")
    reason = "; ".join(info.expensive) if info.expensive else f"{rule_name(info.kind, 'where')} is disabled"
    if where_ok and not info.expensive:
        outs = _if_where(pred, true_fn, false_fn, args, info, forced=False)
        if not isinstance(outs, str):
            return outs
        reason = outs
    if not cond_ok:
        return _as_written(pred, true_fn, false_fn, args)
    return _if_cond(pred, true_fn, false_fn, args, info, reason)


def _keeping_raw(raw: tuple, true_fn, false_fn) -> tuple:
    """The sides, each knowing the branch function as the converter wrote it (``_fx_raw``): the
    size specialisations wrap a side so that it runs the other too, which a run of one side
    outside the cond (:func:`_object_specs`) must not."""
    if torch.compiler.is_dynamo_compiling():
        return true_fn, false_fn
    return tuple(_with_raw(fn, original) for fn, original in zip((true_fn, false_fn), raw))


def _with_raw(fn, original):
    if fn is not original:
        try:
            fn._fx_raw = original
        except AttributeError:  # not a function object: no raw side to run alone
            pass
    return fn


def _left_as_written(info, nested: bool, chosen: str, where_ok: bool, cond_ok: bool) -> bool:
    """True when the disabled conversions leave no lowering for this statement.

    In a traced body the rule is ``if-in-traced-body`` (for ``a if c else b`` too); outside,
    ``<kind>-to-where`` and ``<kind>-to-cond``.
    """
    if nested:
        return is_disabled(rule_name("if", "in-traced-body"))
    if chosen == "where" and where_ok:
        return False
    return not cond_ok and (not where_ok or bool(info.expensive))


def _as_written(pred, true_fn, false_fn, args):
    """A disabled conversion: the ``if`` as Python runs it (``bool`` of a traced value fails)."""
    return true_fn(*args) if pred else false_fn(*args)


def _if_in_loop_body(pred, true_fn, false_fn, args, info, forced: bool):
    """Inside a traced cond/while_loop body: ``where`` first; a ``cond`` (an ``If`` in the ``Loop``)
    where the branches differ in shape, or where a branch may fail on the side not taken (soft-NMS's
    arg-max of an empty rest) and no return value is carried (a cond cannot borrow it)."""
    if forced:
        return _if_where(pred, true_fn, false_fn, args, info, forced=True)
    faults = [reason for reason in info.expensive if reason.endswith(_FAULTS)]
    if faults and info.retval is None and not is_disabled(rule_name(info.kind, "cond")):
        return _if_cond(pred, true_fn, false_fn, args, info, "; ".join(faults))
    outs = _if_where(pred, true_fn, false_fn, args, info, forced=False,
                     detail="where: nested in a traced cond/while_loop body")
    if not isinstance(outs, str):
        return outs
    if is_disabled(rule_name(info.kind, "cond")):
        fail(f"if inside a data-dependent loop has branches of different shapes ({outs})", info,
             f"enable {rule_name(info.kind, 'cond')}, or make both branches produce the same shape")
    return _if_cond(pred, true_fn, false_fn, args, info, outs)


_FAULTS = ("fail on the other path", "divide by zero on the other path", "out of range on the other path")  # facts'


def _faults_a_cond_avoids(args: tuple, info, chosen: str, cond_ok: bool) -> str:
    """Why a side of an ``if`` that appends to a list grown by a loop may fail where it is not
    taken (an arg-max of the empty slice at a counter past the end), when a ``cond`` can run the
    taken side alone: every grown list is its tensors by then (not the probe's Python elements),
    no return value is borrowed from the other path, and no strategy asked for ``where``. Inside
    a body dynamo traces only lists of fixed shape qualify: a stack that grows would leave that
    ``cond`` with sizes of its own, whose strides an enclosing ``cond`` refuses. Else ""."""
    faults = [reason for reason in info.expensive if reason.endswith(_FAULTS)]
    if not faults or not cond_ok or chosen == "where" or info.retval is not None:
        return ""
    grown = [a for a in args if isinstance(a, Appender)]
    if not all(is_container(a) for a in grown):
        return ""
    if torch.compiler.is_dynamo_compiling() and any(a.mode not in _FIXED_MODES for a in grown):
        return ""
    return "; ".join(faults)


#: the modes of a grown list whose tensors keep their shapes from trip to trip (lists/appender.py)
_FIXED_MODES = ("rows", "count", "write")


def _check_no_container_written(args: tuple, info) -> None:
    """A list or dict written in a branch (``d[k] = v``) cannot be carried: both would write it."""
    for name, value in zip(info.params, args):
        if name in info.mutated and isinstance(value, (list, dict)) and name not in info.appended \
                and not is_written_list(name, value, info):  # merged entry by entry: lists/selected.py
            fail(f"if on a tensor condition writes into the {type(value).__name__} {name!r}", info,
                 f"use a constant index or key ({name}[0] = v, {name}['k'] = v), or select the value with "
                 "torch.where and store it after the if")


def _check_defined_in_both(args: tuple, info) -> None:
    defined_in = getattr(info, "branch_writes", None)
    if defined_in is None:
        return
    true_writes, false_writes = defined_in
    incoming = dict(zip(info.params, args))
    for name in info.names:
        undefined_before = isinstance(incoming.get(name), Undefined)
        in_true, in_false = name in true_writes, name in false_writes
        if undefined_before and not (in_true and in_false) and isinstance(incoming[name], Missing):
            fail(f"if on a tensor condition has a side effect the converter cannot carry ({incoming[name].assignment()})",
                 info, f"{incoming[name].name} has no value before the if: give it one there (a tensor), "
                       "or make the condition a Python value")
        if undefined_before and not (in_true and in_false):
            branch = "true" if in_true else "false"
            other = "else" if in_true else "if"
            fail(f"if: variable {name!r} is defined only in the {branch} branch and used afterwards", info,
                 f"give {name!r} a value before the if or in the {other} branch too")


def _fresh(args: tuple, info) -> list:
    """Branch inputs; in-place mutated tensors are cloned so the other branch sees the original,
    and a library object (a transformers cache) is rebuilt from clones of its tensors."""
    mutated = set(info.mutated)
    fresh = []
    for name, a in zip(info.params, args):
        if isinstance(a, Appender):
            a = a.copy()
        elif isinstance(a, list) and (name in info.appended or name in mutated):  # appended to, or written (out[i] = v)
            a = list(a)
        elif isinstance(a, torch.Tensor) and name in mutated:
            a = a.clone()
        elif is_container(a):
            a = fresh_copy(a)
        fresh.append(a)
    return fresh


_APPENDER_READ = "a list grown by a data-dependent loop is read in a branch"  # a where no strategy asked for


def _if_where(pred, true_fn, false_fn, args, info, forced: bool | str, detail: str | None = None):
    true_out, false_out = _return_value_on_both_paths(_run_watched(true_fn, args, info, "true"),
                                                      _run_watched(false_fn, args, info, "false"), info)
    true_out, false_out = _empty_rows_as_tensors(*aligned_outputs(true_out, false_out), info)
    if not torch.compiler.is_dynamo_compiling():  # user objects selected field by field
        true_out, false_out = as_fields(true_out), as_fields(false_out)
    outs = _none_on_one_side_merged(pred, true_out, false_out, info)
    if isinstance(outs, str):
        if forced:
            fail(f"if: strategy='where' is impossible: {outs}", info, "use strategy='auto' or 'cond'")
        return outs
    true_out, false_out = outs
    leaves_t, spec_t = pytree.tree_flatten(true_out)
    leaves_f, spec_f = pytree.tree_flatten(false_out)
    names = _leaf_names(true_out, info)
    if spec_t != spec_f:
        _check_no_empty_list_beside_tensor(true_out, false_out, info)
        fail(f"if: the branches produce differently structured values for {_first_diff(spec_t, spec_f, info)!r}", info,
             "make both branches assign values of the same structure", values_differ=True)
    mask = as_bool_tensor(pred)
    selected = []
    for name, a, b in zip(names, leaves_t, leaves_f):
        _check_pair(name, a, b, info)
        shape_problem = _shape_mismatch(a, b)
        if shape_problem and name in info.dead_if_false:  # the false side ends the loop: b is never read
            selected.append(a)
            continue
        if shape_problem and forced in (_APPENDER_READ, LIST_WRITTEN) and can_select_sized(a, b):
            selected.append(select_sized(mask, a, b))  # an append on one side; one box vs some
            continue
        if shape_problem and not forced and _asks_input_sizes(pred) and can_select_sized(a, b):
            selected.append(select_sized(mask, a, b))  # a size test: a window of the tensor or all of it
            continue
        if shape_problem:
            _check_one_rank(name, a, b, info)
            if forced in (_APPENDER_READ, LIST_WRITTEN):
                fail(f"if: {forced}, so both branches run and are selected with where, but {name!r} has shape "
                     f"{shape_problem}", info,
                     "give both branches values of one rank and sizes (an empty result shaped like the other "
                     "branch's, e.g. torch.zeros((0, *shape)))")
            if forced:
                fail(f"if: strategy='where' is impossible: {name!r} has shape {shape_problem}", info,
                     "use strategy='auto' or 'cond'")
            return f"{name!r} has shape {shape_problem}"
        selected.append(_select(mask, a, b))
    detail = detail or (f"where: {forced}" if isinstance(forced, str) else "where: forced by strategy='where'" if forced
                        else "where: pure cheap branches, same dtype and shape")
    record(info, rule_name(info.kind, "where"), detail, lowering="torch.where")
    return objects_rebuilt(pytree.tree_unflatten(selected, spec_t))


def _asks_input_sizes(pred) -> bool:
    """A question about the inputs' sizes only (``idx.size(1) <= block``: a SymBool of no number
    read from data), whose sides a ``where`` of their padded values selects (sized_select.py)."""
    return isinstance(pred, torch.SymBool) and is_symbolic(pred) and not free_unbacked_symbols(pred)


def _is_empty_sequence(value) -> bool:
    return type(value) in (list, tuple) and not value


def _empty_rows_as_tensors(true_out, false_out, info):
    """An output the converter marked as read only as rows (``info.rows``: ``x in v``, ``len(v)``,
    a for loop over ``v``) that is an empty list or tuple on one side and a tensor of rank >= 1 on
    the other becomes, on the empty side, a tensor of no rows shaped and typed like the other's
    rows: every read means the same on it as on the empty list (False, 0, no item)."""
    rows = getattr(info, "rows", ())
    if not rows:
        return true_out, false_out
    true_out, false_out = list(true_out), list(false_out)
    for name in rows:
        slot = info.names.index(name)
        a, b = true_out[slot], false_out[slot]
        if _is_empty_sequence(a) and isinstance(b, torch.Tensor):
            true_out[slot] = _no_rows_like(b, name, info).new_zeros((0, *b.shape[1:]))
        elif _is_empty_sequence(b) and isinstance(a, torch.Tensor):
            false_out[slot] = _no_rows_like(a, name, info).new_zeros((0, *a.shape[1:]))
    return tuple(true_out), tuple(false_out)


def _no_rows_like(tensor: torch.Tensor, name: str, info) -> torch.Tensor:
    if tensor.dim() == 0:  # len() and iteration fail on a 0-d tensor where they give 0 on []
        fail(f"if: {name!r} is an empty list in one branch but a 0-d tensor in the other", info,
             "give both branches a tensor (e.g. an empty one, torch.zeros((0,)), beside t.reshape(1))")
    return tensor


def _row_templates(sides, info) -> dict:
    """slot → (dtype, device, row shape) of the tensor beside an empty list among ``info.rows``,
    from a probe of both sides: the empty side's tensor of no rows is made inside its cond branch,
    so the row shape must be known when the file is written."""
    templates = {}
    for name in getattr(info, "rows", ()):
        slot = info.names.index(name)
        a, b = sides[0][slot], sides[1][slot]
        tensor = b if _is_empty_sequence(a) and isinstance(b, torch.Tensor) else \
            a if _is_empty_sequence(b) and isinstance(a, torch.Tensor) else None
        if tensor is None:
            continue
        row = tuple(_no_rows_like(tensor, name, info).shape[1:])
        if any(is_symbolic(size) for size in row):
            fail(f"if: {name!r} is an empty list in one branch but a tensor with rows of shape {row}, known only at "
                 "run time, in the other", info,
                 "give that branch an empty tensor of those rows (e.g. t[:0] of the tensor the other branch uses)")
        templates[slot] = (tensor.dtype, tensor.device, tuple(int(size) for size in row))
    return templates


def _check_no_empty_list_beside_tensor(true_out, false_out, info) -> None:
    """The one-line refusal of an empty list on one side and a tensor on the other that is read as
    more than rows (an empty tensor would not mean the same there)."""
    for name, a, b in zip(info.names, true_out, false_out):
        if _is_empty_sequence(a) != _is_empty_sequence(b) and isinstance(b if _is_empty_sequence(a) else a, torch.Tensor):
            fail(f"if: {name!r} is an empty {type(a if _is_empty_sequence(a) else b).__name__} in one branch but a "
                 "tensor in the other, and not every use of it reads it only as a sequence of rows (`x in v`, len(v), "
                 "a for loop over v: where an empty tensor means the same)", info,
                 "give that branch an empty tensor shaped like the other's rows (e.g. t[:0]), or "
                 "use the value only through `in`, len() and for loops")


def _run_watched(fn, args, info, side: str):
    """One branch run for a where, refusing a branch that writes in place a tensor the ``if`` does
    not name as written (a function it calls writes it): both branches run before one is
    selected, so that write would not depend on the condition. (Inside a body dynamo traces no
    version counter can be read; the probe of that body, run outside, checked it.)"""
    fresh = _fresh(args, info)
    watched = None if torch.compiler.is_dynamo_compiling() else versions(fresh)
    outs = run_branch(fn, fresh, info, side)
    if watched is not None:
        written = [n for n, a, b in zip(info.params, fresh, watched)
                   if b is not None and a._version != b and n not in info.mutated]
        if written:
            fail(f"if on a tensor condition: a function its {side} branch calls writes {written[0]!r} in place, "
                 "which the if cannot carry", info,
                 f"have the function return a new tensor and assign it in the branch ({written[0]} = f({written[0]}, ...) "
                 f"with no in-place write inside f)")
    return outs


def _none_on_one_side_merged(pred, true_out, false_out, info):
    """Variables None on one side (or possibly None) and a value on the other become one
    :class:`~fxport.controlflow.operators.optional.MaybeNone` on both sides, set where the side
    taken set them (a return value is left to :func:`_return_value_on_both_paths`). A reason
    string where a pair of values cannot be selected (shapes differ: a ``cond`` must carry it)."""
    true_out, false_out = list(true_out), list(false_out)
    for slot, (name, a, b) in enumerate(zip(info.names, true_out, false_out)):
        if name == info.retval or not one_side_none(a, b):
            continue
        problem = _optional_mismatch(a, b)
        if problem:
            return f"{name!r} is None on some paths and {problem}"
        true_out[slot] = false_out[slot] = merged(as_bool_tensor(pred), a, b, select=_select,
                                                  origin=info.location)
    return tuple(true_out), tuple(false_out)


def _optional_mismatch(a, b) -> str | None:
    """Why the values two sides give a variable that is None on some paths cannot be selected."""
    if a is None or b is None:
        return None
    leaves_a, spec_a = pytree.tree_flatten(a.value if is_optional(a) else a)
    leaves_b, spec_b = pytree.tree_flatten(b.value if is_optional(b) else b)
    if spec_a != spec_b:
        return "holds values of different structures on the two sides"
    for x, y in zip(leaves_a, leaves_b):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and (x.dtype != y.dtype or _shape_mismatch(x, y)):
            return f"has {dtype_name(x)} {tuple(x.shape)} in the true branch but {dtype_name(y)} {tuple(y.shape)} in the false branch"
    return None


def _return_value_on_both_paths(true_out, false_out, info):
    """A ``return`` inside a loop sets the return value on one path only (None on the other).

    The value is read only where the return flag set with it is true, so the path that did not
    return may carry the other path's value: the select then needs no value that does not exist.
    """
    if info.retval is None:
        return true_out, false_out
    slot = info.names.index(info.retval)
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
            fail(f"if: variable {name!r} is not defined in the {side} branch and used afterwards", info,
                 f"give {name!r} a value before the if or in both branches")
    if (a is None) != (b is None):
        side = "true" if a is None else "false"
        fail(f"if: {name!r} is None in the {side} branch but a value in the other", info,
             "give both branches a value of the same kind")
    ta, tb = isinstance(a, torch.Tensor), isinstance(b, torch.Tensor)
    if ta and tb and a.dtype != b.dtype:
        fail(f"if: {name!r} is {dtype_name(a)} in the true branch but {dtype_name(b)} in the false branch", info,
             "cast both branches to the same dtype")
    if ta != tb and not (is_number(a) or is_number(b)):
        fail(f"if: {name!r} is a tensor in one branch and {type(b if ta else a).__name__} in the other", info,
             "give both branches a tensor")
    if ta != tb:
        tensor, number = (a, b) if ta else (b, a)
        if isinstance(number, (float, torch.SymFloat)) and not tensor.dtype.is_floating_point:
            fail(f"if: {name!r} is {dtype_name(tensor)} in one branch but a Python {type(number).__name__} in the other",
                 info, "use the same dtype in both branches")
    if not ta and not tb and not (is_number(a) and is_number(b)) and a is not b and a != b:
        fail(f"if: {name!r} is a Python {type(a).__name__} that differs between the branches", info,
             "make it a tensor or keep it the same in both branches")


def _shape_mismatch(a, b) -> str | None:
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return None
    if a.dim() != b.dim() or not all(same_size(x, y) for x, y in zip(a.shape, b.shape)):
        return f"{tuple(a.shape)} in the true branch but {tuple(b.shape)} in the false branch"
    return None


def _check_one_rank(name: str, a, b, info) -> None:
    """The one-line refusal of a value whose rank depends on the condition (``return
    torch.cat(crops)`` on one side, ``img.new_zeros((0,))`` on the other): neither ``where`` nor
    ``torch.cond`` (ONNX ``If`` from a torch program) gives a value two ranks."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.dim() == b.dim():
        return
    what = "the value returned" if name == info.retval else repr(name)
    fail(f"if: {what} is a {a.dim()}-d tensor {_shape_text(a)} in the true branch but a {b.dim()}-d tensor "
         f"{_shape_text(b)} in the false branch: its rank would depend on the condition, which no exported graph "
         "computes", info, f"give both branches values of one rank{_empty_like_hint(a, b)}", values_differ=True)


def _shape_text(tensor: torch.Tensor) -> str:
    return "(" + ", ".join(str(size) for size in tensor.shape) + ("," if tensor.dim() == 1 else "") + ")"


def _empty_like_hint(a: torch.Tensor, b: torch.Tensor) -> str:
    """``, e.g. torch.zeros((0, 3, 8, 8))`` for an empty side beside one of static rows, else ""."""
    for empty, other in ((a, b), (b, a)):
        if isinstance(empty.numel(), int) and empty.numel() == 0 and other.dim() >= 1 \
                and all(isinstance(size, int) for size in other.shape[1:]):
            shape = ", ".join(str(size) for size in (0, *other.shape[1:]))
            return f" (an empty result shaped like the other branch's rows, e.g. torch.zeros(({shape}{',' if other.dim() == 1 else ''})))"
    return ""


def _select(mask, a, b):
    """``torch.where(mask, a, b)``; bool values use logic ops (onnxruntime has no bool Where)."""
    if a is b:
        return a
    a_is_tensor, b_is_tensor = isinstance(a, torch.Tensor), isinstance(b, torch.Tensor)
    if not a_is_tensor and not b_is_tensor:
        if not is_symbolic(a) and not is_symbolic(b) and a == b and type(a) is type(b):
            return a
        a, b = scalar(a), scalar(b)
        a, b = a.to(torch.promote_types(a.dtype, b.dtype)), b.to(torch.promote_types(a.dtype, b.dtype))
    elif not a_is_tensor:
        a = scalar(a, b.dtype)
    elif not b_is_tensor:
        b = scalar(b, a.dtype)
    if a.dtype == torch.bool:
        return torch.logical_or(torch.logical_and(mask, a), torch.logical_and(torch.logical_not(mask), b))
    return torch.where(mask, a, b)


def _if_cond(pred, true_fn, false_fn, args, info, reason: str):
    """The ``if`` as a ``torch.cond`` (:func:`_traced_cond`); one whose branch holds a loop whose
    state grows, which dynamo cannot trace in a branch, as one ``fxport::grown_cond`` call whose
    branches are captured on their own (:mod:`.loops.grown_branches`), outside a body dynamo traces."""
    try:
        return _traced_cond(pred, true_fn, false_fn, args, info, reason)
    except ControlFlowError as err:
        if GROWN_IN_A_BODY not in str(err) or torch.compiler.is_dynamo_compiling():
            raise
    return grown_cond(pred, true_fn, false_fn, args, info)


def _traced_cond(pred, true_fn, false_fn, args, info, reason: str, objects: dict | None = None):
    """``torch.cond`` over the tensors among ``args``; a library object (a transformers cache,
    :mod:`fxport.controlflow.operators.containers`) goes in as its leaves and is rebuilt inside each
    branch, so a branch that updates it changes its own copy, never an object outside the cond.
    A variable None before the ``if`` that a branch assigns goes in as a
    :class:`~fxport.controlflow.operators.optional.MaybeNone` and leaves each branch as one.
    ``objects``: the variables that hold user objects (:mod:`.user_objects`), returned as their
    fields; learned from a run of one side when a branch first returned one."""
    given, objects = args, objects or {}
    templates = _row_templates(_probed(true_fn, false_fn, args, info), info) if getattr(info, "rows", ()) else {}
    args = ints_read_as_tensors(_none_inputs_as_optional(true_fn, false_fn, args, info))
    slots = [(i, operand_spec(a)) for i, a in enumerate(args) if isinstance(a, torch.Tensor) or is_container(a)]
    operands = tuple(dense(leaf) for i, _ in slots for leaf in pytree.tree_leaves(args[i]))
    relations = size_relations(operands)
    out_specs = assigned_specs(args, info)

    def branch(fn, side):
        def run(*tensors):
            restore_size_relations(tensors, relations)
            full, tensors = list(args), list(tensors)
            for slot, spec in slots:
                if spec is None:
                    tensor = tensors.pop(0)
                    full[slot] = tensor.clone() if info.params[slot] in info.mutated else tensor
                else:
                    full[slot] = pytree.tree_unflatten(tensors[: spec.num_leaves], spec)
                    del tensors[: spec.num_leaves]
            outs = _as_optional_where_it_was(run_branch(fn, full, info, side), full, info)
            outs = tuple(torch.zeros((0, *templates[slot][2]), dtype=templates[slot][0], device=templates[slot][1])
                         if slot in templates and _is_empty_sequence(value) else value for slot, value in enumerate(outs))
            outs = tuple(objects[name].carried(value, lambda what, n=name: _objects_differ(n, what, info)) if name in objects
                         else value for name, value in zip(info.names, outs))
            return tuple(
                pytree.tree_map(lambda leaf, name=name: _cond_leaf(name, leaf, info, side),
                                leaves_out(name, value, out_specs, info, side), is_leaf=lambda leaf: leaf is None)
                for name, value in zip(info.names, outs)
            )

        return run

    if isinstance(pred, torch.Tensor):
        pred = dense(pred)  # a view of a while_loop output cannot be lifted by dynamo (fuzzer find)
    try:
        outs = torch.cond(pred, branch(true_fn, "true"), branch(false_fn, "false"), operands)
    except Exception as exc:  # surface our own error raised while torch traced a branch
        inner = find_error(exc)
        if inner is None or objects or _OBJECT_OUT not in str(inner) or torch.compiler.is_dynamo_compiling():
            _refuse_failed_cond(exc, inner, true_fn, false_fn, args, info)
        outs = inner  # a branch returns a user object: again below, returning its fields
    if isinstance(outs, ControlFlowError):  # (outside the except: errors of the run below are its own)
        found = _object_specs(true_fn, false_fn, given, info)
        if not found:
            raise outs
        return _traced_cond(pred, true_fn, false_fn, given, info, reason, objects=found)
    record(info, rule_name(info.kind, "cond"), f"cond: {reason}", lowering="torch.cond")
    bound_merged_sizes(outs)
    outs = tuple(dense(t) if isinstance(t, torch.Tensor) else t for t in outs)  # writable (see loop_lowering)
    outs = rebuilt(outs, out_specs, info)
    _fixed_lists_keep_their_shapes(outs, given, info)
    return tuple(objects[name].rebuilt(value) if name in objects else value for name, value in zip(info.names, outs))


def _fixed_lists_keep_their_shapes(outs: tuple, args: tuple, info) -> None:
    """A grown list of fixed shape (a buffer written at its count, a count and size sums) leaves
    a ``cond`` with the shapes it came in with, which torch, seeing sizes of the cond's own,
    no longer knows; said with ``torch._check`` (a loop carrying the list needs them equal)."""
    incoming = dict(zip(info.params, args))
    for name, value in zip(info.names, outs):
        before = incoming.get(name)
        if not (isinstance(value, Appender) and isinstance(before, Appender) and before.mode in _FIXED_MODES):
            continue
        for new, old in zip(pytree.tree_leaves(value), pytree.tree_leaves(before)):
            if isinstance(new, torch.Tensor) and isinstance(old, torch.Tensor) and new.dim() == old.dim():
                for got, want in zip(new.shape, old.shape):
                    torch._check(got == want)


def _refuse_failed_cond(exc: Exception, inner, true_fn, false_fn, args, info) -> None:
    """Raise the one-line refusal of a cond torch could not trace (``inner``: the operators' own
    error found in what torch raised), or torch's error where there is none."""
    if inner is not None:
        raise inner from None
    if "same pytree structure" in str(exc):
        _explain_structures(_probed(true_fn, false_fn, args, info), info)
    if not torch.compiler.is_dynamo_compiling() and "fake tensor call" in _chain_text(exc):
        _explain_ranks(_probed(true_fn, false_fn, args, info), info)
    if writes_an_input(exc):
        fail("if on a tensor condition: a branch writes in place into a tensor the if does not carry (a function "
             "it calls writes its argument, an attribute or a buffer)", info,
             "have the function return a new tensor and assign it in the branch (buf = f(buf, ...) with no "
             "in-place write inside f)")
    raise exc


#: the words of :func:`_cond_leaf`'s refusal of an object a cond cannot return
_OBJECT_OUT = "which torch.cond cannot return"


def _object_specs(true_fn, false_fn, args, info) -> dict:
    """``{name: ObjectSpec}`` of the variables a side gives user objects, from a run of the true
    side outside the cond (dead code), or of the false side where the true one gives none."""
    for fn in (true_fn, false_fn):
        with probing():
            outs = getattr(fn, "_fx_raw", fn)(*_fresh(args, info))
        found = {name: spec for name, spec in ((n, object_spec(v)) for n, v in zip(info.names, outs)) if spec is not None}
        if found:
            return found
    return {}


def _objects_differ(name: str, what: str, info) -> None:
    what_name = "the value returned" if name == info.retval else repr(name)
    fail(f"if: {what_name} {what}", info, "give both branches objects of one class with the same fields")


def _chain_text(exc: BaseException) -> str:
    """The messages of ``exc`` and the exceptions it was raised from."""
    texts, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        texts.append(str(exc))
        exc = exc.__cause__ or exc.__context__
    return "\n".join(texts)


def _none_inputs_as_optional(true_fn, false_fn, args, info) -> tuple:
    """``args`` with each variable that is None before the ``if`` and assigned a value by a branch
    replaced by an unset :class:`~fxport.controlflow.operators.optional.MaybeNone` whose
    placeholder has that value's type (learned by running the branches once outside the cond;
    their ops are dead code, as a loop probe's)."""
    incoming = dict(zip(info.params, args))
    candidates = [n for n in info.names if n in incoming and incoming[n] is None and n != info.retval]
    if not candidates:
        return args
    sides = _probed(true_fn, false_fn, args, info)
    args = list(args)
    for name in candidates:
        assigned = [outs[info.names.index(name)] for outs in sides]
        value = next((v for v in assigned if v is not None), None)
        if value is not None:
            args[info.params.index(name)] = unset(value, info.location)
    return tuple(args)


def _explain_structures(sides, info) -> None:
    """The one-line refusal of a cond whose branches torch found to give values of different
    structures: the variable, and what to do."""
    _check_no_empty_list_beside_tensor(*sides, info)
    for name, a, b in zip(info.names, *sides):
        if pytree.tree_structure(a) != pytree.tree_structure(b):
            fail(f"if: the branches produce differently structured values for {name!r}", info,
                 "make both branches assign values of the same structure", values_differ=True)


def _explain_ranks(sides, info) -> None:
    """The one-line refusal of a cond torch could not trace because a value has another rank on
    each side (torch words it as a failed fake tensor call)."""
    for name, a, b in zip(info.names, *sides):
        leaves_a, leaves_b = pytree.tree_leaves(a), pytree.tree_leaves(b)
        if len(leaves_a) == len(leaves_b):
            for x, y in zip(leaves_a, leaves_b):
                _check_one_rank(name, x, y, info)


def _probed(true_fn, false_fn, args, info) -> tuple:
    """Both sides' outputs, run once outside the cond to learn their types (dead code, as a loop
    probe's)."""
    with probing():
        return true_fn(*_fresh(args, info)), false_fn(*_fresh(args, info))


def _as_optional_where_it_was(outs, full, info) -> tuple:
    """A branch's outputs, each variable that came in as a MaybeNone leaving as one."""
    incoming = dict(zip(info.params, full))
    return tuple(as_optional(value, incoming[name]) if is_optional(incoming.get(name)) and name != info.retval
                 else value for name, value in zip(info.names, outs))


def _cond_leaf(name, leaf, info, side):
    if isinstance(leaf, Undefined):
        fail(f"if: variable {name!r} is not defined in the {side} branch and used afterwards", info,
             f"give {name!r} a value before the if or in both branches")
    if leaf is None:
        if name == info.retval:  # where-selected ifs borrow the other path's value; a cond branch cannot
            fail("if: a return under a tensor condition inside a loop returns on one path and goes on on the other, "
                 "which a traced loop body cannot express", info,
                 "assign the result to a variable, break, and return once after the loop")
        fail(f"if: {name!r} is None in the {side} branch", info, "give both branches a tensor value")
    if is_number(leaf):
        return scalar(leaf)
    if not isinstance(leaf, torch.Tensor):
        fail(f"if: {name!r} is a {type(leaf).__name__}, {_OBJECT_OUT}", info,
             "return tensors from data-dependent branches")
    return dense(leaf)  # outputs may not alias inputs or closed-over tensors
