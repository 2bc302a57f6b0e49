"""A comparison that may compare a size in an ``if``/``while`` test → ``_fx.sizes.compare``.

``if x.shape[0] > 0:``, ``while i < x.shape[0]:``, ``if len(xs) == 0:`` compare sizes; torch
may answer such a question for sizes of at least 2 only (fxport/controlflow/operators/sizes.py),
so these comparisons are decided by the operator, which turns an answer the range leaves open
into a tensor condition. A comparison in a test (also under ``and``/``or``/``not``) is rewritten
when

* its text reads a size (``.shape``, ``.size(``, ``len(``, ``.numel(``),
* an operand is a number computed from sizes held in local names: a name bound to a size, directly
  or through other such names (``num_gts, num_bboxes = overlaps.size(0), overlaps.size(1)`` then
  ``if num_gts == 0:``; ``rows = a.size(-2)``, ``n = rows * cols`` then ``if n == 0:``;
  ``B, T = x.shape``), or
* an operand is a parameter, or arithmetic on parameters, compared with an integer (``def
  empty(x, n): if n == 0:``, a size the caller passes in), or
* an operand is the counter of a ``for t in range(...)`` compared with an integer or a size
  (``if t == 0:`` in the body): in a converted loop the counter is a traced tensor that knows
  its range (operators/counters.py), and from the loop's second trip on ``t == 0`` is False.

The operator returns Python's answer for anything that is not a symbolic size, so a comparison
rewritten on a name that holds no size behaves as written.

An ``if`` one of whose sides ends in ``raise`` (``if n == 0: raise ValueError("no boxes")``) is
left as written: those sizes are the ones the model rejects, not a branch the file must hold.
torch's answer (the side for sizes of at least 2) stands, and verification narrows the range
where eager raises (the made-up ``size[n=0]`` set: "eager rejects these inputs").

Example::

    >>> import ast
    >>> from fxport.controlflow.context import Context
    >>> def f(x):
    ...     n = x.shape[0]
    ...     if n == 0 or x.sum() > 1:
    ...         x = x + 1
    ...     return x
    >>> ctx = Context(f)
    >>> SizeComparisons(ctx).apply()
    >>> ast.unparse(ctx.fdef.body[1].test)
    "_fx.sizes.compare(n, '==', 0) or x.sum() > 1"
"""

from __future__ import annotations

import ast
import copy

from fxport.controlflow.astutil import call, rt
from fxport.controlflow.converters.base import ExpressionConverter

_OPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
#: builtins whose value is a size when their arguments are
_OF_SIZES = frozenset({"min", "max", "int", "abs", "round"})


class SizeComparisons(ExpressionConverter):
    """Rewrite the size comparisons of ``if``/``while`` tests and of ``a if c else b`` (by then
    an ``_fx.ifexp`` call)."""

    def apply(self) -> None:
        self._sizes = names_bound_to_sizes(self.ctx.fdef)
        self._params = {p for p in self.ctx.params if p != self.ctx.self_name}
        self._counters = range_counters(self.ctx.fdef)
        super().apply()

    def visit_If(self, node):
        self.generic_visit(node)
        if not _a_side_raises(node):
            whole = self._size_against_int(node.test)
            node.test = self._in_test(node.test)
            if whole is not None:  # the branches may learn the size from it (operators/size_tests.py)
                node.test = self._remembered(node.test, whole)
        return node

    def _size_against_int(self, test: ast.expr):
        """``(size, op, integer)`` copies when ``test`` as a whole compares a number made of sizes
        with an integer literal (``found.numel() > 0``, ``n == 0``): pure reads, evaluated twice."""
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _OPS):
            return None
        left, right = test.left, test.comparators[0]
        for size, other in ((left, right), (right, left)):
            if _is_int(other) and is_size_expression(size, self._sizes) and self._compares_a_size(left, right):
                return copy.deepcopy(left), ast.Constant(_OPS[type(test.ops[0])]), copy.deepcopy(right)
        return None

    def visit_While(self, node):
        self.generic_visit(node)
        node.test = self._held(node.test)
        return node

    def _held(self, test: ast.expr) -> ast.expr:
        """``test`` rewritten (:meth:`_in_test`), each conjunct at its top (through ``and`` and
        ``_fx.and_``) that is a size or compares one with an integer marked ``_fx.size_tests.held``:
        the body runs only where it holds, so it may learn those sizes are at least 1."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            test.values = [self._held(v) for v in test.values]
            return test
        if isinstance(test, ast.Call) and ast.unparse(test.func) == "_fx.and_":
            for arg in test.args:
                if isinstance(arg, ast.Lambda):
                    arg.body = self._held(arg.body)
            return test
        whole = self._size_against_int(test)
        marked = (call(ast.Attribute(rt("size_tests"), "held", ast.Load()), copy.deepcopy(test))
                  if whole is None and is_size_expression(test, self._sizes) else None)
        test = self._in_test(test)
        if whole is not None:
            marked = call(ast.Attribute(rt("size_tests"), "held", ast.Load()), test, *whole)
        return ast.copy_location(marked, test) if marked is not None else test

    def _remembered(self, test: ast.expr, whole: tuple) -> ast.expr:
        return ast.copy_location(call(ast.Attribute(rt("size_tests"), "remembered", ast.Load()), test, *whole), test)

    def visit_Call(self, node):
        """``_fx.ifexp(test, ...)``: what the conditional-expression converter made of ``a if c else b``."""
        self.generic_visit(node)
        if ast.unparse(node.func) == "_fx.ifexp" and node.args:
            node.args[0] = self._in_test(node.args[0])
        return node

    def _in_test(self, node: ast.expr) -> ast.expr:
        """``node`` with its size comparisons rewritten, through ``and``/``or``/``not`` and the
        thunks the logical converter makes of them."""
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _OPS \
                and self._compares_a_size(node.left, node.comparators[0]):
            op = ast.Constant(_OPS[type(node.ops[0])])
            return ast.copy_location(call(ast.Attribute(rt("sizes"), "compare", ast.Load()), node.left, op,
                                          node.comparators[0]), node)
        if isinstance(node, ast.BoolOp):
            node.values = [self._in_test(v) for v in node.values]
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            node.operand = self._in_test(node.operand)
        elif isinstance(node, ast.Lambda):
            node.body = self._in_test(node.body)
        elif isinstance(node, ast.Call) and ast.unparse(node.func) in ("_fx.and_", "_fx.or_", "_fx.not_"):
            node.args = [self._in_test(a) for a in node.args]
        return node

    def _compares_a_size(self, left: ast.expr, right: ast.expr) -> bool:
        if reads_a_size(left) or reads_a_size(right):
            return True
        if is_size_expression(left, self._sizes) or is_size_expression(right, self._sizes):
            return True
        return any((_is_int(other) and is_size_expression(side, self._params)) or
                   (isinstance(side, ast.Name) and side.id in self._counters and
                    (_is_int(other) or is_size_expression(other, self._sizes)))
                   for side, other in ((left, right), (right, left)))


def range_counters(fdef: ast.AST) -> set[str]:
    """The names ``for NAME in range(...)`` counts with, anywhere in ``fdef``."""
    return {node.target.id for node in ast.walk(fdef)
            if isinstance(node, (ast.For, ast.AsyncFor)) and isinstance(node.target, ast.Name)
            and isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Name)
            and node.iter.func.id == "range"}


def reads_a_size(node: ast.AST) -> bool:
    """Whether the text of ``node`` reads a size: ``.shape``, ``.size(``, ``.numel(``, ``len(``."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute) and sub.attr in ("shape", "size", "numel"):
            return True
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "len":
            return True
    return False


def is_size_expression(node: ast.AST, sizes: set[str]) -> bool:
    """Whether ``node`` is a number made of sizes: a read of one (``x.shape[0]``, ``x.size(1)``,
    ``x.shape``, ``len(x)``, ``x.numel()``), a name in ``sizes``, or ``+ - * // %``, unary ``-``,
    ``min``/``max``/``int``/``abs``/``round`` of such numbers and integers, one of them a size."""
    return _size_parts(node, sizes) is True


def _size_parts(node: ast.AST, sizes: set[str]) -> bool | None:
    """True: a number with a size in it; None: a plain integer; False: anything else."""
    if isinstance(node, ast.Name):
        return True if node.id in sizes else False
    if isinstance(node, ast.Constant):
        return None if _is_int(node) else False
    if isinstance(node, ast.Attribute):
        return node.attr == "shape"
    if isinstance(node, ast.Subscript):
        owner = node.value
        return (isinstance(owner, ast.Attribute) and owner.attr == "shape") or _is_size_call(owner)
    if isinstance(node, ast.Call):
        if _is_size_call(node):
            return True
        if isinstance(node.func, ast.Name) and node.func.id in _OF_SIZES and node.args and not node.keywords:
            return _combined([_size_parts(a, sizes) for a in node.args])
        return False
    if isinstance(node, ast.BinOp) and isinstance(node.op, _ARITHMETIC):
        return _combined([_size_parts(node.left, sizes), _size_parts(node.right, sizes)])
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _size_parts(node.operand, sizes)
    return False


def _combined(parts: list) -> bool | None:
    if any(p is False for p in parts):
        return False
    return True if any(parts) else None


def _is_size_call(node: ast.AST) -> bool:
    """``x.size(...)``, ``x.numel()``, ``len(x)``."""
    if not isinstance(node, ast.Call):
        return False
    if isinstance(node.func, ast.Attribute) and node.func.attr in ("size", "numel"):
        return True
    return isinstance(node.func, ast.Name) and node.func.id == "len"


def names_bound_to_sizes(fdef: ast.AST) -> set[str]:
    """The names ``fdef`` binds (``=``, ``+=``, ``:=``, annotated) to a number made of sizes
    (:func:`is_size_expression`, through other such names); a tuple target bound to a tuple of the
    same length element by element, to ``x.shape`` (or a slice of it) every name."""
    pairs: list[tuple[ast.expr, ast.expr]] = []
    for node in ast.walk(fdef):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                pairs.extend(_pairs(target, node.value))
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)) and node.value is not None:
            pairs.extend(_pairs(node.target, node.value))
        elif isinstance(node, ast.NamedExpr):
            pairs.append((node.target, node.value))
    sizes: set[str] = set()
    changed = True
    while changed:
        changed = False
        for target, value in pairs:
            if _binds_sizes(target, value, sizes):
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name) and sub.id not in sizes:
                        sizes.add(sub.id)
                        changed = True
    return sizes


def _binds_sizes(target: ast.expr, value: ast.expr, sizes: set[str]) -> bool:
    if isinstance(target, ast.Name):
        return is_size_expression(value, sizes)
    if isinstance(target, (ast.Tuple, ast.List)):  # B, T = x.shape / x.shape[:2] / x.size()
        shape = value.value if isinstance(value, ast.Subscript) and isinstance(value.slice, ast.Slice) else value
        return (isinstance(shape, ast.Attribute) and shape.attr == "shape") or \
            (_is_size_call(shape) and not shape.args and isinstance(shape.func, ast.Attribute) and shape.func.attr == "size")
    return False


def _a_side_raises(node: ast.If) -> bool:
    """Whether the body or the ``else`` of ``node`` ends in ``raise``."""
    return any(block and isinstance(block[-1], ast.Raise) for block in (node.body, node.orelse))


def _is_int(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool)


def _pairs(target: ast.expr, value: ast.expr) -> list[tuple[ast.expr, ast.expr]]:
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
            and len(target.elts) == len(value.elts) and not any(isinstance(e, ast.Starred) for e in target.elts):
        return [pair for t, v in zip(target.elts, value.elts) for pair in _pairs(t, v)]
    return [(target, value)]
