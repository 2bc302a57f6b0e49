"""A transformers cache updated in a branch on a tensor condition: carried through an ONNX
``If`` as its tensors (the branch that grows it and the one that does not give different
lengths), equal to eager on both branches, cache lengths 0, 1 and N and batch 1 and N; an
in-place update the if does not assign is refused at the user's line."""

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from fxport.errors import ControlFlowError  # noqa: E402
from tests.controlflow import library_object_models as m  # noqa: E402
from tests.controlflow._util import export_to_ort, run_ort  # noqa: E402
from examples.greedy_gpt2 import GreedyGPT2  # noqa: E402  (the README's generation example)

VOCAB = 64

B, S = torch.export.Dim("batch"), torch.export.Dim("seq")
DYNAMIC = ({0: B, 2: S}, {0: B, 2: S}, {0: B}, {0: B}, None)


def inputs(batch: int, seq: int, go: float, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    kv = [torch.randn(batch, 2, n, 4, generator=g) for n in (seq, seq, 1, 1)]
    return (*kv, torch.tensor([go]))


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_cache_grown_in_one_branch_is_carried_through_an_if():
    model = m.GrowWhenAsked().eval()
    exported = export_to_ort(model, inputs(2, 5, 1.0), dynamic_shapes=DYNAMIC)
    assert exported.ops.get("If", 0) == 1, exported.ops
    for batch, seq, go in [(2, 5, 1.0), (2, 5, -1.0), (1, 1, 1.0), (1, 1, -1.0), (3, 7, -2.0), (3, 0, 1.0),
                           (2, 2, 0.0), (1, 9, 3.0)]:
        args = inputs(batch, seq, go, seed=batch * 10 + seq)
        with torch.no_grad():
            expected = [t.numpy() for t in model(*args)]
        got = run_ort(exported, args)
        for e, o in zip(expected, got):
            assert e.shape == o.shape, (batch, seq, go, e.shape, o.shape)
            np.testing.assert_allclose(o, e, rtol=1e-5, atol=1e-6)


def test_a_cache_changed_in_place_in_a_branch_is_refused_at_its_line():
    with pytest.raises(ControlFlowError) as caught:
        export_to_ort(m.GrowInPlace().eval(), inputs(2, 5, 1.0), dynamic_shapes=DYNAMIC)
    message = str(caught.value)
    assert "changes the DynamicCache 'cache' in place" in message
    assert "library_object_models.py:38" in message and "\n" not in message


def _prompts(batch: int, length: int, seed: int, left_pad: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, VOCAB, (batch, length), generator=g)
    mask = torch.ones(batch, length, dtype=torch.int64)
    if left_pad and batch > 1:
        mask[1, :left_pad] = 0
        ids[1, :left_pad] = 0
    return ids, mask


def _stop_steps(tokens: torch.Tensor, prompt_length: int, eos: int) -> list:
    """Per row: the step at which it produced ``eos`` (1-based), None when it never did."""
    new = tokens[:, prompt_length:].tolist()
    return [row.index(eos) + 1 if eos in row else None for row in new]


def _end_token() -> int:
    """A token the tiny model emits greedily at several different steps and not on every row."""
    free_running = GreedyGPT2(end_token=-1, max_new_tokens=6).eval()
    ids, mask = _prompts(48, 5, seed=1)
    with torch.no_grad():
        new = free_running(ids, mask)[:, 5:].tolist()
    steps = {t: {row.index(t) + 1 for row in new if t in row} for t in range(VOCAB)}
    never = {t: sum(t not in row for row in new) for t in range(VOCAB)}
    return max((t for t in range(2, VOCAB) if never[t]), key=lambda t: (len(steps[t]), -abs(never[t] - 24)))


@pytest.fixture(scope="module")
def greedy():
    model = GreedyGPT2(end_token=_end_token(), max_new_tokens=6).eval()
    dims = ({0: B, 1: S}, {0: B, 1: S})
    return model, export_to_ort(model, _prompts(2, 5, seed=0), dynamic_shapes=dims)


def _rows_stopping_at(model, steps, length: int = 4):
    """One prompt row per step in ``steps`` whose greedy run stops there (searched by seed)."""
    rows = {}
    for seed in range(100, 700):
        ids, mask = _prompts(1, length, seed)
        with torch.no_grad():
            stop = _stop_steps(model(ids, mask), length, model.end_token)[0]
        if stop in steps and stop not in rows:
            rows[stop] = ids
        if len(rows) == len(steps):
            break
    return [rows[s] for s in steps if s in rows]


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_a_greedy_loop_around_tiny_gpt2_with_a_dynamic_cache_converts_to_one_loop(greedy):
    """examples/greedy_gpt2.py, with an end token found to stop rows at several steps."""
    model, exported = greedy
    assert exported.ops.get("Loop", 0) == 1 and exported.ops.get("If", 0) >= 1, exported.ops
    early_rows = _rows_stopping_at(model, (1, 2, 3, 4, 5))
    assert len(early_rows) >= 2, "no prompt found whose greedy run stops early"
    cases = [_prompts(*spec) for spec in [(2, 5, 0, 0), (1, 1, 3, 0), (1, 9, 4, 0), (4, 3, 5, 2), (3, 7, 6, 4),
                                          (8, 4, 7, 1), (5, 2, 8, 1), (6, 6, 9, 3)]]
    cases += [(row, torch.ones_like(row)) for row in early_rows]  # the whole batch stops early: a shorter output
    both = torch.cat(early_rows[:2])
    cases.append((both, torch.ones_like(both)))  # rows stopping at different early steps
    seen_stops, ended_early = set(), False
    for ids, mask in cases:
        batch, length = ids.shape
        pad = int((mask == 0).sum())
        with torch.no_grad():
            expected = model(ids, mask)
        got = run_ort(exported, (ids, mask))[0]
        assert got.shape == tuple(expected.shape) and np.array_equal(got, expected.numpy()), (
            f"batch {batch}, prompt {length}, left pad {pad}: eager {expected.tolist()} vs ONNX {got.tolist()}")
        seen_stops.update(_stop_steps(expected, length, model.end_token))
        ended_early |= expected.shape[1] < length + model.max_new_tokens
    assert ended_early, "no input made every row stop before the last step (the loop's early exit)"
    early = {s for s in seen_stops if s is not None and s < model.max_new_tokens}
    assert None in seen_stops and len(early) >= 2, f"rows stopped at {seen_stops}: the inputs do not exercise early stops"
