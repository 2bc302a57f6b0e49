"""``--optimize ort``: onnxscript's ONNX Runtime fusions, verified against eager, counted.

Differential like every conversion test: the fused model (the one fxport returns and writes) is
run with ONNX Runtime on inputs the export never saw — including left padding, where GPT-2's
padding queries see no key at all (rows eager gives as 0) — and compared with eager PyTorch.
"""

import json

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
import torch

import fxport
from fxport.errors import UsageError
from fxport.lower.ort_fusions import fuse_for_onnxruntime, pre_fusion_rules
from fxport.engine.choices import optimize_level
from fxport.report.result import iter_nodes
from tests.conftest import assert_matches_eager, run_cli
from tests.models.ort_models import VOCAB, GatedAttention, TinyGPT2, gpt2_inputs

pytest.importorskip("transformers")

GPT2_DYNAMIC = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}


def run_gpt2(model, ids, mask):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return session.run(None, dict(zip(names, (ids.numpy(), mask.numpy()))))[0]


def left_padded(batch, seq, seed=1):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, VOCAB, (batch, seq), generator=generator)
    mask = torch.ones(batch, seq, dtype=torch.int64)
    for row in range(batch):
        mask[row, : seq - 1 - 2 * row] = 0  # row r keeps 1 + 2r valid positions (left padding)
    return ids, mask


@pytest.fixture(scope="module")
def gpt2_ort():
    module = TinyGPT2()
    return module, fxport.convert(module, kwargs=gpt2_inputs(), dynamic_shapes=GPT2_DYNAMIC, optimize="ort")


@pytest.mark.slow
def test_gpt2_attention_fuses_to_multihead_attention_and_matches_eager(gpt2_ort):
    module, result = gpt2_ort
    assert result.verified and result.optimize == "ort"
    fusions = result.fusions
    # fxport's pre-rule moves the SDPA rule's empty-row factor so the library's MHA pattern matches
    assert fusions["row_factor_moved"] == 2
    assert fusions["sdpa"] == 2 and fusions["mha2"] == 2 and fusions["skip_layer_normalization"] == 4
    assert "sdpa_via_mha" not in fusions  # the generic fallback was not needed
    ops = result.op_counts()
    assert ops["com.microsoft::MultiHeadAttention"] == 2 and "Softmax" not in ops
    assert list(result.node_counts) == ["exported", "optimized", "ort"]
    assert result.node_counts["ort"] < result.node_counts["optimized"]
    assert result.to_dict()["fusions"] == fusions and result.to_dict()["optimize"] == "ort"
    # unseen sizes, left padding: padding queries under the causal mask see no key (eager: 0 rows)
    ids, mask = left_padded(3, 11)
    with torch.no_grad():
        expected = module(ids, mask).numpy()
    actual = run_gpt2(result.model, ids, mask)
    np.testing.assert_allclose(actual, expected, atol=1e-4, rtol=1e-3)


@pytest.mark.slow
def test_gpt2_fp16_ort_is_verified_and_fused():
    module = TinyGPT2()
    result = fxport.convert(module, kwargs=gpt2_inputs(), dynamic_shapes=GPT2_DYNAMIC, optimize="ort",
                            precision="fp16")
    assert result.verified
    assert result.fusions.get("sdpa", 0) >= 2 and result.fusions.get("skip_layer_normalization", 0) >= 4
    assert result.op_counts().get("com.microsoft::MultiHeadAttention") == 2
    assert list(result.node_counts) == ["exported", "optimized", "ort", "fp16"]
    assert any(row.name.endswith("vs eager fp16") for row in result.verification)


@pytest.mark.slow
def test_fusions_fire_inside_if_branches_and_match_eager():
    module = GatedAttention()
    result = fxport.convert(module, (torch.randn(2, 6, 32),), dynamic_shapes={"x": {0: "batch", 1: "seq"}},
                            optimize="ort", if_strategy="cond")
    assert result.verified
    assert result.fusions["sdpa"] == 2 and result.fusions["skip_layer_normalization"] == 1
    if_node = next(n for n in result.model.graph.node if n.op_type == "If")
    inside = [n.op_type for attr in if_node.attribute for n in iter_nodes(attr.g)]
    assert inside.count("MultiHeadAttention") == 2 and "SkipLayerNormalization" in inside
    assert "Softmax" not in inside
    for sign in (1.0, -1.0):  # both branches, sizes the export never saw
        assert_matches_eager(module, result.model, sign * (torch.rand(3, 5, 32) + 0.1))


@pytest.mark.slow
def test_empty_batch_runs_after_fusion():
    """The library reshapes with ``[0, 0, -1]``, which ORT refuses on an empty tensor; fxport resolves it."""
    module = GatedAttention()
    result = fxport.convert(module, (torch.randn(2, 6, 32),), dynamic_shapes={"x": {0: "batch", 1: "seq"}},
                            optimize="ort", if_strategy="cond", verify=False)
    session = ort.InferenceSession(result.model.SerializeToString(), providers=["CPUExecutionProvider"])
    for shape in ((0, 6, 32), (2, 0, 32)):
        out = session.run(None, {session.get_inputs()[0].name: np.ones(shape, dtype=np.float32)})[0]
        assert out.shape == shape


def test_row_factor_rule_moves_only_a_per_row_factor():
    """The pre-rule is exact for a factor constant along heads and head size, and leaves others alone."""
    from onnx import TensorProto, helper

    def graph(factor_heads):
        nodes = [helper.make_node("Mul", ["x", "f"], ["m"]),
                 helper.make_node("Transpose", ["m"], ["t"], perm=[0, 2, 1, 3]),
                 helper.make_node("Constant", [], ["shape"], value_ints=[0, 0, 32]),
                 helper.make_node("Reshape", ["t", "shape"], ["y"])]
        inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", 4, "S", 8]),
                  helper.make_tensor_value_info("f", TensorProto.FLOAT, ["B", factor_heads, "S", 1])]
        output = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S", 32])
        return helper.make_model(helper.make_graph(nodes, "g", inputs, [output]),
                                 opset_imports=[helper.make_opsetid("", 18)])

    rng = np.random.default_rng(0)
    for factor_heads, fires in ((1, 1), (4, 0)):
        proto = graph(factor_heads)
        model = ir.from_proto(proto)
        assert pre_fusion_rules().apply_to_model(model) == fires
        x = rng.standard_normal((2, 4, 5, 8)).astype(np.float32)
        f = (rng.random((2, factor_heads, 5, 1)) > 0.5).astype(np.float32)
        before = ort.InferenceSession(proto.SerializeToString()).run(None, {"x": x, "f": f})[0]
        after = ort.InferenceSession(ir.to_proto(model).SerializeToString()).run(None, {"x": x, "f": f})[0]
        np.testing.assert_array_equal(after, before)


@pytest.mark.slow
def test_optimize_levels_and_compatibility():
    assert [optimize_level(v) for v in (True, False, "none", "generic", "ort")] == \
        ["generic", "none", "none", "generic", "ort"]
    with pytest.raises(UsageError):
        optimize_level("fast")
    module = GatedAttention()
    x = torch.randn(2, 6, 32)
    raw = fxport.convert(module, (x,), optimize=False, verify=False)
    assert list(raw.node_counts) == ["exported"] and raw.optimize == "none" and raw.fusions == {}
    generic = fxport.convert(module, (x,), verify=False)
    assert list(generic.node_counts) == ["exported", "optimized"] and generic.fusions == {}
    assert not any(n.domain == "com.microsoft" for n in iter_nodes(generic.model.graph))


def test_fuse_for_onnxruntime_reports_only_fusions_that_fired():
    module = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    result = fxport.convert(module, (torch.randn(2, 4),), verify=False)
    _, fusions = fuse_for_onnxruntime(ir.from_proto(result.model))
    assert all(count > 0 for count in fusions.values())


@pytest.mark.slow
def test_cli_optimize_ort_reports_fusions_in_json_and_table(tmp_path):
    target = "tests/models/ort_models.py:TinyGPT2"
    common = ["--inputs-fn", "tests/models/ort_models.py:gpt2_inputs",
              "--dynamic", "input_ids:0=batch,1=seq", "--dynamic", "attention_mask:0=batch,1=seq"]
    out = tmp_path / "gpt2.onnx"
    done = run_cli("convert", target, *common, "--optimize", "ort", "-o", str(out), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and report["verified"] and report["optimize"] == "ort"
    assert report["fusions"]["mha2"] == 2 and report["fusions"]["skip_layer_normalization"] == 4
    assert report["op_counts"]["com.microsoft::MultiHeadAttention"] == 2
    ids, mask = left_padded(2, 9)
    import onnx

    with torch.no_grad():
        expected = TinyGPT2()(ids, mask).numpy()
    np.testing.assert_allclose(run_gpt2(onnx.load(str(out)), ids, mask), expected, atol=1e-4, rtol=1e-3)

    done = run_cli("convert", target, *common, "--optimize", "ort", "--no-verify")
    assert done.returncode == 0, done.stderr
    assert "ONNX Runtime fusions: row_factor_moved×2" in done.stdout and "mha2×2" in done.stdout


@pytest.mark.slow
def test_cli_no_optimize_is_an_alias_and_conflicts_are_usage_errors():
    done = run_cli("convert", "tests/models/basic.py:Scale", "--no-verify", "--no-optimize", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["optimize"] == "none" and list(report["node_counts"]) == ["exported"]
    done = run_cli("convert", "tests/models/basic.py:Scale", "--no-verify", "--optimize", "none", "--json")
    assert json.loads(done.stdout)["node_counts"] == report["node_counts"]
    done = run_cli("convert", "tests/models/basic.py:Scale", "--no-verify", "--no-optimize", "--optimize", "ort")
    assert done.returncode == 2 and "--no-optimize conflicts with --optimize ort" in done.stderr


@pytest.mark.slow
def test_op_rule_whose_nodes_were_fused_is_still_reported():
    """The SDPA translation's nodes end up inside MultiHeadAttention; its AppliedRewrite stays, same location."""
    module = GatedAttention()
    x = torch.randn(2, 6, 32)
    reports = {}
    for level in ("generic", "ort"):
        result = fxport.convert(module, (x,), optimize=level, verify=False, if_strategy="cond")
        reports[level] = [(r.rule, str(r.location), r.detail) for r in result.rewrites
                          if r.rule == "aten::scaled_dot_product_attention"]
    assert reports["generic"] and reports["ort"] == reports["generic"]
    assert all("ort_models.py" in location for _, location, _ in reports["ort"])


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_cli_generator_with_ort_fusions_inside_its_loop_matches_generate(tmp_path):
    """``--task text-generation --optimize ort``: the fusions rewrite the prefill and the decoding
    Loop's body, which the library names per graph; fxport gives a body's clashing names fresh ones
    (the file was refused as invalid: "'val_499' has been used as output names multiple times").
    The written file then generates ``generate()``'s ids on prompts the export never saw."""
    from tests.test_generation import generate, left_padded_prompts, run_file, save_checkpoint, tiny_llama

    lm = tiny_llama(eos_token_id=7)
    out = tmp_path / "gen.onnx"
    result = run_cli("convert", save_checkpoint(lm, tmp_path / "llama"), "--task", "text-generation",
                     "--max-new-tokens", "5", "--eos-token-id", "7", "--optimize", "ort", "-o", str(out), "--json",
                     timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["verified"] and data["optimize"] == "ort"
    model = onnx.load(out)
    loop = next(node for node in model.graph.node if node.op_type == "Loop")
    body_ops = {node.op_type for node in loop.attribute[0].g.node}
    main_ops = {node.op_type for node in model.graph.node}
    assert "MultiHeadAttention" in main_ops | body_ops, (main_ops, body_ops)
    for seed, (batch, length) in enumerate([(1, 1), (3, 4), (2, 9)], start=200):
        ids, mask = left_padded_prompts(batch, length, seed)
        expected = generate(lm, ids, mask, max_new_tokens=5, eos_token_id=7)
        np.testing.assert_array_equal(run_file(out, ids, mask).numpy(), expected.numpy())
