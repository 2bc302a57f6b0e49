"""Building blocks for generated code: names, calls of the operators, outlined functions.

Every generated node carries the location of the user's statement it came from, so the
compiled code keeps the user's file name and line numbers.

Example::

    >>> import ast
    >>> ast.unparse(call(rt("if_stmt"), name("c"), lambda_(name("a"))))
    '_fx.if_stmt(c, lambda: a)'
"""

from __future__ import annotations

import ast

#: the name converted code gives the operators package (``fxport.controlflow.operators``)
RUNTIME = "_fx"
#: the name of the list of StatementInfo passed to the generated factory
META = "_fx_meta"
#: names of generated functions and variables that are never branch or loop state
GENERATED_PREFIXES = ("_fx_true_", "_fx_false_", "_fx_test_", "_fx_body_", "_fx_item")


def name(id_: str, store: bool = False) -> ast.Name:
    return ast.Name(id=id_, ctx=ast.Store() if store else ast.Load())


def rt(attr: str) -> ast.Attribute:
    """``_fx.<attr>``: an operator; a dotted ``attr`` (``"lists.front.insert_into"``) one in a module."""
    node: ast.expr = name(RUNTIME)
    for part in attr.split("."):
        node = ast.Attribute(value=node, attr=part, ctx=ast.Load())
    return node


def meta(index: int) -> ast.Call:
    """``_fx.statement(_fx_meta, index)``: the StatementInfo of one converted statement."""
    return call(rt("statement"), name(META), ast.Constant(index))


def call(func: ast.expr, *args: ast.expr, **kwargs: ast.expr) -> ast.Call:
    return ast.Call(func=func, args=list(args), keywords=[ast.keyword(arg=k, value=v) for k, v in kwargs.items()])


def lambda_(body: ast.expr, *params: str) -> ast.Lambda:
    """``lambda params: body``."""
    arguments = ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params], vararg=None, kwonlyargs=[],
                              kw_defaults=[], kwarg=None, defaults=[])
    return ast.Lambda(args=arguments, body=body)


def tuple_(elts: list[ast.expr], store: bool = False) -> ast.Tuple:
    return ast.Tuple(elts=elts, ctx=ast.Store() if store else ast.Load())


def at(node: ast.AST, like: ast.AST) -> ast.AST:
    """Place a generated statement on the first line of ``like`` (the user's ``if``/loop header).

    The end is kept on that line too: CPython reports a method call's line from the end of its
    attribute, so a generated ``_fx.if_stmt(...)`` spanning the whole ``if`` would otherwise be
    attributed to the last line of the user's statement.
    """
    node.lineno, node.col_offset = like.lineno, like.col_offset
    node.end_lineno, node.end_col_offset = like.lineno, like.col_offset + 1
    return node


def map_blocks(stmt: ast.stmt, rewrite) -> None:
    """Replace each statement block nested in ``stmt`` (``body``, ``orelse``, ``finalbody``, the
    ``except`` handlers' bodies) by ``rewrite(block)``; a nested ``def``/``class`` is left alone.

    >>> tree = ast.parse("if c:\\n    a = 1\\nelse:\\n    b = 2")
    >>> map_blocks(tree.body[0], lambda block: block + block)
    >>> print(ast.unparse(tree))
    if c:
        a = 1
        a = 1
    else:
        b = 2
        b = 2
    """
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
        return
    for field in ("body", "orelse", "finalbody"):
        block = getattr(stmt, field, None)
        if isinstance(block, list) and block:
            setattr(stmt, field, rewrite(block))
    for handler in getattr(stmt, "handlers", ()):
        handler.body = rewrite(handler.body)


def located(node: ast.AST, like: ast.AST) -> ast.AST:
    """Give ``node`` and its children without a location the header line of ``like``."""
    for sub in ast.walk(node):
        if "lineno" in sub._attributes and getattr(sub, "lineno", None) is None:
            at(sub, like)
    return node


def function(fn_name: str, params: tuple[str, ...], body: list[ast.stmt], like: ast.AST) -> ast.FunctionDef:
    """``def fn_name(*params): body`` located at ``like``."""
    arguments = ast.arguments(
        posonlyargs=[], args=[ast.arg(arg=p) for p in params], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]
    )
    fn = ast.FunctionDef(name=fn_name, args=arguments, body=body, decorator_list=[], returns=None, type_params=[])
    return at(fn, like)


def outline(fn_name: str, params: tuple[str, ...], body: list[ast.stmt], returns: ast.expr, like: ast.AST) -> ast.FunctionDef:
    """An outlined block: ``def fn_name(*params): body; return returns``."""
    fn = function(fn_name, params, list(body) + [at(ast.Return(value=returns), like)], like)
    return located(fn, like)


def assign_outputs(names: tuple[str, ...], value: ast.expr, like: ast.AST) -> ast.stmt:
    """``(a, b) = value`` located at ``like``."""
    target = tuple_([name(n, True) for n in names], store=True)
    return located(at(ast.Assign(targets=[target], value=value), like), like)


def assign(target: str, value: ast.expr, like: ast.AST) -> ast.Assign:
    """``target = value`` with the location of ``like`` (canonicalisation)."""
    return ast.copy_location(ast.Assign(targets=[name(target, True)], value=value), like)
