"""``if found.numel() > 0: first = found[0]``: the branch a size test guards sees that size as at least 1.

A size test on a dynamic size (``x.numel() > 0``, ``x.shape[0] != 0``, ``len(x) >= 1``, the else
of ``n == 0``) is a tensor condition where the size's range holds 0 (``sizes.compare``), and the
branch on the side where the size is positive typically indexes a position (``found[0]``,
``dc[0]``). torch cannot trace that position in a ``torch.cond`` branch (it would have to guard on
``u0 >= 1``, a size read from a tensor), and running that branch with ``where`` on the side eager
does not take would index an empty tensor (ONNX Runtime rejects the ``Gather``).

The branch taken where every symbol of the tested size is at least 1 gets each tensor among its
inputs that has such a size along an axis padded to ``max(size, 1)`` along that axis (a row of
zeros appended, then narrowed). Where the branch is taken the size is already at least 1, so the
padded tensor is the tensor: the same values and, at run time, the same size. Where it is not
taken (a where runs it anyway, or a cond never runs it), the padded row keeps its indexing in
range and its values are discarded. So every converted value is eager's on either side.

The converter marks the tests it can read so (:func:`remembered`): a whole ``if`` test that
compares a number made of sizes with an integer.

Example::

    >>> import torch
    >>> padded_to_one(torch.zeros((0, 2)), [0]).shape
    torch.Size([1, 2])
    >>> padded_to_one(torch.ones((3, 2)), [0]).shape
    torch.Size([3, 2])
"""

from __future__ import annotations

import weakref
from typing import Callable

import torch
import torch.utils._pytree as pytree

from fxport.controlflow.operators.values import is_symbolic

#: id of the 0-d bool tensor a size test became → (a weak reference to it, ``(size, op, integer)``,
#: ``size`` a symbolic SymInt). Keyed by id: a WeakKeyDictionary would compare colliding tensors
#: with ``==`` (an elementwise op, a guard on data while exporting).
_TESTS: dict[int, tuple] = {}
_MIRROR = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "==": "==", "!=": "!="}


def remembered(result, left, op: str, right):
    """``result`` (what ``_fx.sizes.compare(left, op, right)`` gave), remembered as the size test
    ``left op right`` when it is a tensor condition on a symbolic size and an integer."""
    if not isinstance(result, torch.Tensor) or torch.compiler.is_dynamo_compiling():  # no global state there
        return result
    if isinstance(right, torch.SymInt) and is_symbolic(right) and _is_int(left):
        left, op, right = right, _MIRROR[op], left
    if isinstance(left, torch.SymInt) and is_symbolic(left) and _is_int(right):
        key = id(result)
        try:
            ref = weakref.ref(result, lambda _, key=key: _TESTS.pop(key, None))
        except TypeError:  # a tensor type that takes no weak reference: no padding, as before
            return result
        _TESTS[key] = (ref, (left, op, int(right)))
    return result


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and not is_symbolic(value)


def positive_side(pred):
    """``(symbols, side)`` when the condition ``pred`` is a remembered size test one of whose
    sides (``True``/``False``) implies that every symbol of the tested size is at least 1; else None."""
    return _positive(_test_of(pred))


def zero_only_side(pred):
    """``(symbols, side)`` when the side ``side`` of the condition ``pred`` (a size test, as for
    :func:`positive_side`) is taken only where a symbol of the tested size is 0, and the other
    side wherever every one is at least 1: ``n == 0``, ``n <= 0``, ``n < 1``, and the else of
    ``n > 0``, ``n != 0``, ``n >= 1``, ``if n:``; else None."""
    test = _test_of(pred)
    if test is None or not _factors(test[0]):
        return None
    _, op, k = test
    if (op, k) in (("==", 0), ("<=", 0), ("<", 1)):
        return _factors(test[0]), True
    if (op, k) in (("!=", 0), (">", 0), (">=", 1)):
        return _factors(test[0]), False
    return None


def _test_of(pred):
    """``(size expression, op, integer)`` the condition ``pred`` tests, or None: a SymBool torch
    kept (an unbacked size: nonzero, a mask), a size as a truth (``while dc.shape[0]:``), or a
    size test the converter remembered (:func:`remembered`)."""
    if isinstance(pred, torch.SymBool):
        return _relation(pred.node.expr)
    if isinstance(pred, torch.SymInt):
        return pred.node.expr, "!=", 0
    if isinstance(pred, torch.Tensor):
        entry = _TESTS.get(id(pred))
        test = entry[1] if entry is not None and entry[0]() is pred else None
        return test and (test[0].node.expr, test[1], test[2])
    return None


def _positive(test):
    """``(symbols, side)`` for ``(size expression, op, integer)`` (see :func:`positive_side`)."""
    if test is None:
        return None
    size, op, k = test
    symbols = _factors(size)
    if not symbols:
        return None
    # the side taken → size >= 1 (sizes are never negative)
    if (op == ">" and k >= 0) or (op == ">=" and k >= 1) or (op == "==" and k >= 1) or (op == "!=" and k == 0):
        return symbols, True
    # the side not taken: size > k, size >= k, size != 0, size == k
    if (op == "<=" and k >= 0) or (op == "<" and k >= 1) or (op == "==" and k == 0) or (op == "!=" and k >= 1):
        return symbols, False
    return None


def _relation(expr):
    """``(size expression, op, integer)`` of a sympy comparison of a size with an integer; else None."""
    import sympy

    ops = {sympy.StrictGreaterThan: ">", sympy.GreaterThan: ">=", sympy.StrictLessThan: "<",
           sympy.LessThan: "<=", sympy.Eq: "==", sympy.Ne: "!="}
    op = ops.get(type(expr))
    if op is None:
        return None
    lhs, rhs = expr.args
    if lhs.is_Integer and not rhs.is_Integer:
        lhs, rhs, op = rhs, lhs, _MIRROR[op]
    if not rhs.is_Integer or lhs.is_Integer:
        return None
    return lhs, op, int(rhs)


def _factors(expr) -> frozenset:
    """The symbols of a size that is a product of symbols and positive integers (``u0``, ``4*u0``,
    ``s0*u1``): the size is at least 1 exactly where each of them is. Empty for anything else."""
    import sympy

    if expr.is_Symbol:
        return frozenset([expr])
    if isinstance(expr, sympy.Mul):
        symbols = []
        for factor in expr.args:
            if factor.is_Symbol:
                symbols.append(factor)
            elif not (factor.is_Integer and factor > 0):
                return frozenset()
        return frozenset(symbols)
    return frozenset()


def axes_of(values, symbols) -> dict[int, list[int]]:
    """slot → the axes of the tensor there whose size is one of ``symbols``."""
    axes = {}
    for slot, value in enumerate(values):
        if isinstance(value, torch.Tensor) and not value.is_sparse and value.layout == torch.strided:
            found = [axis for axis, size in enumerate(value.shape)
                     if isinstance(size, torch.SymInt) and size.node.expr in symbols]
            if found:
                axes[slot] = found
    return axes


def padded_to_one(tensor: torch.Tensor, axes: list[int]) -> torch.Tensor:
    """``tensor`` with a row of zeros appended along each of ``axes``, narrowed to ``max(size, 1)``:
    the tensor itself wherever those sizes are at least 1."""
    for axis in axes:
        size = tensor.shape[axis]
        shape = list(tensor.shape)
        shape[axis] = 1
        tensor = torch.cat([tensor, tensor.new_zeros(shape)], dim=axis).narrow(axis, 0, torch.sym_max(size, 1))
    return tensor


#: the symbols the tests of the ``while`` bodies running now hold at least 1 (outside dynamo)
_KNOWN: list[frozenset] = []
#: while :func:`body_knowing_sizes` asks a test: the size tests its conjuncts made (:func:`held`)
_HELD: list[list] = []


def held(value, left=None, op: str | None = None, right=None):
    """``value``, a conjunct of a ``while`` test that the whole test holds only where it holds:
    a size (``while dc.shape[0]:``, its truth) or ``sizes.compare(left, op, right)``. Noted for
    :func:`body_knowing_sizes` when it is asking the test; otherwise (and under dynamo) only returned."""
    if not _HELD or torch.compiler.is_dynamo_compiling():
        return value
    if op is None:
        left, op, right = value, "!=", 0
    if isinstance(right, torch.SymInt) and is_symbolic(right) and _is_int(left):
        left, op, right = right, _MIRROR[op], left
    if isinstance(left, torch.SymInt) and is_symbolic(left) and _is_int(right):
        _HELD[-1].append((left, op, int(right)))
    return value


def body_knowing_sizes(test_fn: Callable, body_fn: Callable) -> Callable:
    """``body_fn`` of a ``while`` whose test is a size test (``while order.numel() > 0:``, ``while
    dc.shape[0]:``), run knowing that the sizes of its entry state the test tested are at least 1:
    the body runs only where the test holds, so every ``if`` in it pads its tensors of those sizes
    (:func:`guarded`) in both branches. Its test is asked again on the body's entry state (pure
    size reads: dead code in the file). Inside a body dynamo traces, as written (no global state)."""

    if not _marks_held(getattr(test_fn, "__code__", None)):  # no size conjunct: nothing to ask the test
        return body_fn

    def body(*values):
        if torch.compiler.is_dynamo_compiling():
            return body_fn(*values)
        _HELD.append([])
        try:
            whole = positive_side(test_fn(*values))
        except Exception:  # a test that cannot be asked here: the body as it was
            whole = None
        finally:
            held = _HELD.pop()
        symbols = set(whole[0]) if whole is not None and whole[1] else set()
        for size, op, k in held:
            test = _positive((size.node.expr, op, k))
            if test is not None and test[1]:
                symbols |= test[0]
        if not symbols:
            return body_fn(*values)
        _KNOWN.append(frozenset(symbols))
        try:
            return _padded_branch(body_fn, axes_of(values, frozenset(symbols)))(*values)
        finally:
            _KNOWN.pop()

    return body


def _marks_held(code) -> bool:
    """Whether a test function's code (its lambdas included) calls :func:`held`, which the
    converter writes only around pure size reads (converters/size_comparisons.py)."""
    if code is None:
        return False
    return "held" in code.co_names or any(_marks_held(c) for c in code.co_consts if hasattr(c, "co_names"))


def known_positive() -> frozenset:
    """The symbols known to be at least 1 where the statement running now runs."""
    return frozenset().union(*_KNOWN) if _KNOWN else frozenset()


def _narrowed_back(tensor: torch.Tensor, sizes: dict) -> torch.Tensor:
    """``tensor`` narrowed along each axis whose size is a padded size (a key of ``sizes``) to the
    size it padded."""
    for axis, size in enumerate(tensor.shape):
        if isinstance(size, torch.SymInt) and size.node.expr in sizes:
            tensor = tensor.narrow(axis, 0, sizes[size.node.expr])
    return tensor


def padded_size_one(pred, true_fn: Callable, false_fn: Callable, args: tuple, run_other: Callable):
    """``if len(dc) == 1:`` inside a body that padded ``dc`` (:func:`body_knowing_sizes`): the size
    is ``max(1, u)`` there, which ``size_one.specialised`` does not read as a size; where ``u`` is
    known to be at least 1, ``max(1, u) == 1`` is ``u == 1``, and the branch taken at size 1 sees
    that size as a static 1 as it would unpadded (the same specialisation, on that expression)."""
    import sympy
    from torch.utils._sympy.functions import Max  # torch's, not sympy's

    if not isinstance(pred, torch.SymBool) or not _KNOWN:
        return true_fn, false_fn
    expr = pred.node.expr
    if not isinstance(expr, (sympy.Eq, sympy.Ne)):
        return true_fn, false_fn
    a, b = expr.args
    size = a if b == 1 else b if a == 1 else None
    known = known_positive()
    if not (isinstance(size, (Max, sympy.Max)) and len(size.args) == 2 and 1 in size.args
            and all(arg == 1 or arg in known for arg in size.args)):
        return true_fn, false_fn
    from fxport.controlflow.operators.size_one import specialised_at

    return specialised_at(size, isinstance(expr, sympy.Eq), true_fn, false_fn, args, run_other)


def guarded(test, true_fn: Callable, false_fn: Callable, args: tuple):
    """``(true_fn, false_fn)`` with the branch on the positive side of a size test (``test``:
    what :func:`positive_side` said of the condition) seeing its tensors of that size padded to
    at least 1 (see the module doc); unchanged where ``test`` is None or no input has that size."""
    known = known_positive()
    sides = {True: set(known), False: set(known)}
    if test is not None:
        sides[test[1]] |= test[0]
    axes = {side: axes_of(args, frozenset(symbols)) for side, symbols in sides.items() if symbols}
    return (_padded_branch(true_fn, axes.get(True)) if axes.get(True) else true_fn,
            _padded_branch(false_fn, axes.get(False)) if axes.get(False) else false_fn)


def _padded_branch(fn: Callable, axes: dict) -> Callable:
    """``fn`` run on its inputs padded along ``axes`` (slot → axes). Each tensor it returns (a
    padded input, unchanged or written in place, or a value computed from one) leaves with every
    axis of a padded size (``max(1, u)``) narrowed back to that size (``u``): the same where the
    branch is taken, so the other branch's shapes and a loop's carried shapes stay as they were."""

    def branch(*values):
        padded, sizes = [], {}
        for i, v in enumerate(values):
            if i in axes and isinstance(v, torch.Tensor):
                p = padded_to_one(v, axes[i])
                for axis in axes[i]:
                    if isinstance(p.shape[axis], torch.SymInt):
                        sizes.setdefault(p.shape[axis].node.expr, v.shape[axis])
                padded.append(p)
            else:
                padded.append(v)
        outs = fn(*padded)
        if not sizes:
            return outs
        return pytree.tree_map(lambda leaf: _narrowed_back(leaf, sizes) if isinstance(leaf, torch.Tensor) else leaf, outs)

    return branch
