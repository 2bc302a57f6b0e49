"""Loops whose carried state grows (issue 26): decoding around a tiny causal LM, eager vs ONNX
Runtime token ids compared exactly, on prompt lengths and batches the export never saw, rows
that stop at different steps and rows that never stop (``decoding_models.TinyLM.count_down``
makes a row whose last token is k stop after k steps)."""

import numpy as np
import pytest
import torch

from tests.controlflow import decoding_models as m
from tests.controlflow._util import export_to_ort, run_ort, trip_counts

B, L = torch.export.Dim("batch"), torch.export.Dim("length")


def prompt(last: list[int], length: int, seed: int = 0) -> torch.Tensor:
    """A batch of prompts of ``length`` tokens whose last tokens are ``last``."""
    body = torch.randint(1, m.VOCAB, (len(last), length), generator=torch.Generator().manual_seed(seed))
    body[:, -1] = torch.tensor(last)
    return body


def assert_same_tokens(model, exported, inputs):
    for args in inputs:
        with torch.no_grad():
            expected = model(*args).numpy()
        got = run_ort(exported, args)[0]
        assert got.shape == expected.shape and np.array_equal(got, expected), (
            f"{[tuple(a.shape) for a in args]}: eager {expected.tolist()} vs ONNX {got.tolist()}")


# rows stopping at 1, 2, 3, MAX_NEW steps, never (9, 10 > MAX_NEW), all at once (last token 1)
STOPS = [[1], [2], [9], [3, 1, 2], [1, 1], [10, 9, 8], [4, 10], [m.MAX_NEW, 2, 9], [0, 3]]


@pytest.fixture(scope="module")
def greedy():
    model = m.GreedyNoCache(countdown=True).eval()
    return model, export_to_ort(model, (prompt([3, 5], 4),), dynamic_shapes=({0: B, 1: L},))


@pytest.mark.slow
def test_greedy_cat_growth_is_one_loop(greedy):
    model, exported = greedy
    assert exported.ops.get("Loop") == 1
    assert [r.rule for r in exported.records if "grow" in r.detail] == ["for-to-while_loop"]


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_finished_conversion_frees_its_loops():
    """The registry of grown loops is weak: the conversion holds its loops (and through them the
    model's weights) while it lives, and a sweep of conversions does not accumulate them."""
    import gc
    import fxport
    from fxport.controlflow.operators.loops import growing

    model = m.GreedyNoCache(countdown=True).eval()
    job = fxport.engine.pipeline.run(model, (prompt([3, 5], 4),), dynamic_shapes=({0: B, 1: L},), until="capture",
                              verify=False)
    made = list(job.grown_loops)
    assert made and all(key in growing.LOOPS for key in made)
    del job
    gc.collect()
    assert not any(key in growing.LOOPS for key in made)


@pytest.mark.slow
@pytest.mark.parametrize("length", [1, 2, 7])
def test_greedy_tokens_equal_eager_where_rows_stop_at_different_steps(greedy, length):
    model, exported = greedy
    inputs = [(prompt(last, length, seed=i),) for i, last in enumerate(STOPS)]
    assert_same_tokens(model, exported, inputs)
    lengths = {model(*args).shape[1] - length for args in inputs}
    assert {1, 2, 3, m.MAX_NEW} <= lengths  # the output's length follows the stopping step
    assert {1, 2, 3, m.MAX_NEW} <= set().union(*trip_counts(model, inputs).values())


@pytest.mark.slow
def test_greedy_with_random_weights_equals_eager():
    """Attention, positions and the head all decide the tokens (no row reaches EOS by design)."""
    model = m.GreedyNoCache(seed=3).eval()
    exported = export_to_ort(model, (prompt([3, 5], 4),), dynamic_shapes=({0: B, 1: L},))
    inputs = [(torch.randint(0, m.VOCAB, (b, n), generator=torch.Generator().manual_seed(b * 10 + n)),)
              for b, n in [(1, 1), (1, 2), (3, 7), (2, 12), (4, 3)]]
    assert_same_tokens(model, exported, inputs)


def test_tensor_doubled_each_iteration_converts():
    """``x = torch.cat([x, x])`` in ``for _ in range(int(n))``: 0, 1, 2 and 5 trips, another batch."""
    from tests.controlflow import loop_models

    model = loop_models.GrowsByConcatenation().eval()
    x = torch.rand(3, 4)
    exported = export_to_ort(model, (x, torch.tensor(2)), dynamic_shapes=({0: B}, None))
    assert exported.ops.get("Loop") == 1
    for rows, trips in [(3, 0), (3, 1), (1, 2), (2, 5), (5, 3)]:
        args = (torch.rand(rows, 4), torch.tensor(trips))
        got = run_ort(exported, args)[0]
        np.testing.assert_array_equal(got, model(*args).numpy())


@pytest.fixture(scope="module")
def kv_cache():
    model = m.GreedyKVCache(countdown=True).eval()
    return model, export_to_ort(model, (prompt([5, 2], 3), torch.tensor(4)), dynamic_shapes=({0: B, 1: L}, None))


@pytest.mark.slow
def test_kv_cache_grown_by_cat_is_one_loop(kv_cache):
    _, exported = kv_cache
    assert exported.ops.get("Loop") == 1
    (record,) = [r for r in exported.records if r.rule == "while-to-while_loop"]
    assert "k (axis 1)" in record.detail and "v (axis 1)" in record.detail and "out (axis 1)" in record.detail


@pytest.mark.slow
@pytest.mark.parametrize("length", [1, 2, 7])
def test_kv_cache_tokens_equal_eager_for_every_stopping_step(kv_cache, length):
    """``while step < max_new and not finished.all()``: max_new 0, 1, 2, N; rows stopping at
    different steps (the prefill's token is the last one minus 1) and rows that never stop."""
    model, exported = kv_cache
    inputs = [(prompt(last, length, seed=i), torch.tensor(max_new))
              for i, last in enumerate(STOPS) for max_new in (0, 1, 2, m.MAX_NEW)]
    assert_same_tokens(model, exported, inputs)
    assert {0, 1, 2, m.MAX_NEW - 1} <= set().union(*trip_counts(model, inputs).values())
    assert {1, 2, 3, m.MAX_NEW} <= {model(*args).shape[1] for args in inputs}


@pytest.mark.slow
def test_kv_cache_with_random_weights_equals_eager():
    model = m.GreedyKVCache(seed=5).eval()
    exported = export_to_ort(model, (prompt([5, 2], 3), torch.tensor(4)), dynamic_shapes=({0: B, 1: L}, None))
    inputs = [(torch.randint(0, m.VOCAB, (b, n), generator=torch.Generator().manual_seed(b * 10 + n)), torch.tensor(k))
              for b, n, k in [(1, 1, 6), (1, 2, 1), (3, 7, 9), (2, 12, 3), (4, 3, 0)]]
    assert_same_tokens(model, exported, inputs)


@pytest.mark.slow
def test_a_loop_that_ignores_its_break_is_caught(monkeypatch):
    """The comparison is sharp: an ONNX Loop that keeps going after every row stopped fails it."""
    from fxport.controlflow.operators.loops import growing

    real = growing.GrownLoop.keep_going

    def ignores_break(self, counter, state, free):
        flag = self.info.break_flag
        self.info.break_flag = None
        try:
            return real(self, counter, state, free)
        finally:
            self.info.break_flag = flag

    monkeypatch.setattr(growing.GrownLoop, "keep_going", ignores_break)
    model = m.GreedyNoCache(countdown=True).eval()
    exported = export_to_ort(model, (prompt([3, 5], 4),), dynamic_shapes=({0: B, 1: L},))
    with pytest.raises(AssertionError):
        assert_same_tokens(model, exported, [(prompt([1, 2], 3),)])


@pytest.mark.slow
def test_beam_search_regrouped_and_grown_by_cat_equals_eager():
    """``beams = torch.cat([beams[idx // V], (idx % V)[:, None]], 1)``: beams and scores equal
    eager for prompts of lengths 1, 2, 4, 7 whose best beam stops after 1, 2, 4 steps or never."""
    model = m.BeamSearch(countdown=True).eval()
    exported = export_to_ort(model, (torch.tensor([[5, 4, 3]]),), dynamic_shapes=({1: L},))
    assert exported.ops.get("Loop") == 1
    inputs = [(prompt([last], length, seed=last),) for length, last in [(2, 4), (1, 1), (4, 9), (7, 2), (1, 10), (3, 3)]]
    for args in inputs:
        with torch.no_grad():
            beams, scores = model(*args)
        got_beams, got_scores = run_ort(exported, args)
        np.testing.assert_array_equal(got_beams, beams.numpy())
        np.testing.assert_allclose(got_scores, scores.numpy(), rtol=1e-5, atol=1e-5)
    assert {1, 2, 4, m.MAX_NEW} <= set().union(*trip_counts(model, inputs).values())


@pytest.fixture(scope="module")
def into_buffer():
    model = m.GreedyIntoBuffer(countdown=True).eval()
    return model, export_to_ort(model, (prompt([3, 5], 4),), dynamic_shapes=({0: B, 1: L},))


@pytest.mark.slow
@pytest.mark.parametrize("length", [1, 2, 7])
def test_greedy_into_a_buffer_sliced_by_the_counter_equals_eager(into_buffer, length):
    """``out[:, n + step] = nxt`` and the model on ``out[:, :n + step]``; the result sliced to the
    step the loop stopped at."""
    model, exported = into_buffer
    assert exported.ops.get("Loop") == 1
    inputs = [(prompt(last, length, seed=i),) for i, last in enumerate(STOPS)]
    assert_same_tokens(model, exported, inputs)
    assert {1, 2, 3, m.MAX_NEW} <= {model(*args).shape[1] - length for args in inputs}


@pytest.mark.slow
@pytest.mark.parametrize("target, inputs, fn", [
    ("Greedy", ["-i", "tokens=2x5:int64"], "stopping_prompts"),
    ("KVCache", ["-i", "tokens=2x5:int64", "-i", "max_new=scalar:int64"], "stopping_prompts_and_limits"),
])
def test_cli_converts_and_verifies_decoding_loops(tmp_path, target, inputs, fn):
    """``fxport convert`` end to end: one Loop in the file, verified on the generated sizes and on
    inputs whose rows stop at different steps."""
    import json

    import onnx

    from tests.conftest import MODELS, run_cli

    out = tmp_path / "decode.onnx"
    model = f"{MODELS}/decoding.py"
    result = run_cli("convert", f"{model}:{target}", *inputs, "--dynamic", "tokens:0=batch,1=length",
                     "--inputs-fn", f"{model}:{fn}", "-o", str(out), "--json", timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    data = json.loads(result.stdout)
    assert data["op_counts"]["Loop"] == 1
    rows = data["verification"]
    assert sum(row["name"].startswith("user") for row in rows) >= 4, [row["name"] for row in rows]
    assert all(row["passed"] or row["note"].startswith("skipped") for row in rows), rows
    assert any(n.op_type == "Loop" for n in onnx.load(out).graph.node)


@pytest.mark.slow
def test_a_list_of_key_value_caches_per_layer_grows_in_one_loop():
    """``caches = [(k, v) per layer]`` rebuilt each step by two blocks that cat onto their pair:
    the list's leaves are carried (four growing caches plus the tokens) by one Loop."""
    model = m.GreedyLayerCaches(countdown=True).eval()
    exported = export_to_ort(model, (prompt([5, 2], 3), torch.tensor(4)), dynamic_shapes=({0: B, 1: L}, None))
    assert exported.ops.get("Loop") == 1
    (record,) = [r for r in exported.records if r.rule == "while-to-while_loop"]
    assert "caches[1][1] (axis 1)" in record.detail
    inputs = [(prompt(last, length, seed=i), torch.tensor(max_new))
              for i, (last, length) in enumerate([([1], 1), ([3], 2), ([3, 9, 2], 2), ([10, 4], 7)])
              for max_new in (0, 1, 2, m.MAX_NEW)]
    assert_same_tokens(model, exported, inputs)
    assert {1, 2, 3, m.MAX_NEW} <= {model(*args).shape[1] for args in inputs}


def test_graph_passes_run_on_the_body_of_a_growing_loop():
    """``if last.sum().item() > 0.99999999`` in the body: exact at a row summing to 1.0 (float32
    rounds the constant to 1.0, Python does not), so the body got ``item-predicate-to-tensor``."""
    model = m.ItemPredicateInGrowingLoop().eval()
    exported = export_to_ort(model, (torch.tensor([[0.25, 0.25]]), torch.tensor(3)))
    assert exported.ops.get("Loop") == 1
    assert "item-predicate-to-tensor" in {r.rule for r in exported.records} | {r.rule for r in _all_rewrites(model)}
    for row, trips in [([0.5, 0.5], 3), ([0.25, 0.25], 4), ([1.0, 0.0], 0), ([2.0, 0.0], 1), ([0.5, 0.5], 2)]:
        args = (torch.tensor([row]), torch.tensor(trips))
        np.testing.assert_array_equal(run_ort(exported, args)[0], model(*args).numpy())


def _all_rewrites(model):
    from fxport.engine.pipeline import run

    job = run(model, (torch.tensor([[0.25, 0.25]]), torch.tensor(3)), until="rewrite", verify=False)
    return job.rewrites


def test_pad_and_stack_grow_two_tensors_along_different_axes():
    model = m.GrowsAlongTwoAxes().eval()
    exported = export_to_ort(model, (torch.rand(2, 3), torch.tensor(2)), dynamic_shapes=({0: B, 1: L}, None))
    (record,) = [r for r in exported.records if r.rule == "while-to-while_loop"]
    assert "hist (axis 0), x (axis 1)" in record.detail and exported.ops.get("Loop") == 1
    for shape, trips in [((1, 1), 0), ((2, 3), 1), ((3, 2), 2), ((1, 4), 5)]:
        args = (torch.rand(*shape), torch.tensor(trips))
        for got, want in zip(run_ort(exported, args), model(*args)):
            assert got.shape == tuple(want.shape)
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-6, atol=1e-6)


def test_branches_growing_by_amounts_that_differ_only_at_batch_0_become_an_if():
    """``x[:1]`` is one row except at batch 0, which the body capture sees as one row: the if
    that grows the state by it or by a mean row is an If in the Loop body, right at batch 0."""
    model = m.GrowsByARowOrByTheFirstRow().eval()
    exported = export_to_ort(model, (torch.rand(3, 4), torch.tensor(2)), dynamic_shapes=({0: B}, None))
    assert exported.ops.get("Loop") == 1 and exported.ops.get("If") == 1
    inputs = [(sign * torch.rand(b, 4), torch.tensor(trips)) for b in (0, 1, 3) for trips in (0, 1, 2, 4)
              for sign in (1, -1)]
    assert {model(*args).shape[0] - args[0].shape[0] for args in inputs} == {0, 1, 2, 4}
    for args in inputs:
        (got,) = run_ort(exported, args)
        want = model(*args)
        assert got.shape == tuple(want.shape), f"{[tuple(a.shape) for a in args]}: {got.shape} vs {tuple(want.shape)}"
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_state_that_starts_empty_and_grows_by_different_amounts_per_branch():
    model = m.GrowsFromEmptyByThreeOrOne().eval()
    exported = export_to_ort(model, (torch.rand(3, 5), torch.tensor(3)), dynamic_shapes=({0: B}, None))
    assert exported.ops.get("Loop") == 1 and exported.ops.get("If") == 1
    inputs = [(scale * torch.rand(b, 5), torch.tensor(trips)) for b in (0, 1, 3) for trips in (0, 1, 2, 5)
              for scale in (0.1, 10.0, -1.0)]
    assert len({tuple(model(*args).shape) for args in inputs}) > 6, "widths from 0 to 15, breaks included"
    for args in inputs:
        (got,) = run_ort(exported, args)
        want = model(*args)
        assert got.shape == tuple(want.shape), f"{[tuple(a.shape) for a in args]}: {got.shape} vs {tuple(want.shape)}"
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-6, atol=1e-6)


def test_a_state_grown_by_its_own_last_column_runs_from_empty():
    """The body's recorded shapes assume the growing axis at least 2 long; the file must run
    (and equal eager) on the steps where it is 0 and 1 long."""
    model = m.GrowsByItsOwnLastColumn().eval()
    exported = export_to_ort(model, (torch.rand(3, 5), torch.tensor(4)), dynamic_shapes=({0: B}, None))
    assert exported.ops.get("Loop") == 1
    for args in [(scale * torch.rand(b, 5), torch.tensor(trips)) for b in (1, 3) for trips in (0, 1, 2, 5)
                 for scale in (1.0, 40.0)]:
        for got, want in zip(run_ort(exported, args), model(*args)):
            assert got.shape == tuple(want.shape), f"{[tuple(a.shape) for a in args]}: {got.shape} vs {tuple(want.shape)}"
            np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["GrowsInANestedWhile", "GrowsInANestedForWithBreak"])
def test_a_tensor_grown_in_a_loop_nested_in_another_data_dependent_loop(name):
    model = getattr(m, name)().eval()
    exported = export_to_ort(model, (torch.rand(3, 5), torch.tensor(3)), dynamic_shapes=({0: B}, None))
    assert exported.ops.get("Loop") == 2
    (outer,) = [r for r in exported.records if "a loop in its body grows its own" in r.detail]
    inputs = [(scale * torch.rand(b, 5), torch.tensor(trips)) for b in (0, 1, 4) for trips in (0, 1, 2, 5)
              for scale in (0.5, 3.0)]
    for args in inputs:
        (got,) = run_ort(exported, args)
        np.testing.assert_allclose(got, model(*args).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
def test_top_k_sampling_with_the_noise_as_an_input_equals_eager():
    """Steps = the noise's second dimension (dynamic): 0, 1, 5, 6 steps, batches 1..4."""
    model = m.SampleTopK(seed=2).eval()
    g = torch.Generator().manual_seed(0)
    steps = torch.export.Dim("steps")
    exported = export_to_ort(model, (torch.tensor([[5, 4, 3], [2, 9, 8]]), torch.rand(2, 4, 3, generator=g)),
                             dynamic_shapes=({0: B, 1: L}, {0: B, 1: steps}))
    assert exported.ops.get("Loop") == 1
    inputs = [(torch.randint(0, m.VOCAB, (b, n), generator=g), -torch.log(-torch.log(torch.rand(b, s, 3, generator=g))))
              for b, n, s in [(1, 1, 5), (3, 2, 1), (2, 7, 6), (4, 3, 0)]]
    assert_same_tokens(model, exported, inputs)
