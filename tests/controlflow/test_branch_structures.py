"""Branches whose values differ in Python structure (issue #47).

* An empty list on one side of a tensor-conditioned ``if`` / ``a if c else b`` and a tensor on the
  other (PyTorch-YOLOv3's ``target_labels = annotations[:, 0] if len(annotations) else []``): where
  every read of the value treats it as a sequence of rows (``x in v``, ``len(v)``, a for loop over
  it), the empty side becomes a tensor of no rows of the other side's row shape and dtype; where a
  read would tell them apart, it is refused in one line.
* A list a ``while True`` grows, rebound to a tensor on the path of its only ``break``
  (ESPnet2's Transformer-TTS: ``outs = torch.cat(outs, ...)`` then ``break``): those last statements
  of the break path run right after the loop, so the loop carries a list only.

Each model equals eager on inputs taking every branch (sizes 0, 1 and more along the dynamic
dimension) and every exit, and the file holds the If / Loop.
"""

from __future__ import annotations

import ast
import textwrap

import pytest
import torch

import fxport
from fxport.controlflow import converted_source
from fxport.controlflow.context import Context
from fxport.controlflow.converters.conditional_expressions import read_as_rows
from fxport.controlflow.converters.loop_exits import move_break_tails
from tests.controlflow._util import (assert_every_branch_taken, assert_matches_eager, export_to_ort, line_in_source,
                                     loop_exits, trip_counts)


def t(rows):
    return torch.tensor(rows, dtype=torch.float32)


# ---------------------------------------------------------------------------------------------------
# an empty list beside a tensor
# ---------------------------------------------------------------------------------------------------


class IfExpRows(torch.nn.Module):
    """``labels = picked[:, 1:3] if len(picked) else []`` (a size condition), read by a for loop
    over its rows and ``len``."""

    def forward(self, x):
        picked = x[x[:, 0] > 0]
        labels = picked[:, 1:3] if len(picked) else []
        total = x.new_zeros(2)
        for row in labels:
            total = total + row
        return total, x.new_zeros(len(labels))


class IfRows(torch.nn.Module):
    """``labels = []`` before an ``if`` on a tensor condition that may give it a tensor."""

    def forward(self, x):
        picked = x[x[:, 0] > 0]
        labels = []
        if picked.sum() > 1:
            labels = picked[:, 1]
        return x.new_ones(len(labels)) * 2, x.new_zeros(()) + len(labels)


class ElseRows(torch.nn.Module):
    """``if``/``else`` with ``boxes = []`` in the else, read by a for loop and ``len``."""

    def forward(self, x):
        if x.sum() > 0:
            boxes = x[x[:, 0] > 0][:, :2]
        else:
            boxes = []
        acc = x.new_zeros(2)
        for box in boxes:
            acc = acc * 0.5 + box
        return acc, x.new_zeros((len(boxes), 1))


ROWS_INPUTS = [
    (t([[1.0, 2.0, 3.0], [-1.0, 4.0, 5.0], [2.0, 1.0, 1.0]]),),  # two rows picked
    (t([[-1.0, 2.0, 3.0]]),),  # size 1, nothing picked
    (t([[3.0, -2.0, 7.0]]),),  # size 1, one row picked
    (torch.zeros(0, 3),),  # size 0
    (t([[-1.0, 2.0, 3.0], [-2.0, 1.0, 1.0], [-3.0, 0.0, 0.0], [-1.0, 5.0, 5.0]]),),  # none of 4
    (t([[0.5, 1.0, 1.0], [0.2, 1.0, 1.0], [4.0, -9.0, 1.0], [1.0, 1.0, 1.0], [-5.0, 0.0, 0.0]]),),
]


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
@pytest.mark.parametrize("make", [IfExpRows, IfRows, ElseRows], ids=lambda c: c.__name__)
def test_an_empty_list_beside_a_tensor_read_as_rows_equals_eager(make):
    model = make()
    assert_every_branch_taken(model, ROWS_INPUTS)
    exported = export_to_ort(model, (t([[1.0, 2.0, 3.0], [-1.0, 4.0, 5.0], [2.0, 1.0, 1.0]]),),
                             dynamic_shapes={"x": {0: "n"}})
    assert_matches_eager(model, exported, ROWS_INPUTS)
    assert exported.ops.get("If") or exported.ops.get("Where"), exported.ops
    assert {r.rule for r in exported.records} & {"if-to-cond", "ifexp-to-cond", "if-to-where", "ifexp-to-where"}


class RowsInLoopBody(torch.nn.Module):
    """The ``a if len(picked) else []`` inside a data-dependent ``while`` body: an If in the Loop."""

    def forward(self, x, limit):
        acc = x.new_zeros(2)
        k = 0
        while acc.sum() < limit:
            picked = x[x[:, 0] > k]
            labels = picked[:, 1:3] if len(picked) else []
            acc = acc + 1 + x.new_ones((len(labels), 2)).sum(0)
            k += 1
        return acc


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_an_empty_list_beside_a_tensor_in_a_loop_body_equals_eager():
    model = RowsInLoopBody()
    x = t([[1.0, 2.0, 3.0], [-1.0, 4.0, 5.0], [2.0, 1.0, 1.0]])
    inputs = [(x, torch.tensor(5.0)), (x, torch.tensor(30.0)), (torch.zeros(0, 3), torch.tensor(3.0)),
              (t([[3.0, 2.0, 3.0]]), torch.tensor(0.0)), (t([[0.5, 2.0, 3.0]]), torch.tensor(9.0))]
    assert_every_branch_taken(model, inputs)
    assert {0, 1, 2} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, (x, torch.tensor(5.0)), dynamic_shapes={"x": {0: "n"}, "limit": None})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop") and exported.ops.get("If"), exported.ops


class ReturnedRows(torch.nn.Module):
    """The value is returned: a list in eager on one path, so no tensor may stand for it."""

    def forward(self, x):
        picked = x[x[:, 0] > 0]
        labels = picked[:, 1] if len(picked) else []
        return labels


class SummedRows(torch.nn.Module):
    """Passed to a function (``sum``) after the ``if``: what a function does with it is not known."""

    def forward(self, x):
        picked = x[x[:, 0] > 0]
        labels = []
        if picked.sum() > 1:
            labels = picked[:, 1]
        return x.sum() + sum(labels)


class ZeroDimRows(torch.nn.Module):
    """Read by ``in`` but 0-d on the tensor side: ``in`` compares a 0-d tensor's one element."""

    def forward(self, x):
        picked = x[x[:, 0] > 0]
        total = picked.sum() if len(picked) else []
        return x * (x[0, 0] in total)


@pytest.mark.parametrize("make, needle, text", [
    (ReturnedRows, "is an empty list in one branch but a tensor in the other, and not every use", "if len(picked)"),
    (SummedRows, "is an empty list in one branch but a tensor in the other", "if picked.sum() > 1"),
    (ZeroDimRows, "is an empty list in one branch but a 0-d tensor in the other", "if len(picked)"),
], ids=["returned", "summed", "zero-dim"])
def test_an_empty_list_beside_a_tensor_read_otherwise_is_refused_in_one_line(make, needle, text):
    with pytest.raises(fxport.ConversionError) as raised:
        fxport.convert(make(), (t([[1.0, 2.0, 3.0], [-1.0, 4.0, 5.0]]),), dynamic_shapes={"x": {0: "n"}}, verify=False)
    message = str(raised.value)
    assert "\n" not in message and needle in message, message
    assert f"test_branch_structures.py:{line_in_source(make.forward, text)}" in message, message


def test_reads_as_rows_are_in_len_list_and_iteration_only():
    def f(a, n, m):
        labels = a[:, 0] if n else []
        kept = [] if n else a
        pairs = [] if m else a
        seen = [] if m else a
        grown = [] if n else a
        grown += [a]
        found = [v for v in a if v not in labels] + [len(labels)] + list(labels)
        for i, (x, y) in enumerate(zip(a, pairs)):
            found.append(x in seen)
        if seen:
            found.append(kept)
        return found, tuple(seen)

    rows = read_as_rows(Context(f))
    assert {"labels", "pairs"} <= rows
    assert not rows & {"kept", "seen", "grown"}  # returned, bool(), +=


def test_a_module_that_defines_its_own_len_reads_as_written():
    namespace = {}
    exec(textwrap.dedent("""
        def len(v):
            return 3

        def f(a, n):
            labels = a[:, 0] if n else []
            return len(labels)
    """), namespace)
    assert "labels" not in read_as_rows(_ContextOf(namespace["f"], """
        def f(a, n):
            labels = a[:, 0] if n else []
            return len(labels)
    """))


class _ContextOf:
    """What read_as_rows reads of a Context, for a function defined by exec (it has no source file)."""

    def __init__(self, fn, source):
        self.fn, self.source_before = fn, textwrap.dedent(source)


# ---------------------------------------------------------------------------------------------------
# a grown list rebound to a tensor on the break path of a while True
# ---------------------------------------------------------------------------------------------------


class StackOnBreak(torch.nn.Module):
    """``outs = torch.stack(outs)`` (and more) on the only ``break`` of a ``while True``."""

    def forward(self, x, limit):
        outs = []
        y = x
        steps = 0
        while True:
            y = y * 0.5 + 1.0
            outs.append(y)
            steps += 1
            if y.sum() > limit or steps >= 5:
                outs = torch.stack(outs)
                outs = outs * 2
                break
        return outs, y


class EspnetLikeDecoder(torch.nn.Module):
    """ESPnet2's shape: ``outs += [..]``, a ``continue`` under a minimum length inside the stop
    test's branch, then ``outs = torch.cat(outs)``, a postnet under ``is not None``, ``probs =
    torch.cat(probs)`` and ``break``."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.step = torch.nn.Linear(3, 3)
        self.gate = torch.nn.Linear(3, 1)
        self.postnet = torch.nn.Linear(3, 3)

    def forward(self, x, minlen, threshold):
        outs, probs = [], []
        y = x
        idx = 0
        while True:
            idx += 1
            y = torch.tanh(self.step(y))
            outs += [y]
            probs += [torch.sigmoid(self.gate(y))[:, 0]]
            if int(sum(probs[-1] >= threshold)) > 0 or idx >= 6:
                if idx < minlen:
                    continue
                outs = torch.cat(outs, dim=0)
                if self.postnet is not None:
                    outs = outs + self.postnet(outs)
                probs = torch.cat(probs, dim=0)
                break
        return outs, probs


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_espnets_break_path_runs_after_the_loop_and_equals_eager():
    model = EspnetLikeDecoder()
    source = converted_source(EspnetLikeDecoder.forward)
    after_loop = source[source.index("_fx.while_stmt("):]
    assert "outs = _fx.cat(outs, dim=0)" in after_loop and "probs = _fx.cat(probs, dim=0)" in after_loop, source
    half, never = torch.tensor(0.5), torch.tensor(2.0)
    inputs = [(torch.full((1, 3), 0.0), torch.tensor(1), half),  # the gate fires on trip 1: break
              (torch.full((1, 3), -3.0), torch.tensor(1), half),  # on trip 3
              (torch.full((1, 3), 0.0), torch.tensor(3), half),  # fires at once: `continue` on trips 1-2
              (torch.full((1, 3), 1.0), torch.tensor(3), half),  # `continue`, then fires again on trip 4
              (torch.full((1, 3), 0.3), torch.tensor(1), never)]  # never fires: the bound (6 trips)
    assert set().union(*trip_counts(model, inputs).values()) == {1, 3, 4, 6}
    exported = export_to_ort(model, (torch.full((1, 3), 0.3), torch.tensor(2), half))
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop"), exported.ops


class ForLoopStackOnBreak(torch.nn.Module):
    """The same rebinding in a ``for`` loop, which may also end without the break (a list then)."""

    def forward(self, x, limit):
        outs = []
        y = x
        for _ in range(4):
            y = y * 0.5 + 1.0
            outs.append(y)
            if y.sum() > limit:
                outs = torch.stack(outs)
                break
        return outs


def test_a_for_loop_whose_break_path_rebinds_its_list_is_refused_in_one_line():
    with pytest.raises(fxport.ConversionError) as raised:
        fxport.convert(ForLoopStackOnBreak(), (torch.ones(2, 2), torch.tensor(3.0)), verify=False)
    message = str(raised.value)
    assert "\n" not in message and "'outs'" in message and "test_branch_structures.py:" in message, message


def _moved(source: str) -> str:
    fdef = ast.parse(textwrap.dedent(source)).body[0]
    move_break_tails(fdef)
    return ast.unparse(fdef)


def test_the_break_tail_moves_only_out_of_a_while_true_left_by_that_break_alone():
    moved = _moved("""
        def f(x):
            outs = []
            while True:
                outs.append(x)
                if x.sum() > 0:
                    if len(outs) < 2:
                        continue
                    outs = torch.stack(outs)
                    break
            return outs
    """)
    assert moved.index("outs = torch.stack(outs)") > moved.index("break"), moved
    assert "continue" in moved
    kept = {
        "a loop test": "while x.sum() < 9:\n        outs.append(x)\n        if x.sum() > 0:\n"
                       "            outs = torch.stack(outs)\n            break",
        "two breaks": "while True:\n        outs.append(x)\n        if x.sum() > 7:\n            break\n"
                      "        if x.sum() > 0:\n            outs = torch.stack(outs)\n            break",
        "a try around the break": "while True:\n        outs.append(x)\n        try:\n"
                                  "            outs = torch.stack(outs)\n            break\n        finally:\n"
                                  "            log(outs)",
        "no grown list rebound": "while True:\n        outs.append(x)\n        if x.sum() > 0:\n"
                                 "            y = torch.stack(outs)\n            break",
        "an else": "while True:\n        outs.append(x)\n        if x.sum() > 0:\n"
                   "            outs = torch.stack(outs)\n            break\n    else:\n        outs = 0",
    }
    for why, loop in kept.items():
        source = f"def f(x):\n    outs = []\n    {loop}\n    return outs\n"
        assert _moved(source) == ast.unparse(ast.parse(source).body[0]), why
