"""``nn.GRU`` and ``nn.LSTM`` over sequences of any length: ``aten::gru.input`` / ``aten::lstm.input``.

torch.export keeps ``aten::gru.input`` and ``aten::lstm.input`` as ops, but their fake (shape)
kernels run torch's decomposition, a Python loop over the time steps: the sequence length of
the example is fixed into the program ("the model specialises dynamic dimension 'src_len' to
4"), so an encoder over a dynamic source length — every seq2seq, speech or tagging model
built on ``nn.GRU``/``nn.LSTM`` — is refused. Here the modules' call into torch's kernel
(``_VF.gru`` / ``_VF.lstm`` in ``torch.nn.modules.rnn``) becomes one custom op per module call,
``fxport_rnn::gru`` / ``fxport_rnn::lstm``: its eager kernel is torch's own (a program holding
it computes what the model computes), its shape kernel states the output shapes without
looking at the sequence length, and it is written as ONNX ``GRU`` / ``LSTM`` nodes (one per
layer; both directions in one node) by onnxscript's translation of the aten op, which reorders
the gates (PyTorch r,z,n / i,f,g,o → ONNX z,r,h / i,o,f,c) and keeps PyTorch's
``linear_before_reset`` GRU.

Left as torch writes them (the sequence length stays fixed, as without fxport): packed
sequences (``pack_padded_sequence``), ``proj_size > 0``, dropout while training.
"""

from __future__ import annotations

import torch

import fxport

NAMESPACE = "fxport_rnn"


def _output_shape(input, hx, bidirectional: bool):
    """(seq, batch, dirs × hidden) — or (batch, seq, ...) — read from the input and the state."""
    return (input.shape[0], input.shape[1], (2 if bidirectional else 1) * hx.shape[2])


def _define_ops():
    vf_gru, vf_lstm = torch._VF.gru, torch._VF.lstm  # taken now: capture patches the names

    @torch.library.custom_op(f"{NAMESPACE}::gru", mutates_args=())
    def gru(input: torch.Tensor, hx: torch.Tensor, params: list[torch.Tensor], has_biases: bool,
            num_layers: int, dropout: float, train: bool, bidirectional: bool,
            batch_first: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """torch's GRU kernel: (output, h_n)."""
        output, h_n = vf_gru(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
        return output.clone(), h_n.clone()

    @gru.register_fake
    def _(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
        return input.new_empty(_output_shape(input, hx, bidirectional)), hx.new_empty(hx.shape)

    @torch.library.custom_op(f"{NAMESPACE}::lstm", mutates_args=())
    def lstm(input: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, params: list[torch.Tensor],
             has_biases: bool, num_layers: int, dropout: float, train: bool, bidirectional: bool,
             batch_first: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """torch's LSTM kernel: (output, h_n, c_n)."""
        output, h_n, c_n = vf_lstm(input, (h0, c0), params, has_biases, num_layers, dropout, train,
                                   bidirectional, batch_first)
        return output.clone(), h_n.clone(), c_n.clone()

    @lstm.register_fake
    def _(input, h0, c0, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
        return input.new_empty(_output_shape(input, h0, bidirectional)), h0.new_empty(h0.shape), c0.new_empty(c0.shape)

    return vf_gru, vf_lstm


def _ops():
    """(torch's gru, torch's lstm) kernels; the custom ops defined once per process."""
    global _KERNELS
    if _KERNELS is None:
        _KERNELS = _define_ops() if not hasattr(getattr(torch.ops, NAMESPACE), "gru") else (
            torch._C._VariableFunctions.gru, torch._C._VariableFunctions.lstm)
    return _KERNELS


_KERNELS = None
_ops()


def _plain_layout(params, has_biases: bool, num_layers: int, bidirectional: bool, dropout: float,
                  train: bool) -> bool:
    """The call the ONNX ops express: weights (and biases) per layer and direction, no
    projection, no dropout in effect."""
    per_direction = 4 if has_biases else 2
    return (len(params) == per_direction * num_layers * (2 if bidirectional else 1)
            and not (train and dropout > 0))


@fxport.patch("torch.nn.modules.rnn._VF.gru", name="gru-any-sequence-length", priority=fxport.BUILTIN_PRIORITY)
def gru_call(*args):
    """``nn.GRU``'s kernel call as one op whose shapes do not fix the sequence length."""
    if len(args) == 9 and isinstance(args[2], (list, tuple)) and _plain_layout(args[2], *args[3:5], args[7], args[5], args[6]):
        input, hx, params, *flags = args
        return torch.ops.fxport_rnn.gru(input, hx, list(params), *flags)
    return _ops()[0](*args)  # packed sequences and other layouts: torch's kernel, as written


@fxport.patch("torch.nn.modules.rnn._VF.lstm", name="lstm-any-sequence-length", priority=fxport.BUILTIN_PRIORITY)
def lstm_call(*args):
    """``nn.LSTM``'s kernel call as one op whose shapes do not fix the sequence length."""
    if (len(args) == 9 and isinstance(args[1], (list, tuple)) and len(args[1]) == 2
            and _plain_layout(args[2], *args[3:5], args[7], args[5], args[6])):
        input, (h0, c0), params, *flags = args
        return torch.ops.fxport_rnn.lstm(input, h0, c0, list(params), *flags)
    return _ops()[1](*args)


@fxport.onnx_op(f"{NAMESPACE}::gru", opset=18, priority=fxport.BUILTIN_PRIORITY)
def gru_onnx(input, hx, params, has_biases: bool, num_layers: int, dropout: float, train: bool,
             bidirectional: bool, batch_first: bool):
    """GRU as ONNX GRU nodes (one per layer), by onnxscript's translation of aten::gru."""
    from onnxscript.function_libs.torch_lib.ops.core import aten_gru

    return aten_gru(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)


@fxport.onnx_op(f"{NAMESPACE}::lstm", opset=18, priority=fxport.BUILTIN_PRIORITY)
def lstm_onnx(input, h0, c0, params, has_biases: bool, num_layers: int, dropout: float, train: bool,
              bidirectional: bool, batch_first: bool):
    """LSTM as ONNX LSTM nodes (one per layer), by onnxscript's translation of aten::lstm."""
    from onnxscript.function_libs.torch_lib.ops.core import aten_lstm

    return aten_lstm(input, [h0, c0], params, has_biases, num_layers, dropout, train, bidirectional, batch_first)
