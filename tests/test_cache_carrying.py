"""The cache-carrying variants of benchmarks/cache_carrying.py (rewrites of fxport's generation
Loop) give eager ``generate()``'s ids, and carry the cache the way they say."""

import numpy as np
import onnx
import pytest
import torch

import fxport
import fxport.load.tasks
from benchmarks import cache_carrying
from fxport.generation.architectures import build_generator
from fxport.generation.generator import Generator

transformers = pytest.importorskip("transformers")
VOCAB, NEW = 64, 6
CONFIG = dict(layers=2, width=32, heads=4, kv_heads=2, vocab=VOCAB)
#: what each variant's Loop body must hold (and the Concat growth it must not)
BODY_OPS = {"concat": {"Concat"}, "scatternd": {"ScatterND"}, "tensorscatter": {"TensorScatter"},
            "gqa": {"GroupQueryAttention"}, "gqa_buffer": {"GroupQueryAttention"}}


# one generator conversion shared by the variants (about 40 s on the 2-core machine): with the slow set
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fxport_file(tmp_path_factory):
    torch.manual_seed(0)
    lm = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=CONFIG["width"], intermediate_size=64, num_hidden_layers=CONFIG["layers"],
        num_attention_heads=CONFIG["heads"], num_key_value_heads=CONFIG["kv_heads"],
        max_position_embeddings=64)).eval()
    generator = build_generator(lm, max_new_tokens=NEW, eos_token_id=VOCAB)  # no row stops early
    ids, mask = fxport.load.tasks.left_padded_prompts(3, 5, VOCAB, 0)
    result = fxport.convert(generator, (ids, mask), dynamic_shapes=Generator.dynamic_shapes, verify=False)
    path = tmp_path_factory.mktemp("cache") / "generation.onnx"
    onnx.save(result.model, path)
    return lm, str(path)


def body_ops(model) -> set:
    (loop,) = [node for node in model.graph.node if node.op_type == "Loop"]
    return {node.op_type for node in loop.attribute[0].g.node}


def cache_concats(model) -> int:
    import onnx_ir as ir

    _, body = cache_carrying.generation_loop(ir.from_proto(model))
    return len(cache_carrying.cache_concats(body))


@pytest.mark.parametrize("variant", cache_carrying.LOOP_VARIANTS)
def test_variant_gives_eager_ids_on_left_padded_prompts(fxport_file, variant):
    lm, path = fxport_file
    model = cache_carrying.variant_model(path, variant, cache_carrying.Heads.of(CONFIG), NEW)
    assert BODY_OPS[variant] <= body_ops(model)
    assert cache_concats(model) == (2 * CONFIG["layers"] if variant == "concat" else 0)
    run = cache_carrying.loop_runner(model)
    for seed, (batch, length) in enumerate([(1, 1), (3, 7), (4, 4)], start=10):
        ids, mask = fxport.load.tasks.left_padded_prompts(batch, length, VOCAB, seed)
        ids, mask = ids.numpy(), mask.numpy()
        expected = cache_carrying.eager_ids(lm, ids, mask, NEW)
        np.testing.assert_array_equal(run(ids, mask), expected)


@pytest.mark.slow  # a conversion with verification: about 30 s
def test_optimize_ort_writes_group_query_attention_in_the_loop_equal_to_generate(fxport_file):
    """``--optimize ort`` carries the cache as GroupQueryAttention's present (fxport/lower/loop_attention.py):
    verified against eager, no Concat-grown cache left in the Loop, eager's ids on unseen prompts."""
    lm, _ = fxport_file
    generator = build_generator(lm, max_new_tokens=NEW, eos_token_id=VOCAB)
    prompts = [fxport.load.tasks.left_padded_prompts(batch, length, VOCAB, seed)
               for seed, (batch, length) in enumerate([(3, 5), (1, 2), (2, 7)])]
    result = fxport.convert(generator, prompts[0], dynamic_shapes=Generator.dynamic_shapes, optimize="ort",
                            verify_inputs=prompts[1:])
    assert result.verified and result.fusions["loop_group_query_attention"] == CONFIG["layers"]
    assert "GroupQueryAttention" in body_ops(result.model) and cache_concats(result.model) == 0
    run = cache_carrying.loop_runner(result.model)
    for seed, (batch, length) in enumerate([(1, 1), (4, 6)], start=20):
        ids, mask = (t.numpy() for t in fxport.load.tasks.left_padded_prompts(batch, length, VOCAB, seed))
        np.testing.assert_array_equal(run(ids, mask), cache_carrying.eager_ids(lm, ids, mask, NEW))
