"""A loop whose first trip changes the rank of a carried tensor, kept from the second trip on
(issue #47, "carried value changes rank / first iteration unlike the rest"): the seq2seq
tutorial's ``decoder_input = torch.tensor([[SOS]])`` (1, 1) before the loop, ``decoder_input =
topi.squeeze()`` (0-d) in it; cockpit's ``eigval = torch.Tensor([inf])`` (1,) before, 0-d
after. The first trip runs on its own (peeled, as Python) and the loop carries the rank it made.
Each model equals eager in ONNX Runtime at every exit (a break on the first, second and a later
trip, the range bound) and the file holds the Loop; what stays refused (a rank that changes
again, a loop that may run no trip, a return inside) is one line at the user's line."""

from __future__ import annotations

import re

import pytest
import torch

import fxport
from tests.controlflow._util import assert_matches_eager, export_to_ort, line_in_source, loop_exits, trip_counts


class GreedyDecoder(torch.nn.Module):
    """``tok = torch.tensor([[1]])`` then ``tok = logits.argmax().squeeze()`` (0-d) each step,
    the token appended to a list, ``break`` on an end token (a tensor condition), a buffer row
    written per step (``buf[i] = ...``)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(5, 4)
        self.out = torch.nn.Linear(4, 5)

    def forward(self, x, end: int = 0):
        tok = torch.tensor([[1]])
        h = x
        words = []
        scores = torch.zeros(6, 5)
        for i in range(6):
            h = torch.tanh(self.emb(tok).view(1, -1) + h)
            logits = self.out(h)
            scores[i] = logits
            top = logits.argmax(dim=1, keepdim=True)
            if top.item() == end:
                words.append(end)
                break
            else:
                words.append(top.item())
            tok = top.squeeze().detach()
        return torch.tensor(words, dtype=torch.long), scores[: i + 1], h


class Converges(torch.nn.Module):
    """``eig = torch.Tensor([inf])`` (1,) then ``eig = new.norm() / v.norm()`` (0-d) each trip,
    ``break`` once two estimates agree (``torch.allclose`` of the (1,) and the 0-d
    value on the first trip, of two 0-d ones later). (cockpit's ``power_iteration`` returns the
    older estimate at the break, of shape (1,) had it broken on the first trip: a result whose
    rank is data, which stays refused: corpus loop power_iteration_return_raise.)"""

    def forward(self, a, v):
        eig = torch.tensor([float("inf")])
        v = v / v.norm()
        for _ in range(10):
            new = a @ v
            est = new.norm() / v.norm()
            v = new / new.norm()
            before, eig = eig, est
            if torch.allclose(before, eig, rtol=1e-3, atol=1e-6):
                break
        return eig * 1, v


class RankChangesTwice(torch.nn.Module):
    """``t.sum(0)`` every trip: (2, 3, 4) → (3, 4) → (4,): the rank changes again after the first trip."""

    def forward(self, x, n):
        t = x.reshape(2, 3, 4)
        for _ in range(3):  # error-line
            t = t.sum(0)
            if t.sum() > n:
                break
        return t


class TracedRange(torch.nn.Module):
    """A range over a size (it may be empty): after no trip ``e`` keeps its (1,) shape."""

    def forward(self, x):
        e = torch.tensor([3.0])
        for i in range(x.shape[0]):  # error-line
            e = (x[i] * e).sum()
        return e + 1


class OverRows(torch.nn.Module):
    """``for row in x`` (its rows may be none) whose first trip makes ``acc`` 0-d."""

    def forward(self, x):
        acc = torch.ones(1, 1)
        for row in x:  # error-line
            acc = (row * acc).sum()
        return acc


class WhileOnATensor(torch.nn.Module):
    """``while`` on a tensor test: the loop may run no trip."""

    def forward(self, x, n):
        e = x.reshape(1, -1).sum(1)
        while e.sum() < n:  # error-line
            e = (e * 2).sum() + 1
        return e


class WhileTrue(torch.nn.Module):
    """``while True`` with a ``break`` on a tensor: the first trip runs (as Python), so the loop
    carries the 0-d ``e`` it made."""

    def forward(self, x, n):
        e = x.reshape(1, -1).sum(1)
        k = 0
        while True:
            e = (e * 2).sum() + 1
            k += 1
            if e > n or k >= 5:
                break
        return e


def test_a_while_true_whose_first_trip_changes_a_rank_equals_eager_at_every_exit():
    model = WhileTrue()
    x = torch.tensor([0.5, 0.5])
    inputs = [(x, torch.tensor(v)) for v in (-1.0, 3.5, 10.0, 1000.0)]
    assert {1, 2, 3, 5} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, (x, torch.tensor(4.0)))
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_a_greedy_decoder_whose_first_step_squeezes_its_token_equals_eager_at_every_exit():
    model = GreedyDecoder().eval()
    inputs = [(torch.full((1, 4), float(v)),) for v in (-2.0, -1.0, 0.0, 0.5, 1.0, 2.0, 3.0)]
    with torch.no_grad():
        first_words = {model(*args)[0].numel() for args in inputs}
    trips = set().union(*trip_counts(model, inputs).values())
    exits = set().union(*loop_exits(model, inputs).values())
    assert {1, 6} <= trips and len(trips) >= 3, (trips, first_words)
    assert len(exits) >= 2, exits
    exported = export_to_ort(model, (torch.zeros(1, 4),))
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_power_iteration_whose_estimate_starts_as_a_vector_equals_eager():
    model = Converges()
    inputs = [(torch.diag(torch.tensor([3.0, 1.0])), torch.tensor([1.0, 0.0])),    # eigenvector: trip 2
              (torch.tensor([[2.0]]), torch.tensor([1.0])),                         # n = 1: trip 2
              (torch.tensor([[2.0, 1.0], [1.0, 2.0]]), torch.tensor([1.0, 0.0])),   # several trips
              (torch.tensor([[1.0, 0.9], [0.9, 1.0]]) + torch.eye(2) * 0.001, torch.tensor([1.0, -0.2])),
              (torch.diag(torch.tensor([1.0, 0.99, 0.5])), torch.ones(3)),           # trip 6
              (torch.diag(torch.tensor([1.0, 0.95])), torch.ones(2))]                # the bound (10)
    trips = set().union(*trip_counts(model, inputs).values())
    assert {2, 4, 6, 10} <= trips, trips
    exported = export_to_ort(model, (torch.eye(3) * 2, torch.ones(3)),
                             dynamic_shapes={"a": {0: "n", 1: "n"}, "v": {0: "n"}})
    assert_matches_eager(model, exported, inputs, atol=1e-4)
    assert exported.ops.get("Loop")


def test_a_rank_the_first_trip_makes_is_what_the_rest_of_the_loop_carries():
    class SumsOnce(torch.nn.Module):
        def forward(self, x, n):
            t = x.reshape(2, 3)
            for k in range(4):
                t = t.sum() + k if t.dim() else t * 2 + k
                if t > n:
                    break
            return t

    model = SumsOnce()
    x = torch.arange(6.0) / 10
    inputs = [(x, torch.tensor(v)) for v in (-1.0, 3.5, 4.5, 100.0)]
    assert {1, 2, 4} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, (x, torch.tensor(3.0)))
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


REFUSED = {
    "rank_changes_again": (RankChangesTwice, (torch.arange(24.0), torch.tensor(1e9)), None,
                           r"for: loop variable 't' changes shape from \(3, 4\) to \(4,\) at .*test_peeled_shapes.py:(\d+);"),
    "traced_range": (TracedRange, (torch.randn(3),), {"x": {0: "n"}},
                     r"for: loop variable 'e' changes shape from \(1,\) to \(\) in the first iteration, and whether the "
                     r"loop runs an iteration depends on the input: after no iteration it would keep the shape \(1,\) "
                     r"at .*test_peeled_shapes.py:(\d+); give 'e' the shape \(\) before the loop"),
    "while_test": (WhileOnATensor, (torch.tensor([0.5, 0.5]), torch.tensor(4.0)), None,
                   r"while: loop variable 'e' changes shape from \(1,\) to \(\) in the first iteration.* at "
                   r".*test_peeled_shapes.py:(\d+);"),
    "over_rows": (OverRows, (torch.randn(3, 2),), {"x": {0: "n"}},
                  r"for: loop variable 'acc' changes shape from \(1, 1\) to \(\) in the first iteration.* at "
                  r".*test_peeled_shapes.py:(\d+);"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_what_stays_refused_is_one_line_at_the_users_line(name):
    cls, args, dynamic_shapes, pattern = REFUSED[name]
    with pytest.raises(fxport.ConversionError) as info:
        fxport.convert(cls(), args, dynamic_shapes=dynamic_shapes)
    message = str(info.value)
    assert "\n" not in message
    match = re.search(pattern, message)
    assert match, message
    line = line_in_source(cls.forward, "# error-line")
    assert int(match.group(1)) == line, (match.group(1), line)
