"""Source-level control-flow conversion (AutoGraph-style) for torch.export.

``if``/``while``/``for`` statements of the model's own code are rewritten into calls of
trace-time operators that keep Python semantics for Python values and emit ``torch.where``,
``torch.cond`` or ``while_loop`` for tensor/SymBool conditions. See docs/control-flow.md.

The package is laid out like TensorFlow AutoGraph's converter:

* :mod:`~fxport.controlflow.operators` — the runtime converted code calls (``_fx.if_stmt``, …);
  it imports nothing from the compiler side below.
* :mod:`~fxport.controlflow.analysis` (names read/written, liveness) and
  :mod:`~fxport.controlflow.facts` (typed facts per ``if``/loop, computed before rewriting).
* :mod:`~fxport.controlflow.converters` — one converter per construct, applied in order by
  :mod:`~fxport.controlflow.engine` on a :class:`~fxport.controlflow.context.Context`.
* :mod:`~fxport.controlflow.install` — installs converted forwards while a model is captured.

:data:`CONTROL_FLOW_RULES` names the conversions as the rewrites table records them; pass some
as ``convert_control_flow(model, disabled=...)`` to switch them off.

Example::

    >>> from fxport.controlflow import CONTROL_FLOW_RULES, convert_control_flow
    >>> "if-to-where" in CONTROL_FLOW_RULES
    True
    >>> import torch
    >>> from examples.gated_mlp import GatedMLP
    >>> model = GatedMLP()
    >>> with convert_control_flow(model, disabled={"ifexp-to-where"}) as records:
    ...     ep = torch.export.export(model, (torch.randn(3, 8),), strict=False)
    >>> [r.rule for r in records]
    ['if-to-cond', 'ifexp-to-cond']
"""

from fxport.controlflow.install import convert_control_flow, converted_function, converted_source
from fxport.controlflow.operators.rule_names import CONTROL_FLOW_RULES

__all__ = ["CONTROL_FLOW_RULES", "convert_control_flow", "converted_function", "converted_source"]
