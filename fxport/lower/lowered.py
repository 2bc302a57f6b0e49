"""What the lower stage hands on: one ONNX model and what is known about it, as one value.

A :class:`LoweredModel` says where its weights live (inline, or staged as external data in
``home``), holds its graph serialised once (``model_bytes``), the program the exporter
translated and the node counts of each graph step. The lower stage adds it to the
:class:`~fxport.engine.conversion.Conversion` as ``lowered``; the precision stage replaces it with the
fp16 / int8 model, which keeps the float32 one it was made from (``float32``); verify, coverage
and write read it instead of asking the staging where a proto lives.

Example::

    >>> import torch
    >>> from fxport.lower.lowering import lower_model
    >>> from fxport.lower.external import Staging
    >>> program = torch.export.export(torch.nn.ReLU(), (torch.randn(2, 3),))
    >>> lowered = lower_model(program, opset=18, staging=Staging())
    >>> lowered.home, list(lowered.node_counts), lowered.float_model is lowered
    (None, ['exported', 'optimized'], True)
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnx

    from fxport.lower.external import Staging
    from fxport.lower.serialized import ModelBytes


@dataclasses.dataclass(frozen=True)
class LoweredModel:
    """One lowered ONNX model: the proto, where its weights live, its bytes, its provenance.

    Attributes:
        proto: the ModelProto. Later stages may edit its top-level fields (verification widens
            the range metadata), never its graph (:mod:`fxport.lower.serialized`).
        home: the staged directory holding its external data (:class:`~fxport.lower.external.Staging`);
            None when the weights are inside the proto.
        model_bytes: its graph serialised once, for the checker, ONNX Runtime and the file
            (self-contained float32 models; None otherwise).
        translated_program: the program the exporter translated (after its decompositions),
            whose node names the file's values carry (verification replays decisions in it).
        node_counts: ONNX nodes (subgraphs included) after each graph step, in order:
            ``exported``, ``optimized``, ``ort``, then ``fp16`` / ``int8``.
        fusions: the ONNX Runtime fusions that fired (``--optimize ort``), by name.
        float32: the float32 model this one was made from (fp16, int8); None for that model itself.
        weight_quantization: int4 / int8-weights: the record of the quantised weights
            (:class:`~fxport.lower.weight_quantization.WeightQuantization`); None otherwise.
    """

    proto: "onnx.ModelProto"
    home: str | None = None
    model_bytes: "ModelBytes | None" = None
    translated_program: Any = None
    node_counts: dict[str, int] = dataclasses.field(default_factory=dict)
    fusions: dict[str, int] = dataclasses.field(default_factory=dict)
    float32: "LoweredModel | None" = None
    weight_quantization: Any = None

    @property
    def staged(self) -> bool:
        """Whether the weights live in a staged external-data file (``home``)."""
        return self.home is not None

    @property
    def float_model(self) -> "LoweredModel":
        """The float32 model: the one this was made from, or this one."""
        return self.float32 if self.float32 is not None else self

    def runnable(self, staging: "Staging") -> "onnx.ModelProto | str":
        """What the checker and ONNX Runtime load: the proto, or for a staged pair the model file
        written next to its data (with the proto's current top-level fields)."""
        return staging.model_path(self.proto, self.home) if self.home is not None else self.proto
