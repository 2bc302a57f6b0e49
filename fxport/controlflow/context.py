"""The state of converting one function, shared by the engine and the converters.

A :class:`Context` holds the parsed function, what is known about it before any rewriting
(its local names, the names it declares global/nonlocal), the statement facts
(:mod:`fxport.controlflow.facts`), the :class:`~fxport.controlflow.operators.StatementInfo`
list handed to the generated code, and the walk over statement blocks that dispatches each
``if``/``while``/``for`` to its converter.

Example::

    >>> def f(x):
    ...     return x + 1
    >>> ctx = Context(f)
    >>> ctx.self_name, sorted(ctx.local_names)            # a function, not a method: no self
    (None, ['x'])
    >>> def forward(self, x):                               # a method (e.g. patched into a class)
    ...     return self.block(x)
    >>> Context(forward).self_name
    'self'
"""

from __future__ import annotations

import ast
import inspect
import textwrap

from fxport.controlflow import analysis, astutil
from fxport.controlflow.scopes import names_bound_by_comprehensions
from fxport.controlflow.operators.info import FunctionSource, StatementInfo
from fxport.errors import ControlFlowError, SourceLocation

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
#: locals made for written attributes, entries and objects (converters/state_targets.py)
STATE_TARGET_PREFIXES = ("_fx_v_", "_fx_was_")
#: the flag saying two local names are still one tensor (converters/aliases.py)
ALIAS_FLAG_PREFIX = "_fx_same_"


class Context:
    """Converting one function (see the module doc)."""

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
        static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fdef.decorator_list)
        fdef.decorator_list = []
        self.fdef = fdef
        positional = fdef.args.posonlyargs + fdef.args.args
        #: the instance (or class) a method is called on; None for functions and static methods
        self.self_name = (positional[0].arg if positional and not static
                          and (_is_method(fn) or positional[0].arg in ("self", "cls")) else None)
        self.params = {a.arg for a in positional + fdef.args.kwonlyargs + [fdef.args.vararg, fdef.args.kwarg] if a is not None}
        #: the function's own local names as the user wrote it (no generated names)
        # comprehension targets are locals of the code too (t in `(t.reshape(...) for t in xs)`)
        self.local_names = analysis.writes(fdef.body) | self.params | names_bound_by_comprehensions(fdef.body)
        self.declared_outer = {
            n for node in ast.walk(fdef) if isinstance(node, (ast.Global, ast.Nonlocal)) for n in node.names
        }
        self.function_source = FunctionSource(fn.__qualname__, self.filename, self.source_before)
        self.infos: list[StatementInfo] = []
        self.parents: list[StatementInfo] = []
        #: loop → the flag its canonicalised ``break`` sets (filled by the loop-exit converter)
        self.break_flags: dict[ast.AST, str] = {}
        #: names held as a stack or queue of scalars (filled by converters/list_stacks.py)
        self.stacks: set[str] = set()
        self.facts = None  # fxport.controlflow.facts.FunctionFacts, set by the engine
        self.statement_converters: dict[type, object] = {}  # ast type → converter, set by the engine

    def location(self, node: ast.AST) -> SourceLocation:
        return SourceLocation(self.filename, node.lineno, self.fn.__qualname__)

    def add_info(self, info: StatementInfo) -> int:
        """Register the StatementInfo of a converted statement; its index in ``_fx_meta``."""
        info.function = self.function_source
        if self.parents:
            self.parents[-1].children.append(info)
        self.infos.append(info)
        return len(self.infos) - 1

    def convert_block(self, stmts: list[ast.stmt], defined: set[str]) -> list[ast.stmt]:
        """Convert the statements of one block; ``defined`` (names bound so far) grows."""
        out: list[ast.stmt] = []
        for stmt in stmts:
            converter = self.statement_converters.get(type(stmt))
            if converter is not None:
                out.extend(converter.convert(stmt, defined))
                continue
            for field in ("body", "orelse", "finalbody"):
                block = getattr(stmt, field, None)
                if isinstance(block, list) and block and not isinstance(stmt, _SCOPES):
                    setattr(stmt, field, self.convert_block(block, set(defined)))
            out.append(stmt)
            defined |= analysis.writes(stmt)
        return out

    def nested(self, info: StatementInfo, blocks: list[list[ast.stmt]], defined: set[str]) -> list[list[ast.stmt]]:
        """Convert the blocks of a converted statement, recording what is nested in ``info``."""
        self.parents.append(info)
        try:
            return [self.convert_block(block, set(defined)) for block in blocks]
        finally:
            self.parents.pop()

    def state_value(self, name: str, defined: set[str]) -> ast.expr:
        """The value passed for ``name`` into an outlined block (``_fx.undefined(name)`` if unbound)."""
        if name in defined:
            return astutil.name(name)
        return astutil.call(astutil.rt("undefined"), ast.Constant(name))

    def free_locals(self, reads: set[str], writes: set[str], defined: set[str]) -> set[str]:
        """Local variables a block reads from the enclosing function (passed as parameters).

        Passing them explicitly (instead of through closures) lets torch.cond/while_loop lift
        them as inputs; dynamo cannot lift closed-over tensors with symbolic strides.
        """
        return {n for n in reads & defined & self.local_names if _is_user_state(n)} - writes

    def check_no_outer_writes(self, construct: str, node: ast.AST, modified: set[str]) -> None:
        """Outlined blocks cannot assign names declared global/nonlocal (they would become local)."""
        clash = sorted(modified & self.declared_outer)
        if clash:
            raise ControlFlowError(
                f"{construct} assigns the global/nonlocal variable {clash[0]!r}",
                where=self.location(node),
                hint="return the value and assign it outside the statement",
            )


def _is_user_state(name: str) -> bool:
    """A user local, or a local standing for a written attribute/entry/object (state_targets)."""
    return not name.startswith("_fx_") or name.startswith((*STATE_TARGET_PREFIXES, ALIAS_FLAG_PREFIX))


def state_names(names) -> set[str]:
    """``names`` without generated functions and items (never branch or loop state)."""
    return {n for n in names if not n.startswith(astutil.GENERATED_PREFIXES)}


def _is_method(fn) -> bool:
    """Whether ``fn`` is defined in a class body (``Net.forward``), not at module level or
    inside another function (``forward.<locals>.find``); a function whose first parameter is
    ``self``/``cls`` counts as a method wherever it is defined (a patched-in ``forward``)."""
    parts = fn.__qualname__.split(".")
    return len(parts) >= 2 and parts[-2] != "<locals>"
