"""The report stage: what a conversion produced, as data.

A :class:`ConversionResult` is returned by :func:`fxport.convert` and serialised by the CLI
(``--report``, ``--json``). Each rewrite that fired is an :class:`AppliedRewrite`; each
verified input set is a :class:`VerificationRow`.

Example::

    >>> import torch, fxport
    >>> from examples.gated_mlp import GatedMLP
    >>> result = fxport.convert(GatedMLP(), (torch.full((3, 8), -2.0),), dynamic_shapes={"x": {0: "batch"}})
    >>> result.verified, [r.rule for r in result.rewrites]
    (True, ['if-to-cond', 'ifexp-to-where', 'aten::mean', 'aten::max'])
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import onnx

from fxport.errors import SourceLocation


@dataclasses.dataclass
class AppliedRewrite:
    """One rewrite that fired while converting the model.

    Attributes:
        rule: the rule's name (e.g. ``"if-to-where"``, ``"aten::erfinv"``).
        tier: ``"control-flow"``, ``"patch"``, ``"op"`` or ``"graph"``.
        location: where in the user's code it applied, when known.
        detail: one line saying what was done and why (e.g. the where/cond choice).
        data: rule-specific facts (carried variables, source before/after, node counts...).
    """

    rule: str
    tier: str
    location: SourceLocation | None = None
    detail: str = ""
    data: dict[str, Any] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "rule": self.rule,
            "tier": self.tier,
            "location": str(self.location) if self.location else None,
            "detail": self.detail,
            "data": _jsonable(self.data),
        }


@dataclasses.dataclass
class VerificationRow:
    """The comparison of eager PyTorch and ONNX Runtime on one input set."""

    name: str
    input_shapes: list[list[int]]
    provider: str
    max_abs_error: float
    max_rel_error: float
    cosine_similarity: float
    passed: bool
    mismatched_outputs: list[str] = dataclasses.field(default_factory=list)
    note: str = ""
    #: Max abs distances of eager float32 and of the ONNX file to a float64 run of the model, set
    #: when the fixed tolerances failed and the float64 reference judged the row (None otherwise).
    eager_error: float | None = None
    onnx_error: float | None = None

    @property
    def skipped(self) -> bool:
        """A generated input set that did not run (eager rejects it, or a bound stopped it): no
        comparison, so no errors; it does not fail verification."""
        return self.note.startswith("skipped")

    def to_dict(self) -> dict:
        """JSON-ready; errors that were not measured (a skipped row) are ``null``, not ``"nan"``."""
        data = dataclasses.asdict(self)
        for key in ("max_abs_error", "max_rel_error", "cosine_similarity"):
            if data[key] != data[key]:
                data[key] = None
        return _jsonable({**data, "skipped": self.skipped})


@dataclasses.dataclass
class ConversionResult:
    """Everything :func:`fxport.convert` produced.

    Attributes:
        model: the ONNX model.
        output_path: where it was written, or None when kept in memory.
        rewrites: the rewrites that fired, in the order they applied.
        verification: one row per verified input set (empty when verification was off).
        timings: seconds spent per pipeline stage.
        opset: the ONNX default-domain opset of ``model``.
        warnings: one-line notices the user should see (e.g. train mode switched to eval).
        artifacts: intermediate products, filled only with ``convert(..., keep_artifacts=True)``.
        precision: ``"fp32"``, ``"fp16"``, ``"int8"``, ``"int4"`` or ``"int8-weights"`` (docs/precision.md).
        node_counts: ONNX node count (subgraphs included) after each graph stage, in order:
            ``exported``, ``optimized`` (unless ``optimize=False``), ``ort`` (``optimize="ort"``:
            after the ONNX Runtime fusions), then ``fp16`` (float32 islands added)
            or ``int8`` (quantised).
        tolerances: the user's ``atol`` / ``rtol`` when given (empty: each dtype's defaults).
        coverage: per converted ``if`` / loop, the outcomes the verified input sets gave it and
            what none reached (``{"kind", "location", "outcomes", "missing"}``).
        optimize: the optimisation level: ``"none"``, ``"generic"`` or ``"ort"`` (docs/optimize.md).
        fusions: with ``optimize="ort"``, the ONNX Runtime fusions that fired and how often
            (onnxscript's names: ``{"sdpa": 2, "mha2": 2, "skip_layer_normalization": 4}``).
        quantization: int4 / int8-weights: the scheme, the weights and MatMuls quantised (by
            graph: ``main``, ``body``), and ``agreement_with_fp32`` (the file's ids against the
            float32 model's; verification compares it with the same quantised weights).
    """

    model: onnx.ModelProto
    output_path: str | None = None
    rewrites: list[AppliedRewrite] = dataclasses.field(default_factory=list)
    verification: list[VerificationRow] = dataclasses.field(default_factory=list)
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    opset: int | None = None
    warnings: list[str] = dataclasses.field(default_factory=list)
    artifacts: dict[str, Any] = dataclasses.field(default_factory=dict)
    precision: str = "fp32"
    node_counts: dict[str, int] = dataclasses.field(default_factory=dict)
    tolerances: dict[str, float | None] = dataclasses.field(default_factory=dict)
    coverage: list[dict] = dataclasses.field(default_factory=list)
    optimize: str = "generic"
    fusions: dict[str, int] = dataclasses.field(default_factory=dict)
    quantization: dict = dataclasses.field(default_factory=dict)

    @property
    def verified(self) -> bool:
        """True when verification ran and every input set passed."""
        return bool(self.verification) and all(row.passed for row in self.verification)

    def op_counts(self) -> dict[str, int]:
        """ONNX op-type counts, including nodes inside If/Loop/Scan subgraphs."""
        return count_ops(self.model.graph)

    def to_dict(self) -> dict:
        return {
            "ok": True,
            "output_path": self.output_path,
            "opset": self.opset,
            "verified": self.verified,
            "rewrites": [r.to_dict() for r in self.rewrites],
            "verification": [row.to_dict() for row in self.verification],
            "timings": {k: round(v, 4) for k, v in self.timings.items()},
            "op_counts": self.op_counts(),
            "warnings": list(self.warnings),
            "precision": self.precision,
            "node_counts": dict(self.node_counts),
            "tolerances": dict(self.tolerances),
            "coverage": list(self.coverage),
            "optimize": self.optimize,
            "fusions": dict(self.fusions),
            **({"quantization": _jsonable(self.quantization)} if self.quantization else {}),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)


def iter_nodes(graph: onnx.GraphProto):
    """Every node of ``graph`` and of its nested subgraphs (If/Loop/Scan bodies), depth first."""
    for node in graph.node:
        yield node
        for sub in subgraphs(node):
            yield from iter_nodes(sub)


def iter_graphs(graph: onnx.GraphProto):
    """``graph`` and every nested subgraph (If/Loop/Scan bodies), depth first."""
    yield graph
    for node in graph.node:
        for sub in subgraphs(node):
            yield from iter_graphs(sub)


def subgraphs(node: onnx.NodeProto):
    """The graphs held by ``node``'s attributes (an If's branches, a Loop's or Scan's body)."""
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def count_ops(graph: onnx.GraphProto) -> dict[str, int]:
    """Op-type counts of a graph including subgraphs, sorted by name for stable output."""
    counts: dict[str, int] = {}
    for node in iter_nodes(graph):
        key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    return str(value)
