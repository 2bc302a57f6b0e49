"""Source-level control-flow conversion (AutoGraph-style) for torch.export.

``if``/``while``/``for`` statements of the model's own code are rewritten into calls of
trace-time operators that keep Python semantics for Python values and emit ``torch.where``,
``torch.cond`` or ``while_loop`` for tensor/SymBool conditions. See docs/control-flow.md.

Example::

    >>> from fxport.controlflow import convert_control_flow
    >>> with convert_control_flow(model, strategy="auto") as records:     # doctest: +SKIP
    ...     ep = torch.export.export(model, (x,), strict=False)
"""

from fxport.controlflow.install import convert_control_flow, converted_function, converted_source

__all__ = ["convert_control_flow", "converted_function", "converted_source"]
