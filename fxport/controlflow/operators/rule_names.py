"""The control-flow conversions as data: one row per (construct, lowering), with its rule name.

Operators ask :func:`rule_name` for the name a record carries or ``--disable`` switches off
(``rule_name("if", "where")``), and read a record's construct and lowering back with
:func:`conversion_named`; nothing formats or parses rule names. ``fxport rules`` lists the
rows (:mod:`fxport.rules.controlflow`), and the tests derive their sets from :data:`CONVERSIONS`.
A new construct is one row here, one converter and one operator module.

Example::

    >>> rule_name("if", "cond"), conversion_named("while-to-while_loop").lowering
    ('if-to-cond', 'while_loop')
    >>> CONTROL_FLOW_RULES["if-to-cond"]
    'a tensor-conditioned if/else becomes torch.cond'
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class ControlFlowConversion:
    """One conversion: ``construct`` (a ``StatementInfo.kind``) lowered as ``lowering``."""

    construct: str
    lowering: str
    name: str
    doc: str


#: Every control-flow conversion, in the order ``fxport rules`` lists them.
CONVERSIONS: tuple[ControlFlowConversion, ...] = tuple(ControlFlowConversion(*row) for row in (
    ("if", "where", "if-to-where", "a tensor-conditioned if/else whose branches are pure and cheap becomes torch.where"),
    ("if", "cond", "if-to-cond", "a tensor-conditioned if/else becomes torch.cond"),
    ("ifexp", "where", "ifexp-to-where", "a tensor-conditioned `a if c else b` becomes torch.where"),
    ("ifexp", "cond", "ifexp-to-cond", "a tensor-conditioned `a if c else b` becomes torch.cond"),
    ("while", "while_loop", "while-to-while_loop", "a while loop with a tensor condition becomes torch while_loop"),
    ("for", "while_loop", "for-to-while_loop",
     "a for loop over a tensor-sized range (or a break on a tensor) becomes torch while_loop"),
    ("if", "in-traced-body", "if-in-traced-body",
     "an if (or `a if c else b`) nested in a converted branch or loop body selects with where there"),
    ("while", "in-traced-body", "while-in-traced-body",
     "a while loop nested in a converted branch or loop body becomes a nested while_loop"),
    ("for", "in-traced-body", "for-in-traced-body",
     "a for loop nested in a converted branch or loop body becomes a nested while_loop"),
    ("assert", "dropped", "assert-on-tensor",
     "an assert on a tensor's value runs in PyTorch (verification, coverage) and is left out of the ONNX "
     "file with a warning at its line (ONNX cannot stop a run); disabled, it is refused there"),
    ("raise", "dropped", "raise-on-tensor",
     "a branch that only raises, under a tensor's value, runs in PyTorch (verification, coverage) and is left "
     "out of the ONNX file with a warning at the raise; disabled, it is refused there"),
    ("item", "tensor", "item-predicate-to-tensor",
     "a condition on .item() of a tensor is computed on the tensor (graph pass)"),
))

_BY_KEY = {(row.construct, row.lowering): row for row in CONVERSIONS}
_BY_NAME = {row.name: row for row in CONVERSIONS}

#: name → one-line description, for every rule name a control-flow record can carry.
CONTROL_FLOW_RULES: dict[str, str] = {row.name: row.doc for row in CONVERSIONS}


def rule_name(construct: str, lowering: str) -> str:
    """The rule name of ``construct`` lowered as ``lowering``; a pair without a row is a KeyError."""
    row = _BY_KEY.get((construct, lowering))
    if row is None:
        raise KeyError(f"no control-flow conversion of {construct!r} as {lowering!r}: add a row to CONVERSIONS")
    return row.name


def has_conversion(construct: str, lowering: str) -> bool:
    """Whether the table has a row for ``construct`` lowered as ``lowering``."""
    return (construct, lowering) in _BY_KEY


def conversion_named(name: str) -> ControlFlowConversion | None:
    """The row a record's rule name comes from (None for a name that is not a control-flow conversion)."""
    return _BY_NAME.get(name)
