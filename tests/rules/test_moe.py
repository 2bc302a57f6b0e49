"""MoE experts (rewrites/moe.py): transformers 5.x's grouped matmul ops, alone and in Mixtral,
Qwen2-MoE and Qwen3-MoE built from tiny configs (random weights, nothing downloaded)."""

from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import fxport
import fxport.testing
from fxport.cli import app
from tests.conftest import assert_matches_eager, run_cli

transformers = pytest.importorskip("transformers")
import transformers.integrations.moe  # noqa: E402,F401  (defines transformers::grouped_mm_fallback)

FALLBACK = "transformers::grouped_mm_fallback"
ATEN = "aten::_grouped_mm"


class Fallback(torch.nn.Module):
    def forward(self, x, weight, offs):
        return torch.ops.transformers.grouped_mm_fallback(x, weight, offs)


class AtenGrouped(torch.nn.Module):
    def forward(self, x, weight, offs):
        return torch.nn.functional.grouped_mm(x, weight, offs=offs)


def offsets(*values, dtype=torch.int32):
    return torch.tensor(values, dtype=dtype)


def offset_cases(rows: int, groups: int, k: int, dtype, offs_dtype=torch.int32, seed=1):
    """(x, offs) pairs over the edges of the op's domain, for ``groups`` experts."""
    g = torch.Generator().manual_seed(seed)

    def x(n):
        return torch.randn(n, k, generator=g).to(dtype)

    def offs(*counts):  # rows per group -> running offsets
        return torch.cumsum(torch.tensor(counts), 0).to(torch.int32)

    cases = [
        (x(rows), offs(*([rows] + [0] * (groups - 1)))),           # all rows in the first expert
        (x(rows), offs(*([0] * (groups - 1) + [rows]))),           # all rows in the last expert
        (x(1), offs(*([0] * (groups // 2) + [1] + [0] * (groups - groups // 2 - 1)))),  # one row
        (x(0), offs(*([0] * groups))),                              # no rows at all
        (x(rows), offs(*([0] * (groups - 1) + [rows - 2]))),       # last two rows owned by no group
    ]
    if groups > 2:
        counts = [2, 0] + [1] * (groups - 3) + [3]                  # an empty group in the middle
        cases.append((x(sum(counts)), offs(*counts)))
    return [(xi, oi.to(offs_dtype)) for xi, oi in cases]


@pytest.mark.parametrize("groups", [1, 4, 9])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["float32", "float16"])
def test_grouped_mm_fallback_matches_eager(groups, dtype):
    """Each group's rows times its own expert; empty groups, one group, one expert taking every
    row, rows past the last offset (zeros) and zero rows, float32 and float16."""
    torch.manual_seed(0)
    k, n = 8, 6
    weight = torch.randn(groups, k, n).to(dtype)
    counts = [3] + [0, 2] * (groups // 2) if groups > 1 else [5]
    counts = counts[:groups]
    x = torch.randn(sum(counts), k).to(dtype)
    example = (x, weight, torch.cumsum(torch.tensor(counts), 0).to(torch.int32))
    inputs = [(xi, weight, oi) for xi, oi in offset_cases(7, groups, k, dtype)]
    tolerance = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=2e-3, rtol=2e-3)
    check = fxport.testing.assert_rule_converts(
        Fallback(), example, expect_fired=[FALLBACK], inputs=inputs,
        dynamic_shapes={"x": {0: "rows"}, "weight": None, "offs": None}, **tolerance)
    assert check.fired[FALLBACK] == 1
    ops = check.result.op_counts()
    assert ops.get("MatMul") == groups  # one multiplication per expert, none per row


def test_grouped_mm_fallback_int64_offsets():
    weight = torch.randn(4, 8, 6)
    example = (torch.randn(5, 8), weight, offsets(1, 1, 4, 5, dtype=torch.int64))
    inputs = [(x, weight, o) for x, o in offset_cases(6, 4, 8, torch.float32, torch.int64)]
    fxport.testing.assert_rule_converts(
        Fallback(), example, expect_fired=[FALLBACK], inputs=inputs,
        dynamic_shapes={"x": {0: "rows"}, "weight": None, "offs": None}, atol=1e-5, rtol=1e-5)


def test_grouped_mm_fallback_without_experts_gives_zeros():
    """Zero experts (trip count 0): every row is owned by no group, so all zeros."""
    weight = torch.randn(0, 4, 3)
    check = fxport.testing.assert_rule_converts(
        Fallback(), (torch.randn(5, 4), weight, offsets()), expect_fired=[FALLBACK],
        inputs=[(torch.randn(2, 4), weight, offsets())],
        dynamic_shapes={"x": {0: "rows"}, "weight": None, "offs": None}, atol=0, rtol=0)
    assert check.max_abs_error == 0


def test_without_the_rule_the_op_has_no_translation():
    with pytest.raises(fxport.ConversionError, match=r"grouped_mm_fallback"):
        fxport.convert(Fallback(), (torch.randn(4, 4), torch.randn(2, 4, 3), offsets(1, 4)),
                       verify=False, disable_rules=[FALLBACK])


def test_aten_grouped_mm_with_offsets_bfloat16():
    """bfloat16 experts take aten::_grouped_mm (its stock translation refuses offsets). ONNX
    Runtime's CPU provider has no bfloat16 MatMul, so onnx's reference evaluator runs the file."""
    import ml_dtypes
    from onnx.reference import ReferenceEvaluator

    torch.manual_seed(0)
    weight = torch.randn(4, 8, 8, dtype=torch.bfloat16)
    example = (torch.randn(6, 8, dtype=torch.bfloat16), weight, offsets(2, 2, 5, 6))
    result = fxport.convert(AtenGrouped(), example, verify=False,
                            dynamic_shapes={"x": {0: "rows"}, "weight": None, "offs": None})
    assert any(record.rule == ATEN for record in result.rewrites)
    evaluator = ReferenceEvaluator(result.model)
    for x, offs in offset_cases(7, 4, 8, torch.bfloat16):
        expected = AtenGrouped()(x, weight, offs).float().numpy()
        feed = {"x": x.float().numpy().astype(ml_dtypes.bfloat16),
                "weight": weight.float().numpy().astype(ml_dtypes.bfloat16), "offs": offs.numpy()}
        got = evaluator.run(None, feed)[0].astype(np.float32)
        owned = int(offs[-1])  # torch leaves rows past the last offset uninitialised
        np.testing.assert_allclose(got[:owned], expected[:owned], atol=0.05, rtol=0.02)
        assert (got[owned:] == 0).all()


# --- the models -----------------------------------------------------------------------------

class LastHidden(torch.nn.Module):
    """A transformers model taking token ids (no attention mask), returning the last hidden state."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False).last_hidden_state


def tiny_moe(name: str) -> torch.nn.Module:
    """2 layers, hidden 32, 4 experts, top-2, vocabulary 100; random weights."""
    torch.manual_seed(0)
    common = dict(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=128, num_experts_per_tok=2)
    if name == "mixtral":
        config = transformers.MixtralConfig(intermediate_size=64, num_local_experts=4, **common)
        model = transformers.MixtralModel(config)
    elif name == "qwen2_moe":
        config = transformers.Qwen2MoeConfig(intermediate_size=64, moe_intermediate_size=16,
                                             shared_expert_intermediate_size=32, num_experts=4,
                                             **common)
        model = transformers.Qwen2MoeModel(config)
    else:
        config = transformers.Qwen3MoeConfig(intermediate_size=64, moe_intermediate_size=16,
                                             num_experts=4, head_dim=8, **common)
        model = transformers.Qwen3MoeModel(config)
    assert model.config._experts_implementation == "grouped_mm"  # transformers' default
    return LastHidden(model).eval()


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mixtral", "qwen2_moe", "qwen3_moe"])
def test_tiny_moe_model_converts_and_verifies(name):
    model = tiny_moe(name)
    generator = torch.Generator().manual_seed(1)
    result = fxport.convert(model, (torch.randint(0, 100, (2, 8), generator=generator),),
                            dynamic_shapes={"input_ids": {0: "batch", 1: "seq"}})
    assert result.verified
    fired = [record.rule for record in result.rewrites if record.rule == FALLBACK]
    assert len(fired) == 4  # gate-up and down projections of both layers
    # Other batch and sequence sizes than the example, batch 1 and a single token (where most
    # experts get no row) included.
    for shape in [(1, 1), (1, 13), (3, 5), (4, 17)]:
        ids = torch.randint(0, 100, shape, generator=generator)
        assert_matches_eager(model, result.model, ids, atol=1e-5, rtol=1e-4)


MODEL_FILE = textwrap.dedent('''
    import torch
    import transformers


    class TinyMixtral(torch.nn.Module):
        def __init__(self):
            super().__init__()
            config = transformers.MixtralConfig(
                vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                num_experts_per_tok=2, max_position_embeddings=128)
            self.model = transformers.MixtralModel(config)

        def forward(self, input_ids):
            return self.model(input_ids=input_ids, use_cache=False).last_hidden_state
''')


@pytest.mark.slow
def test_fxport_ops_no_longer_lists_the_experts_op(tmp_path):
    """In a fresh process, where only the model file imports transformers, `fxport ops` finds
    a translation for every op; with the rule disabled it names the op (so this can fail)."""
    path = tmp_path / "tiny_mixtral.py"
    path.write_text(MODEL_FILE)
    args = ["ops", f"{path}:TinyMixtral", "-i", "input_ids=2x8:int64",
            "--dynamic", "input_ids:0=batch,1=seq"]
    done = run_cli(*args, cwd=str(tmp_path))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Every op has an ONNX translation" in done.stdout
    without = CliRunner().invoke(app, [*args, "--disable", FALLBACK])
    assert without.exit_code == 1
    assert FALLBACK in without.stdout and os.path.basename(path) in without.stdout


@pytest.mark.slow
def test_rule_appears_when_transformers_is_imported_after_fxport_loaded_its_rules():
    """A process that used fxport before importing transformers still gets the rules that need
    it: the MoE op rule and the generate() patch rules (transformers' and Whisper's)."""
    import subprocess
    import sys

    from tests.conftest import REPO

    code = ("import sys\nfrom fxport.rules.registry import builtin_rules\n"
            "assert 'transformers' not in sys.modules\n"
            "before = {r.name for r in builtin_rules()}\nimport transformers\n"
            "after = {r.name for r in builtin_rules()}\nprint(sorted(after - before))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ("['transformers-generate', 'transformers-whisper-generate', "
                                   "'transformers::grouped_mm_fallback']")
