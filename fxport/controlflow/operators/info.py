"""What the converter tells an operator about the statement it runs (the ``_fx_meta[i]`` arg).

These are the only compiler-made names the operators see: the converter fills a
:class:`StatementInfo` per converted statement (and passes the list to the generated factory),
so the operators never import compiler names such as the return-value variable.

Example::

    >>> from fxport.controlflow.operators.info import StatementInfo
    >>> StatementInfo("while", None, ("i", "acc")).params     # defaults: no extra inputs
    ()
"""

from __future__ import annotations

import dataclasses

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
    exact_appends: tuple[str, ...] = ()  # lists appended once per iteration, unconditionally
    branch_writes: tuple | None = None  # (names assigned in the true branch, in the false branch)
    children: list = dataclasses.field(default_factory=list)  # statements nested in this one
