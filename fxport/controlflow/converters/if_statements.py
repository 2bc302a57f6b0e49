"""``if test: body else: orelse`` → two branch functions + ``_fx.if_stmt``.

The branch functions take the branch state (names assigned, written in place or appended to
and live afterwards) plus the locals they read, and return the state; the operator decides at
trace time between Python, ``torch.where`` and ``torch.cond``.

Example::

    >>> from fxport.controlflow.engine import convert_function
    >>> def f(self, x):
    ...     if x.sum() > 0:
    ...         x = x * 2
    ...     return x
    >>> print(convert_function(f).source.after)
    def f(self, x):
    <BLANKLINE>
        def _fx_true_0(x):
            x = x * 2
            return (x,)
    <BLANKLINE>
        def _fx_false_0(x):
            return (x,)
        x, = _fx.if_stmt(x.sum() > 0, _fx_true_0, _fx_false_0, (x,), _fx.statement(_fx_meta, 0))
        return x
"""

from __future__ import annotations

import ast
import copy

from fxport.controlflow.astutil import assign_outputs, call, meta, name, outline, rt, tuple_
from fxport.controlflow.context import state_names
from fxport.controlflow.converters.base import StatementConverter
from fxport.controlflow.converters.conditional_expressions import is_empty_sequence, read_as_rows
from fxport.controlflow.converters.return_statements import RETVAL
from fxport.controlflow.astutil import RUNTIME
from fxport.controlflow.operators.info import StatementInfo


class IfConverter(StatementConverter):
    node_type = ast.If

    def convert(self, node: ast.If, defined: set[str]) -> list[ast.stmt]:
        ctx, facts = self.ctx, self.ctx.facts.of(node)
        appended = set(facts.appended)
        live_after = set(facts.live_after)
        # a local written in place (y.mul_(3), h[m] = 0) and read afterwards is branch state,
        # exactly like a reassigned one: the branch returns its (cloned, then written) value
        written_in_place = (state_names(facts.written_in_place) & live_after & defined) - {"self"}
        modified = state_names(facts.writes) | appended | (written_in_place - appended)
        # a local list appended to in a branch and read nowhere after the if (CenterTrack's list,
        # returned inside the branch that grows it) is not branch state: each branch appends to
        # its own copy. One that is the function's input, or another name's, stays state.
        kept_appended = {n for n in appended if n in live_after or not self._own_list(n)}
        outputs = tuple(sorted((modified & live_after) | kept_appended))
        ctx.check_no_outer_writes("if", node, modified)
        free = ctx.free_locals(set(facts.reads), set(facts.writes), defined) - modified
        # a name both branches assign before reading and nobody reads after needs no value in:
        # passing one would hand the branch a stale value (in a loop body, the enclosing
        # function's value, which the body's own capture cannot take as an input)
        carried = {n for n in modified if n in outputs or n in facts.live_in or n in written_in_place}
        params = tuple(sorted(carried)) + tuple(sorted(free))
        info = StatementInfo(
            "if",
            ctx.location(node),
            outputs,
            params=params,
            mutated=tuple(sorted(facts.written_in_place & set(params))),
            expensive=tuple(dict.fromkeys(facts.expensive + tuple(reductions_failing_on_empty(node.body + node.orelse, node.test)))),
            appended=tuple(sorted(appended)),
            side_effects=tuple(e.what for e in facts.side_effects if e.applies(set(params) | modified, allow_append=False)),
            branch_writes=(facts.writes_true, facts.writes_false),
            retval=RETVAL if RETVAL in outputs else None,
            dead_if_false=self._dead_when_the_loop_ends(node, outputs),
            rows=tuple(n for n in outputs if n in self._rows()),
        )
        index = ctx.add_info(info)
        body, orelse = ctx.nested(info, [node.body, node.orelse], set(defined) | set(params))
        returns = tuple_([name(n) for n in outputs])
        true_fn = outline(f"_fx_true_{index}", params, body, returns, node)
        false_fn = outline(f"_fx_false_{index}", params, orelse, copy.deepcopy(returns), node)
        args = tuple_([ctx.state_value(p, defined) for p in params])
        operator_call = call(rt("if_stmt"), node.test, name(true_fn.name), name(false_fn.name), args, meta(index))
        defined |= set(outputs)
        return [true_fn, false_fn, assign_outputs(outputs, operator_call, node)]

    def _rows(self) -> set[str]:
        """Names the function binds to an empty list or tuple somewhere and reads only as rows
        (conditional_expressions.read_as_rows), and the stacks of converters/list_stacks.py: where a
        branch leaves one empty and the other gives a tensor, the operator makes the empty side a
        tensor of no rows."""
        if not hasattr(self, "_rows_names"):
            written = ast.parse(self.ctx.source_before)  # as the user wrote it (before _fx.ifexp)
            empty = {n for stmt in ast.walk(written) for n in _bound_to_empty(stmt)}
            self._rows_names = read_as_rows(self.ctx) & empty if empty else set()
            self._rows_names |= self.ctx.stacks  # pushed, popped, measured: an empty list is a tensor of no items
        return self._rows_names

    def _own_list(self, list_name: str) -> bool:
        """True for a local of the function that is never a plain copy of, or copied to, another name."""
        ctx = self.ctx
        if list_name in ctx.params or list_name in ctx.declared_outer or list_name not in ctx.local_names:
            return False
        for node in ast.walk(ctx.fdef):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and isinstance(node.value, ast.Name):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                named = {t.id for t in targets if isinstance(t, ast.Name)}
                if node.value.id == list_name or list_name in named:
                    return False
        return True

    def _dead_when_the_loop_ends(self, node: ast.If, outputs: tuple[str, ...]) -> tuple[str, ...]:
        """For the guard ``if not _fx_break_N:`` of the rest of a loop body (loop_exits.py): the
        outputs not live after that loop. Its false side means the loop has broken off, so their
        values there are never read."""
        flags = _negated_flags(node.test)
        if not flags:
            return ()
        live_after: set[str] = set()
        for flag in flags:
            facts = [self._facts_of(loop) for loop, name in self.ctx.break_flags.items() if name == flag]
            facts = [f for f in facts if f is not None]
            if not facts:  # a continue flag, or a flag of no loop we know: the false side goes on
                return ()
            live_after |= set(facts[0].live_after)
        return tuple(n for n in outputs if n not in live_after)

    def _facts_of(self, loop: ast.AST):
        try:
            return self.ctx.facts.of(loop)
        except KeyError:  # a loop node the canonicalisation replaced
            return None


#: reductions that raise in eager and fail in ONNX Runtime (ArgMax, ReduceMax) on an empty input
_REDUCTIONS = frozenset({"argmax", "argmin", "max", "min", "amax", "amin"})


def reductions_failing_on_empty(stmts, test: ast.expr | None = None) -> list[str]:
    """Why a side may fail where it is not taken: a reduction of a tensor that may be empty there,
    worded as the facts word faults (``... may fail on the other path``), so the ``if`` becomes a
    ``cond`` that runs the taken side only. A tensor may be empty there when it is a slice
    (``scores[i + 1:].argmax()``) or when the condition tests a size (``overlaps.max(dim=0)``
    under ``if num_gts == 0 or ...: return ...``); ``x.max(dim=1)`` under ``if x.sum() > 0`` runs
    on the tensors the condition itself reduced. ``torch.max(a, b)`` of two tensors (elementwise,
    a name as its second argument) is no reduction.

    >>> reductions_failing_on_empty(ast.parse("y = x[1:].max(dim=0)[0] + torch.max(a, b)").body)
    ['x[1:].max at line 1 may fail on the other path']
    >>> reductions_failing_on_empty(ast.parse("y = x.max(dim=0)").body, ast.parse("x.sum() > 0").body[0].value)
    []
    >>> reductions_failing_on_empty(ast.parse("y = x.max(dim=0)").body, ast.parse("n == 0").body[0].value)
    ['x.max at line 1 may fail on the other path']
    """
    sized = test is not None and _tests_a_size(test)
    reasons = []
    for node in ast.walk(ast.Module(body=list(stmts), type_ignores=[])):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _REDUCTIONS):
            continue
        on_torch = isinstance(node.func.value, ast.Name) and node.func.value.id == "torch"
        rest = node.args[1:] if on_torch else node.args
        if node.func.attr in ("max", "min") and rest and not _is_dim(rest[0]):
            continue  # the elementwise maximum of two tensors
        operand = node.args[0] if on_torch and node.args else node.func.value
        if sized or isinstance(operand, ast.Subscript):
            reasons.append(f"{ast.unparse(node.func)} at line {node.lineno} may fail on the other path")
    return reasons


#: what a condition calls or reads to test how many elements a tensor has; ``sizes`` is
#: ``_fx.sizes.compare(n, '==', 0)``, a comparison SizeComparisons found to compare a size
_SIZES = frozenset({"numel", "nelement", "size", "shape", "len", "sizes"})


def _tests_a_size(test: ast.expr) -> bool:
    """Whether ``test`` reads a size (``x.numel()``, ``len(xs)``, ``x.shape[0]``, a comparison
    already rewritten to ``_fx.sizes.compare``) or compares a plain name with 0 (``num_gts == 0``:
    a count computed before the ``if``)."""
    for node in ast.walk(test):
        if isinstance(node, ast.Attribute) and node.attr in _SIZES or isinstance(node, ast.Name) and node.id in _SIZES:
            return True
        if isinstance(node, ast.Compare) and any(
                isinstance(side, ast.Name) for side in [node.left, *node.comparators]) and any(
                isinstance(side, ast.Constant) and side.value == 0 for side in [node.left, *node.comparators]):
            return True
    return False


def _is_dim(arg: ast.expr) -> bool:
    """An int literal (``1``, ``-1``): the dimension a reduction runs over."""
    if isinstance(arg, ast.UnaryOp) and isinstance(arg.op, ast.USub):
        arg = arg.operand
    return isinstance(arg, ast.Constant) and type(arg.value) is int


def _bound_to_empty(node: ast.AST):
    """Names ``node`` binds to ``[]`` / ``()`` (or to ``a if c else []``), unpacking included."""
    if not isinstance(node, ast.Assign):
        return
    for target in node.targets:
        pairs = [(target, node.value)]
        while pairs:
            target, value = pairs.pop()
            if isinstance(target, ast.Name) and (is_empty_sequence(value) or isinstance(value, ast.IfExp) and (
                    is_empty_sequence(value.body) or is_empty_sequence(value.orelse))):
                yield target.id
            elif (isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))
                  and len(target.elts) == len(value.elts)):
                pairs.extend(zip(target.elts, value.elts))


def _negated_flags(test: ast.expr) -> list[str]:
    """``not f`` / ``not (f1 or f2)``, as written or as the logical converter wrote it
    (``_fx.not_(f)``, ``_fx.or_(lambda: f1, lambda: f2)``) → the flag names; anything else → []."""
    operand = _negated(test)
    if operand is None:
        return []
    values = _or_operands(operand)
    return [v.id for v in values] if values and all(isinstance(v, ast.Name) for v in values) else []


def _negated(test: ast.expr) -> ast.expr | None:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand
    if _is_runtime_call(test, "not_") and len(test.args) == 1:
        return test.args[0]
    return None


def _or_operands(expr: ast.expr) -> list[ast.expr]:
    if isinstance(expr, ast.BoolOp) and isinstance(expr.op, ast.Or):
        return list(expr.values)
    if _is_runtime_call(expr, "or_"):
        return [a.body if isinstance(a, ast.Lambda) else a for a in expr.args]
    return [expr]


def _is_runtime_call(expr: ast.expr, function: str) -> bool:
    return (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == function
            and isinstance(expr.func.value, ast.Name) and expr.func.value.id == RUNTIME)
