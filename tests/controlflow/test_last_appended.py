"""The last element of a list read inside the loop that grows it, under a branch (issue #47:
Tacotron 1's greedy decoder, ``if t > 0: current_input = outputs[-1]`` in ``while True``). The
probe that learns the list's elements reads it inside a branch, on the branch's copy of the list;
that it was read reached only the copy, so the loop carried the list as rows it cannot read inside
the loop and refused ("indexing list 'outputs' … inside the loop is not supported"). The read is
now seen by every copy, the loop carries the stack of the elements so far, and the file equals
eager at every exit."""

from __future__ import annotations

import pytest
import torch

from tests.controlflow._util import assert_matches_eager, export_to_ort, trip_counts


class FeedLastOutput(torch.nn.Module):
    """r9y9's shape: the previous output is the next input from the second step on; a stop test
    after the first step, and a step bound."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc = torch.nn.Linear(3, 3)

    def forward(self, x, threshold):
        outputs = []
        t = 0
        current = x
        while True:
            if t > 0:
                current = outputs[-1]
            out = torch.tanh(self.fc(current) + current)
            outputs += [out]
            t += 1
            if t > 1 and out.sum() > threshold:
                break
            elif t > 6:
                break
        return torch.stack(outputs)


class LastOfAList(torch.nn.Module):
    """``outputs[-1]`` under a tensor condition in a ``for`` over a traced range, with an initial
    element before the loop."""

    def forward(self, x, n):
        outputs = [x]
        for i in range(int(n)):
            if x.sum() > 0:
                y = outputs[-1] * 0.5 + i
            else:
                y = outputs[-1] - 1.0
            outputs.append(y)
        return torch.stack(outputs).sum(0)


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_the_last_output_fed_back_converts_and_equals_eager_at_every_exit():
    model = FeedLastOutput()
    x = torch.tensor([[0.3, -0.2, 0.1]])
    inputs = [(x, torch.tensor(-9.0)), (x, torch.tensor(9.0)), (x * 4, torch.tensor(0.2)),
              (torch.randn(3, 3), torch.tensor(0.0)), (-x, torch.tensor(1.0))]
    trips = set().union(*trip_counts(model, inputs).values())
    assert 2 in trips and 7 in trips, trips
    exported = export_to_ort(model, (torch.randn(2, 3), torch.tensor(0.5)),
                             dynamic_shapes={"x": {0: "batch"}, "threshold": None})
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_the_last_element_under_a_tensor_condition_in_a_for():
    model = LastOfAList()
    inputs = [(torch.ones(2), torch.tensor(0)), (torch.ones(2), torch.tensor(1)), (-torch.ones(2), torch.tensor(2)),
              (torch.ones(2), torch.tensor(5))]
    assert {0, 1, 2, 5} <= set().union(*trip_counts(model, inputs).values())
    exported = export_to_ort(model, (torch.ones(2), torch.tensor(3)))
    assert_matches_eager(model, exported, inputs)
    assert exported.ops.get("Loop")


class ListWrittenInAGrowingLoop(torch.nn.Module):
    """Tacotron 1's decoder RNN states: a Python list of tensors written by index
    (``hs[idx] = cell(x, hs[idx])``) in a loop whose state grows. Such a loop runs its body
    outside dynamo, where the write once landed in a list the file never read (verification
    caught it; later refused at the write). Since round nine a per-layer list written at a
    trace-time position is carried entry by entry (docs/control-flow.md), so it converts."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.cells = torch.nn.ModuleList([torch.nn.GRUCell(3, 3) for _ in range(2)])

    def forward(self, enc):
        outs = enc.new_zeros(enc.shape[0], 0, 3)
        hs = [enc.new_zeros(enc.shape[0], 3) for _ in range(2)]
        cur = enc.mean(1)
        t = 0
        while True:
            if t > 0:
                cur = outs[:, -1]
            x = cur
            for idx in range(2):
                hs[idx] = self.cells[idx](x, hs[idx])
                x = hs[idx] + x
            outs = torch.cat([outs, x[:, None]], 1)
            t += 1
            if t > 1 and (x <= 0.2).all():
                break
            elif t > 6:
                break
        return outs


@pytest.mark.slow  # 4.5 s or more in the CI run of 2026-12-03
def test_a_list_written_by_index_in_a_loop_whose_state_grows_is_carried_and_equals_eager():
    """Both ways out of the ``while True``: the ``(x <= 0.2).all()`` break after 2 trips, and the
    ``t > 6`` break after 7; sizes 1, 2 and 4 along the dynamic ``T``."""
    model = ListWrittenInAGrowingLoop()
    inputs = [(torch.full((1, T, 3), -3.0),) for T in (1, 2)]  # leaves by the all-small break
    inputs += [(torch.randn(1, 4, 3, generator=torch.Generator().manual_seed(seed)),) for seed in (0, 12)]
    inputs += [(torch.zeros(1, 1, 3),)]  # leaves by t > 6
    assert {model(*args).shape[1] for args in inputs} == {2, 7}
    exported = export_to_ort(model, (torch.randn(1, 4, 3),), dynamic_shapes={"enc": {1: "T"}})
    assert exported.ops.get("Loop"), exported.ops
    assert_matches_eager(model, exported, inputs)
