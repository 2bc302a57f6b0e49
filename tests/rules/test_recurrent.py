"""``nn.GRU`` / ``nn.LSTM`` (rewrites/recurrent.py): recurrent layers over sequences of any
length. torch's shape kernels of ``aten::gru``/``aten::lstm`` loop over the example's time steps
and fix its sequence length; the rule's custom ops keep it symbolic and are written as ONNX
GRU/LSTM nodes."""

import numpy as np
import pytest
import torch

import fxport
from fxport.testing import run_onnx


class Stacked(torch.nn.Module):
    """A bidirectional 2-layer LSTM (time first, zero state) feeding a batch-first bidirectional
    2-layer GRU given its initial state."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lstm = torch.nn.LSTM(4, 6, num_layers=2, bidirectional=True)
        self.gru = torch.nn.GRU(12, 5, batch_first=True, bidirectional=True, num_layers=2)

    def forward(self, x, h0):
        out, (h, c) = self.lstm(x)
        out2, h2 = self.gru(out.transpose(0, 1), h0)
        return out2, h2, h, c


class Unbatched(torch.nn.Module):
    def __init__(self, cell):
        super().__init__()
        torch.manual_seed(1)
        self.rnn = cell(3, 4, bias=False)

    def forward(self, x):
        return self.rnn(x)[0]


def _randn(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_stacked_bidirectional_layers_convert_for_every_length_and_batch():
    model = Stacked().eval()
    result = fxport.convert(model, (_randn(7, 2, 4, seed=0), _randn(4, 2, 5, seed=1)),
                            dynamic_shapes={"x": {0: "time", 1: "batch"}, "h0": {1: "batch"}})
    assert result.verified
    assert {"gru-any-sequence-length", "lstm-any-sequence-length"} <= {r.rule for r in result.rewrites}
    ops = result.op_counts()
    assert ops.get("GRU") == 2 and ops.get("LSTM") == 2
    for seed, (time, batch) in enumerate([(1, 1), (2, 3), (13, 1), (30, 4)]):
        args = (_randn(time, batch, 4, seed=10 + seed), _randn(4, batch, 5, seed=20 + seed))
        with torch.no_grad():
            expected = [t.numpy() for t in model(*args)]
        for got, want in zip(run_onnx(result.model, args), expected):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5, err_msg=f"time {time} batch {batch}")


@pytest.mark.parametrize("cell", [torch.nn.GRU, torch.nn.LSTM])
def test_an_unbatched_sequence_without_biases_converts(cell):
    model = Unbatched(cell).eval()
    result = fxport.convert(model, (_randn(5, 3, seed=2),), dynamic_shapes={"x": {0: "time"}})
    assert result.verified and result.op_counts().get(cell.__name__)
    for time in (1, 9):
        x = _randn(time, 3, seed=time)
        np.testing.assert_allclose(run_onnx(result.model, (x,))[0], model(x).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_a_projected_lstm_is_left_as_torch_writes_it():
    """``proj_size`` has no ONNX LSTM form: torch's kernel runs as written (its sequence length
    stays the example's), and the refusal says so at the user's line."""
    model = torch.nn.LSTM(3, 4, proj_size=2).eval()
    with pytest.raises(fxport.ConversionError, match="specialises dynamic dimension 'time'"):
        fxport.convert(model, (_randn(5, 1, 3, seed=3),), dynamic_shapes={"input": {0: "time"}}, verify=False)
