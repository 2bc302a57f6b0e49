"""``for target in iter: body`` → body function + ``_fx.for_stmt``; ``range(...)`` in the
header → ``_fx.range_(...)`` (a data-dependent range becomes a while_loop counter).

Example::

    >>> from fxport.controlflow.engine import convert_function
    >>> def f(x, n):
    ...     for i in range(n):
    ...         x = x + i
    ...     return x
    >>> print(convert_function(f).source.after)
    def f(x, n):
    <BLANKLINE>
        def _fx_body_0(i, x):
            x = x + i
            return (x,)
        x, = _fx.for_stmt(_fx.range_(n), _fx_body_0, (x,), _fx.statement(_fx_meta, 0))
        return x
"""

from __future__ import annotations

import ast

from fxport.controlflow import analysis
from fxport.controlflow.astutil import assign_outputs, at, call, meta, name, outline, rt, tuple_
from fxport.controlflow.converters.base import StatementConverter
from fxport.controlflow.converters.loop_exits import stop_test
from fxport.controlflow.converters.loop_state import loop_info

_ITEM = "_fx_item"


class ForConverter(StatementConverter):
    node_type = ast.For

    def convert(self, node: ast.For, defined: set[str]) -> list[ast.stmt]:
        ctx, facts = self.ctx, self.ctx.facts.of(node)
        stop = stop_test(node)  # a leading ``if t: break``, folded (converters/loop_exits.py): asked before each iteration
        if stop is not None:
            node.body = node.body[1:]
        bound = bool(facts.target_writes & facts.live_after)
        if bound:
            _bind_target_in_body(node)
        info = loop_info(ctx, facts, defined, target_bound=bound)
        index = ctx.add_info(info)
        state = info.names
        target = node.target
        if isinstance(target, ast.Name):
            item_param, unpack = target.id, []
        else:
            item_param = _ITEM
            unpack = [at(ast.Assign(targets=[target], value=name(_ITEM)), node)]
        (body,) = ctx.nested(info, [node.body], set(defined) | set(info.params) | analysis.writes(target))
        returns = tuple_([name(n) for n in state])
        body_fn = outline(f"_fx_body_{index}", (item_param,) + info.params, unpack + body, returns, node)
        iterable = node.iter
        if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id == "range":
            iterable = ast.copy_location(call(rt("range_"), *iterable.args), iterable)
        elif _is_reversed_range(iterable):  # for j in reversed(range(t)): the same counter, counting down
            iterable = ast.copy_location(call(rt("reversed_range"), *iterable.args[0].args), iterable)
        elif _is_reversed(iterable):  # for h in reversed(history): a list grown in a loop, or a tensor's rows
            iterable = ast.copy_location(call(rt("reversed_"), iterable.args[0]), iterable)
        else:  # for i, (a, b) in enumerate(zip(xs, ys)): rows of tensors, read by position
            iterable = _rows_header(iterable)
        args = tuple_([ctx.state_value(p, defined) for p in info.params])
        operator_call = call(rt("for_stmt"), iterable, name(body_fn.name), args, meta(index))
        stop_fn = [] if stop is None else [outline(f"_fx_stop_{index}", info.params, [], stop, node)]
        if stop_fn:
            operator_call.keywords.append(ast.keyword(arg="stop_fn", value=name(stop_fn[0].name)))
        defined |= set(state)  # the target is bound after the loop only as state (_bind_target_in_body)
        out = stop_fn + [body_fn, assign_outputs(state, operator_call, node)]
        return out + ctx.convert_block(node.orelse, defined)


_ROWS_OPERATORS = {"zip": "loops.rows.zip_", "enumerate": "loops.rows.enumerate_"}


def _rows_header(node: ast.expr) -> ast.expr:
    """``zip(...)`` / ``enumerate(...)`` (nested too) as ``_fx.loops.rows.zip_`` /
    ``enumerate_``, which give tensors' rows by position (operators/loops/rows.py)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _ROWS_OPERATORS
            and not any(isinstance(a, ast.Starred) for a in node.args) and all(k.arg for k in node.keywords)):
        return node
    made = ast.Call(func=rt(_ROWS_OPERATORS[node.func.id]), args=[_rows_header(a) for a in node.args],
                    keywords=node.keywords)
    return ast.copy_location(made, node)


def _is_reversed(node: ast.expr) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "reversed"
            and len(node.args) == 1 and not node.keywords)


def _is_reversed_range(node: ast.expr) -> bool:
    """``reversed(range(...))`` as written (no keywords)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "reversed"
            and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Call)
            and isinstance(node.args[0].func, ast.Name) and node.args[0].func.id == "range" and not node.args[0].keywords)


def _bind_target_in_body(node: ast.For) -> None:
    """A loop target read after the loop becomes loop state: ``for _fx_item in it: i = _fx_item``.

    Python leaves ``i`` bound to the last item; carried as state it keeps that value after a
    Python loop and a ``while_loop`` alike (and a data-dependent loop with no value for ``i``
    before it is the usual clear error asking for an initial value).
    """
    node.body = [at(ast.Assign(targets=[node.target], value=name(_ITEM)), node)] + node.body
    node.target = at(name(_ITEM, store=True), node.target)
