"""What the converter tells an operator about the statement it runs (``_fx.statement(_fx_meta, i)``).

These are the only compiler-made names the operators see: the converter fills a
:class:`StatementInfo` per converted statement, :func:`register` keeps the list of one converted
function under a key the generated factory receives (``_fx_meta``), and converted code reads
an entry with :func:`statement`. The operators never import compiler names such as the
return-value variable. Reading through a function of this module, rather than through a list
held by the converted function's closure, keeps the entry reachable when dynamo traces a
converted function it reached through an object made inside a traced branch (a transformers
cache rebuilt in a ``torch.cond`` branch): dynamo wraps such a function's closure without a
source, and can wrap no StatementInfo that way, while this module's globals always have one.

Example::

    >>> from fxport.controlflow.operators.info import StatementInfo
    >>> StatementInfo("while", None, ("i", "acc")).params     # defaults: no extra inputs
    ()
    >>> key = register([StatementInfo("if", None, ("y",))])
    >>> statement(key, 0).names
    ('y',)
"""

from __future__ import annotations

import dataclasses
import itertools

from fxport.errors import SourceLocation


@dataclasses.dataclass
class FunctionSource:
    """The source of one function before and after conversion."""

    qualname: str
    filename: str
    before: str
    after: str = ""


@dataclasses.dataclass
class StatementInfo:
    """Static facts about one converted statement, passed to the runtime operator."""

    kind: str  # the construct, as in rule_names.CONVERSIONS: "if", "ifexp", "while", "for", "assert"
    location: SourceLocation | None
    names: tuple[str, ...]  # outputs (if) / carried state (loops)
    params: tuple[str, ...] = ()  # inputs of the outlined functions
    mutated: tuple[str, ...] = ()  # params changed in place (cloned before use)
    appended: tuple[str, ...] = ()  # lists grown with .append in a loop body
    expensive: tuple[str, ...] = ()  # why a branch is not cheap (→ cond)
    side_effects: tuple[str, ...] = ()  # effects the converter cannot carry
    function: FunctionSource | None = None
    break_flag: str | None = None  # the name in ``names`` of the loop's break flag
    retval: str | None = None  # the name in ``names`` of a return value set inside a loop
    #: an if guarding the rest of a loop body after a ``break`` (its false side ends the loop):
    #: outputs nobody reads after the loop, so that side may carry the true side's values
    dead_if_false: tuple[str, ...] = ()
    written_first: tuple[str, ...] = ()  # loop state the body assigns before reading it (and the test never reads)
    exact_appends: tuple[str, ...] = ()  # lists appended once per iteration, unconditionally
    branch_writes: tuple | None = None  # (names assigned in the true branch, in the false branch)
    #: outputs every read of which treats them as a sequence of rows (``x in v``, ``len(v)``, a for
    #: loop over ``v``): an empty list on one side may be an empty tensor of the other side's rows
    rows: tuple[str, ...] = ()
    children: list = dataclasses.field(default_factory=list)  # statements nested in this one


#: key → the StatementInfos of one converted function (converted functions are kept for the
#: process, so their entries are too)
_TABLES: dict[int, list[StatementInfo]] = {}
_KEYS = itertools.count()


def register(infos: list[StatementInfo]) -> int:
    """Keep the StatementInfos of one converted function; the key its code reads them by."""
    key = next(_KEYS)
    _TABLES[key] = infos
    return key


def statement(key: int, index: int) -> StatementInfo:
    """The StatementInfo ``index`` of the converted function registered as ``key``."""
    return _TABLES[key][index]
