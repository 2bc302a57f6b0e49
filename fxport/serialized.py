"""A lowered model's bytes, serialised once for the checker, ONNX Runtime and the file.

Serialising a ModelProto takes about a second per 300 MB of weights on a small machine, and a
conversion used to do it for the ONNX checker, for each verification session and for the file.
:class:`ModelBytes` serialises the graph (which holds the weights) once, when the lower stage
is done editing it; the top-level fields, which later stages still edit (verification widens
the dynamic-range metadata), are serialised at each use, around it. A protobuf message's bytes
are its fields' bytes in field order, so the result is what ``SerializeToString()`` returns.

Example::

    >>> import onnx
    >>> from onnx import TensorProto, helper
    >>> graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
    ...                           [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
    ...                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    >>> model = helper.make_model(graph)
    >>> model_bytes = ModelBytes(model)
    >>> _ = model.metadata_props.add(key="k", value="v")  # a top-level edit after the graph was kept
    >>> model_bytes(model) == model.SerializeToString()
    True
"""

from __future__ import annotations

from typing import Any

import onnx

#: ModelProto's field number of ``graph``: the fields before it and after it are serialised apart.
GRAPH_FIELD = onnx.ModelProto.DESCRIPTOR.fields_by_name["graph"].number


class ModelBytes:
    """Serialises ``model`` reusing its graph's bytes; any other model is serialised as usual.

    The graph must not be edited after this is made (the pipeline makes it at the end of the
    lower stage); a cheap fingerprint (node count, input and output names and shapes) catches
    the edits later code is likeliest to make, and then the model is serialised again.
    """

    def __init__(self, model: onnx.ModelProto):
        self.model = model
        self.graph = model.graph.SerializeToString()
        self._fingerprint = _fingerprint(model.graph)

    def pieces(self, model: onnx.ModelProto) -> list[bytes]:
        """``model``'s serialised form as consecutive pieces (written one after the other)."""
        if model is not self.model or _fingerprint(model.graph) != self._fingerprint:
            return [model.SerializeToString()]
        before, after = _top_level_fields(model)
        return [before, _length_delimited_key(GRAPH_FIELD) + _varint(len(self.graph)), self.graph, after]

    def __call__(self, model: onnx.ModelProto) -> bytes:
        """``model.SerializeToString()``, from the kept graph bytes when ``model`` is the one kept.

        The joined bytes are not kept: a second whole copy held through verification would
        double what the graph bytes already cost in memory, for a copy that takes a fraction of
        a second to make again."""
        pieces = self.pieces(model)
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def serialize(model: onnx.ModelProto, model_bytes: ModelBytes | None = None) -> bytes:
    """``model``'s bytes, through ``model_bytes`` when given."""
    return model_bytes(model) if model_bytes is not None else model.SerializeToString()


def _top_level_fields(model: onnx.ModelProto) -> tuple[bytes, bytes]:
    """``model``'s set fields other than ``graph``, serialised: those numbered below it, those above."""
    before, after = onnx.ModelProto(), onnx.ModelProto()
    for field, value in model.ListFields():
        if field.number == GRAPH_FIELD:
            continue
        _copy_field(before if field.number < GRAPH_FIELD else after, field, value)
    return before.SerializeToString(), after.SerializeToString()


def _copy_field(target: onnx.ModelProto, field: Any, value: Any) -> None:
    if field.is_repeated if hasattr(field, "is_repeated") else field.label == field.LABEL_REPEATED:
        getattr(target, field.name).extend(value)
    elif field.message_type is not None:
        getattr(target, field.name).CopyFrom(value)
    else:
        setattr(target, field.name, value)


def _fingerprint(graph: onnx.GraphProto) -> tuple:
    def described(values) -> tuple:
        return tuple((v.name, v.type.SerializeToString()) for v in values)

    return len(graph.node), len(graph.initializer), described(graph.input), described(graph.output)


def _length_delimited_key(number: int) -> bytes:
    return _varint(number << 3 | 2)


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)

