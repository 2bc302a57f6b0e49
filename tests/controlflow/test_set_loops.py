"""``for v in set(xs)`` inside the data-dependent loop that grows ``xs`` (issue #47, found in
yangjianxin1/GPT2-chitchat's reply loop: ``for id in set(generated): next_token_logits[id] /=
repetition_penalty``, then ``generated.append(next_token.item())``).

The set's size is data there. A body that writes only ``t[v]`` and reads only ``t[v]`` of what it
writes cannot tell Python's set order, so the ``for`` runs over the distinct values so far (a
Loop nested in the decoding Loop); any other body keeps the refusal, in one line at the user's
line. Differential: eager vs ONNX Runtime on prompts whose greedy ids repeat (the set keeps one
of each: the penalty divides once), that stop at trip 1 (an empty set), 2, 3 and the bound.
"""

from __future__ import annotations

import pytest
import torch

import fxport
from fxport.controlflow import converted_source
from tests.controlflow._util import assert_matches_eager, export_to_ort, line_in_source, loop_exits, trip_counts


class RepetitionPenalty(torch.nn.Module):
    """A greedy decoder of 5 steps that divides the logits of every id generated so far once."""

    def __init__(self, penalty: float = 1.5):
        super().__init__()
        torch.manual_seed(0)
        self.emb, self.out, self.penalty = torch.nn.Embedding(6, 4), torch.nn.Linear(4, 6), penalty

    def forward(self, ids):
        generated = []
        token = ids[-1:]
        h = self.emb(ids).mean(0)
        for _ in range(5):
            logits = self.out(torch.tanh(h + self.emb(token)[0]))
            for id in set(generated):
                logits[id] /= self.penalty
            token = torch.argmax(logits).unsqueeze(0)
            if token == 0:
                break
            generated.append(token.item())
            h = h + self.emb(token)[0]
        return torch.tensor(generated, dtype=torch.long)


class PeeledFirstTrip(RepetitionPenalty):
    """GPT2-chitchat's shape: the state is None before the loop, so the first trip runs on its own,
    and its append sits under the break's tensor test; the set is read on every later trip."""

    def forward(self, ids):
        generated = []
        token = ids[-1:]
        h = None
        for _ in range(5):
            e = self.emb(token)[0]
            h = torch.tanh(self.emb(ids).mean(0) + e) if h is None else torch.tanh(h + e)
            logits = self.out(h)
            for id in set(generated):
                logits[id] /= self.penalty
            token = torch.argmax(logits).unsqueeze(0)
            if token == 0:
                break
            generated.append(token.item())
        return torch.tensor(generated, dtype=torch.long)


class OrderShows(RepetitionPenalty):
    """The body reads another position of what it writes: the set's order would show."""

    def forward(self, ids):
        generated = []
        token = ids[-1:]
        h = self.emb(ids).mean(0)
        for _ in range(5):
            logits = self.out(torch.tanh(h + self.emb(token)[0]))
            for id in set(generated):
                logits[id] = logits[id] / 2 + logits[0]
            token = torch.argmax(logits).unsqueeze(0)
            if token == 0:
                break
            generated.append(token.item())
            h = h + self.emb(token)[0]
        return torch.tensor(generated, dtype=torch.long)


def _prompts():
    """Greedy ids [], [3, 5], [5, 4, 3], [5, 4, 3, 3] (then 0), and the bound: [3, 5, 4, 3, 3],
    [3, 5, 5, 4, 3], [4, 3, 3, 3, 3]; prompts of 1, 2, 3 and 6 ids."""
    return [(torch.randint(0, 6, (n,), generator=torch.Generator().manual_seed(seed)),)
            for n, seed in ((3, 9), (1, 3), (2, 10), (2, 2), (1, 0), (2, 7), (6, 10))]


@pytest.mark.slow  # 4.5 s or more (2026-12-03, third session): it runs with the slow set in CI
def test_a_set_of_the_ids_so_far_converts_and_equals_eager_at_every_exit():
    model = RepetitionPenalty().eval()
    prompts = _prompts()
    outputs = [model(*p).tolist() for p in prompts]
    assert any(len(o) > len(set(o)) for o in outputs), outputs  # repeated ids: the set keeps one each
    (trips,) = [t for line, t in trip_counts(model, prompts).items() if line == line_in_source(RepetitionPenalty.forward, "for _ in range(5)")]
    assert {1, 3, 4, 5} <= trips, trips  # break on trip 1 (an empty set), 3, 4 and 5; the bound
    exits = set().union(*loop_exits(model, prompts).values())
    assert {"left by a break", "left at its trip bound"} <= exits, exits
    assert "_fx.lists.distinct.iterated(set, generated)" in converted_source(RepetitionPenalty.forward)
    exported = export_to_ort(model, prompts[1], dynamic_shapes={"ids": {0: torch.export.Dim("n", min=1, max=64)}})
    assert exported.ops.get("Loop", 0) >= 2, exported.ops  # the loop over the set inside the decoding loop
    assert_matches_eager(model, exported, prompts)


#: greedy ids [] (a break on trip 1, prompts of 2 and 6), [5], [3, 5], [4, 3, 5], the bound with
#: repeats ([5, 4, 3, 3, 3], [3, 5, 4, 3, 3]), [4, 3]
PEELED_PROMPTS = ((2, 4), (6, 3), (2, 0), (1, 0), (1, 5), (1, 1), (3, 7), (3, 1))


@pytest.mark.slow  # 4.5 s or more (2026-12-03, third session): it runs with the slow set in CI
def test_the_set_after_a_first_trip_that_appended_under_a_tensor_test_converts_and_equals_eager():
    """The loop's stack starts with the rows the peeled first trip kept (none where it broke)."""
    model = PeeledFirstTrip().eval()
    prompts = [(torch.randint(0, 6, (n,), generator=torch.Generator().manual_seed(seed)),)
               for n, seed in PEELED_PROMPTS]
    outputs = [model(*p).tolist() for p in prompts]
    assert [] in outputs and any(len(o) == 5 and len(set(o)) < 5 for o in outputs), outputs
    trips = set().union(*trip_counts(model, prompts).values())
    assert {1, 5} <= trips and len(trips) >= 3, trips
    exported = export_to_ort(model, prompts[-1], dynamic_shapes={"ids": {0: torch.export.Dim("n", min=1, max=64)}})
    assert exported.ops.get("Loop", 0) >= 2, exported.ops
    assert_matches_eager(model, exported, prompts)


def test_a_body_that_could_tell_the_order_keeps_the_set_and_is_refused_at_its_line():
    assert "set(generated)" in converted_source(OrderShows.forward)
    assert "distinct" not in converted_source(OrderShows.forward)
    with pytest.raises(fxport.ConversionError) as raised:
        fxport.convert(OrderShows().eval(), _prompts()[1], dynamic_shapes={"ids": {0: "n"}}, verify=False)
    message = str(raised.value)
    assert "\n" not in message and "set(generated)" in message, message
    assert f"test_set_loops.py:{line_in_source(OrderShows.forward, 'for id in set(generated)')}" in message, message
