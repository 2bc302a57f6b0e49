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
from fxport.controlflow.converters.return_statements import RETVAL
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
        outputs = tuple(sorted((modified & live_after) | appended))
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
            expensive=facts.expensive,
            appended=tuple(sorted(appended)),
            side_effects=tuple(e.what for e in facts.side_effects if e.applies(set(params) | modified, allow_append=False)),
            branch_writes=(facts.writes_true, facts.writes_false),
            retval=RETVAL if RETVAL in outputs else None,
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
