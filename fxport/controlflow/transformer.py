"""Source-to-source conversion of a function: canonicalise, rewrite expressions, outline blocks.

One converter per construct:

* :class:`ExpressionConverter` — ``and``/``or``/``not``, ``a if c else b``, call sites
  (``f(x)`` → ``_fx.call(f)(x)``), ``torch.stack/cat(list)`` and ``range(...)`` in ``for``.
* :func:`convert_if` — ``if`` → two branch functions + ``_fx.if_stmt``.
* :func:`convert_while` — ``while`` → test/body functions + ``_fx.while_stmt``.
* :func:`convert_for` — ``for`` → body function + ``_fx.for_stmt``.

Every generated node carries the location of the statement it came from, so the compiled code
keeps the user's file name and line numbers.

Example::

    >>> def f(x):
    ...     if x.sum() > 0:
    ...         x = x + 1
    ...     return x
    >>> print(convert_function_source(f))   # doctest: +SKIP
"""

from __future__ import annotations

import ast
import builtins
import copy
import dataclasses
import inspect
import textwrap

from fxport.controlflow import analysis
from fxport.controlflow.canonicalize import (
    RETVAL,
    canonicalize_loop_exits,
    canonicalize_returns,
    canonicalize_returns_in_loops,
)
from fxport.controlflow.operators.info import FunctionSource, StatementInfo
from fxport.errors import ControlFlowError, SourceLocation

RUNTIME = "_fx"
META = "_fx_meta"
_GENERATED_PREFIXES = ("_fx_true_", "_fx_false_", "_fx_test_", "_fx_body_", "_fx_item")
_PLAIN_CALL_ROOTS = {
    "torch", "F", "nn", "math", "np", "numpy", "operator", "functools", "itertools", RUNTIME,
}
_BUILTINS = set(dir(builtins))


@dataclasses.dataclass
class ConvertedCode:
    """The result of converting one function: compiled factory code plus its metadata."""

    module: ast.Module
    factory_name: str
    freevars: tuple[str, ...]
    infos: list[StatementInfo]
    source: FunctionSource


def _name(id_: str, store: bool = False) -> ast.Name:
    return ast.Name(id=id_, ctx=ast.Store() if store else ast.Load())


def _rt(attr: str) -> ast.Attribute:
    return ast.Attribute(value=_name(RUNTIME), attr=attr, ctx=ast.Load())


def _call(func: ast.expr, *args: ast.expr, **kwargs: ast.expr) -> ast.Call:
    return ast.Call(func=func, args=list(args), keywords=[ast.keyword(arg=k, value=v) for k, v in kwargs.items()])


def _lambda(body: ast.expr) -> ast.Lambda:
    no_args = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
    return ast.Lambda(args=no_args, body=body)


def _tuple(elts: list[ast.expr], store: bool = False) -> ast.Tuple:
    return ast.Tuple(elts=elts, ctx=ast.Store() if store else ast.Load())


def _at(node: ast.AST, like: ast.AST) -> ast.AST:
    """Place a generated statement on the first line of ``like`` (the user's ``if``/loop header).

    The end is kept on that line too: CPython reports a method call's line from the end of its
    attribute, so a generated ``_fx.if_stmt(...)`` spanning the whole ``if`` would otherwise be
    attributed to the last line of the user's statement.
    """
    node.lineno, node.col_offset = like.lineno, like.col_offset
    node.end_lineno, node.end_col_offset = like.lineno, like.col_offset + 1
    return node


def _located(node: ast.AST, like: ast.AST) -> ast.AST:
    """Give ``node`` and its children without a location the header line of ``like``."""
    for sub in ast.walk(node):
        if "lineno" in sub._attributes and getattr(sub, "lineno", None) is None:
            _at(sub, like)
    return node


# --- expressions -----------------------------------------------------------------------------


class ExpressionConverter(ast.NodeTransformer):
    """Rewrite expressions whose meaning depends on a tensor's truth value, and call sites."""

    def __init__(self, converter: "FunctionConverter"):
        self.converter = converter

    def visit_FunctionDef(self, node):
        return node  # nested user functions are left as written

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef

    def visit_Lambda(self, node):
        """A lambda written in converted code holds only expressions: convert them in place."""
        self.generic_visit(node)
        return node

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        op = "and_" if isinstance(node.op, ast.And) else "or_"
        result = node.values[-1]
        for value in reversed(node.values[:-1]):
            result = _call(_rt(op), _lambda(value), _lambda(result))
        return ast.copy_location(result, node)

    def visit_Compare(self, node):
        """``a < b < c`` → ``_fx.and_(lambda: a < b, lambda: b < c)`` (Python calls bool() in between)."""
        self.generic_visit(node)
        if len(node.ops) == 1:
            return node
        operands = [node.left] + node.comparators
        pairs = [
            ast.copy_location(ast.Compare(left=operands[i], ops=[op], comparators=[copy.deepcopy(operands[i + 1])]), node)
            for i, op in enumerate(node.ops)
        ]
        result = pairs[-1]
        for pair in reversed(pairs[:-1]):
            result = _call(_rt("and_"), _lambda(pair), _lambda(result))
        return ast.copy_location(result, node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(_call(_rt("not_"), node.operand), node)
        return node

    def visit_IfExp(self, node):
        self.generic_visit(node)
        index = self.converter.add_info(StatementInfo("ifexp", self.converter.location(node), ("<value>",)))
        meta = ast.Subscript(value=_name(META), slice=ast.Constant(index), ctx=ast.Load())
        return ast.copy_location(_call(_rt("ifexp"), node.test, _lambda(node.body), _lambda(node.orelse), meta), node)

    def visit_Subscript(self, node):
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Load) and not _is_static_index(node.slice):
            return ast.copy_location(_call(_rt("getitem"), node.value, _index_expr(node.slice)), node)
        return node

    def visit_Assign(self, node):
        target = node.targets[0]
        if len(node.targets) == 1 and _is_dynamic_item_store(target):
            self.generic_visit(node.value)
            node.value = self.visit(node.value)
            index = _index_expr(self.visit(target.slice))
            value = _call(_rt("setitem"), _name(target.value.id), index, node.value)
            return ast.copy_location(ast.Assign(targets=[_name(target.value.id, True)], value=value), node)
        self.generic_visit(node)
        return node

    def visit_AugAssign(self, node):
        target = node.target
        if _is_dynamic_item_store(target):
            load = ast.Subscript(value=_name(target.value.id), slice=copy.deepcopy(target.slice), ctx=ast.Load())
            combined = ast.copy_location(ast.BinOp(left=load, op=node.op, right=node.value), node)
            assign = ast.Assign(targets=[target], value=combined)
            return self.visit_Assign(ast.copy_location(assign, node))
        self.generic_visit(node)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        if _is_torch_attr(func, ("stack", "cat", "concat", "concatenate")) and node.args:
            node.func = _rt(func.attr if func.attr in ("stack", "cat") else "cat")
            return node
        if isinstance(func, ast.Name) and func.id == "int" and len(node.args) == 1 and not node.keywords:
            node.func = ast.copy_location(_rt("int_"), func)
            return node
        if not self._may_be_user_function(func):
            return node
        node.func = ast.copy_location(_call(_rt("call"), func), func)
        return node


    def _may_be_user_function(self, func: ast.expr) -> bool:
        """Plain names and ``self.method`` / ``module.function``; not methods of local values."""
        if isinstance(func, ast.Name):
            return func.id not in _BUILTINS and func.id not in _PLAIN_CALL_ROOTS
        if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
            return False
        root = func.value.id
        if root == self.converter.self_name:
            return True
        return root not in self.converter.local_names and root not in _PLAIN_CALL_ROOTS


def _index_expr(index: ast.expr) -> ast.expr:
    """The index of a subscript as an ordinary expression (``a:b`` → ``slice(a, b, None)``)."""
    if isinstance(index, ast.Slice):
        parts = [p if p is not None else ast.Constant(None) for p in (index.lower, index.upper, index.step)]
        return ast.copy_location(_call(_name("slice"), *parts), index)
    if isinstance(index, ast.Tuple):
        return ast.copy_location(_tuple([_index_expr(e) for e in index.elts]), index)
    return index


def _is_dynamic_item_store(target: ast.expr) -> bool:
    return isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and not _is_static_index(target.slice)


def _is_torch_attr(func: ast.expr, attrs: tuple[str, ...]) -> bool:
    return isinstance(func, ast.Attribute) and func.attr in attrs and isinstance(func.value, ast.Name) and func.value.id == "torch"


def _root(func: ast.expr) -> str | None:
    while isinstance(func, ast.Attribute):
        func = func.value
    return func.id if isinstance(func, ast.Name) else None


# --- statements ------------------------------------------------------------------------------


class FunctionConverter:
    """Converts one function's AST; see :func:`convert_function`."""

    def __init__(self, fn):
        self.fn = fn
        self.filename = inspect.getsourcefile(fn) or fn.__code__.co_filename
        lines, first_line = inspect.getsourcelines(fn)
        self.source_before = textwrap.dedent("".join(lines))
        tree = ast.parse(self.source_before)
        ast.increment_lineno(tree, first_line - 1)
        fdef = tree.body[0]
        if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
            raise ControlFlowError(
                f"cannot convert {fn.__qualname__}: its source is not a def statement",
                where=SourceLocation(self.filename, first_line),
                hint="define it with `def` (lambdas and decorated expressions are not converted)",
            )
        fdef.decorator_list = []
        self.fdef = fdef
        positional = fdef.args.posonlyargs + fdef.args.args
        self.self_name = positional[0].arg if positional else None
        self.local_names = analysis.writes(fdef.body) | {
            a.arg for a in positional + fdef.args.kwonlyargs + [fdef.args.vararg, fdef.args.kwarg] if a is not None
        }
        self.infos: list[StatementInfo] = []
        self.parents: list[StatementInfo] = []
        self.declared_outer = {
            name for node in ast.walk(fdef) if isinstance(node, (ast.Global, ast.Nonlocal)) for name in node.names
        }
        self.function_source = FunctionSource(fn.__qualname__, self.filename, self.source_before)

    def location(self, node: ast.AST) -> SourceLocation:
        return SourceLocation(self.filename, node.lineno, self.fn.__qualname__)

    def add_info(self, info: StatementInfo) -> int:
        info.function = self.function_source
        if self.parents:
            self.parents[-1].children.append(info)
        self.infos.append(info)
        return len(self.infos) - 1

    def _meta(self, index: int) -> ast.Subscript:
        return ast.Subscript(value=_name(META), slice=ast.Constant(index), ctx=ast.Load())

    def convert(self) -> ConvertedCode:
        fdef = self.fdef
        canonicalize_returns_in_loops(fdef)
        canonicalize_loop_exits(fdef)
        canonicalize_returns(fdef)
        fdef.body = [ExpressionConverter(self).visit(s) for s in fdef.body]
        analysis.live_in(fdef.body, set())
        params = {a.arg for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs}
        params |= {a.arg for a in (fdef.args.vararg, fdef.args.kwarg) if a is not None}
        fdef.body = self.convert_block(fdef.body, set(params))
        freevars = tuple(self.fn.__code__.co_freevars)
        factory = self._factory(fdef, freevars)
        module = ast.Module(body=[factory], type_ignores=[])
        _located(module, fdef)
        ast.fix_missing_locations(module)
        self.function_source.after = ast.unparse(fdef)
        return ConvertedCode(module, factory.name, freevars, self.infos, self.function_source)

    def _factory(self, fdef: ast.FunctionDef, freevars: tuple[str, ...]) -> ast.FunctionDef:
        args = [ast.arg(arg=n) for n in (RUNTIME, META) + freevars]
        arguments = ast.arguments(posonlyargs=[], args=args, vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[])
        ret = _at(ast.Return(value=_name(fdef.name)), fdef)
        factory = ast.FunctionDef(name="_fx_factory", args=arguments, body=[fdef, ret], decorator_list=[], returns=None, type_params=[])
        return _at(factory, fdef)

    # blocks

    def convert_block(self, stmts: list[ast.stmt], defined: set[str]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            if isinstance(stmt, ast.If):
                out.extend(self.convert_if(stmt, defined))
            elif isinstance(stmt, ast.While):
                out.extend(self.convert_while(stmt, defined))
            elif isinstance(stmt, ast.For):
                out.extend(self.convert_for(stmt, defined))
            else:
                for field in ("body", "orelse", "finalbody"):
                    block = getattr(stmt, field, None)
                    if isinstance(block, list) and block and not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        setattr(stmt, field, self.convert_block(block, set(defined)))
                out.append(stmt)
                defined |= analysis.writes(stmt)
        return out

    def _state_value(self, name: str, defined: set[str]) -> ast.expr:
        if name in defined:
            return _name(name)
        return _call(_rt("Undefined"), ast.Constant(name))

    def _outline(self, name: str, params: tuple[str, ...], body: list[ast.stmt], returns: ast.expr, like: ast.AST) -> ast.FunctionDef:
        arguments = ast.arguments(
            posonlyargs=[], args=[ast.arg(arg=p) for p in params], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]
        )
        body = list(body) + [_at(ast.Return(value=returns), like)]
        fn = ast.FunctionDef(name=name, args=arguments, body=body, decorator_list=[], returns=None, type_params=[])
        return _located(_at(fn, like), like)

    def _assign_outputs(self, names: tuple[str, ...], call: ast.expr, like: ast.AST) -> ast.stmt:
        target = _tuple([_name(n, True) for n in names], store=True)
        return _located(_at(ast.Assign(targets=[target], value=call), like), like)

    # if

    def convert_if(self, node: ast.If, defined: set[str]) -> list[ast.stmt]:
        """``if test: body else: orelse`` → branch functions + ``_fx.if_stmt``."""
        appended = _appended_lists(node.body + node.orelse) - analysis.writes(node.body + node.orelse)
        live_after = getattr(node, "_fx_live_out", set())
        # a local written in place (y.mul_(3), h[m] = 0) and read afterwards is branch state,
        # exactly like a reassigned one: the branch returns its (cloned, then written) value
        written_in_place = (_state_names(analysis.mutated(node.body + node.orelse)) & live_after & defined) - {"self"}
        modified = _state_names(analysis.writes(node.body + node.orelse)) | appended | (written_in_place - appended)
        outputs = tuple(sorted((modified & live_after) | appended))
        _check_no_outer_writes(self, "if", node, modified)
        free = self._free_locals(node.body + node.orelse, defined) - modified
        params = tuple(sorted(modified)) + tuple(sorted(free))
        info = StatementInfo(
            "if",
            self.location(node),
            outputs,
            params=params,
            mutated=tuple(sorted(analysis.mutated(node.body + node.orelse) & set(params))),
            expensive=tuple(_expensive_reasons(node.body + node.orelse)),
            appended=tuple(sorted(appended)),
            side_effects=tuple(_side_effects(node.body + node.orelse, set(params))),
            branch_writes=(frozenset(analysis.writes(node.body)), frozenset(analysis.writes(node.orelse))),
            retval=RETVAL if RETVAL in outputs else None,
        )
        index = self.add_info(info)
        inner_defined = set(defined) | set(params)
        self.parents.append(info)
        body = self.convert_block(node.body, set(inner_defined))
        orelse = self.convert_block(node.orelse, set(inner_defined))
        self.parents.pop()
        returns = _tuple([_name(n) for n in outputs])
        true_fn = self._outline(f"_fx_true_{index}", params, body, returns, node)
        false_fn = self._outline(f"_fx_false_{index}", params, orelse, copy.deepcopy(returns), node)
        args = _tuple([self._state_value(p, defined) for p in params])
        call = _call(_rt("if_stmt"), node.test, _name(true_fn.name), _name(false_fn.name), args, self._meta(index))
        defined |= set(outputs)
        return [true_fn, false_fn, self._assign_outputs(outputs, call, node)]

    # while

    def convert_while(self, node: ast.While, defined: set[str]) -> list[ast.stmt]:
        """``while test: body`` → test/body functions + ``_fx.while_stmt``."""
        state, info, index = self._loop_info("while", node, analysis.reads(node.test), defined)
        params = info.params
        inner_defined = set(defined) | set(params)
        self.parents.append(info)
        body = self.convert_block(node.body, set(inner_defined))
        self.parents.pop()
        returns = _tuple([_name(n) for n in state])
        test_fn = self._outline(f"_fx_test_{index}", params, [], node.test, node)
        body_fn = self._outline(f"_fx_body_{index}", params, body, returns, node)
        args = _tuple([self._state_value(p, defined) for p in params])
        call = _call(_rt("while_stmt"), _name(test_fn.name), _name(body_fn.name), args, self._meta(index))
        defined |= set(state)
        out = [test_fn, body_fn, self._assign_outputs(state, call, node)]
        return out + self.convert_block(node.orelse, defined)

    def _free_locals(self, stmts, defined: set[str]) -> set[str]:
        """Local variables a block reads from the enclosing function (passed as parameters).

        Passing them explicitly (instead of through closures) lets torch.cond/while_loop lift
        them as inputs; dynamo cannot lift closed-over tensors with symbolic strides.
        """
        reads = analysis.reads(list(stmts))
        return {n for n in reads & defined & self.local_names if not n.startswith("_fx_")} - analysis.writes(list(stmts))

    def _loop_info(self, kind, node, head_reads, defined):
        modified = _state_names(analysis.writes(node.body))
        if isinstance(node, ast.For):
            modified -= analysis.writes(node.target)
        _check_no_outer_writes(self, kind, node, modified)
        appended = _appended_lists(node.body) - modified
        body_live_in = getattr(node, "_fx_body_live_in", set())
        live_after = getattr(node, "_fx_live_out", set())
        # a local written in place in the body (out[i] = h, out.index_add_(...)) is loop state
        written_in_place = (_state_names(analysis.mutated(node.body)) & defined & self.local_names) - appended - {"self"}
        modified |= written_in_place & (head_reads | body_live_in | live_after)
        state = set(modified & (head_reads | body_live_in | live_after)) | appended
        flag = getattr(node, "_fx_break_flag", None)
        if flag:
            state.add(flag)
        state = tuple(sorted(state))
        mutated = analysis.mutated(node.body) & set(state)
        free = self._free_locals(node.body + ([node.test] if isinstance(node, ast.While) else []), defined)
        free -= set(state) | (analysis.writes(node.target) if isinstance(node, ast.For) else set())
        info = StatementInfo(
            kind,
            self.location(node),
            state,
            params=state + tuple(sorted(free)),
            mutated=tuple(sorted(mutated - appended)),
            appended=tuple(sorted(appended)),
            exact_appends=tuple(sorted(_top_level_appends(node.body) & appended)),
            side_effects=tuple(_side_effects(node.body, set(state) | analysis.writes(node.body), allow_append=True)),
            break_flag=flag,
            retval=RETVAL if RETVAL in state else None,
        )
        index = self.add_info(info)
        return state, info, index

    # for

    def convert_for(self, node: ast.For, defined: set[str]) -> list[ast.stmt]:
        """``for target in iter: body`` → body function + ``_fx.for_stmt``."""
        _bind_target_in_body(node)
        state, info, index = self._loop_info("for", node, analysis.reads(node.iter), defined)
        target = node.target
        if isinstance(target, ast.Name):
            item_param, unpack = target.id, []
        else:
            item_param = "_fx_item"
            unpack = [_at(ast.Assign(targets=[target], value=_name("_fx_item")), node)]
        inner_defined = set(defined) | set(info.params) | analysis.writes(target)
        self.parents.append(info)
        body = unpack + self.convert_block(node.body, set(inner_defined))
        self.parents.pop()
        returns = _tuple([_name(n) for n in state])
        body_fn = self._outline(f"_fx_body_{index}", (item_param,) + info.params, body, returns, node)
        iterable = node.iter
        if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id == "range":
            iterable = ast.copy_location(_call(_rt("range_"), *iterable.args), iterable)
        args = _tuple([self._state_value(p, defined) for p in info.params])
        call = _call(_rt("for_stmt"), iterable, _name(body_fn.name), args, self._meta(index))
        defined |= set(state)  # the target is bound after the loop only as state (_bind_target_in_body)
        out = [body_fn, self._assign_outputs(state, call, node)]
        return out + self.convert_block(node.orelse, defined)


def _bind_target_in_body(node: ast.For) -> None:
    """A loop target read after the loop becomes loop state: ``for _fx_item in it: i = _fx_item``.

    Python leaves ``i`` bound to the last item; carried as state it keeps that value after a
    Python loop and a ``while_loop`` alike (and a data-dependent loop with no value for ``i``
    before it is the usual clear error asking for an initial value).
    """
    if not analysis.writes(node.target) & getattr(node, "_fx_live_out", set()):
        return
    node.body = [_at(ast.Assign(targets=[node.target], value=_name("_fx_item")), node)] + node.body
    node.target = _at(_name("_fx_item", store=True), node.target)


def _check_no_outer_writes(converter: "FunctionConverter", construct: str, node: ast.AST, modified: set[str]) -> None:
    """Outlined blocks cannot assign names declared global/nonlocal (they would become local)."""
    clash = sorted(modified & converter.declared_outer)
    if clash:
        raise ControlFlowError(
            f"{construct} assigns the global/nonlocal variable {clash[0]!r}",
            where=converter.location(node),
            hint="return the value and assign it outside the statement",
        )


def _state_names(names: set[str]) -> set[str]:
    return {n for n in names if not n.startswith(_GENERATED_PREFIXES)}


def _appended_lists(stmts) -> set[str]:
    found = set()
    for node in ast.walk(ast.Module(body=list(stmts), type_ignores=[])):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "append"
            and isinstance(node.func.value, ast.Name)
        ):
            found.add(node.func.value.id)
    return found


def _top_level_appends(stmts) -> set[str]:
    """Lists appended to exactly once by a statement at the top level of a loop body."""
    counts: dict[str, int] = {}
    for stmt in stmts:
        if isinstance(stmt, ast.Expr) and _appended_lists([stmt]):
            for name in _appended_lists([stmt]):
                counts[name] = counts.get(name, 0) + 1
    nested = _appended_lists([s for s in stmts if not isinstance(s, ast.Expr)])
    return {n for n, c in counts.items() if c == 1 and n not in nested}


def _expensive_reasons(stmts) -> list[str]:
    """Why evaluating both branches of an ``if`` would be costly or unsafe (empty: cheap)."""
    reasons: list[str] = []
    for node in ast.walk(ast.Module(body=list(stmts), type_ignores=[])):
        if isinstance(node, (ast.For, ast.While)):
            reasons.append(f"loop at line {node.lineno}")
        elif isinstance(node, ast.If):
            reasons.append(f"nested if at line {node.lineno}")
        elif isinstance(node, ast.Call):
            text = ast.unparse(node.func)
            if text == "_fx.getitem" and len(node.args) == 2:
                reasons.append(f"indexing with {ast.unparse(node.args[1])} at line {node.lineno} may be out of range on the other path")
            elif text.startswith("self.") or text.startswith("_fx.call(self."):
                reasons.append(f"calls {text.replace('_fx.call(', '').rstrip(')')} at line {node.lineno}")
            elif text.endswith((".item", ".tolist", ".nonzero")) or text in ("torch.nonzero", "torch.linalg.inv", "torch.inverse"):
                reasons.append(f"{text} at line {node.lineno} may fail on the other path")
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if not _is_static_index(node.slice):
                reasons.append(f"indexing with {ast.unparse(node.slice)} at line {node.lineno} may be out of range on the other path")
    return list(dict.fromkeys(reasons))


def _is_static_index(index: ast.expr) -> bool:
    for node in ast.walk(index):
        if isinstance(node, ast.Name):
            return False
        if isinstance(node, ast.Call):
            return False
    return True


def _side_effects(stmts, local_names: set[str], *, allow_append: bool = False) -> list[str]:
    """Effects a tensor-conditioned branch or loop cannot carry, as ``"what at line N"``."""
    found = []
    for node in ast.walk(ast.Module(body=list(stmts), type_ignores=[])):
        if isinstance(node, (ast.Attribute,)) and isinstance(node.ctx, ast.Store):
            found.append(f"assignment to {ast.unparse(node)} at line {node.lineno}")
        elif isinstance(node, (ast.Raise, ast.Assert)):
            found.append(f"{type(node).__name__.lower()} at line {node.lineno}")
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            found.append(f"{type(node).__name__.lower()} {', '.join(node.names)} at line {node.lineno}")
        elif isinstance(node, ast.Call):
            text = ast.unparse(node.func)
            if text in ("print", "_fx.call(print)"):
                found.append(f"print() at line {node.lineno}")
            elif isinstance(node.func, ast.Attribute) and node.func.attr in ("append", "extend", "insert", "pop", "update", "add", "clear", "remove"):
                owner = analysis._root_name(node.func.value)
                if node.func.attr == "append" and allow_append:
                    continue
                if owner is not None and owner not in local_names:
                    found.append(f"{text}() on outer {owner!r} at line {node.lineno}")
    return found


def convert_function(fn) -> ConvertedCode:
    """Parse and convert ``fn``'s source (see the module docstring)."""
    return FunctionConverter(fn).convert()
