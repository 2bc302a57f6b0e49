"""Provenance: which rule made a node, and where in the user's code the node came from.

The one owner of the metadata keys fxport writes and reads:

- :data:`FX_RULE_KEY` (``node.meta["fxport_rule"]``): the rule or graph pass that made an FX node;
- :data:`ONNX_RULE_KEY` (``metadata_props["fxport.rule"]``): the rule that produced an ONNX node
  (op rules' translations, and the nodes lowered from what a graph rule or pass made);
- the exporter's own per-node metadata, which fxport reads: :data:`EXPORTER_FX_NODE_KEY` (the FX
  node an ONNX node was lowered from) and :data:`EXPORTER_STACK_KEY` (its stack-trace text, see
  :func:`fxport.common.frames.user_location_in`).

Imports nothing heavy (ONNX nodes are used through their ``metadata_props``).

Example::

    >>> import onnx
    >>> node = onnx.helper.make_node("Erf", ["x"], ["y"])
    >>> set_metadata(node, ONNX_RULE_KEY, "aten::erfinv")
    >>> rule_of_node(node), metadata(node)
    ('aten::erfinv', {'fxport.rule': 'aten::erfinv'})
"""

from __future__ import annotations

from typing import Any

#: ``node.meta`` key of an FX node made by a graph rule or pass: the rule's name.
FX_RULE_KEY = "fxport_rule"
#: ONNX ``NodeProto.metadata_props`` key: the name of the rule that produced the node.
ONNX_RULE_KEY = "fxport.rule"
#: The exporter's ``metadata_props`` key: the FX node an ONNX node was lowered from
#: (``%name : ... = call_function[target=torch.ops.aten.erfinv.default](...)``).
EXPORTER_FX_NODE_KEY = "pkg.torch.onnx.fx_node"
#: The exporter's ``metadata_props`` key: the stack trace of that FX node.
EXPORTER_STACK_KEY = "pkg.torch.onnx.stack_trace"


def mark_made_by(nodes: Any, rule: str, origin: Any = None,
                 inherit: tuple[str, ...] = ("stack_trace",)) -> None:
    """Stamp the FX nodes a graph rule or pass made with the rule's name (:data:`FX_RULE_KEY`);
    each takes ``origin``'s ``inherit`` meta entries (its user line) where it has none.

    The one place fxport stamps FX provenance. Example::

        >>> import torch.fx
        >>> graph = torch.fx.Graph()
        >>> old, new = graph.placeholder("x"), graph.placeholder("y")
        >>> old.meta["stack_trace"] = 'File "net.py", line 3'
        >>> mark_made_by([new], "neg-neg", old)
        >>> new.meta[FX_RULE_KEY], new.meta["stack_trace"]
        ('neg-neg', 'File "net.py", line 3')
    """
    for node in nodes:
        node.meta[FX_RULE_KEY] = rule
        for key in inherit if origin is not None else ():
            if key not in node.meta and origin.meta.get(key):
                node.meta[key] = origin.meta[key]


def metadata(node: Any) -> dict[str, str]:
    """An ONNX node's ``metadata_props`` as a dict."""
    return {prop.key: prop.value for prop in node.metadata_props}


def set_metadata(node: Any, key: str, value: str) -> None:
    """Set (or replace) one ``metadata_props`` entry of an ONNX node."""
    for prop in node.metadata_props:
        if prop.key == key:
            prop.value = value
            return
    node.metadata_props.add(key=key, value=value)


def rule_of_node(node: Any) -> str | None:
    """The fxport rule recorded on an ONNX node, or None."""
    return next((prop.value for prop in node.metadata_props if prop.key == ONNX_RULE_KEY), None)


def fx_node_name(props: dict[str, str]) -> str:
    """The FX node name (``%erfinv``) the exporter recorded in an ONNX node's metadata, or ``""``."""
    return props.get(EXPORTER_FX_NODE_KEY, "").split(" ", 1)[0]
