"""Weight-only blockwise quantisation (issue 49, item 3): ``--precision int4`` / ``int8-weights``
write the Linear weights as MatMulNBits or DequantizeLinear(block_size) → MatMul — inside the
generation ``Loop``'s body too — and verification compares the file with eager running the same
quantised weights, token for token; the agreement with the float32 model is reported apart."""

import dataclasses
import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import fxport
import fxport.load.tasks
from fxport.errors import UsageError, VerificationError
from fxport.verify.weight_agreement import describe, share_of_equal_ids
from fxport.lower.quantized_matmuls import pack_matmulnbits
from fxport.lower.weight_quantization import (BlockwiseScheme, WeightQuantization, int8_activation_matmul,
                                              quantize_blockwise, quantize_module_weights)
from fxport.report.result import iter_graphs
from tests.conftest import op_counts, run_cli

VOCAB = 64


class Dense(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(64, 48)
        self.fc2 = torch.nn.Linear(48, 8, bias=False)   # 48 inputs: one full block of 32 and a partial one

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def ops_by_graph(model):
    """{graph name: op counts} for the main graph and every Loop/If body."""
    counts = {}
    for graph in iter_graphs(model.graph):
        ops = counts.setdefault(graph.name, {})
        for node in graph.node:
            key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"
            ops[key] = ops.get(key, 0) + 1
    return counts


# --- the scheme ---------------------------------------------------------------------------------

@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("columns", [64, 48, 7])
def test_blockwise_quantisation_is_on_its_grid_and_exact(bits, columns):
    torch.manual_seed(bits * 100 + columns)
    weight = torch.randn(5, columns) * torch.logspace(-3, 2, 5)[:, None]   # rows of very different scale
    weight[2, :3] = 0.0
    weight[3] = 0.0                                                      # an all-zero row: scale 0, integers 0
    scheme = BlockwiseScheme(bits=bits, block_size=32)
    integers, scales, dequantized = quantize_blockwise(weight, scheme)
    assert integers.dtype == np.int8 and integers.shape == (5, columns)
    assert scales.shape == (5, -(-columns // 32))
    assert integers.min() >= scheme.lowest and integers.max() <= scheme.highest
    expanded = np.repeat(scales, 32, axis=1)[:, :columns]
    np.testing.assert_array_equal(integers.astype(np.float32) * expanded, dequantized.numpy())
    assert not dequantized[3].any()
    # each block's largest magnitude is exactly its lowest level: the error is at most half a step,
    # one step where the opposite extreme is clipped to the highest level
    step, error = np.abs(expanded), np.abs(dequantized.numpy() - weight.numpy())
    clipped = integers == scheme.highest
    assert np.all(error[~clipped] <= step[~clipped] * (0.5 + 1e-6)) and np.all(error <= step * (1 + 1e-6))
    assert not torch.equal(dequantized, weight)


def unpack_matmulnbits(packed, scheme, columns):
    if scheme.bits == 4:
        low, high = packed & 0x0F, packed >> 4
        stored = np.stack([low, high], axis=-1).reshape(packed.shape[0], -1)
    else:
        stored = packed.reshape(packed.shape[0], -1)
    return stored[:, :columns].astype(np.int16) + scheme.lowest


@pytest.mark.parametrize("bits", [4, 8])
def test_matmulnbits_packing_round_trips(bits):
    scheme = BlockwiseScheme(bits=bits, block_size=16)
    integers = np.random.default_rng(bits).integers(scheme.lowest, scheme.highest + 1, (3, 40)).astype(np.int8)
    packed = pack_matmulnbits(integers, scheme)
    assert packed.shape == (3, 3, 16 * bits // 8) and packed.dtype == np.uint8
    np.testing.assert_array_equal(unpack_matmulnbits(packed, scheme, 40), integers)


def matmulnbits_session(integers, scales, scheme):
    """One MatMulNBits node with ``scheme``'s accuracy level, on ONNX Runtime's CPU provider."""
    out_features, in_features = integers.shape
    node = onnx.helper.make_node("MatMulNBits", ["a", "b", "s"], ["y"], domain="com.microsoft", K=in_features,
                                 N=out_features, bits=scheme.bits, block_size=scheme.block_size,
                                 accuracy_level=scheme.accuracy_level)
    graph = onnx.helper.make_graph(
        [node], "one", [onnx.helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, [None, in_features])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, out_features])],
        [onnx.numpy_helper.from_array(pack_matmulnbits(integers, scheme), "b"),
         onnx.numpy_helper.from_array(scales.reshape(-1), "s")])
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 21),
                                                         onnx.helper.make_opsetid("com.microsoft", 1)])
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("bits, block_size, rows, out_features, in_features",
                         [(4, 32, 1, 256, 768), (4, 16, 5, 96, 80), (4, 128, 3, 64, 300), (8, 32, 2, 48, 200)])
def test_the_int8_activation_emulation_is_what_onnx_runtime_computes_at_accuracy_level_4(
        bits, block_size, rows, out_features, in_features):
    """MLAS quantises each block of the activations to int8 (amax / 127, half to even) and sums the
    blocks' integer dot products scaled: the emulation gives ONNX Runtime's numbers up to float32
    rounding of that sum (measured ≤ 1e-6 of the output's range), where float32 activations —
    the dequantised weights in eager, or accuracy level 0 — differ by ~5e-3 of it."""
    torch.manual_seed(bits + block_size + rows)
    scheme = BlockwiseScheme(bits=bits, block_size=block_size, activations="int8")
    integers, scales, dequantized = quantize_blockwise(torch.randn(out_features, in_features) * 0.05, scheme)
    activations = torch.randn(rows, in_features) * torch.logspace(-2, 1, rows)[:, None]
    activations[0, :block_size] = 0.0                     # a block of zeros: scale 0, no division by zero
    (onnx_out,) = matmulnbits_session(integers, scales, scheme).run(None, {"a": activations.numpy()})
    emulated = int8_activation_matmul(activations, torch.from_numpy(integers), torch.from_numpy(scales), block_size)
    float32 = (activations @ dequantized.T).numpy()
    span = np.abs(onnx_out).max(axis=1, keepdims=True)
    assert np.all(np.abs(emulated.numpy() - onnx_out) <= 2e-6 * span)
    assert np.all(np.abs(float32 - onnx_out).max(axis=1, keepdims=True) > 1e-4 * span), "int8 activations changed it"
    (level0,) = matmulnbits_session(integers, scales, dataclasses.replace(scheme, activations="float32")).run(
        None, {"a": activations.numpy()})
    np.testing.assert_allclose(level0, float32, rtol=1e-4, atol=1e-5 * span.max())


def test_the_record_untied_a_weight_shared_with_an_embedding():
    """A tied LM head is quantised in the eager reference; the embedding stays float32, as in the file."""
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(40, 32)
            self.head = torch.nn.Linear(32, 40, bias=False)
            self.head.weight = self.embed.weight

    model = Tied()
    record = quantize_module_weights(model, BlockwiseScheme())
    assert list(record.weights) == ["head.weight"]
    record.weights["head.weight"].uses = 1
    fake = record.fake_quantized(model)
    assert torch.equal(fake.embed.weight, model.embed.weight)
    assert torch.equal(fake.head.weight, record.weights["head.weight"].dequantized)
    assert model.head.weight is model.embed.weight, "the caller's module is not changed"


def test_agreement_counts_generated_ids_and_rows_of_other_lengths():
    assert share_of_equal_ids([np.array([[9, 1, 2, 3], [9, 4, 5, 6]])],
                              [np.array([[9, 1, 2, 3], [9, 4, 0, 6]])], prefix=1) == (5, 6)
    assert share_of_equal_ids([np.array([[9, 1, 2]])], [np.array([[9, 1, 2, 3]])], prefix=1) == (2, 3)
    assert "83% of generated ids" in describe({"sets": 1, "equal_ids": 5, "compared_ids": 6, "ids_share": 5 / 6,
                                               "cosine": None})


# --- a model that is not a generator: the API ---------------------------------------------------

@pytest.mark.parametrize("form, opset, quantized_op", [("matmulnbits", None, "com.microsoft::MatMulNBits"),
                                                       ("qdq", 21, "DequantizeLinear")])
def test_api_int4_writes_the_form_and_verifies_against_the_same_quantised_weights(form, opset, quantized_op):
    torch.manual_seed(0)
    model = Dense().eval()
    x = torch.randn(4, 64)
    if form == "qdq":  # ONNX Runtime's default session computes the standard form with int8 activations
        result = fxport.convert(model, (x,), dynamic_shapes={"x": {0: "batch"}}, precision="int4", quant_format=form,
                                opset=opset, verify=False)
    else:
        result = fxport.convert(model, (x,), dynamic_shapes={"x": {0: "batch"}}, precision="int4", quant_format=form,
                                opset=opset)
    assert form == "qdq" or result.verified and all(row.name.endswith(" vs eager int4") for row in result.verification)
    counts = op_counts(result.model)
    assert counts.get(quantized_op) == 2, counts
    assert "Gemm" not in counts and counts.get("MatMul", 0) == (2 if form == "qdq" else 0), counts
    assert result.quantization["weights"] == 2 and result.quantization["form"] == form
    agreement = result.quantization["agreement_with_fp32"]
    if form == "qdq":  # not verified: nothing ran, so the agreement is not measured either
        assert agreement is None
    else:
        assert 0.9 < agreement["cosine"] < 1.0
    # on a batch the export never saw: equal to eager with the dequantised weights, not to fp32 eager
    record = quantize_module_weights(model, BlockwiseScheme.of("int4", form=form, activations="float32"))
    for weight in record.weights.values():
        weight.uses = 1
    unseen = torch.randn(7, 64)
    options = ort.SessionOptions()
    if form == "qdq":  # float32 activations, as eager: ORT's fusion asked for accuracy level 1
        options.add_session_config_entry("session.qdq_matmulnbits_accuracy_level", "1")
    session = ort.InferenceSession(result.model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    (onnx_out,) = session.run(None, {session.get_inputs()[0].name: unseen.numpy()})
    with torch.no_grad():
        fake, fp32 = record.fake_quantized(model)(unseen).numpy(), model(unseen).numpy()
    np.testing.assert_allclose(onnx_out, fake, rtol=1e-4, atol=1e-5)
    assert np.abs(onnx_out - fp32).max() > 1e-3, "the weights were quantised"


@pytest.mark.parametrize("form", ["matmulnbits"])
def test_int8_activations_are_verified_against_eager_quantising_them_as_onnx_runtime_does(form):
    """``quant_activations="int8"`` writes MatMulNBits at accuracy level 4; the eager reference's
    Linears quantise their activations per block as MLAS does, so the file passes — and the
    float32-activation reference it would otherwise meet refuses it. (The standard form in a
    generator: test_api_int4_generator_in_the_standard_form_…; on this model ONNX Runtime leaves
    the first DequantizeLinear → MatMul unfused, see the test below.)"""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 96, bias=False), torch.nn.ReLU(),
                                torch.nn.Linear(96, 8, bias=False)).eval()
    x = torch.randn(4, 64)
    result = fxport.convert(model, (x,), dynamic_shapes={"input": {0: "batch"}}, precision="int4", quant_format=form,
                            quant_activations="int8", opset=21 if form == "qdq" else None)
    assert result.verified and result.quantization["activations"] == "int8"
    if form == "matmulnbits":
        levels = {a.i for node in result.model.graph.node if node.op_type == "MatMulNBits"
                  for a in node.attribute if a.name == "accuracy_level"}
        assert levels == {4}
    record = quantize_module_weights(model, BlockwiseScheme.of("int4", form=form, activations="int8"))
    for weight in record.weights.values():
        weight.uses = 1
    unseen = torch.randn(9, 64) * 3
    session = ort.InferenceSession(result.model.SerializeToString(), providers=["CPUExecutionProvider"])
    (onnx_out,) = session.run(None, {session.get_inputs()[0].name: unseen.numpy()})
    float_reference = dataclasses.replace(record, scheme=dataclasses.replace(record.scheme, activations="float32"))
    with torch.no_grad():
        emulated, dequantized = record.fake_quantized(model)(unseen).numpy(), float_reference.fake_quantized(model)(unseen).numpy()
    np.testing.assert_allclose(onnx_out, emulated, rtol=1e-5, atol=1e-6)
    assert np.abs(onnx_out - dequantized).max() > 1e-3, "float32 activations are not what the file computes"


def test_an_int8_activation_file_is_refused_against_a_float32_activation_reference(monkeypatch):
    """The verdict can fail: with the emulation taken out of the reference (the float32-activation
    eager a file at accuracy level 4 used to be compared with), the same file is refused."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 96, bias=False), torch.nn.ReLU(),
                                torch.nn.Linear(96, 8, bias=False)).eval()
    monkeypatch.setattr("fxport.lower.weight_quantization._multiply_with_int8_activations", lambda *args: None)
    with pytest.raises(VerificationError, match="vs eager int4"):
        fxport.convert(model, (torch.randn(4, 64),), precision="int4", quant_activations="int8")


@pytest.mark.parametrize("model", ["bias", "no_bias"])
def test_the_standard_form_is_refused_where_onnx_runtime_leaves_a_matmul_in_float32(model):
    """Which DequantizeLinear → MatMul pairs ONNX Runtime 1.32 fuses into MatMulNBits (int8
    activations) is its choice: here it fuses MatMul + Add (a bias, 2-D input) into FusedGemm
    first, or leaves the first layer's pair as it is — those layers compute with float32
    activations while the reference quantises them, and verification refuses the file rather
    than vouch for it."""
    torch.manual_seed(0)
    module = Dense() if model == "bias" else torch.nn.Sequential(
        torch.nn.Linear(64, 96, bias=False), torch.nn.ReLU(), torch.nn.Linear(96, 8, bias=False))
    with pytest.raises(VerificationError, match="vs eager int4"):
        fxport.convert(module.eval(), (torch.randn(4, 64),), precision="int4", quant_format="qdq", opset=21)


def test_int8_weights_keeps_more_of_the_float32_model_than_int4():
    torch.manual_seed(0)
    model = Dense().eval()
    x = torch.randn(4, 64)
    cosines = {}
    for precision in ("int4", "int8-weights"):
        result = fxport.convert(model, (x,), precision=precision)
        assert result.verified and op_counts(result.model).get("com.microsoft::MatMulNBits") == 2
        assert result.quantization["bits"] == (4 if precision == "int4" else 8)
        cosines[precision] = result.quantization["agreement_with_fp32"]["cosine"]
    assert cosines["int4"] < cosines["int8-weights"] < 1.0


def test_a_file_whose_weights_differ_from_its_reference_fails_verification(monkeypatch):
    """The verdict can fail: an eager reference with the float32 weights (what a rewrite that
    ignored the record would be compared with) does not match the int4 file."""
    torch.manual_seed(0)
    monkeypatch.setattr(WeightQuantization, "fake_quantized", lambda self, module: module)
    with pytest.raises(VerificationError):
        fxport.convert(Dense().eval(), (torch.randn(4, 64),), precision="int4")


def test_int8_keeps_its_meaning_and_weight_options_are_usage_errors():
    torch.manual_seed(0)
    result = fxport.convert(Dense().eval(), (torch.randn(4, 64),), precision="int8")
    counts = op_counts(result.model)
    assert counts.get("MatMulInteger") == 2 and "com.microsoft::MatMulNBits" not in counts
    assert result.quantization == {} and "quantization" not in result.to_dict()
    with pytest.raises(UsageError, match="--block-size only applies to the weight-only precisions"):
        fxport.convert(Dense(), (torch.randn(2, 64),), precision="int8", block_size=32)
    with pytest.raises(UsageError, match="--block-size 48 is not one MatMulNBits takes"):
        fxport.convert(Dense(), (torch.randn(2, 64),), precision="int4", block_size=48)
    with pytest.raises(UsageError, match="--quant-activations only applies to the weight-only precisions"):
        fxport.convert(Dense(), (torch.randn(2, 64),), precision="int8", quant_activations="int8")
    with pytest.raises(UsageError, match="--quant-format qdq computes with int8 activations"):
        fxport.convert(Dense(), (torch.randn(2, 64),), precision="int4", quant_format="qdq", quant_activations="float32")
    with pytest.raises(UsageError, match="needs opset 21"):
        fxport.convert(Dense(), (torch.randn(2, 64),), precision="int4", quant_format="qdq", opset=18)


# --- generation: the CLI and the API ---------------------------------------------------------

def tiny_llama(seed=0, **config):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    settings = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**{**settings, **config})).eval()


def fake_quantized_lm(lm, scheme):
    record = quantize_module_weights(lm, scheme)
    for weight in record.weights.values():
        weight.uses = 1
    return record.fake_quantized(lm)


def generate(lm, ids, mask, **settings):
    with torch.no_grad():
        return lm.generate(input_ids=ids, attention_mask=mask, do_sample=False, **settings)


def run_file(path, ids, mask):
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {"input_ids": ids.numpy(), "attention_mask": mask.numpy()})[0]


@pytest.mark.slow
@pytest.mark.parametrize("activations", ["float32", "int8"])
def test_cli_int4_generation_file_quantises_the_loop_body_and_equals_eager_with_the_same_weights(tmp_path, activations):
    lm = tiny_llama(seed=1)
    checkpoint = tmp_path / "llama"
    lm.save_pretrained(checkpoint)
    out = tmp_path / "gen4.onnx"
    done = run_cli("convert", str(checkpoint), "--task", "text-generation", "--max-new-tokens", "6",
                   "--precision", "int4", "--quant-activations", activations, "-o", str(out), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    said = next(line for line in done.stdout.splitlines() if line.startswith("Weights int4"))
    assert ("int8 activations" in said) == (activations == "int8"), said
    assert "15 Linear weights, 30 MatMuls (15 inside Loop/If bodies)" in said, said
    assert "ids agree with the fp32 model on" in said and "of generated ids" in said, said
    model = onnx.load(out)
    by_graph = ops_by_graph(model)
    body = next(counts for name, counts in by_graph.items() if name != model.graph.name)
    # every Linear of the decode step is MatMulNBits; the MatMuls left are attention's (2 per layer)
    assert body.get("com.microsoft::MatMulNBits") == 15 and body.get("MatMul") == 4, body
    assert by_graph[model.graph.name].get("com.microsoft::MatMulNBits") == 15
    fake = fake_quantized_lm(lm, BlockwiseScheme.of("int4", activations=activations))
    levels = {a.i for graph in iter_graphs(model.graph) for node in graph.node if node.op_type == "MatMulNBits"
              for a in node.attribute if a.name == "accuracy_level"}
    assert levels == {4 if activations == "int8" else 0}
    agree = total = 0
    for seed, (batch, length) in enumerate([(1, 1), (5, 3), (1, 11), (3, 7)], start=50):
        ids, mask = fxport.load.tasks.left_padded_prompts(batch, length, VOCAB, seed)
        produced = run_file(out, ids, mask)
        np.testing.assert_array_equal(produced, generate(fake, ids, mask, max_new_tokens=6).numpy())
        fp32 = generate(lm, ids, mask, max_new_tokens=6).numpy()
        agree, total = agree + (produced[:, length:] == fp32[:, length:]).sum(), total + fp32[:, length:].size
    assert agree < total, "int4 weights changed some ids of this random model"


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_api_int4_generator_in_the_standard_form_holds_dequantize_linear_in_the_loop_body():
    from fxport.generation.architectures import build_generator

    lm = tiny_llama(seed=2)
    generator = build_generator(lm, max_new_tokens=4, eos_token_id=None)
    sets = [fxport.load.tasks.left_padded_prompts(batch, length, VOCAB, seed)
            for seed, (batch, length) in enumerate([(2, 5), (1, 3)])]
    result = fxport.convert(generator, sets[0], dynamic_shapes=generator.dynamic_shapes, verify_inputs=sets[1:],
                            precision="int4", quant_format="qdq", block_size=16)
    assert result.verified
    body = next(counts for name, counts in ops_by_graph(result.model).items() if name != result.model.graph.name)
    assert body.get("DequantizeLinear") == 15 and body.get("MatMul", 0) >= 15, body
    quantization = result.quantization
    assert quantization["block_size"] == 16 and quantization["replaced_nodes"] == {"main": 15, "body": 15}
    share = quantization["agreement_with_fp32"]["ids_share"]
    assert 0.0 <= share <= 1.0
    assert json.loads(result.to_json())["quantization"]["agreement_with_fp32"]["sets"] == 2
