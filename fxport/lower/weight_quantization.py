"""Weight-only blockwise quantisation (``--precision int4`` / ``int8-weights``): the Linear
weights of the module stored as 4- or 8-bit integers with one float32 scale per block of
``block_size`` input features, everything else float32 — onnxruntime-genai's ``-p int4``.

The scheme is decided on the torch side and recorded (:func:`quantize_module_weights`): each
``nn.Linear`` weight (transformers' ``Conv1D`` too), per output feature, in blocks along the
input dimension, symmetric: the block's element of largest magnitude ``m`` sets the scale
``m / -2**(bits-1)`` (so ``m`` is exactly the lowest level), every element is
``round(w / scale)`` clipped to ``[-2**(bits-1), 2**(bits-1) - 1]``. The record keeps the
integers, the scales and the dequantised weight ``q * scale`` (float32, exact).

Two consumers read the same record, so the file and its reference hold the same numbers:

- :func:`~fxport.lower.quantized_matmuls.rewrite_quantized_matmuls` finds every ``MatMul`` (or ``Gemm``) of the lowered file,
  in the main graph and in ``Loop``/``If`` bodies (the decode step runs in a ``Loop``), whose
  constant weight holds one recorded weight's values (found by content, in either orientation,
  through a ``Transpose``), and replaces it by ``com.microsoft.MatMulNBits`` or by the standard
  ``DequantizeLinear(block_size=…) → MatMul`` (opset 21, int4/int8 initializers), with the
  recorded integers and scales;
- :meth:`WeightQuantization.fake_quantized` is the eager reference verification runs: a copy
  of the module whose quantised Linear weights are the dequantised ones (a weight tied to an
  embedding is untied: the embedding stays float32, as in the file).

Example::

    >>> import torch
    >>> layer = torch.nn.Linear(64, 3, bias=False)
    >>> record = quantize_module_weights(torch.nn.Sequential(layer), BlockwiseScheme(bits=4, block_size=32))
    >>> weight = record.weights["0.weight"]
    >>> weight.integers.shape, weight.scales.shape, int(weight.integers.min()) >= -8
    ((3, 64), (3, 2), True)
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Iterator

import numpy as np
import torch


#: Weight-only precisions (fxport.engine.choices.WEIGHT_ONLY) and their bits.
WEIGHT_ONLY_BITS = {"int4": 4, "int8-weights": 8}
#: The block size and form when none is given (docs/precision.md, "Weight-only int4/int8": measured).
DEFAULT_BLOCK_SIZE, DEFAULT_FORM = 32, "matmulnbits"
#: The activations each form computes with when none are asked for: MatMulNBits float32 (what
#: eager computes); the standard form int8, as ONNX Runtime's CPU provider computes it by default
#: (it fuses DequantizeLinear → MatMul into MatMulNBits, ``session.qdq_matmulnbits_accuracy_level`` 4).
DEFAULT_ACTIVATIONS = {"matmulnbits": "float32", "qdq": "int8"}
#: The opset the standard form needs (blockwise DequantizeLinear with int4 inputs).
QDQ_OPSET = 21


@dataclasses.dataclass(frozen=True)
class BlockwiseScheme:
    """How weights are quantised and written: ``bits`` (4 or 8), ``block_size`` input features per
    scale, ``form`` (``"matmulnbits"``: com.microsoft.MatMulNBits; ``"qdq"``: DequantizeLinear
    then MatMul, standard ONNX), ``activations`` (``"float32"``: MatMulNBits ``accuracy_level 0``;
    ``"int8"``: ``accuracy_level 4``, activations quantised per block at run time — the eager
    reference then computes those Linears with :func:`int8_activation_matmul`)."""

    bits: int = 4
    block_size: int = 32
    form: str = "matmulnbits"
    #: what the quantised MatMuls multiply the weights with: ``"float32"`` (MatMulNBits
    #: ``accuracy_level 0``) or ``"int8"`` (``accuracy_level 4``: activations quantised per block at
    #: run time; the standard form in ONNX Runtime's default session)
    activations: str = "float32"

    @property
    def accuracy_level(self) -> int:
        """MatMulNBits' ``accuracy_level``: 0 (float32 activations) or 4 (int8 activations)."""
        return 4 if self.activations == "int8" else 0

    @property
    def lowest(self) -> int:
        return -(1 << (self.bits - 1))

    @property
    def highest(self) -> int:
        return (1 << (self.bits - 1)) - 1

    @classmethod
    def of(cls, precision: str, block_size: int | None = None, form: str | None = None,
           activations: str | None = None) -> "BlockwiseScheme":
        """The scheme of a weight-only precision and its options (None: the defaults; the
        activations default to int8 for the standard form, which ONNX Runtime computes so).

        >>> BlockwiseScheme.of("int4").describe()
        'int4, blocks of 32, MatMulNBits'
        >>> BlockwiseScheme.of("int4", activations="int8").describe()
        'int4, blocks of 32, MatMulNBits, int8 activations'
        """
        form = form or DEFAULT_FORM
        return cls(bits=WEIGHT_ONLY_BITS[precision], block_size=block_size or DEFAULT_BLOCK_SIZE, form=form,
                   activations=activations or DEFAULT_ACTIVATIONS[form])

    def describe(self) -> str:
        """``'int4, blocks of 32, MatMulNBits'`` (``', int8 activations'`` added when they are)."""
        form = "MatMulNBits" if self.form == "matmulnbits" else "DequantizeLinear + MatMul"
        return f"int{self.bits}, blocks of {self.block_size}, {form}" + (
            ", int8 activations" if self.activations == "int8" else "")


@dataclasses.dataclass
class QuantizedWeight:
    """One Linear weight quantised: ``integers`` (int8 array ``[out, in]``), ``scales`` (float32
    ``[out, blocks]``), ``dequantized`` (the float32 weight the file computes with, in the
    module's own orientation)."""

    name: str
    integers: np.ndarray
    scales: np.ndarray
    dequantized: torch.Tensor
    #: the module's weight is ``[in, out]`` (transformers' Conv1D) rather than ``[out, in]``
    in_out: bool = False
    #: MatMul/Gemm nodes of the file it replaced (0: not found in the file, left float32)
    uses: int = 0

    @property
    def in_features(self) -> int:
        return self.integers.shape[1]


@dataclasses.dataclass
class WeightQuantization:
    """The record of one module's weights (name → :class:`QuantizedWeight`), what the rewrite did
    with it, and the agreement of the quantised file with the float32 model."""

    scheme: BlockwiseScheme
    weights: dict[str, QuantizedWeight]
    #: MatMul/Gemm nodes replaced, by graph (``main_graph``, a Loop body's name)
    replaced: dict[str, int] = dataclasses.field(default_factory=dict)
    #: the file's outputs against the float32 model (:mod:`fxport.verify.weight_agreement`)
    agreement: dict | None = None

    @property
    def applied(self) -> list[QuantizedWeight]:
        return [w for w in self.weights.values() if w.uses]

    def fake_quantized(self, module: torch.nn.Module) -> torch.nn.Module:
        """A copy of ``module`` whose weights the file quantised are the dequantised ones.

        The eager reference of a weight-only file: the same numbers as the file's weights, so the
        file is compared with it token for token. ``module`` is not changed.

        Example::

            >>> reference = record.fake_quantized(model)          # doctest: +SKIP
        """
        replaced = {w.name: w for w in self.applied}
        fake = copy.deepcopy(module)
        for name, submodule in fake.named_modules():
            weight = replaced.get(f"{name}.weight" if name else "weight")
            if weight is not None:
                # a new Parameter: a weight tied to an embedding is untied, the embedding stays float32
                submodule.weight = torch.nn.Parameter(weight.dequantized.clone(), requires_grad=False)
                if self.scheme.activations == "int8":
                    _multiply_with_int8_activations(submodule, weight, self.scheme.block_size)
        return fake

    def summary(self) -> dict:
        """JSON-ready: the scheme, what was quantised where, the agreement with float32."""
        return {"bits": self.scheme.bits, "block_size": self.scheme.block_size, "form": self.scheme.form,
                "activations": self.scheme.activations, "accuracy_level": self.scheme.accuracy_level,
                "weights": len(self.applied), "weights_left_float32": sorted(w.name for w in self.weights.values()
                                                                              if not w.uses),
                "replaced_nodes": dict(self.replaced), "agreement_with_fp32": self.agreement}

    def describe(self) -> str:
        """One line for the CLI: what was quantised, and where."""
        return describe_summary(self.summary())


def describe_summary(summary: dict) -> str:
    """:meth:`WeightQuantization.summary` (``result.quantization``) as the CLI's line.

    >>> describe_summary({"bits": 4, "block_size": 32, "form": "matmulnbits", "weights": 15,
    ...                   "weights_left_float32": [], "replaced_nodes": {"main": 15, "body": 15}})
    'Weights int4, blocks of 32, MatMulNBits: 15 Linear weights, 30 MatMuls (15 inside Loop/If bodies)'
    """
    scheme = BlockwiseScheme(bits=summary["bits"], block_size=summary["block_size"], form=summary["form"],
                             activations=summary.get("activations", "float32"))
    replaced = summary["replaced_nodes"]
    inside, total = sum(n for graph, n in replaced.items() if graph != "main"), sum(replaced.values())
    left = summary.get("weights_left_float32") or []
    return (f"Weights {scheme.describe()}: {summary['weights']} Linear weights, {total} MatMuls "
            f"({inside} inside Loop/If bodies)" + (f", {len(left)} left float32 (not found in the file)" if left else ""))


def _multiply_with_int8_activations(layer: torch.nn.Module, weight: "QuantizedWeight", block_size: int) -> None:
    """``layer`` (an ``nn.Linear`` or transformers' ``Conv1D`` of an eager reference) computing as
    MatMulNBits with int8 activations does (:func:`int8_activation_matmul`), then its bias."""
    integers = torch.from_numpy(weight.integers)
    scales = torch.from_numpy(weight.scales)
    blocked: dict = {}                                   # the weight in blocks, made once per device

    def forward(x: torch.Tensor) -> torch.Tensor:
        if x.device not in blocked:
            blocked[x.device] = _blocked_weight(integers, block_size, x.device)
        product = int8_activation_matmul(x, integers, scales, block_size, blocked[x.device]).to(x.dtype)
        return product if layer.bias is None else product + layer.bias

    layer.forward = forward


# --- the torch side: quantise and record ---------------------------------------------------------

def quantize_blockwise(weight: torch.Tensor, scheme: BlockwiseScheme) -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
    """``weight`` ``[out, in]`` quantised in blocks along ``in``: (integers int8 ``[out, in]``,
    scales float32 ``[out, blocks]``, dequantised float32 ``[out, in]``). A last partial block
    gets its own scale over the elements it has.

    Example::

        >>> q, s, d = quantize_blockwise(torch.tensor([[1.0, -2.0, 0.5, 4.0]]), BlockwiseScheme(bits=4, block_size=16))
        >>> q.tolist(), s.tolist(), d.tolist()
        ([[-2, 4, -1, -8]], [[-0.5]], [[1.0, -2.0, 0.5, 4.0]])
    """
    rows, columns = weight.shape
    size = scheme.block_size
    blocks = -(-columns // size)
    padded = torch.zeros(rows, blocks * size, dtype=torch.float32)
    padded[:, :columns] = weight.detach().to(torch.float32)
    grouped = padded.reshape(rows, blocks, size)
    largest = grouped.abs().argmax(dim=2, keepdim=True)
    extreme = torch.gather(grouped, 2, largest)                       # the signed element of largest magnitude
    scales = extreme / float(scheme.lowest)                            # it becomes exactly the lowest level
    divisor = torch.where(scales == 0, torch.ones_like(scales), scales)
    integers = torch.clamp(torch.round(grouped / divisor), scheme.lowest, scheme.highest)
    dequantized = (integers * scales).reshape(rows, blocks * size)[:, :columns].contiguous()
    return (integers.reshape(rows, blocks * size)[:, :columns].to(torch.int8).numpy(),
            scales.reshape(rows, blocks).numpy().astype(np.float32), dequantized)


def _blocked_weight(integers: torch.Tensor, block_size: int, device) -> torch.Tensor:
    """``integers`` ``[N, K]`` as float64 ``[blocks, block_size, N]`` (a last partial block padded
    with zeros): the right operand of :func:`int8_activation_matmul`'s per-block products."""
    out_features, columns = integers.shape
    blocks = -(-columns // block_size)
    weight = torch.zeros(out_features, blocks * block_size, dtype=torch.float64, device=device)
    weight[:, :columns] = integers.to(device=device, dtype=torch.float64)
    return weight.reshape(out_features, blocks, block_size).permute(1, 2, 0).contiguous()


def int8_activation_matmul(activations: torch.Tensor, integers: torch.Tensor, scales: torch.Tensor,
                           block_size: int, blocked: torch.Tensor | None = None) -> torch.Tensor:
    """``activations @ (integers * scales).T`` as ONNX Runtime's CPU MatMulNBits computes it with
    ``accuracy_level 4`` (MLAS ``SQNBIT_CompInt8``): ``activations`` ``[..., K]`` float32, the
    weight's ``integers`` ``[N, K]`` (signed, int8 or int4 values) and ``scales`` ``[N, blocks]``.

    MLAS (``QuantizeARow_CompInt8_avx512`` / ``_avx2``, onnxruntime 1.32) quantises each row of
    the activations at run time in blocks of the *weight's* ``block_size`` along K: symmetric,
    ``amax`` = the block's largest magnitude, scale ``amax / 127``, each value
    ``round_half_even(a * (127 / amax))`` (0 when ``amax`` is 0; a last partial block padded with
    zeros). Each block's product is an exact integer dot product, scaled by ``scale_a * scale_b``
    (float32) and summed over the blocks. Everything up to the integer dot products is reproduced
    bit for bit; the sum over the blocks is done here in float64 and rounded once, where MLAS
    sums float32 partials in its own lane order — so the two differ by float32 rounding only
    (measured in docs/precision.md).

    Example::

        >>> a = torch.tensor([[1.0, -0.5, 0.25, 0.0]])
        >>> int8_activation_matmul(a, torch.tensor([[1, 2, 3, 4]], dtype=torch.int8), torch.tensor([[0.5]]), 16)
        tensor([[0.3740]])
    """
    columns = activations.shape[-1]
    out_features = integers.shape[0]
    blocks = -(-columns // block_size)
    lead = activations.shape[:-1]
    rows = activations.reshape(-1, columns).to(torch.float32)
    padded = torch.zeros(rows.shape[0], blocks * block_size, dtype=torch.float32, device=rows.device)
    padded[:, :columns] = rows
    grouped = padded.reshape(-1, blocks, block_size)                              # [M, B, bs]
    largest = grouped.abs().amax(dim=2, keepdim=True)
    scale_a = largest / 127.0                                                     # float32, as MLAS
    inverse = torch.where(largest != 0, 127.0 / torch.where(largest != 0, largest, torch.ones_like(largest)),
                          torch.zeros_like(largest))
    quantized = torch.clamp(torch.round(grouped * inverse), -128, 127)           # half to even, as _MM_ROUND_NEAREST
    if blocked is None:
        blocked = _blocked_weight(integers, block_size, rows.device)             # [B, bs, N]
    # the integer dot products of each block: exact in float64
    dots = torch.bmm(quantized.double().transpose(0, 1), blocked)                # [B, M, N]
    combined = scale_a.reshape(-1, blocks).t().unsqueeze(2) * \
        scales.to(device=rows.device, dtype=torch.float32).t().unsqueeze(1)     # [B, M, N] float32, as MLAS
    product = (dots * combined.double()).sum(dim=0).to(torch.float32)
    return product.reshape(*lead, out_features)


def quantize_module_weights(module: torch.nn.Module, scheme: BlockwiseScheme) -> WeightQuantization:
    """Every Linear weight of ``module`` (``nn.Linear``, transformers' ``Conv1D``), quantised by
    ``scheme`` and recorded by parameter name; the module is not changed. A weight shared by
    several Linears is quantised once (its first name)."""
    weights: dict[str, QuantizedWeight] = {}
    seen: set[int] = set()
    for name, submodule in _linear_layers(module):
        parameter = submodule.weight
        if id(parameter) in seen or parameter.dim() != 2 or not parameter.is_floating_point():
            continue
        seen.add(id(parameter))
        in_out = not isinstance(submodule, torch.nn.Linear)               # Conv1D keeps [in, out]
        out_in = parameter.detach().t() if in_out else parameter.detach()
        integers, scales, dequantized = quantize_blockwise(out_in, scheme)
        key = f"{name}.weight" if name else "weight"
        weights[key] = QuantizedWeight(key, integers, scales, dequantized.t().contiguous() if in_out else dequantized,
                                       in_out=in_out)
    return WeightQuantization(scheme, weights)


def _linear_layers(module: torch.nn.Module) -> Iterator[tuple[str, torch.nn.Module]]:
    for name, submodule in module.named_modules():
        if isinstance(submodule, torch.nn.Linear) or type(submodule).__name__ == "Conv1D" and hasattr(submodule, "nf"):
            yield name, submodule
