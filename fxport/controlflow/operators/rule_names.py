"""The names of the control-flow conversions, as the rewrites table records them.

Example::

    >>> from fxport.controlflow.operators.rule_names import CONTROL_FLOW_RULES
    >>> CONTROL_FLOW_RULES["if-to-cond"]
    'a tensor-conditioned if/else becomes torch.cond'
"""

from __future__ import annotations

#: name → one-line description, for every rule name a control-flow record can carry.
CONTROL_FLOW_RULES: dict[str, str] = {
    "if-to-where": "a tensor-conditioned if/else whose branches are pure and cheap becomes torch.where",
    "if-to-cond": "a tensor-conditioned if/else becomes torch.cond",
    "ifexp-to-where": "a tensor-conditioned `a if c else b` becomes torch.where",
    "ifexp-to-cond": "a tensor-conditioned `a if c else b` becomes torch.cond",
    "while-to-while_loop": "a while loop with a tensor condition becomes torch while_loop",
    "for-to-while_loop": "a for loop over a tensor-sized range (or a break on a tensor) becomes torch while_loop",
    "if-in-traced-body": "an if (or `a if c else b`) nested in a converted branch or loop body selects with where there",
    "while-in-traced-body": "a while loop nested in a converted branch or loop body becomes a nested while_loop",
    "for-in-traced-body": "a for loop nested in a converted branch or loop body becomes a nested while_loop",
    "item-predicate-to-tensor": "a condition on .item() of a tensor is computed on the tensor (graph pass)",
}
