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

import os
from typing import Any, Callable

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
        #: Where a file that begins with the model's leading pieces is being written: called with
        #: ``pieces(model)``, it returns that file's path once those are in it, or None
        #: (:meth:`fxport.lower.external.Staging.early_head`).
        self.head_file: Callable[[list[bytes]], str | None] | None = None

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

    def by_reference(self, model: onnx.ModelProto) -> tuple[bytes, str] | None:
        """``model``'s bytes with the raw data of its graph's initializers left in the file
        :attr:`head_file` names, referred to by offset (ONNX external data), and that file's
        directory; None without such a file.

        ONNX Runtime maps those weights from the file instead of copying them out of the bytes
        (VGG's 530 MB: a 0.05 s session load against 0.9 s), and verification runs the very
        bytes the output file is made of.
        """
        pieces = self.pieces(model)
        path = self.head_file(pieces) if self.head_file is not None and len(pieces) == 4 else None
        if path is None:
            return None
        graph = initializers_by_reference(self.graph, os.path.basename(path), len(pieces[0]) + len(pieces[1]))
        return b"".join([pieces[0], _length_delimited_key(GRAPH_FIELD) + _varint(len(graph)), graph, pieces[3]]), \
            os.path.dirname(path)


def initializers_by_reference(graph: bytes, location: str, graph_offset: int) -> bytes:
    """A serialised GraphProto's bytes with each top-level initializer's ``raw_data`` over
    :data:`EMBEDDED_BYTES` replaced by an external-data reference to ``location``, where the
    graph's bytes begin at ``graph_offset``. Every other field is kept byte for byte.

    >>> tensor = onnx.numpy_helper.from_array(__import__("numpy").zeros(512, "float32"), "w")
    >>> graph = onnx.helper.make_graph([], "g", [], [], [tensor]).SerializeToString()
    >>> referred = onnx.GraphProto.FromString(initializers_by_reference(graph, "m.onnx", 10))
    >>> [(e.key, e.value) for e in referred.initializer[0].external_data], referred.initializer[0].raw_data
    ([('location', 'm.onnx'), ('offset', '27'), ('length', '2048')], b'')
    """
    view = memoryview(graph)
    out: list[bytes | memoryview] = []
    for number, start, end, payload in _fields(view, 0, len(view)):
        tensor = _tensor_by_reference(view, payload, end, location, graph_offset) if number == INITIALIZER_FIELD else None
        if tensor is None:
            out.append(view[start:end])
        else:
            out += [_length_delimited_key(INITIALIZER_FIELD) + _varint(len(tensor)), tensor]
    return b"".join(out)


#: GraphProto's ``initializer`` and TensorProto's fields the rewrite above reads or writes.
INITIALIZER_FIELD = onnx.GraphProto.DESCRIPTOR.fields_by_name["initializer"].number
_TENSOR_FIELDS = onnx.TensorProto.DESCRIPTOR.fields_by_name
RAW_DATA, EXTERNAL_DATA, DATA_LOCATION = (_TENSOR_FIELDS[name].number for name in ("raw_data", "external_data", "data_location"))

#: Raw data up to this size stays in the graph (onnx.save's threshold for external data).
EMBEDDED_BYTES = 1024


def _tensor_by_reference(view: memoryview, start: int, end: int, location: str, graph_offset: int) -> bytes | None:
    """The TensorProto in ``view[start:end]`` with its raw data referred to in ``location``; None
    when it keeps its data (small, or not raw)."""
    kept, raw = [], None
    for number, field_start, field_end, payload in _fields(view, start, end):
        if number == RAW_DATA and field_end - payload > EMBEDDED_BYTES:
            raw = (graph_offset + payload, field_end - payload)
        elif number in (EXTERNAL_DATA, DATA_LOCATION):
            return None
        else:
            kept.append(bytes(view[field_start:field_end]))
    if raw is None:
        return None
    for key, value in (("location", location), ("offset", str(raw[0])), ("length", str(raw[1]))):
        entry = _string_field(1, key) + _string_field(2, value)  # StringStringEntryProto
        kept.append(_length_delimited_key(EXTERNAL_DATA) + _varint(len(entry)) + entry)
    kept.append(_varint(DATA_LOCATION << 3) + _varint(onnx.TensorProto.EXTERNAL))
    return b"".join(kept)


def _fields(view: memoryview, start: int, end: int):
    """``(number, start, end, payload start)`` of each field of the message in ``view[start:end]``
    (payload start None for a field that is not length-delimited)."""
    position = start
    while position < end:
        field_start = position
        tag, position = _read_varint(view, position)
        number, wire_type = tag >> 3, tag & 7
        payload = None
        if wire_type == 0:
            _, position = _read_varint(view, position)
        elif wire_type == 2:
            length, payload = _read_varint(view, position)
            position = payload + length
        elif wire_type in (1, 5):
            position += 8 if wire_type == 1 else 4
        else:
            raise ValueError(f"protobuf wire type {wire_type} in an ONNX graph")
        yield number, field_start, position, payload


def _read_varint(view: memoryview, position: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = view[position]
        position += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, position


def _string_field(number: int, text: str) -> bytes:
    data = text.encode("utf-8")
    return _length_delimited_key(number) + _varint(len(data)) + data


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

