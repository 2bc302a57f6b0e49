"""``while test: body`` → test/body functions + ``_fx.while_stmt``.

Example::

    >>> from fxport.controlflow.engine import convert_function
    >>> def f(self, x):
    ...     while x.sum() < 10:
    ...         x = x * 2
    ...     return x
    >>> print(convert_function(f).source.after)
    def f(self, x):
    <BLANKLINE>
        def _fx_test_0(x):
            return x.sum() < 10
    <BLANKLINE>
        def _fx_body_0(x):
            x = x * 2
            return (x,)
        x, = _fx.while_stmt(_fx_test_0, _fx_body_0, (x,), _fx.statement(_fx_meta, 0))
        return x
"""

from __future__ import annotations

import ast

from fxport.controlflow.astutil import assign_outputs, call, meta, name, outline, rt, tuple_
from fxport.controlflow.converters.base import StatementConverter
from fxport.controlflow.converters.loop_exits import stop_test
from fxport.controlflow.converters.loop_state import loop_info


class WhileConverter(StatementConverter):
    node_type = ast.While

    def convert(self, node: ast.While, defined: set[str]) -> list[ast.stmt]:
        ctx = self.ctx
        info = loop_info(ctx, ctx.facts.of(node), defined)
        stop = stop_test(node)  # a leading ``if t: break``, folded (converters/loop_exits.py)
        if stop is not None:
            node.body = node.body[1:]
        index = ctx.add_info(info)
        state, params = info.names, info.params
        (body,) = ctx.nested(info, [node.body], set(defined) | set(params))
        returns = tuple_([name(n) for n in state])
        test_fn = outline(f"_fx_test_{index}", params, [], node.test, node)
        body_fn = outline(f"_fx_body_{index}", params, body, returns, node)
        args = tuple_([ctx.state_value(p, defined) for p in params])
        operator_call = call(rt("while_stmt"), name(test_fn.name), name(body_fn.name), args, meta(index))
        stop_fn = [] if stop is None else [outline(f"_fx_stop_{index}", params, [], stop, node)]
        if stop_fn:
            operator_call.keywords.append(ast.keyword(arg="stop_fn", value=name(stop_fn[0].name)))
        defined |= set(state)
        out = [test_fn] + stop_fn + [body_fn, assign_outputs(state, operator_call, node)]
        return out + ctx.convert_block(node.orelse, defined)
