"""A list read inside the data-dependent loop that grows it (issue #47, "loops in the wild":
NeMo's RNN-T greedy decoder ``last_label = SOS if label == [] else label[-1]``, icefall's
``hyp[-context_size:]``). Inside the loop the list is rows plus a count (the ``rows`` buffer of a
``for`` over a range, the stack of a loop whose state grows); ``xs == []``, ``if xs``,
``len(xs) == 0`` are tensor tests of the count, ``xs[-k]`` and ``xs[-k:]`` reads of the rows at
the count, and a read where the list holds fewer elements (the side of a ``where`` not taken) reads
a zero row, never out of bounds. Each model is compared with eager on inputs where the list is
empty at the read, holds one element, and many; the loops run 0, 1, 2 and N trips. Reads that
cannot be exact are refused in one line at the read."""

from __future__ import annotations

import pytest
import torch

import fxport
from tests.controlflow._util import (assert_every_branch_taken, assert_matches_eager, export_to_ort, line_in_source,
                                    trip_counts)

_T = {"x": {0: "T"}}


def _inputs():
    """Trip counts 0, 1, 2, 5; rows that append (sum > 0) and rows that do not, so the list is
    empty at a read (all negative), holds one element, and many."""
    neg, pos = -torch.ones(3), torch.ones(3)
    return [(torch.zeros(0, 3),), (pos[None] * 0.5,), (neg[None],), (torch.stack([pos, pos * 0.3]),),
            (torch.stack([neg, pos, neg, pos * 2, pos * 0.1]),), (torch.stack([neg] * 4),),
            (torch.randn(5, 3, generator=torch.Generator().manual_seed(0)),), (torch.stack([pos * 0.2, neg, pos * 0.7, pos * 0.4, neg]),)]


def _check(model, inputs=None, example=None, want=(0, 1, 2, 5)):
    inputs = inputs or _inputs()
    trips = set().union(*trip_counts(model, inputs).values())
    assert set(want) <= trips, trips
    assert_every_branch_taken(model, inputs)
    exported = export_to_ort(model, example or (torch.randn(3, 3),), dynamic_shapes=_T)
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop"), exported.ops
    return exported


class LastOrStart(torch.nn.Module):
    """NeMo's shape: ``start if ys == [] else ys[-1]``, an append under a tensor condition."""

    def forward(self, x):
        ys = []
        acc = x.new_zeros(3)
        for t in range(x.shape[0]):
            prev = x.new_zeros(3) - 1 if ys == [] else ys[-1]
            if x[t].sum() > 0:
                ys.append(torch.tanh(x[t] + prev))
            acc = acc * 0.5 + prev
        return acc


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_empty_test_then_the_last_element_in_a_for_over_a_range():
    exported = _check(LastOrStart())
    assert exported.ops.get("Where"), exported.ops


class LenIsZero(torch.nn.Module):
    """``len(ys) == 0`` as the test; the read is not met on the first trip (the loop carries rows)."""

    def forward(self, x):
        ys = []
        acc = x.new_zeros(3)
        for t in range(x.shape[0]):
            prev = x.new_ones(3) if len(ys) == 0 else ys[-1] * 2
            if x[t].sum() > 0:
                ys.append(torch.tanh(x[t] + prev))
            acc = acc + prev
        return acc


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_len_zero_test_then_the_last_element():
    _check(LenIsZero())


class IfList(torch.nn.Module):
    """``if ys:`` (the list's truth) before ``ys[-1]``."""

    def forward(self, x):
        ys = []
        acc = x.new_zeros(3)
        for t in range(x.shape[0]):
            if ys:
                prev = ys[-1] * 2
            else:
                prev = x.new_ones(3)
            if x[t].sum() > 0:
                ys.append(torch.tanh(x[t] + prev))
            acc = acc + prev
        return acc


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_the_truth_of_the_list_then_the_last_element():
    _check(IfList())


class WhileLastOrStart(torch.nn.Module):
    """A ``while`` loop (a count on its first pass): the test of emptiness in its first trip makes
    it carry the elements, so later trips read them."""

    def forward(self, x):
        ys = []
        t = 0
        acc = x.new_zeros(3)
        while t < x.shape[0] and acc.sum() < 2.5:
            prev = x.new_zeros(3) if ys == [] else ys[-1]
            if x[t].sum() > 0:
                ys.append(torch.tanh(x[t] + prev))
            acc = acc + prev
            t += 1
        return acc


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_empty_test_then_the_last_element_in_a_while():
    model = WhileLastOrStart()
    early = [args[0].shape[0] for args in _inputs()
             if max(set().union(*trip_counts(model, [args]).values())) < args[0].shape[0]]
    assert early, "no input leaves the loop by acc.sum() before t reaches T"
    _check(model, want=(0, 1, 2, 4))


class SecondToLast(torch.nn.Module):
    """``ys[-2]`` guarded by ``len(ys) >= 2``, one element before the loop."""

    def forward(self, x):
        ys = [x.new_full((3,), 0.5)]
        acc = x.new_zeros(3)
        for t in range(x.shape[0]):
            if x[t].sum() > 0:
                ys.append(x[t] * 2)
            acc = acc + (ys[-2] if len(ys) >= 2 else ys[-1] * 0 - 1)
        return acc


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_the_second_to_last_element_guarded_by_len():
    _check(SecondToLast())


class ContextWindow(torch.nn.Module):
    """icefall's ``torch.tensor([hyp[-context_size:]])``: ids read with ``.item()``, appended under
    a tensor condition, the last two read back as the next context (two blanks before the loop)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(3, 3)

    def forward(self, x):
        hyp = [0, 0]
        ctx = self.emb(torch.tensor([0, 0])).sum(0)
        for t in range(x.shape[0]):
            y = (x[t] + ctx).argmax().item()
            if y != 0:
                hyp.append(y)
                ctx = self.emb(torch.tensor([hyp[-2:]])).sum(1)[0]
        return ctx


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_window_of_the_last_elements_with_elements_before_the_loop():
    x = torch.tensor([[0.0, 1.0, 9.0], [9.0, 0.0, 0.0], [0.0, 9.0, 0.0], [0.0, 0.0, 9.0], [0.0, 9.0, 0.0]])
    inputs = _inputs() + [(x,), (x[:2],), (x[1:2],)]
    _check(ContextWindow(), inputs)


class StackOfLastTwo(torch.nn.Module):
    """``torch.stack(ys[-2:])`` read on every trip (the loop carries the stack of the elements)."""

    def forward(self, x):
        ys = [x.new_zeros(3), x.new_ones(3)]
        for t in range(x.shape[0]):
            w = torch.stack(ys[-2:]).sum(0)
            if x[t].sum() > 0:
                w = w * 0.5
            ys.append(torch.tanh(x[t] + w))
        return torch.stack(ys)


def test_a_slice_of_the_last_elements_read_on_every_trip():
    _check(StackOfLastTwo())


# --- refused in one line at the read ---------------------------------------------------------------


def _refusal(model, text: str, fn=None) -> str:
    with pytest.raises(fxport.ConversionError) as raised:
        fxport.convert(model, (torch.randn(3, 3),), dynamic_shapes=_T, verify=False)
    message = str(raised.value)
    line = line_in_source(fn or type(model).forward, text)
    assert "\n" not in message and f"test_list_reads_in_loop.py:{line}" in message, message
    return message


class NotList(torch.nn.Module):
    def forward(self, x):
        ys = []
        acc = x.new_zeros(3)
        for t in range(x.shape[0]):
            if not ys:
                acc = acc + 1
            ys.append(x[t])
        return acc + torch.stack(ys).sum(0)


def test_not_of_the_list_is_refused_with_the_test_to_write_instead():
    message = _refusal(NotList(), "if not ys:")
    assert "ys == []" in message, message


class WhileLenRead(torch.nn.Module):
    """A ``while`` whose first trip neither reads the list nor tests it as a list: its first pass
    only counts, so the read on a later trip is refused."""

    def forward(self, x):
        ys = []
        t = 0
        acc = x.new_zeros(3)
        while t < x.shape[0] and acc.sum() < 30:
            prev = x.new_zeros(3) if len(ys) == 0 else ys[-1]
            ys.append(x[t] + prev)
            acc = acc + prev
            t += 1
        return acc


def test_a_read_a_while_loop_first_trip_did_not_make_is_refused_at_the_read():
    message = _refusal(WhileLenRead(), "prev = x.new_zeros(3) if len(ys) == 0 else ys[-1]")
    assert "ys == []" in message, message


class WindowLongerThanTheStart(torch.nn.Module):
    def forward(self, x):
        ys = [x.new_zeros(3)]
        acc = x.new_zeros(3)
        for t in range(x.shape[0]):
            if len(ys) >= 2:
                acc = acc + torch.stack(ys[-2:]).sum(0)
            if x[t].sum() > 0:
                ys.append(x[t])
        return acc


def test_a_window_that_may_hold_fewer_elements_is_refused_at_the_read():
    message = _refusal(WindowLongerThanTheStart(), "acc = acc + torch.stack(ys[-2:]).sum(0)")
    assert "[-2:]" in message, message


def test_the_grown_list_models_last_element_read_in_its_while_equals_eager():
    """grown_list_models.LastOfListGrownInItsLoop (``0 if label == [] else label[-1]`` in a
    ``while`` on a tensor test, appends under a tensor condition), refused before, converts."""
    from tests.controlflow import grown_list_models as models

    model = models.LastOfListGrownInItsLoop()
    inputs = [(torch.tensor([0.5, 0.2, 0.1]),), (torch.tensor([1.5, 0.0, 0.0]),), (torch.tensor([-3.0, 2.0, 3.0]),),
              (torch.tensor([3.0, 1.0, 0.5]),), (torch.tensor([4.2, 3.1, 2.0]),), (torch.rand(3) * 3,)]
    assert {0, 1, 2} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, (torch.tensor([2.5, 1.0, 1.0]),))
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop"), exported.ops


class NestedLastOrStart(torch.nn.Module):
    """NeMo's nesting: a ``for`` over frames around a ``while`` over symbols that reads the list
    both grow (``start if label == [] else label[-1]``): the inner loop's first trip reads what
    earlier frames appended. Both loops carry the stack of all the elements."""

    def forward(self, x):
        label = []
        acc = x.new_zeros(3)
        for t in range(x.shape[0]):
            s = 0
            go = x[t].sum() > -10
            while go and s < 2:
                last = x.new_zeros(3) - 1 if label == [] else label[-1]
                acc = acc + last
                if (x[t] + last).sum() > 0:
                    label.append(torch.tanh(x[t] + last))
                else:
                    go = x[t].sum() < -10
                s += 1
        return acc


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_list_read_in_a_loop_nested_in_another_that_grows_it():
    model = NestedLastOrStart()
    pos, neg = torch.ones(3), -torch.ones(3) * 2
    inputs = _inputs() + [(torch.stack([pos, neg, pos * 0.1]),), (torch.stack([neg, neg, pos]),),
                          (torch.stack([pos * 3, pos * 0.2, neg * 0.1, pos]),)]
    exported = _check(model, inputs)
    assert exported.ops.get("Loop", 0) >= 2, exported.ops


def test_len_of_the_list_in_a_loop_nested_in_another_that_grows_it_equals_eager():
    """nested_list_models.LenInsideTheInnerLoop (``parts.append(x + len(parts))`` in a ``while``
    inside a ``while``), refused before: the inner loop's count starts with the outer's elements."""
    from tests.controlflow import nested_list_models as models

    model = models.LenInsideTheInnerLoop()
    inputs = [(torch.rand(3), torch.tensor(k)) for k in (0, 1, 2, 3, 5)]
    trips = trip_counts(model, inputs)
    assert all({0, 1, 2} <= t for t in trips.values()), trips
    exported = export_to_ort(model, (torch.rand(3), torch.tensor(3)))
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop", 0) >= 2, exported.ops
