"""Fresh loops ported from public code (group "fresh"): an out-of-sample measurement.

None of these 16 origins is among the 52 of ``search_models.py`` / ``decoding_models.py``; they were
chosen after the engine fixes of the last round, by someone who had not worked on those fixes.
Each model keeps its origin's loop as written there (``for``/``while`` shape, ``break``/``continue``,
list appends, slicing by counters, ``.item()``/``float()``, in-place writes, attribute state, queues
that grow and shrink). What was adapted is named in each docstring and is limited to:

- sizes shrunk, checkpoints replaced by tiny modules seeded in ``make()``; nothing downloads;
- numpy/numba written with the torch equivalent (``np.where`` -> ``torch.where``, ...);
- sampling replaced by ``argmax`` (the origin's greedy/deterministic branch), wall-clock progress
  displays and time limits dropped (they are not input-controlled exits);
- a Python list of ints returned by the origin becomes ``torch.tensor(list)``.

The held-out sets take every exit of every loop that the inputs can reach; ``exits`` says which,
``python3 -m tests.wild_loops.measure --group fresh --exits`` re-checks it in eager.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from math import ceil
from typing import List

import torch
import torch.nn.functional as F
import torchvision
from torch import Tensor, nn

from tests.wild_loops.harness import LoopCase, ints as _ints, randn as _randn, seeded as _seeded
from tests.wild_loops.harness import tensor_of as _t





# ---------------------------------------------------------------------------------------------------
# 1. BiLSTM-CRF tutorial Viterbi (pytorch/tutorials beginner_source/nlp/advanced_tutorial.py)
# ---------------------------------------------------------------------------------------------------

START_TAG = "<START>"
STOP_TAG = "<STOP>"


def argmax(vec):
    # return the argmax as a python int
    _, idx = torch.max(vec, 1)
    return idx.item()


class BiLSTMCRFTutorial(nn.Module):
    """pytorch/tutorials ``beginner_source/nlp/advanced_tutorial.py``, ``BiLSTM_CRF.forward`` ->
    ``_get_lstm_features`` -> ``_viterbi_decode`` (current tutorial text: ``argmax`` returns
    ``idx.item()``, ``torch.full`` init, ``next_tag_var[0][best_tag_id].view(1)``): ``for feat in
    feats`` over the sentence, an inner ``for next_tag in range(tagset_size)`` appending Python ints
    (``.item()``) and 1-element tensors, the ints used as indices; the backtrack ``for bptrs_t in
    reversed(backpointers)`` indexes a list of lists by a Python int, ``best_path.pop()``,
    ``assert start == ...``, ``best_path.reverse()``. The tutorial's own sizes (5 tags, embedding 5,
    hidden 4). Adapted: ``init_hidden`` draws ``torch.randn`` on every call; here it returns two
    fixed tensors drawn once with a seed (eager would not be deterministic otherwise); the list
    of tags is returned as ``torch.tensor(tag_seq)``."""

    def __init__(self, vocab_size=19, embedding_dim=5, hidden_dim=4):
        super().__init__()
        tag_to_ix = {"B": 0, "I": 1, "O": 2, START_TAG: 3, STOP_TAG: 4}
        self.embedding_dim = embedding_dim
        self.hidden_dim = hidden_dim
        self.vocab_size = vocab_size
        self.tag_to_ix = tag_to_ix
        self.tagset_size = len(tag_to_ix)
        self.word_embeds = nn.Embedding(vocab_size, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim // 2, num_layers=1, bidirectional=True)
        self.hidden2tag = nn.Linear(hidden_dim, self.tagset_size)
        self.transitions = nn.Parameter(torch.randn(self.tagset_size, self.tagset_size))
        self.transitions.data[tag_to_ix[START_TAG], :] = -10000
        self.transitions.data[:, tag_to_ix[STOP_TAG]] = -10000
        self.register_buffer("_h0", torch.randn(2, 1, self.hidden_dim // 2))
        self.register_buffer("_c0", torch.randn(2, 1, self.hidden_dim // 2))
        self.hidden = self.init_hidden()

    def init_hidden(self):
        return (self._h0, self._c0)  # tutorial: torch.randn(2, 1, hidden_dim // 2) twice

    def _get_lstm_features(self, sentence):
        self.hidden = self.init_hidden()
        embeds = self.word_embeds(sentence).view(len(sentence), 1, -1)
        lstm_out, self.hidden = self.lstm(embeds, self.hidden)
        lstm_out = lstm_out.view(len(sentence), self.hidden_dim)
        lstm_feats = self.hidden2tag(lstm_out)
        return lstm_feats

    def _viterbi_decode(self, feats):
        backpointers = []

        # Initialize the viterbi variables in log space
        init_vvars = torch.full((1, self.tagset_size), -10000.)
        init_vvars[0][self.tag_to_ix[START_TAG]] = 0

        # forward_var at step i holds the viterbi variables for step i-1
        forward_var = init_vvars
        for feat in feats:
            bptrs_t = []  # holds the backpointers for this step
            viterbivars_t = []  # holds the viterbi variables for this step

            for next_tag in range(self.tagset_size):
                next_tag_var = forward_var + self.transitions[next_tag]
                best_tag_id = argmax(next_tag_var)
                bptrs_t.append(best_tag_id)
                viterbivars_t.append(next_tag_var[0][best_tag_id].view(1))
            # Now add in the emission scores, and assign forward_var to the set
            # of viterbi variables we just computed
            forward_var = (torch.cat(viterbivars_t) + feat).view(1, -1)
            backpointers.append(bptrs_t)

        # Transition to STOP_TAG
        terminal_var = forward_var + self.transitions[self.tag_to_ix[STOP_TAG]]
        best_tag_id = argmax(terminal_var)
        path_score = terminal_var[0][best_tag_id]

        # Follow the back pointers to decode the best path.
        best_path = [best_tag_id]
        for bptrs_t in reversed(backpointers):
            best_tag_id = bptrs_t[best_tag_id]
            best_path.append(best_tag_id)
        # Pop off the start tag (we dont want to return that to the caller)
        start = best_path.pop()
        assert start == self.tag_to_ix[START_TAG]  # Sanity check
        best_path.reverse()
        return path_score, best_path

    def forward(self, sentence):  # dont confuse this with _forward_alg above.
        lstm_feats = self._get_lstm_features(sentence)
        score, tag_seq = self._viterbi_decode(lstm_feats)
        return score, torch.tensor(tag_seq)


# ---------------------------------------------------------------------------------------------------
# 2. SpeechBrain S2SRNNGreedySearcher (speechbrain/decoders/seq2seq.py + speechbrain/nnet/RNN.py,
#    speechbrain/nnet/attention.py, speechbrain/dataio/dataio.py length_to_mask)
# ---------------------------------------------------------------------------------------------------


def length_to_mask(length, max_len=None, dtype=None, device=None):
    # speechbrain/dataio/dataio.py
    assert len(length.shape) == 1
    if max_len is None:
        max_len = length.max().long().item()  # using arange to generate mask
    mask = torch.arange(max_len, device=length.device, dtype=length.dtype).expand(
        len(length), max_len) < length.unsqueeze(1)
    if dtype is None:
        dtype = length.dtype
    if device is None:
        device = length.device
    mask = torch.as_tensor(mask, dtype=dtype, device=device)
    return mask


class _SbGRUCell(nn.Module):
    # speechbrain/nnet/RNN.py GRUCell (hx=None -> zeros; layer loop)
    def __init__(self, hidden_size, input_size, num_layers=1):
        super().__init__()
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.rnn_cells = nn.ModuleList([nn.GRUCell(input_size, hidden_size)])
        for i in range(self.num_layers - 1):
            self.rnn_cells.append(nn.GRUCell(self.hidden_size, self.hidden_size))
        self.dropout_layers = nn.ModuleList([nn.Dropout(p=0.0) for _ in range(self.num_layers - 1)])

    def forward(self, x, hx=None):
        # if not provided, initialized with zeros
        if hx is None:
            hx = x.new_zeros(self.num_layers, x.shape[0], self.hidden_size)
        h = self.rnn_cells[0](x, hx[0])
        hidden_lst = [h]
        for i in range(1, self.num_layers):
            drop_h = self.dropout_layers[i - 1](h)
            h = self.rnn_cells[i](drop_h, hx[i])
            hidden_lst.append(h)
        hidden = torch.stack(hidden_lst, dim=0)
        return h, hidden


class _SbContentBasedAttention(nn.Module):
    # speechbrain/nnet/attention.py ContentBasedAttention (precomputed_enc_h cached on the first call)
    def __init__(self, enc_dim, dec_dim, attn_dim, output_dim, scaling=1.0):
        super().__init__()
        self.mlp_enc = nn.Linear(enc_dim, attn_dim)
        self.mlp_dec = nn.Linear(dec_dim, attn_dim)
        self.mlp_attn = nn.Linear(attn_dim, 1, bias=False)
        self.mlp_out = nn.Linear(enc_dim, output_dim)
        self.scaling = scaling
        self.softmax = nn.Softmax(dim=-1)
        self.reset()

    def reset(self):
        self.enc_len = None
        self.precomputed_enc_h = None
        self.mask = None

    def forward(self, enc_states, enc_len, dec_states):
        if self.precomputed_enc_h is None:
            self.precomputed_enc_h = self.mlp_enc(enc_states)
            self.mask = length_to_mask(enc_len, max_len=enc_states.size(1), device=enc_states.device)
        dec_h = self.mlp_dec(dec_states.unsqueeze(1))
        attn = self.mlp_attn(torch.tanh(self.precomputed_enc_h + dec_h)).squeeze(-1)
        # mask the padded frames
        attn = attn.masked_fill(self.mask == 0, -math.inf)
        attn = self.softmax(attn * self.scaling)
        # compute context vectors
        # [B, 1, L] X [B, L, F]
        context = torch.bmm(attn.unsqueeze(1), enc_states).squeeze(1)
        context = self.mlp_out(context)
        return context, attn


class _SbAttentionalRNNDecoder(nn.Module):
    # speechbrain/nnet/RNN.py AttentionalRNNDecoder (rnn_type="gru", attn_type="content"), forward_step
    def __init__(self, hidden_size, attn_dim, enc_dim, input_size):
        super().__init__()
        self.attn_dim = attn_dim
        self.hidden_size = hidden_size
        self.multihead_attn = False
        self.attn = _SbContentBasedAttention(enc_dim, hidden_size, attn_dim, attn_dim)
        self.drop = nn.Dropout(p=0.0)
        self.rnn = _SbGRUCell(hidden_size, input_size + attn_dim)
        self.proj = nn.Linear(hidden_size + attn_dim, hidden_size)

    def forward_step(self, inp, hs, c, enc_states, enc_len):
        cell_inp = torch.cat([inp, c], dim=-1)
        cell_inp = self.drop(cell_inp)
        cell_out, hs = self.rnn(cell_inp, hs)

        c, attn = self.attn(enc_states, enc_len, cell_out)
        dec_out = torch.cat([c, cell_out], dim=1)
        dec_out = self.proj(dec_out)

        return dec_out, hs, c, attn


class SpeechBrainRNNGreedy(nn.Module):
    """speechbrain/speechbrain ``speechbrain/decoders/seq2seq.py``: ``S2SGreedySearcher.forward`` with
    ``S2SRNNGreedySearcher.reset_mem`` / ``forward_step`` around ``AttentionalRNNDecoder``
    (``speechbrain/nnet/RNN.py``, content attention from ``nnet/attention.py``). The loop: ``for t in
    range(max_decode_steps)`` with ``max_decode_steps = int(enc_states.shape[1] *
    max_decode_ratio)``, ``log_probs_lst.append(log_probs)`` and *then* ``log_probs[has_ended] =
    float("inf")`` (an in-place write into a tensor already appended to the list),
    ``has_ended = has_ended | ...``, ``if has_ended.all(): break``; memory starts as ``hs = None``;
    the attention caches ``precomputed_enc_h`` / ``mask`` in attributes on the first step.
    Adapted: sizes (vocab 8, hidden 8); the final ``.tolist()`` and ``batch_filter_seq2seq_output``
    (lists of lists) are left out: predictions and summed scores are returned as tensors."""

    def __init__(self, vocab=8, emb=6, hidden=8, attn_dim=8, enc_dim=6):
        super().__init__()
        self.bos_index = 0
        self.eos_index = 1
        self.min_decode_ratio = 0.0
        self.max_decode_ratio = 1.0
        self.emb = nn.Embedding(vocab, emb)
        self.dec = _SbAttentionalRNNDecoder(hidden, attn_dim, enc_dim, emb)
        self.fc = nn.Linear(hidden, vocab)
        self.softmax = torch.nn.LogSoftmax(dim=-1)
        with torch.no_grad():
            self.fc.bias[self.eos_index] += 0.4

    def change_max_decoding_length(self, min_decode_steps, max_decode_steps):
        """set the minimum/maximum length the decoder can take."""
        return min_decode_steps, max_decode_steps

    def reset_mem(self, batch_size, device):
        hs = None
        self.dec.attn.reset()
        c = torch.zeros(batch_size, self.dec.attn_dim, device=device)
        return hs, c

    def forward_step(self, inp_tokens, memory, enc_states, enc_lens):
        hs, c = memory
        e = self.emb(inp_tokens)
        dec_out, hs, c, w = self.dec.forward_step(e, hs, c, enc_states, enc_lens)
        log_probs = self.softmax(self.fc(dec_out))
        return log_probs, (hs, c), w

    def forward(self, enc_states, wav_len):
        enc_lens = torch.round(enc_states.shape[1] * wav_len).int()
        device = enc_states.device
        batch_size = enc_states.shape[0]

        memory = self.reset_mem(batch_size, device=device)

        # Using bos as the first input
        inp_tokens = enc_states.new_zeros(batch_size).fill_(self.bos_index).long()

        log_probs_lst = []
        max_decode_steps = int(enc_states.shape[1] * self.max_decode_ratio)

        # the decoding steps can be based on the max number of tokens that a decoder can process
        _, max_decode_steps = self.change_max_decoding_length(0, max_decode_steps)

        has_ended = enc_states.new_zeros(batch_size).bool()
        for t in range(max_decode_steps):
            log_probs, memory, _ = self.forward_step(inp_tokens, memory, enc_states, enc_lens)
            log_probs_lst.append(log_probs)
            inp_tokens = log_probs.argmax(dim=-1)
            log_probs[has_ended] = float("inf")
            has_ended = has_ended | (inp_tokens == self.eos_index)
            if has_ended.all():
                break

        log_probs = torch.stack(log_probs_lst, dim=1)
        scores, predictions = log_probs.max(dim=-1)
        mask = scores == float("inf")
        scores[mask] = 0
        predictions[mask] = self.eos_index
        scores = scores.sum(dim=1)  # origin: .tolist()
        return predictions, scores  # origin: batch_filter_seq2seq_output(predictions, eos_id)


# ---------------------------------------------------------------------------------------------------
# 3. icefall transducer greedy_search (k2-fsa/icefall egs/librispeech/ASR/pruned_transducer_stateless*)
# ---------------------------------------------------------------------------------------------------


class _IcefallDecoder(nn.Module):
    # pruned_transducer_stateless2/decoder.py Decoder (stateless: embedding + depthwise Conv1d over
    # the last context_size tokens), with the later `y.clamp(min=0) * (y >= 0)` for the -1 context
    def __init__(self, vocab_size, decoder_dim, blank_id, context_size):
        super().__init__()
        self.embedding = nn.Embedding(num_embeddings=vocab_size, embedding_dim=decoder_dim,
                                      padding_idx=blank_id)
        self.blank_id = blank_id
        assert context_size >= 1, context_size
        self.context_size = context_size
        self.vocab_size = vocab_size
        if context_size > 1:
            self.conv = nn.Conv1d(in_channels=decoder_dim, out_channels=decoder_dim,
                                  kernel_size=context_size, padding=0, groups=decoder_dim, bias=False)
        else:
            self.conv = nn.Identity()

    def forward(self, y, need_pad=True):
        if isinstance(need_pad, torch.Tensor):
            need_pad = bool(need_pad)
        y = y.to(torch.int64)
        embedding_out = self.embedding(y.clamp(min=0)) * (y >= 0).unsqueeze(-1)
        if self.context_size > 1:
            embedding_out = embedding_out.permute(0, 2, 1)
            if need_pad:
                embedding_out = F.pad(embedding_out, pad=(self.context_size - 1, 0))
            else:
                # During inference time, there is no need to do extra padding
                # as we only need one output
                if not torch.jit.is_tracing():
                    assert embedding_out.size(-1) == self.context_size
            embedding_out = self.conv(embedding_out)
            embedding_out = embedding_out.permute(0, 2, 1)
        embedding_out = F.relu(embedding_out)
        return embedding_out


class _IcefallJoiner(nn.Module):
    # pruned_transducer_stateless*/joiner.py Joiner (project_input argument of the later versions)
    def __init__(self, encoder_dim, decoder_dim, joiner_dim, vocab_size):
        super().__init__()
        self.encoder_proj = nn.Linear(encoder_dim, joiner_dim)
        self.decoder_proj = nn.Linear(decoder_dim, joiner_dim)
        self.output_linear = nn.Linear(joiner_dim, vocab_size)

    def forward(self, encoder_out, decoder_out, project_input=True):
        assert encoder_out.ndim == decoder_out.ndim == 4
        if project_input:
            logit = self.encoder_proj(encoder_out) + self.decoder_proj(decoder_out)
        else:
            logit = encoder_out + decoder_out
        logit = self.output_linear(torch.tanh(logit))
        return logit


class _IcefallTransducer(nn.Module):
    def __init__(self, vocab_size=6, encoder_dim=8, decoder_dim=8, joiner_dim=8):
        super().__init__()
        self.decoder = _IcefallDecoder(vocab_size, decoder_dim, blank_id=0, context_size=2)
        self.joiner = _IcefallJoiner(encoder_dim, decoder_dim, joiner_dim, vocab_size)


def greedy_search(model, encoder_out, max_sym_per_frame, blank_penalty=0.0):
    # k2-fsa/icefall pruned_transducer_stateless2/beam_search.py greedy_search (return_timestamps=False)
    assert encoder_out.ndim == 3

    # support only batch_size == 1 for now
    assert encoder_out.size(0) == 1, encoder_out.size(0)

    blank_id = model.decoder.blank_id
    context_size = model.decoder.context_size
    unk_id = getattr(model, "unk_id", blank_id)

    device = next(model.parameters()).device

    decoder_input = torch.tensor([-1] * (context_size - 1) + [blank_id], device=device,
                                 dtype=torch.int64).reshape(1, context_size)

    decoder_out = model.decoder(decoder_input, need_pad=False)
    decoder_out = model.joiner.decoder_proj(decoder_out)

    encoder_out = model.joiner.encoder_proj(encoder_out)

    T = encoder_out.size(1)
    t = 0
    hyp = [blank_id] * context_size

    # timestamp[i] is the frame index after subsampling
    # on which hyp[i] is decoded
    timestamp = []

    # Maximum symbols per utterance.
    max_sym_per_utt = 1000

    # symbols per frame
    sym_per_frame = 0

    # symbols per utterance decoded so far
    sym_per_utt = 0

    while t < T and sym_per_utt < max_sym_per_utt:
        if sym_per_frame >= max_sym_per_frame:
            sym_per_frame = 0
            t += 1
            continue

        # fmt: off
        current_encoder_out = encoder_out[:, t:t+1, :].unsqueeze(2)
        # fmt: on
        logits = model.joiner(current_encoder_out, decoder_out.unsqueeze(1), project_input=False)
        # logits is (1, 1, 1, vocab_size)

        if blank_penalty != 0:
            logits[:, :, :, 0] -= blank_penalty

        y = logits.argmax().item()
        if y not in (blank_id, unk_id):
            hyp.append(y)
            timestamp.append(t)
            decoder_input = torch.tensor([hyp[-context_size:]], device=device).reshape(1, context_size)

            decoder_out = model.decoder(decoder_input, need_pad=False)
            decoder_out = model.joiner.decoder_proj(decoder_out)

            sym_per_utt += 1
            sym_per_frame += 1
        else:
            sym_per_frame = 0
            t += 1
    hyp = hyp[context_size:]  # remove blanks

    return hyp


class IcefallGreedySearch(nn.Module):
    """k2-fsa/icefall ``egs/librispeech/ASR/pruned_transducer_stateless2/beam_search.py``
    ``greedy_search`` (one utterance), with ``decoder.py`` ``Decoder`` (stateless, context 2) and
    ``joiner.py`` ``Joiner``: ``while t < T and sym_per_utt < max_sym_per_utt``, a ``continue``
    branch when ``sym_per_frame >= max_sym_per_frame``, ``encoder_out[:, t:t+1, :]`` sliced by the
    counter, ``y = logits.argmax().item()``, ``if y not in (blank_id, unk_id)``, ``hyp.append(y)``
    and ``torch.tensor([hyp[-context_size:]])`` built from the list, counters bumped in either
    branch. Adapted: ScaledLinear/ScaledEmbedding/ScaledConv1d are plain layers; the decoder takes
    the later ``clamp(min=0) * (y >= 0)`` for the ``-1`` context id; vocab 6, dims 8,
    ``max_sym_per_frame=2``; the hyp list is returned as a tensor."""

    def __init__(self):
        super().__init__()
        self.model = _IcefallTransducer()
        self.max_sym_per_frame = 2

    def forward(self, encoder_out):
        hyp = greedy_search(self.model, encoder_out, self.max_sym_per_frame)
        return torch.tensor(hyp, dtype=torch.int64)


# ---------------------------------------------------------------------------------------------------
# 4. FastSpeech LengthRegulator (xcmyz/FastSpeech modules.py)
# ---------------------------------------------------------------------------------------------------


def create_alignment(base_mat, duration_predictor_output):
    # xcmyz/FastSpeech modules.py create_alignment (@numba.jit in the origin; here on tensors)
    N, L = duration_predictor_output.shape
    for i in range(N):
        count = 0
        for j in range(L):
            for k in range(duration_predictor_output[i][j]):
                base_mat[i][count+k][j] = 1
            count = count + duration_predictor_output[i][j]
    return base_mat


class _FsConv(nn.Module):
    # modules.py Conv (transpose, Conv1d, transpose)
    def __init__(self, in_channels, out_channels, kernel_size=1, padding=0):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel_size=kernel_size, padding=padding)
        nn.init.xavier_uniform_(self.conv.weight, gain=nn.init.calculate_gain("linear"))

    def forward(self, x):
        x = x.contiguous().transpose(1, 2)
        x = self.conv(x)
        x = x.contiguous().transpose(1, 2)
        return x


class _FsDurationPredictor(nn.Module):
    # modules.py DurationPredictor (hp.encoder_dim etc. shrunk to 8)
    def __init__(self, input_size=8, filter_size=8, kernel=3, dropout=0.1):
        super().__init__()
        self.conv_layer = nn.Sequential(
            _FsConv(input_size, filter_size, kernel_size=kernel, padding=1),
            nn.LayerNorm(filter_size), nn.ReLU(), nn.Dropout(dropout),
            _FsConv(filter_size, filter_size, kernel_size=kernel, padding=1),
            nn.LayerNorm(filter_size), nn.ReLU(), nn.Dropout(dropout))
        self.linear_layer = nn.Linear(filter_size, 1)
        self.relu = nn.ReLU()

    def forward(self, encoder_output):
        out = self.conv_layer(encoder_output)
        out = self.linear_layer(out)
        out = self.relu(out)
        out = out.squeeze()
        if not self.training:
            out = out.unsqueeze(0)
        return out


class FastSpeechLengthRegulator(nn.Module):
    """xcmyz/FastSpeech ``modules.py`` ``LengthRegulator.forward`` with a target (the training
    path: durations given) -> ``LR`` -> ``create_alignment``: three nested ``for`` loops, the
    innermost ``for k in range(duration_predictor_output[i][j])`` over a duration read from the
    tensor, ``base_mat[i][count+k][j] = 1`` written in place by chained indexing at a position
    counted by the loops, ``count = count + duration[i][j]``; ``alignment @ x``. Adapted:
    ``create_alignment`` is ``@numba.jit`` on numpy in the origin (``.numpy()`` before, ``from_numpy``
    after); here the same loop runs on the torch tensors; encoder dim 8."""

    def __init__(self):
        super().__init__()
        self.duration_predictor = _FsDurationPredictor()

    def LR(self, x, duration_predictor_output, mel_max_length=None):
        expand_max_len = torch.max(torch.sum(duration_predictor_output, -1), -1)[0]
        alignment = torch.zeros(duration_predictor_output.size(0), expand_max_len,
                                duration_predictor_output.size(1))
        alignment = create_alignment(alignment, duration_predictor_output)

        output = alignment @ x
        if mel_max_length:
            output = F.pad(output, (0, 0, 0, mel_max_length - output.size(1), 0, 0))
        return output

    def forward(self, x, target, alpha=1.0, mel_max_length=None):
        duration_predictor_output = self.duration_predictor(x)

        if target is not None:
            output = self.LR(x, target, mel_max_length=mel_max_length)
            return output, duration_predictor_output
        else:
            duration_predictor_output = ((duration_predictor_output + 0.5) * alpha).int()
            output = self.LR(x, duration_predictor_output)
            mel_pos = torch.stack([torch.Tensor([i + 1 for i in range(output.size(1))])]).long()
            return output, mel_pos


# ---------------------------------------------------------------------------------------------------
# 5. Monotonic alignment search, numpy version (coqui-ai/TTS TTS/tts/utils/helpers.py)
# ---------------------------------------------------------------------------------------------------


def maximum_path_numpy(value, mask, max_neg_val=None):
    """
    Monotonic alignment search algorithm
    Numpy-friendly version. It's about 4 times faster than torch version.
    value: [b, t_x, t_y]
    mask: [b, t_x, t_y]
    """
    if max_neg_val is None:
        max_neg_val = -math.inf  # Patch for Sphinx complaint
    value = value * mask

    b, t_x, t_y = value.shape
    direction = torch.zeros(value.shape, dtype=torch.int64)
    v = torch.zeros((b, t_x), dtype=torch.float32)
    x_range = torch.arange(t_x, dtype=torch.float32).reshape(1, -1)
    for j in range(t_y):
        v0 = F.pad(v, (1, 0), mode="constant", value=max_neg_val)[:, :-1]
        v1 = v
        max_mask = v1 >= v0
        v_max = torch.where(max_mask, v1, v0)
        direction[:, :, j] = max_mask

        index_mask = x_range <= j
        v = torch.where(index_mask, v_max + value[:, :, j], max_neg_val)
    direction = torch.where(mask.bool(), direction, 1)

    path = torch.zeros(value.shape, dtype=torch.float32)
    index = mask[:, :, 0].sum(1).long() - 1
    index_range = torch.arange(b)
    for j in reversed(range(t_y)):
        path[index_range, index, j] = 1
        index = index + direction[index_range, index, j] - 1
    path = path * mask
    return path


class CoquiMaximumPath(nn.Module):
    """coqui-ai/TTS ``TTS/tts/utils/helpers.py`` ``maximum_path_numpy`` (Glow-TTS / VITS monotonic
    alignment search without Cython): a forward ``for j in range(t_y)`` that writes
    ``direction[:, :, j]`` in place at the counter and carries ``v`` through ``np.pad(...)[:, :-1]``
    and ``np.where``, then a backward ``for j in reversed(range(t_y))`` that writes
    ``path[index_range, index, j] = 1`` and moves the carried index tensor by what it reads back
    (``index + direction[index_range, index, j] - 1``). Adapted: numpy written with torch
    (``np.pad`` -> ``F.pad``, ``np.where`` -> ``torch.where``); the ``.cpu().numpy()`` round trip
    is gone."""

    def forward(self, value, mask):
        return maximum_path_numpy(value, mask)


# ---------------------------------------------------------------------------------------------------
# 6. WaveRNN generate (fatchord/WaveRNN models/fatchord_version.py), RAW mode, unbatched
# ---------------------------------------------------------------------------------------------------


def to_one_hot(tensor, n, fill_with=1.):
    # fatchord/WaveRNN utils/distribution.py
    # we perform one hot encore with respect to the last axis
    one_hot = torch.FloatTensor(tensor.size() + (n,)).zero_()
    one_hot.scatter_(len(tensor.size()), tensor.unsqueeze(-1), fill_with)
    return one_hot


def sample_from_discretized_mix_logistic(y, log_scale_min=None):
    # fatchord/WaveRNN utils/distribution.py (only reached in mode 'MOL'; the cases run 'RAW')
    if log_scale_min is None:
        log_scale_min = float(math.log(1e-14))
    assert y.size(1) % 3 == 0
    nr_mix = y.size(1) // 3

    # B x T x C
    y = y.transpose(1, 2)
    logit_probs = y[:, :, :nr_mix]

    # sample mixture indicator from softmax
    temp = logit_probs.data.new(logit_probs.size()).uniform_(1e-5, 1.0 - 1e-5)
    temp = logit_probs.data - torch.log(- torch.log(temp))
    _, argmax = temp.max(dim=-1)

    # (B, T) -> (B, T, nr_mix)
    one_hot = to_one_hot(argmax, nr_mix)
    # select logistic parameters
    means = torch.sum(y[:, :, nr_mix:2 * nr_mix] * one_hot, dim=-1)
    log_scales = torch.clamp(torch.sum(y[:, :, 2 * nr_mix:3 * nr_mix] * one_hot, dim=-1), min=log_scale_min)
    # sample from logistic & clip to interval
    # we don't actually round to the nearest 8bit value when sampling
    u = means.data.new(means.size()).uniform_(1e-5, 1.0 - 1e-5)
    x = means + torch.exp(log_scales) * (torch.log(u) - torch.log(1. - u))

    x = torch.clamp(torch.clamp(x, min=-1.), max=1.)

    return x


class _TinyUpsample(nn.Module):
    # stands in for fatchord's UpsampleNetwork (MelResNet + Stretch2d stack): same interface and
    # output lengths (aux from a conv without padding, both upsampled by hop_length, `indent` cropped)
    def __init__(self, feat_dims, res_out_dims, hop_length, pad):
        super().__init__()
        self.resnet = nn.Conv1d(feat_dims, res_out_dims, kernel_size=2 * pad + 1)
        self.hop_length = hop_length
        self.indent = pad * hop_length

    def forward(self, m):
        aux = self.resnet(m).repeat_interleave(self.hop_length, dim=2)
        m = m.repeat_interleave(self.hop_length, dim=2)[:, :, self.indent:-self.indent]
        return m.transpose(1, 2), aux.transpose(1, 2)


class WaveRNNGenerate(nn.Module):
    """fatchord/WaveRNN ``models/fatchord_version.py`` ``WaveRNN.generate`` (``mode='RAW'``,
    ``batched=False``): ``for i in range(seq_len)`` over the upsampled conditioning length,
    ``mels[:, i, :]`` and ``(a[:, i, :] for a in aux_split)`` sliced at the counter, two GRU cells,
    ``if self.mode == 'MOL' ... elif self.mode == 'RAW' ... else: raise``, ``output.append(sample)``
    and ``x = sample.unsqueeze(-1)`` fed back; ``pad_tensor`` writes the padded copy in place.
    The MOL branch and its ``sample_from_discretized_mix_logistic`` (``utils/distribution.py``) are
    ported as written but not taken. Adapted: ``distrib.sample()`` -> ``posterior.argmax(dim=1)``;
    the progress display (``if i % 100 == 0: self.gen_display(...)``, wall clock) dropped;
    ``.cuda()`` dropped; the GRU cells are built by the origin's ``get_gru_cell`` once in
    ``__init__`` rather than at each call; the UpsampleNetwork is a tiny conv + nearest upsampling with the same lengths; the numpy tail
    (mu-law decode, fade-out, ``save_wav``) is dropped: ``output[:wave_len]`` is returned."""

    def __init__(self, rnn_dims=8, fc_dims=8, bits=4, feat_dims=4, res_out_dims=8, hop_length=2, pad=1):
        super().__init__()
        self.mode = "RAW"
        self.n_classes = 2 ** bits
        self.pad = pad
        self.rnn_dims = rnn_dims
        self.aux_dims = res_out_dims // 4
        self.hop_length = hop_length
        self.upsample = _TinyUpsample(feat_dims, res_out_dims, hop_length, pad)
        self.I = nn.Linear(feat_dims + self.aux_dims + 1, rnn_dims)
        self.rnn1 = nn.GRU(rnn_dims, rnn_dims, batch_first=True)
        self.rnn2 = nn.GRU(rnn_dims + self.aux_dims, rnn_dims, batch_first=True)
        self.fc1 = nn.Linear(rnn_dims + self.aux_dims, fc_dims)
        self.fc2 = nn.Linear(fc_dims + self.aux_dims, fc_dims)
        self.fc3 = nn.Linear(fc_dims, self.n_classes)
        self.cell1 = self.get_gru_cell(self.rnn1)
        self.cell2 = self.get_gru_cell(self.rnn2)

    def get_gru_cell(self, gru):
        gru_cell = nn.GRUCell(gru.input_size, gru.hidden_size)
        gru_cell.weight_hh.data = gru.weight_hh_l0.data
        gru_cell.weight_ih.data = gru.weight_ih_l0.data
        gru_cell.bias_hh.data = gru.bias_hh_l0.data
        gru_cell.bias_ih.data = gru.bias_ih_l0.data
        return gru_cell

    def pad_tensor(self, x, pad, side='both'):
        # NB - this is just a quick method i need right now
        # i.e., it won't generalise to other shapes/dims
        b, t, c = x.size()
        total = t + 2 * pad if side == 'both' else t + pad
        padded = torch.zeros(b, total, c)
        if side == 'before' or side == 'both':
            padded[:, pad:pad + t, :] = x
        elif side == 'after':
            padded[:, :t, :] = x
        return padded

    def forward(self, mels):
        return self.generate(mels)

    def generate(self, mels):
        output = []
        rnn1 = self.cell1
        rnn2 = self.cell2

        with torch.no_grad():
            wave_len = (mels.size(-1) - 1) * self.hop_length
            mels = self.pad_tensor(mels.transpose(1, 2), pad=self.pad, side='both')
            mels, aux = self.upsample(mels.transpose(1, 2))

            b_size, seq_len, _ = mels.size()

            h1 = torch.zeros(b_size, self.rnn_dims)
            h2 = torch.zeros(b_size, self.rnn_dims)
            x = torch.zeros(b_size, 1)

            d = self.aux_dims
            aux_split = [aux[:, :, d * i:d * (i + 1)] for i in range(4)]

            for i in range(seq_len):

                m_t = mels[:, i, :]

                a1_t, a2_t, a3_t, a4_t = \
                    (a[:, i, :] for a in aux_split)

                x = torch.cat([x, m_t, a1_t], dim=1)
                x = self.I(x)
                h1 = rnn1(x, h1)

                x = x + h1
                inp = torch.cat([x, a2_t], dim=1)
                h2 = rnn2(inp, h2)

                x = x + h2
                x = torch.cat([x, a3_t], dim=1)
                x = F.relu(self.fc1(x))

                x = torch.cat([x, a4_t], dim=1)
                x = F.relu(self.fc2(x))

                logits = self.fc3(x)

                if self.mode == 'MOL':
                    sample = sample_from_discretized_mix_logistic(logits.unsqueeze(0).transpose(1, 2))
                    output.append(sample.view(-1))
                    # x = torch.FloatTensor([[sample]]).cuda()
                    x = sample.transpose(0, 1)

                elif self.mode == 'RAW':
                    posterior = F.softmax(logits, dim=1)
                    sample = 2 * posterior.argmax(dim=1).float() / (self.n_classes - 1.) - 1.
                    output.append(sample)
                    x = sample.unsqueeze(-1)
                else:
                    raise RuntimeError("Unknown model mode value - ", self.mode)

        output = torch.stack(output).transpose(0, 1)
        output = output[0]
        output = output[:wave_len]
        return output


# ---------------------------------------------------------------------------------------------------
# 7. YOLOv5 non_max_suppression (ultralytics/yolov5 utils/general.py)
# ---------------------------------------------------------------------------------------------------


def xywh2xyxy(x):
    # Convert nx4 boxes from [x, y, w, h] to [x1, y1, x2, y2] where xy1=top-left, xy2=bottom-right
    y = x.clone() if isinstance(x, torch.Tensor) else None
    y[:, 0] = x[:, 0] - x[:, 2] / 2  # top left x
    y[:, 1] = x[:, 1] - x[:, 3] / 2  # top left y
    y[:, 2] = x[:, 0] + x[:, 2] / 2  # bottom right x
    y[:, 3] = x[:, 1] + x[:, 3] / 2  # bottom right y
    return y


def non_max_suppression(prediction, conf_thres=0.25, iou_thres=0.45, classes=None, agnostic=False,
                        multi_label=False, labels=(), max_det=300):
    """Runs Non-Maximum Suppression (NMS) on inference results

    Returns:
         list of detections, on (n,6) tensor per image [xyxy, conf, cls]
    """

    nc = prediction.shape[2] - 5  # number of classes
    xc = prediction[..., 4] > conf_thres  # candidates

    # Checks
    assert 0 <= conf_thres <= 1, f'Invalid Confidence threshold {conf_thres}, valid values are between 0.0 and 1.0'
    assert 0 <= iou_thres <= 1, f'Invalid IoU {iou_thres}, valid values are between 0.0 and 1.0'

    # Settings
    min_wh, max_wh = 2, 4096  # (pixels) minimum and maximum box width and height
    max_nms = 30000  # maximum number of boxes into torchvision.ops.nms()
    multi_label &= nc > 1  # multiple labels per box (adds 0.5ms/img)

    output = [torch.zeros((0, 6), device=prediction.device)] * prediction.shape[0]
    for xi, x in enumerate(prediction):  # image index, image inference
        # Apply constraints
        # x[((x[..., 2:4] < min_wh) | (x[..., 2:4] > max_wh)).any(1), 4] = 0  # width-height
        x = x[xc[xi]]  # confidence

        # Cat apriori labels if autolabelling
        if labels and len(labels[xi]):
            lb = labels[xi]
            v = torch.zeros((len(lb), nc + 5), device=x.device)
            v[:, :4] = lb[:, 1:5]  # box
            v[:, 4] = 1.0  # conf
            v[range(len(lb)), lb[:, 0].long() + 5] = 1.0  # cls
            x = torch.cat((x, v), 0)

        # If none remain process next image
        if not x.shape[0]:
            continue

        # Compute conf
        x[:, 5:] *= x[:, 4:5]  # conf = obj_conf * cls_conf

        # Box (center x, center y, width, height) to (x1, y1, x2, y2)
        box = xywh2xyxy(x[:, :4])

        # Detections matrix nx6 (xyxy, conf, cls)
        if multi_label:
            i, j = (x[:, 5:] > conf_thres).nonzero(as_tuple=False).T
            x = torch.cat((box[i], x[i, j + 5, None], j[:, None].float()), 1)
        else:  # best class only
            conf, j = x[:, 5:].max(1, keepdim=True)
            x = torch.cat((box, conf, j.float()), 1)[conf.view(-1) > conf_thres]

        # Filter by class
        if classes is not None:
            x = x[(x[:, 5:6] == torch.tensor(classes, device=x.device)).any(1)]

        # Check shape
        n = x.shape[0]  # number of boxes
        if not n:  # no boxes
            continue
        elif n > max_nms:  # excess boxes
            x = x[x[:, 4].argsort(descending=True)[:max_nms]]  # sort by confidence

        # Batched NMS
        c = x[:, 5:6] * (0 if agnostic else max_wh)  # classes
        boxes, scores = x[:, :4] + c, x[:, 4]  # boxes (offset by class), scores
        i = torchvision.ops.nms(boxes, scores, iou_thres)  # NMS
        if i.shape[0] > max_det:  # limit detections
            i = i[:max_det]

        output[xi] = x[i]

    return output


class YoloV5Nms(nn.Module):
    """ultralytics/yolov5 ``utils/general.py`` ``non_max_suppression`` (v6, ``multi_label=False``,
    ``merge=False``): ``for xi, x in enumerate(prediction)`` over the images, ``x = x[xc[xi]]``
    shrinks each image's rows by a mask, ``if not x.shape[0]: continue``, the in-place
    ``x[:, 5:] *= x[:, 4:5]``, a second ``if not n: continue`` after the class-confidence filter,
    ``torchvision.ops.nms`` and ``output[xi] = x[i]`` into a list pre-filled with one shared
    empty tensor. Adapted: the wall-clock ``if (time.time() - t) > time_limit: break`` is left out
    (never taken on these inputs, and a clock is not an input); two images of 5+3 columns."""

    def forward(self, prediction):
        return tuple(non_max_suppression(prediction))


# ---------------------------------------------------------------------------------------------------
# 8. Cluster-NMS (Zzh-tju/CIoU layers/functions/detection.py, layers/box_utils.py)
# ---------------------------------------------------------------------------------------------------


def intersect(box_a, box_b):
    # Zzh-tju/CIoU layers/box_utils.py intersect (@torch.jit.script there)
    n = box_a.size(0)
    A = box_a.size(1)
    B = box_b.size(1)
    max_xy = torch.min(box_a[:, :, 2:].unsqueeze(2).expand(n, A, B, 2),
                       box_b[:, :, 2:].unsqueeze(1).expand(n, A, B, 2))
    min_xy = torch.max(box_a[:, :, :2].unsqueeze(2).expand(n, A, B, 2),
                       box_b[:, :, :2].unsqueeze(1).expand(n, A, B, 2))
    return torch.clamp(max_xy - min_xy, min=0).prod(3)  # inter


def jaccard(box_a, box_b, iscrowd: bool = False):
    # Zzh-tju/CIoU layers/box_utils.py jaccard
    use_batch = True
    if box_a.dim() == 2:
        use_batch = False
        box_a = box_a[None, ...]
        box_b = box_b[None, ...]

    inter = intersect(box_a, box_b)
    area_a = ((box_a[:, :, 2] - box_a[:, :, 0]) *
              (box_a[:, :, 3] - box_a[:, :, 1])).unsqueeze(2).expand_as(inter)  # [A,B]
    area_b = ((box_b[:, :, 2] - box_b[:, :, 0]) *
              (box_b[:, :, 3] - box_b[:, :, 1])).unsqueeze(1).expand_as(inter)  # [A,B]
    union = area_a + area_b - inter

    out = inter / area_a if iscrowd else inter / union
    return out if use_batch else out.squeeze(0)


class ClusterNmsCrossClass(nn.Module):
    """Zzh-tju/CIoU ``layers/functions/detection.py`` ``Detect.cc_cluster_nms`` (Cluster-NMS,
    cross-class) with ``layers/box_utils.py`` ``jaccard``: ``iou = jaccard(...).triu_(diagonal=1)``
    in place, then ``for i in range(200)``: ``A = B``, column max, ``B = iou.mul(E)``,
    ``if A.equal(B) == True: break``; ``maxA`` from the last trip is read after the loop.
    Adapted: none beyond sizes (masks of width 3, 2 classes)."""

    def forward(self, boxes, masks, scores):
        return self.cc_cluster_nms(boxes, masks, scores)

    def cc_cluster_nms(self, boxes, masks, scores, iou_threshold: float = 0.5, top_k: int = 200):
        # Collapse all the classes into 1
        scores, classes = scores.max(dim=0)
        _, idx = scores.sort(0, descending=True)
        idx = idx[:top_k]
        boxes_idx = boxes[idx]
        iou = jaccard(boxes_idx, boxes_idx).triu_(diagonal=1)
        B = iou
        for i in range(200):
            A = B
            maxA, _ = torch.max(A, dim=0)
            E = (maxA <= iou_threshold).float().unsqueeze(1).expand_as(A)
            B = iou.mul(E)
            if A.equal(B) == True:  # noqa: E712 - as written in the origin
                break
        idx_out = idx[maxA <= iou_threshold]
        return boxes[idx_out], masks[idx_out], classes[idx_out], scores[idx_out]


# ---------------------------------------------------------------------------------------------------
# 9. CenterTrack greedy_assignment (xingyizhou/CenterTrack src/lib/utils/tracker.py)
# ---------------------------------------------------------------------------------------------------


def greedy_assignment(dist):
    matched_indices = []
    if dist.shape[1] == 0:
        return torch.tensor(matched_indices, dtype=torch.int32).reshape(-1, 2)
    for i in range(dist.shape[0]):
        j = dist[i].argmin()
        if dist[i][j] < 1e16:
            dist[:, j] = 1e18
            matched_indices.append([i, j])
    return torch.tensor(matched_indices, dtype=torch.int32).reshape(-1, 2)


class CenterTrackGreedyAssignment(nn.Module):
    """xingyizhou/CenterTrack ``src/lib/utils/tracker.py``: the distance matrix of ``Tracker.step``
    (squared centre distances, made invalid by ``+ invalid * 1e18`` where the distance exceeds
    either box size or the classes differ) and ``greedy_assignment(copy.deepcopy(dist))``: an early
    ``return`` when there are no tracks, ``for i in range(dist.shape[0])``, ``j = dist[i].argmin()``,
    ``if dist[i][j] < 1e16:`` blank the column in place (``dist[:, j] = 1e18``) and
    ``matched_indices.append([i, j])``; ``np.array(matched_indices, np.int32).reshape(-1, 2)``.
    Adapted: numpy -> torch (``np.array(..., np.int32)`` -> ``torch.tensor(..., dtype=torch.int32)``,
    ``copy.deepcopy`` -> ``clone``); detections and tracks come in as tensors instead of dicts."""

    def forward(self, dets, item_size, item_cat, tracks, track_size, track_cat):
        N = dets.shape[0]
        M = tracks.shape[0]
        dist = (((tracks.reshape(1, -1, 2) - dets.reshape(-1, 1, 2)) ** 2).sum(dim=2))  # N x M
        invalid = ((dist > track_size.reshape(1, M)).int() + (dist > item_size.reshape(N, 1)).int()
                   + (item_cat.reshape(N, 1) != track_cat.reshape(1, M)).int()) > 0
        dist = dist + invalid * 1e18
        matched_indices = greedy_assignment(dist.clone())
        return matched_indices


# ---------------------------------------------------------------------------------------------------
# 10. L-BFGS strong-Wolfe line search (pytorch/pytorch torch/optim/lbfgs.py)
# ---------------------------------------------------------------------------------------------------


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    # ported from https://github.com/torch/optim/blob/master/polyinterp.lua
    # Compute bounds of interpolation area
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square >= 0:
        d2 = d2_square.sqrt()
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    else:
        return (xmin_bound + xmax_bound) / 2.0


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    # ported from https://github.com/torch/optim/blob/master/lswolfe.lua
    d_norm = d.abs().max()
    g = g.clone(memory_format=torch.contiguous_format)
    # evaluate objective and gradient using initial step
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = g_new.dot(d)

    # bracket an interval containing a point satisfying the Wolfe criteria
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        # check conditions
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket = [t_prev, t]
            bracket_f = [f_prev, f_new]
            bracket_g = [g_prev, g_new.clone(memory_format=torch.contiguous_format)]
            bracket_gtd = [gtd_prev, gtd_new]
            break

        if abs(gtd_new) <= -c2 * gtd:
            bracket = [t]
            bracket_f = [f_new]
            bracket_g = [g_new]
            done = True
            break

        if gtd_new >= 0:
            bracket = [t_prev, t]
            bracket_f = [f_prev, f_new]
            bracket_g = [g_prev, g_new.clone(memory_format=torch.contiguous_format)]
            bracket_gtd = [gtd_prev, gtd_new]
            break

        # interpolate
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(min_step, max_step))

        # next step
        t_prev = tmp
        f_prev = f_new
        g_prev = g_new.clone(memory_format=torch.contiguous_format)
        gtd_prev = gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1

    # reached max number of iterations?
    if ls_iter == max_ls:
        bracket = [0, t]
        bracket_f = [f, f_new]
        bracket_g = [g, g_new]

    # zoom phase: we now have a point satisfying the criteria, or
    # a bracket around it. We refine the bracket until we find the
    # exact point satisfying the criteria
    insuf_progress = False
    # find high and low points in bracket
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        # line-search bracket is so small
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break

        # compute new trial value
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0],
                               bracket[1], bracket_f[1], bracket_gtd[1])

        # test that we are making sufficient progress:
        # in case `t` is so close to boundary, we mark that we are making
        # insufficient progress, and if
        #   + we have made insufficient progress in the last step, or
        #   + `t` is at one of the boundary,
        # we will move `t` to a position which is `0.1 * len(bracket)`
        # away from the nearest boundary point.
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            # interpolation close to boundary
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                # evaluate at 0.1 away from boundary
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False

        # Evaluate new point
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1

        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            # Armijo condition not satisfied or not lower than lowest point
            bracket[high_pos] = t
            bracket_f[high_pos] = f_new
            bracket_g[high_pos] = g_new.clone(memory_format=torch.contiguous_format)
            bracket_gtd[high_pos] = gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                # Wolfe conditions satisfied
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                # old high becomes new low
                bracket[high_pos] = bracket[low_pos]
                bracket_f[high_pos] = bracket_f[low_pos]
                bracket_g[high_pos] = bracket_g[low_pos]
                bracket_gtd[high_pos] = bracket_gtd[low_pos]

            # new point becomes new low
            bracket[low_pos] = t
            bracket_f[low_pos] = f_new
            bracket_g[low_pos] = g_new.clone(memory_format=torch.contiguous_format)
            bracket_gtd[low_pos] = gtd_new

    # return stuff
    t = bracket[low_pos]
    f_new = bracket_f[low_pos]
    g_new = bracket_g[low_pos]
    return f_new, g_new, t, ls_func_evals


def _rosenbrock(x):
    return (100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2).sum()


def _rosenbrock_grad(x):
    g = torch.zeros_like(x)
    r = x[1:] - x[:-1] ** 2
    g[:-1] = g[:-1] - 400.0 * x[:-1] * r - 2.0 * (1.0 - x[:-1])
    g[1:] = g[1:] + 200.0 * r
    return g


class LbfgsStrongWolfe(nn.Module):
    """pytorch/pytorch ``torch/optim/lbfgs.py`` ``_strong_wolfe`` (+ ``_cubic_interpolate``), called
    as ``LBFGS.step`` calls it with ``line_search_fn="strong_wolfe"``: the objective goes through
    ``_directional_evaluate`` (``loss = float(closure())``: a Python float read from a tensor) and
    the flat gradient. Two ``while`` loops: the bracketing loop with three ``break`` exits
    (Armijo fails / strong Wolfe holds / gradient turns non-negative) and ``ls_iter < max_ls``,
    then the zoom loop ``while not done and ls_iter < max_ls`` with a tolerance ``break``;
    brackets are Python lists written by position (``bracket[high_pos] = t``), ``min``/``max``/``abs``
    of Python builtins on tensors, ``(0, 1) if ... else (1, 0)`` on tensor comparisons.
    Adapted: the closure is the n-dimensional Rosenbrock function with its analytic gradient
    (no autograd inside the module), evaluated at ``x + t * d`` as ``_add_grad(t, d)`` does; the
    initial step ``t = lr = 1``. Returns the line search's (loss, gradient, step, evaluations)
    as tensors."""

    def forward(self, x, d):
        def obj_func(x, t, d):  # LBFGS._directional_evaluate(closure, x, t, d)
            xt = x + t * d
            loss = float(_rosenbrock(xt))
            flat_grad = _rosenbrock_grad(xt)
            return loss, flat_grad

        loss = float(_rosenbrock(x))
        flat_grad = _rosenbrock_grad(x)
        gtd = flat_grad.dot(d)
        t = 1.0
        loss, flat_grad, t, ls_func_evals = _strong_wolfe(obj_func, x, t, d, loss, flat_grad, gtd)
        return (torch.as_tensor(loss, dtype=torch.float32), flat_grad,
                torch.as_tensor(t, dtype=torch.float32), torch.as_tensor(ls_func_evals))


# ---------------------------------------------------------------------------------------------------
# 11. Hybrid Demucs chunked inference (pytorch/audio examples/tutorials/hybrid_demucs_tutorial.py)
# ---------------------------------------------------------------------------------------------------


class Fade(torch.nn.Module):
    # torchaudio/transforms/_transforms.py Fade
    def __init__(self, fade_in_len: int = 0, fade_out_len: int = 0, fade_shape: str = "linear") -> None:
        super().__init__()
        self.fade_in_len = fade_in_len
        self.fade_out_len = fade_out_len
        self.fade_shape = fade_shape

    def forward(self, waveform: Tensor) -> Tensor:
        waveform_length = waveform.size()[-1]
        device = waveform.device
        return self._fade_in(waveform_length, device) * self._fade_out(waveform_length, device) * waveform

    def _fade_in(self, waveform_length: int, device: torch.device) -> Tensor:
        fade = torch.linspace(0, 1, self.fade_in_len, device=device)
        ones = torch.ones(waveform_length - self.fade_in_len, device=device)
        if self.fade_shape == "linear":
            fade = fade
        if self.fade_shape == "exponential":
            fade = torch.pow(2, (fade - 1) * 5)
        if self.fade_shape == "logarithmic":
            fade = torch.log10(0.1 + fade) + 1
        if self.fade_shape == "quarter_sine":
            fade = torch.sin(fade * math.pi / 2)
        if self.fade_shape == "half_sine":
            fade = torch.sin(fade * math.pi - math.pi / 2) / 2 + 0.5
        return torch.cat((fade, ones)).clamp_(0, 1)

    def _fade_out(self, waveform_length: int, device: torch.device) -> Tensor:
        fade = torch.linspace(0, 1, self.fade_out_len, device=device)
        ones = torch.ones(waveform_length - self.fade_out_len, device=device)
        if self.fade_shape == "linear":
            fade = -fade + 1
        if self.fade_shape == "exponential":
            fade = torch.pow(2, -fade * 5)
        if self.fade_shape == "logarithmic":
            fade = torch.log10(1.1 - fade) + 1
        if self.fade_shape == "quarter_sine":
            fade = torch.sin(fade * math.pi / 2 + math.pi / 2)
        if self.fade_shape == "half_sine":
            fade = torch.sin(fade * math.pi + math.pi / 2) / 2 + 0.5
        return torch.cat((ones, fade)).clamp_(0, 1)


sample_rate = 10  # the tutorial: bundle.sample_rate (44100); 10 here so chunks are 12 samples


class _TinySeparator(nn.Module):
    # stands in for HDEMUCS_HIGH_MUSDB_PLUS: (batch, channels, length) -> (batch, sources, channels, length)
    def __init__(self, channels=2):
        super().__init__()
        self.sources = ["drums", "bass", "other", "vocals"]
        self.channels = channels
        self.conv = nn.Conv1d(channels, len(self.sources) * channels, kernel_size=3, padding=1)

    def forward(self, mix):
        b, c, n = mix.shape
        return self.conv(mix).view(b, len(self.sources), c, n)


def separate_sources(model, mix, segment=10.0, overlap=0.1, device=None):
    """
    Apply model to a given mixture. Use fade, and add segments together in order to add model segment by segment.
    """
    if device is None:
        device = mix.device
    else:
        device = torch.device(device)

    batch, channels, length = mix.shape

    chunk_len = int(sample_rate * segment * (1 + overlap))
    start = 0
    end = chunk_len
    overlap_frames = overlap * sample_rate
    fade = Fade(fade_in_len=0, fade_out_len=int(overlap_frames), fade_shape="linear")

    final = torch.zeros(batch, len(model.sources), channels, length, device=device)

    while start < length - overlap_frames:
        chunk = mix[:, :, start:end]
        with torch.no_grad():
            out = model.forward(chunk)
        out = fade(out)
        final[:, :, :, start:end] += out
        if start == 0:
            fade.fade_in_len = int(overlap_frames)
            start += int(chunk_len - overlap_frames)
        else:
            start += chunk_len
        end += chunk_len
        if end >= length:
            fade.fade_out_len = 0
    return final


class DemucsSeparateSources(nn.Module):
    """pytorch/audio ``examples/tutorials/hybrid_demucs_tutorial.py`` ``separate_sources`` with
    torchaudio's ``transforms.Fade``: ``while start < length - overlap_frames`` where ``length``
    is the input's size, ``mix[:, :, start:end]`` sliced by the counters, the overlap-add
    ``final[:, :, :, start:end] += out`` in place, and the ``Fade`` module's ``fade_in_len`` /
    ``fade_out_len`` attributes rewritten inside the loop (``if start == 0`` / ``if end >= length``)
    and read by the next trip's ``fade(out)``. Adapted: the Hybrid Demucs bundle is a tiny conv
    with the same ``sources`` / output layout; ``sample_rate = 10`` and ``segment = 1.0``,
    ``overlap = 0.2`` (chunks of 12 samples, 2 overlapping)."""

    def __init__(self):
        super().__init__()
        self.model = _TinySeparator()

    def forward(self, mix):
        return separate_sources(self.model, mix, segment=1.0, overlap=0.2)


# ---------------------------------------------------------------------------------------------------
# 12. DBSCAN (chrisjmccormick/dbscan dbscan.py)
# ---------------------------------------------------------------------------------------------------


def MyDBSCAN(D, eps, MinPts):
    labels = [0] * len(D)
    C = 0
    for P in range(0, len(D)):
        if not (labels[P] == 0):
            continue
        NeighborPts = regionQuery(D, P, eps)
        if len(NeighborPts) < MinPts:
            labels[P] = -1
        else:
            C += 1
            growCluster(D, labels, P, NeighborPts, C, eps, MinPts)
    return labels


def growCluster(D, labels, P, NeighborPts, C, eps, MinPts):
    labels[P] = C
    i = 0
    while i < len(NeighborPts):
        Pn = NeighborPts[i]
        if labels[Pn] == -1:
            labels[Pn] = C
        elif labels[Pn] == 0:
            labels[Pn] = C
            PnNeighborPts = regionQuery(D, Pn, eps)
            if len(PnNeighborPts) >= MinPts:
                NeighborPts = NeighborPts + PnNeighborPts
        i += 1


def regionQuery(D, P, eps):
    neighbors = []
    for Pn in range(0, len(D)):
        if torch.linalg.norm(D[P] - D[Pn]) < eps:
            neighbors.append(Pn)
    return neighbors


class DBSCANQueue(nn.Module):
    """chrisjmccormick/dbscan ``dbscan.py`` ``MyDBSCAN`` / ``growCluster`` / ``regionQuery``: labels
    kept in a Python list, ``for P in range(len(D))`` with ``continue`` on labelled points,
    ``regionQuery`` appending indices under a tensor comparison (``norm(D[P] - D[Pn]) < eps``),
    and ``growCluster``'s FIFO ``while i < len(NeighborPts)`` whose queue grows by
    ``NeighborPts = NeighborPts + PnNeighborPts`` inside the loop. Adapted: ``numpy.linalg.norm``
    -> ``torch.linalg.norm``; the label list is returned as a tensor; eps 1.0, MinPts 3."""

    def __init__(self, eps=1.0, MinPts=3):
        super().__init__()
        self.eps = eps
        self.MinPts = MinPts

    def forward(self, D):
        return torch.tensor(MyDBSCAN(D, self.eps, self.MinPts))


# ---------------------------------------------------------------------------------------------------
# 13. Beam search of jadore801120/attention-is-all-you-need-pytorch (transformer/Translator.py)
# ---------------------------------------------------------------------------------------------------


def get_pad_mask(seq, pad_idx):
    return (seq != pad_idx).unsqueeze(-2)


def get_subsequent_mask(seq):
    ''' For masking out the subsequent info. '''
    sz_b, len_s = seq.size()
    subsequent_mask = (1 - torch.triu(torch.ones((1, len_s, len_s), device=seq.device), diagonal=1)).bool()
    return subsequent_mask


class _AiayMHA(nn.Module):
    # transformer/SubLayers.py MultiHeadAttention (+ Modules.py ScaledDotProductAttention), tiny
    def __init__(self, n_head, d_model, d_k, d_v):
        super().__init__()
        self.n_head, self.d_k, self.d_v = n_head, d_k, d_v
        self.w_qs = nn.Linear(d_model, n_head * d_k, bias=False)
        self.w_ks = nn.Linear(d_model, n_head * d_k, bias=False)
        self.w_vs = nn.Linear(d_model, n_head * d_v, bias=False)
        self.fc = nn.Linear(n_head * d_v, d_model, bias=False)
        self.layer_norm = nn.LayerNorm(d_model, eps=1e-6)

    def forward(self, q, k, v, mask=None):
        d_k, d_v, n_head = self.d_k, self.d_v, self.n_head
        sz_b, len_q, len_k, len_v = q.size(0), q.size(1), k.size(1), v.size(1)
        residual = q
        q = self.w_qs(q).view(sz_b, len_q, n_head, d_k).transpose(1, 2)
        k = self.w_ks(k).view(sz_b, len_k, n_head, d_k).transpose(1, 2)
        v = self.w_vs(v).view(sz_b, len_v, n_head, d_v).transpose(1, 2)
        if mask is not None:
            mask = mask.unsqueeze(1)  # For head axis broadcasting.
        attn = torch.matmul(q / d_k ** 0.5, k.transpose(2, 3))
        if mask is not None:
            attn = attn.masked_fill(mask == 0, -1e9)
        attn = F.softmax(attn, dim=-1)
        q = torch.matmul(attn, v)
        q = q.transpose(1, 2).contiguous().view(sz_b, len_q, -1)
        q = self.fc(q)
        q += residual
        q = self.layer_norm(q)
        return q, attn


class _AiayFFN(nn.Module):
    def __init__(self, d_in, d_hid):
        super().__init__()
        self.w_1 = nn.Linear(d_in, d_hid)
        self.w_2 = nn.Linear(d_hid, d_in)
        self.layer_norm = nn.LayerNorm(d_in, eps=1e-6)

    def forward(self, x):
        residual = x
        x = self.w_2(F.relu(self.w_1(x)))
        x += residual
        x = self.layer_norm(x)
        return x


class _AiayEncoder(nn.Module):
    def __init__(self, n_src_vocab, d_model, n_position, pad_idx):
        super().__init__()
        self.src_word_emb = nn.Embedding(n_src_vocab, d_model, padding_idx=pad_idx)
        self.position_enc = nn.Embedding(n_position, d_model)  # sinusoid table in the origin
        self.slf_attn = _AiayMHA(2, d_model, 4, 4)
        self.pos_ffn = _AiayFFN(d_model, 16)
        self.layer_norm = nn.LayerNorm(d_model, eps=1e-6)

    def forward(self, src_seq, src_mask):
        pos = torch.arange(src_seq.size(1)).unsqueeze(0)
        enc_output = self.layer_norm(self.src_word_emb(src_seq) + self.position_enc(pos))
        enc_output, _ = self.slf_attn(enc_output, enc_output, enc_output, mask=src_mask)
        enc_output = self.pos_ffn(enc_output)
        return enc_output,


class _AiayDecoder(nn.Module):
    def __init__(self, n_trg_vocab, d_model, n_position, pad_idx):
        super().__init__()
        self.trg_word_emb = nn.Embedding(n_trg_vocab, d_model, padding_idx=pad_idx)
        self.position_enc = nn.Embedding(n_position, d_model)
        self.slf_attn = _AiayMHA(2, d_model, 4, 4)
        self.enc_attn = _AiayMHA(2, d_model, 4, 4)
        self.pos_ffn = _AiayFFN(d_model, 16)
        self.layer_norm = nn.LayerNorm(d_model, eps=1e-6)

    def forward(self, trg_seq, trg_mask, enc_output, src_mask):
        pos = torch.arange(trg_seq.size(1)).unsqueeze(0)
        dec_output = self.layer_norm(self.trg_word_emb(trg_seq) + self.position_enc(pos))
        dec_output, _ = self.slf_attn(dec_output, dec_output, dec_output, mask=trg_mask)
        dec_output, _ = self.enc_attn(dec_output, enc_output, enc_output, mask=src_mask)
        dec_output = self.pos_ffn(dec_output)
        return dec_output,


class _AiayTransformer(nn.Module):
    def __init__(self, n_vocab=12, d_model=8, n_position=16, pad_idx=0):
        super().__init__()
        self.encoder = _AiayEncoder(n_vocab, d_model, n_position, pad_idx)
        self.decoder = _AiayDecoder(n_vocab, d_model, n_position, pad_idx)
        self.trg_word_prj = nn.Linear(d_model, n_vocab, bias=False)


class AiayTranslatorBeam(nn.Module):
    """jadore801120/attention-is-all-you-need-pytorch ``transformer/Translator.py``
    ``Translator.translate_sentence`` (the ``nn.Module`` version with ``_get_init_state``,
    ``_model_decode``, ``_get_the_best_score_and_idx``): ``for step in range(2, max_seq_len)``,
    ``gen_seq[:, :step]`` sliced by the counter, ``gen_seq[:, :step] = gen_seq[best_k_r_idxs, :step]``
    and ``gen_seq[:, step] = best_k_idx`` written in place, ``if (eos_locs.sum(1) > 0).sum(0).item()
    == beam_size:`` then ``ans_idx = ans_idx.item()`` and ``break``; ``ans_idx = 0`` when the loop
    runs out; ``gen_seq[ans_idx][:seq_lens[ans_idx]]`` after it. Adapted: a one-layer tiny
    Transformer (vocab 12, d_model 8, learned positions) for the checkpoint; ``.tolist()`` of the
    answer dropped; beam 3, ``max_seq_len`` 7; the eos logit is biased so that beams can end."""

    def __init__(self, beam_size=3, max_seq_len=7, src_pad_idx=0, trg_pad_idx=0, trg_bos_idx=1,
                 trg_eos_idx=2):
        super().__init__()
        self.alpha = 0.7
        self.beam_size = beam_size
        self.max_seq_len = max_seq_len
        self.src_pad_idx = src_pad_idx
        self.trg_bos_idx = trg_bos_idx
        self.trg_eos_idx = trg_eos_idx
        self.model = _AiayTransformer()
        self.model.eval()
        with torch.no_grad():
            self.model.trg_word_prj.weight[trg_eos_idx] *= 2.5
        self.register_buffer('init_seq', torch.LongTensor([[trg_bos_idx]]))
        self.register_buffer('blank_seqs', torch.full((beam_size, max_seq_len), trg_pad_idx, dtype=torch.long))
        self.blank_seqs[:, 0] = self.trg_bos_idx
        self.register_buffer('len_map', torch.arange(1, max_seq_len + 1, dtype=torch.long).unsqueeze(0))

    def _model_decode(self, trg_seq, enc_output, src_mask):
        trg_mask = get_subsequent_mask(trg_seq)
        dec_output, *_ = self.model.decoder(trg_seq, trg_mask, enc_output, src_mask)
        return F.softmax(self.model.trg_word_prj(dec_output), dim=-1)

    def _get_init_state(self, src_seq, src_mask):
        beam_size = self.beam_size

        enc_output, *_ = self.model.encoder(src_seq, src_mask)
        dec_output = self._model_decode(self.init_seq, enc_output, src_mask)

        best_k_probs, best_k_idx = dec_output[:, -1, :].topk(beam_size)

        scores = torch.log(best_k_probs).view(beam_size)
        gen_seq = self.blank_seqs.clone().detach()
        gen_seq[:, 1] = best_k_idx[0]
        enc_output = enc_output.repeat(beam_size, 1, 1)
        return enc_output, gen_seq, scores

    def _get_the_best_score_and_idx(self, gen_seq, dec_output, scores, step):
        assert len(scores.size()) == 1

        beam_size = self.beam_size

        # Get k candidates for each beam, k^2 candidates in total.
        best_k2_probs, best_k2_idx = dec_output[:, -1, :].topk(beam_size)

        # Include the previous scores.
        scores = torch.log(best_k2_probs).view(beam_size, -1) + scores.view(beam_size, 1)

        # Get the best k candidates from k^2 candidates.
        scores, best_k_idx_in_k2 = scores.view(-1).topk(beam_size)

        # Get the corresponding positions of the best k candidiates.
        best_k_r_idxs, best_k_c_idxs = best_k_idx_in_k2 // beam_size, best_k_idx_in_k2 % beam_size
        best_k_idx = best_k2_idx[best_k_r_idxs, best_k_c_idxs]

        # Copy the corresponding previous tokens.
        gen_seq[:, :step] = gen_seq[best_k_r_idxs, :step]
        # Set the best tokens in this beam search step
        gen_seq[:, step] = best_k_idx

        return gen_seq, scores

    def forward(self, src_seq):
        return self.translate_sentence(src_seq)

    def translate_sentence(self, src_seq):
        # Only accept batch size equals to 1 in this function.
        # TODO: expand to batch operation.
        assert src_seq.size(0) == 1

        src_pad_idx, trg_eos_idx = self.src_pad_idx, self.trg_eos_idx
        max_seq_len, beam_size, alpha = self.max_seq_len, self.beam_size, self.alpha

        with torch.no_grad():
            src_mask = get_pad_mask(src_seq, src_pad_idx)
            enc_output, gen_seq, scores = self._get_init_state(src_seq, src_mask)

            ans_idx = 0   # default
            for step in range(2, max_seq_len):    # decode up to max length
                dec_output = self._model_decode(gen_seq[:, :step], enc_output, src_mask)
                gen_seq, scores = self._get_the_best_score_and_idx(gen_seq, dec_output, scores, step)

                # Check if all path finished
                # -- locate the eos in the generated sequences
                eos_locs = gen_seq == trg_eos_idx
                # -- replace the eos with its position for the length penalty use
                seq_lens, _ = self.len_map.masked_fill(~eos_locs, max_seq_len).min(1)
                # -- check if all beams contain eos
                if (eos_locs.sum(1) > 0).sum(0).item() == beam_size:
                    # TODO: Try different terminate conditions.
                    _, ans_idx = scores.div(seq_lens.float() ** alpha).max(0)
                    ans_idx = ans_idx.item()
                    break
        return gen_seq[ans_idx][:seq_lens[ans_idx]]


# ---------------------------------------------------------------------------------------------------
# 14. torchvision batched NMS, per-class loop (pytorch/vision torchvision/ops/boxes.py)
# ---------------------------------------------------------------------------------------------------


def _batched_nms_vanilla(boxes: Tensor, scores: Tensor, idxs: Tensor, iou_threshold: float) -> Tensor:
    # Based on Detectron2 implementation, just manually call nms() on each class independently
    keep_mask = torch.zeros_like(scores, dtype=torch.bool)
    for class_id in torch.unique(idxs):
        curr_indices = torch.where(idxs == class_id)[0]
        curr_keep_indices = torchvision.ops.nms(boxes[curr_indices], scores[curr_indices], iou_threshold)
        keep_mask[curr_indices[curr_keep_indices]] = True
    keep_indices = torch.where(keep_mask)[0]
    return keep_indices[scores[keep_indices].sort(descending=True)[1]]


class TorchvisionBatchedNmsVanilla(nn.Module):
    """pytorch/vision ``torchvision/ops/boxes.py`` ``_batched_nms_vanilla`` (what ``batched_nms``
    runs above 4000 boxes on CPU; called directly here): ``for class_id in torch.unique(idxs)`` --
    a loop over the values of a data-dependent tensor -- ``torch.where(idxs == class_id)[0]``,
    ``nms`` per class and ``keep_mask[curr_indices[curr_keep_indices]] = True`` in place.
    Adapted: ``@torch.jit._script_if_tracing`` dropped; IoU threshold 0.5."""

    def forward(self, boxes, scores, idxs):
        return _batched_nms_vanilla(boxes, scores, idxs, 0.5)


# ---------------------------------------------------------------------------------------------------
# 15. All-pairs Dijkstra with a priority queue kept in a tensor (Chase1325/tasc_frontiers)
# ---------------------------------------------------------------------------------------------------


class priorityQ_torch(object):
    """Priority Q implelmentation in PyTorch"""

    def __init__(self, val):
        self.q = torch.tensor([[val, 0]])

    def push(self, x):
        if self.isEmpty():
            self.q = x
            self.q = torch.unsqueeze(self.q, dim=0)
            return
        idx = torch.searchsorted(self.q.T[1], x[1])
        self.q = torch.vstack([self.q[0:idx], x, self.q[idx:]]).contiguous()

    def top(self):
        return self.q[0]

    def pop(self):
        if self.isEmpty():
            print("Can Not Pop")
        self.q = self.q[1:]

    def isEmpty(self):
        return self.q.shape[0] == 0


def dijkstra(adj):
    n = adj.shape[0]
    distance_matrix = torch.zeros([n, n])
    for i in range(n):
        u = torch.zeros(n, dtype=torch.bool)  # noqa: F841 - unused in the origin too
        d = 1e16 * torch.ones(n)
        d[i] = 0
        q = priorityQ_torch(i)
        while not q.isEmpty():
            v, d_v = q.top()  # point and distance
            v = v.int()
            q.pop()
            if d_v != d[v]:
                continue
            for j, py in enumerate(adj[v]):
                if py == 0 and j != v:
                    continue
                else:
                    to = j
                    weight = py  # noqa: F841 - unused in the origin too
                    if d[v] + py < d[to]:
                        d[to] = d[v] + py
                        q.push(torch.Tensor([to, d[to]]))
        distance_matrix[i] = d
    return distance_matrix, q.q


class TensorPriorityQueueDijkstra(nn.Module):
    """Chase1325/tasc_frontiers ``Methods/dijkstra.py`` ``dijkstra`` with ``priorityQ_torch``: a
    priority queue kept as an (k, 2) tensor in an object attribute, ``push`` inserting a row at
    ``torch.searchsorted`` with ``torch.vstack([q[0:idx], x, q[idx:]])`` (the queue starts as an
    int64 tensor and turns float on the first push), ``pop`` shrinking it with ``q[1:]``;
    ``for i in range(n)`` sources, ``while not q.isEmpty()`` until the queue is empty,
    ``continue`` on stale entries, an inner ``for j, py in enumerate(adj[v])`` with
    ``continue`` on missing edges and relaxations written in place. Returns the distance matrix and
    the (empty) last queue, as the origin does. Adapted: none."""

    def forward(self, adj):
        return dijkstra(adj)


# ---------------------------------------------------------------------------------------------------
# 16. x-transformers AutoregressiveWrapper.generate (lucidrains/x-transformers)
# ---------------------------------------------------------------------------------------------------


def exists(val):
    return val is not None


def default(val, d):
    return val if exists(val) else d


def top_k(logits, frac_num_tokens=0.1, k=None):
    num_tokens = logits.shape[-1]

    k = default(k, ceil(frac_num_tokens * num_tokens))
    k = min(k, num_tokens)

    val, ind = torch.topk(logits, k)
    probs = torch.full_like(logits, float('-inf'))
    probs.scatter_(1, ind, val)
    return probs


@dataclass
class LayerIntermediates:
    # x_transformers.x_transformers.LayerIntermediates, reduced to the field generate() reads
    attn_intermediates: List = field(default_factory=list)


class _TinyDecoderLM(nn.Module):
    # stands in for TransformerWrapper(Decoder(...)): one causal attention block, no kv cache kept
    # (it returns LayerIntermediates with no attention intermediates, as a cache-less net would)
    def __init__(self, num_tokens=20, dim=8, max_seq_len=4):
        super().__init__()
        self.max_seq_len = max_seq_len
        self.token_emb = nn.Embedding(num_tokens, dim)
        self.pos_emb = nn.Embedding(max_seq_len, dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim)
        self.to_logits = nn.Linear(dim, num_tokens)

    def forward(self, x, return_intermediates=False, cache=None):
        n = x.shape[1]
        h = self.token_emb(x) + self.pos_emb(torch.arange(n))
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        sim = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        causal = torch.ones(n, n, dtype=torch.bool).triu(1)
        sim = sim.masked_fill(causal, -torch.finfo(sim.dtype).max)
        h = h + self.out(sim.softmax(dim=-1) @ v)
        logits = self.to_logits(self.norm(h))
        if return_intermediates:
            return logits, LayerIntermediates()
        return logits


class XTransformersGenerate(nn.Module):
    """lucidrains/x-transformers ``x_transformers/autoregressive_wrapper.py``
    ``AutoregressiveWrapper.generate`` (default ``filter_logits_fn=top_k``,
    ``restrict_to_max_seq_len=True``): ``for _ in range(seq_len)``, ``x = out[:, -max_seq_len:]``
    (a sliding window over the growing output), ``cache = None`` before the loop and the net's
    intermediates after it (``if exists(cache): for inter in cache.attn_intermediates: ...``),
    ``top_k`` with ``probs.scatter_`` in place, ``out = torch.cat((out, sample), dim=-1)``, and the
    eos exit ``if is_eos_tokens.any(dim=-1).all():`` masking after the eos then ``break``;
    ``out[:, t:]`` after the loop. Adapted: ``torch.multinomial(probs, 1)`` ->
    ``probs.argmax(dim=-1, keepdim=True)``; einops ``pack``/``unpack`` of a 2-D input are the
    identity and written out as such; the contrastive-decoding (``amateur_model``) branch, off by
    default, is left out; the net is a tiny one-block causal LM (vocab 20, ``max_seq_len`` 4);
    ``seq_len`` 6, ``eos_token`` 3."""

    def __init__(self, seq_len=6, eos_token=3):
        super().__init__()
        self.pad_value = 0
        self.net = _TinyDecoderLM()
        self.max_seq_len = self.net.max_seq_len
        self.seq_len = seq_len
        self.eos_token = eos_token
        with torch.no_grad():
            self.net.to_logits.bias[eos_token] += 0.5

    def forward(self, start_tokens):
        return self.generate(start_tokens, self.seq_len, eos_token=self.eos_token)

    @torch.no_grad()
    def generate(self, start_tokens, seq_len, eos_token=None, temperature=1., filter_logits_fn=top_k,
                 restrict_to_max_seq_len=True, filter_kwargs: dict = dict(), **kwargs):
        assert callable(filter_logits_fn)

        max_seq_len, device, num_dims = self.max_seq_len, start_tokens.device, start_tokens.ndim

        # start_tokens, ps = pack([start_tokens], '* n') -- identity for a (b, n) input
        b, t = start_tokens.shape

        out = start_tokens

        # kv caches

        cache = None

        # sampling up to seq_len

        for _ in range(seq_len):

            if restrict_to_max_seq_len:
                x = out[:, -max_seq_len:]

                if exists(cache):
                    for inter in cache.attn_intermediates:
                        inter.cached_kv = [t[..., -(max_seq_len - 1):, :] for t in inter.cached_kv]

            logits, cache = self.net(x, return_intermediates=True, cache=cache, **kwargs)

            logits = logits[:, -1]

            # filter by top_k, top_p (nucleus), top_a, or custom

            filtered_logits = filter_logits_fn(logits, **filter_kwargs)

            probs = F.softmax(filtered_logits / temperature, dim=-1)

            sample = probs.argmax(dim=-1, keepdim=True)  # origin: torch.multinomial(probs, 1)

            out = torch.cat((out, sample), dim=-1)

            if exists(eos_token):
                is_eos_tokens = (out == eos_token)

                if is_eos_tokens.any(dim=-1).all():
                    # mask out everything after the eos tokens
                    shifted_is_eos_tokens = F.pad(is_eos_tokens, (1, -1))
                    mask = shifted_is_eos_tokens.float().cumsum(dim=-1) >= 1
                    out = out.masked_fill(mask, self.pad_value)
                    break

        out = out[:, t:]

        # out, = unpack(out, ps, '* n') -- identity
        return out


# ---------------------------------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------------------------------




def _mas(seed, b, tx, ty, lens=None):
    value = _randn(seed, b, tx, ty)
    mask = torch.ones(b, tx, ty)
    for i, (lx, ly) in enumerate(lens or []):
        mask[i, lx:, :] = 0
        mask[i, :, ly:] = 0
    return value, mask


def _yolo(img0, img1):
    # rows (cx, cy, w, h, obj, cls0, cls1, cls2) per image; both images padded to the same n
    n = max(len(img0), len(img1))
    pad = [[0, 0, 1, 1, 0.0, 0, 0, 0]]
    return (torch.stack([_t(img0 + pad * (n - len(img0))).reshape(n, 8),
                         _t(img1 + pad * (n - len(img1))).reshape(n, 8)]),)


def _adj(n, edges):
    A = torch.zeros(n, n)
    for a, b, w in edges:
        A[a, b] = w
    return A


def _rosen_dir(x, scale):
    x = _t(x)
    return x, -_rosenbrock_grad(x) * scale


_L = torch.tensor

CASES: list[LoopCase] = [
    LoopCase(
        name="bilstm_crf_tutorial_viterbi",
        origin="pytorch/tutorials beginner_source/nlp/advanced_tutorial.py BiLSTM_CRF._viterbi_decode",
        make=_seeded(BiLSTMCRFTutorial, 1),
        example=(_ints(4, 19, 4),),
        dynamic_shapes={"sentence": {0: "len"}},
        held_out=[(_ints(1, 19, 1),), (_ints(2, 19, 2),), (_ints(3, 19, 3),), (_ints(7, 19, 7),)],
        exits=["len 1: 1 outer trip (5 inner), backtrack 1 trip", "len 2: 2 trips, backtrack 2",
               "len 3: 3 trips", "len 7: 7 trips, backtrack 7, pop/assert/reverse"],
    ),
    LoopCase(
        name="speechbrain_rnn_greedy_all_ended",
        origin="speechbrain/speechbrain speechbrain/decoders/seq2seq.py S2SGreedySearcher.forward + S2SRNNGreedySearcher",
        make=_seeded(SpeechBrainRNNGreedy, 0),
        example=(_randn(7, 2, 3, 6, scale=2.0), _t([1.0, 0.6])),
        dynamic_shapes={"enc_states": {1: "time"}, "wav_len": None},
        held_out=[(_randn(1, 2, 3, 6, scale=2.0), _t([1.0, 0.6])),
                  (_randn(3, 2, 5, 6, scale=2.0), _t([1.0, 0.6])),
                  (_randn(26, 2, 5, 6, scale=2.0), _t([1.0, 0.6])),
                  (_randn(23, 2, 6, 6, scale=2.0), _t([1.0, 0.6])),
                  (_randn(5, 2, 4, 6, scale=2.0), _t([1.0, 0.6])),
                  (_randn(8, 2, 4, 6, scale=2.0), _t([1.0, 0.6]))],
        exits=["T=3: both rows end on trip 1: has_ended.all() break on trip 1",
               "T=5: row 1 ends on trip 1 (inf written into its appended log_probs on trip 2), break on trip 2",
               "T=5: break on trip 3", "T=6: row 0 ends first, break on trip 5",
               "T=4: no eos: range bound (4 trips)",
               "T=4: row 1 ends on trip 1, row 0 never: range bound with inf rows"],
    ),
    LoopCase(
        name="icefall_transducer_greedy_search",
        origin="k2-fsa/icefall egs/librispeech/ASR/pruned_transducer_stateless2/beam_search.py greedy_search",
        make=_seeded(IcefallGreedySearch, 1),
        example=(_randn(3, 1, 3, 8, scale=2.0),),
        dynamic_shapes={"encoder_out": {1: "T"}},
        held_out=[(_randn(0, 1, 0, 8, scale=2.0),),
                  (_randn(1, 1, 1, 8, scale=2.0),),
                  (_randn(0, 1, 1, 8, scale=2.0),),
                  (_randn(2, 1, 3, 8, scale=2.0),),
                  (_randn(0, 1, 3, 8, scale=2.0),),
                  (_randn(5, 1, 3, 8, scale=2.0),)],
        exits=["T=0: while test false at once, empty hyp",
               "T=1: blank at once (1 trip, else branch)",
               "T=1: two symbols then sym_per_frame >= max_sym_per_frame `continue`",
               "T=3: a frame with one symbol then blank, then max-symbol frames (hyp [1, 4, 4, 4, 5, 5])",
               "T=3: blank on every frame", "T=3: max_sym_per_frame `continue` on every frame"],
    ),
    LoopCase(
        name="fastspeech_length_regulator_alignment",
        origin="xcmyz/FastSpeech modules.py LengthRegulator.LR + create_alignment",
        make=_seeded(FastSpeechLengthRegulator, 0),
        example=(_randn(3, 1, 3, 8), _L([[2, 1, 3]])),
        dynamic_shapes={"x": {1: "L"}, "target": {1: "L"}},
        held_out=[(_randn(2, 1, 2, 8), _L([[0, 0]])),
                  (_randn(4, 1, 2, 8), _L([[1, 0]])),
                  (_randn(5, 1, 3, 8), _L([[2, 0, 1]])),
                  (_randn(6, 1, 5, 8), _L([[3, 1, 2, 4, 1]]))],
        exits=["all durations 0: innermost loop 0 trips, alignment (1, 0, 2)",
               "durations 1, 0: innermost 1 then 0 trips", "durations 2, 0, 1",
               "L=5, durations up to 4 (N trips)"],
    ),
    LoopCase(
        name="coqui_maximum_path_numpy",
        origin="coqui-ai/TTS TTS/tts/utils/helpers.py maximum_path_numpy",
        make=_seeded(CoquiMaximumPath, 0),
        example=_mas(0, 2, 3, 4),
        dynamic_shapes={"value": {0: "b", 1: "t_x", 2: "t_y"}, "mask": {0: "b", 1: "t_x", 2: "t_y"}},
        held_out=[_mas(1, 1, 1, 1), _mas(2, 1, 2, 2), _mas(3, 2, 3, 5, [(3, 5), (2, 3)]),
                  _mas(4, 3, 4, 7, [(4, 7), (2, 6), (3, 3)])],
        exits=["t_y=1: both loops 1 trip", "t_y=2: 2 trips each",
               "t_y=5 with a padded row (mask zero past its lengths)", "t_y=7, three rows of other lengths"],
    ),
    LoopCase(
        name="wavernn_generate_raw",
        origin="fatchord/WaveRNN models/fatchord_version.py WaveRNN.generate (RAW, unbatched)",
        make=_seeded(WaveRNNGenerate, 0),
        example=(_randn(3, 1, 4, 3),),
        dynamic_shapes={"mels": {2: "frames"}},
        held_out=[(_randn(1, 1, 4, 1),), (_randn(2, 1, 4, 2),), (_randn(5, 1, 4, 5),)],
        exits=["1 frame: 2 samples (seq_len = frames * hop)", "2 frames: 4 trips", "5 frames: 10 trips"],
    ),
    LoopCase(
        name="yolov5_nms_per_image",
        origin="ultralytics/yolov5 utils/general.py non_max_suppression",
        make=_seeded(YoloV5Nms, 0),
        example=_yolo([[10, 10, 8, 8, 0.9, 0.9, 0.1, 0.1], [11, 10, 8, 8, 0.8, 0.8, 0.1, 0.2],
                       [30, 30, 6, 6, 0.7, 0.1, 0.9, 0.1]],
                      [[20, 20, 10, 10, 0.6, 0.1, 0.1, 0.9], [21, 21, 10, 10, 0.9, 0.2, 0.1, 0.8],
                       [5, 5, 4, 4, 0.1, 0.9, 0.1, 0.1]]),
        dynamic_shapes={"prediction": {1: "n"}},
        held_out=[_yolo([[10, 10, 8, 8, 0.1, 0.9, 0.1, 0.1], [30, 30, 8, 8, 0.2, 0.9, 0.1, 0.1]],
                        [[10, 10, 8, 8, 0.5, 0.3, 0.2, 0.1], [30, 30, 8, 8, 0.4, 0.2, 0.2, 0.3]]),
                  _yolo([[10, 10, 8, 8, 0.9, 0.9, 0.1, 0.1], [10, 11, 8, 8, 0.8, 0.9, 0.1, 0.1],
                         [10, 10, 8, 8, 0.8, 0.1, 0.9, 0.1], [40, 40, 8, 8, 0.3, 0.9, 0.1, 0.1]],
                        [[25, 25, 6, 6, 0.95, 0.2, 0.9, 0.1]]),
                  _yolo([], []),
                  _yolo([[10, 10, 8, 8, 0.9, 0.9, 0.1, 0.1], [12, 10, 8, 8, 0.85, 0.9, 0.1, 0.1],
                         [14, 10, 8, 8, 0.8, 0.9, 0.1, 0.1], [50, 10, 8, 8, 0.7, 0.1, 0.1, 0.9],
                         [52, 10, 8, 8, 0.6, 0.1, 0.1, 0.9]],
                        [[10, 10, 8, 8, 0.2, 0.9, 0.1, 0.1]])],
        exits=["image 0: no obj above conf_thres -> first `continue`; image 1: candidates whose "
               "obj*cls <= conf_thres -> second `continue`",
               "image 0: same-class overlap suppressed, other class kept at the same place; image 1: one box",
               "n=0: both images `continue`",
               "image 0: two clusters of 3 and 2 boxes; image 1: first `continue`"],
    ),
    LoopCase(
        name="cluster_nms_equal_break",
        origin="Zzh-tju/CIoU layers/functions/detection.py Detect.cc_cluster_nms",
        make=_seeded(ClusterNmsCrossClass, 0),
        example=(_t([[0, 0, 10, 10], [1, 1, 11, 11], [2, 2, 12, 12], [30, 30, 40, 40]]),
                 torch.arange(12.).view(4, 3), _t([[0.9, 0.8, 0.7, 0.6], [0.1, 0.2, 0.3, 0.95]])),
        dynamic_shapes={"boxes": {0: "n"}, "masks": {0: "n"}, "scores": {1: "n"}},
        held_out=[(_t([[0, 0, 10, 10]]), _t([[0, 1, 2]]), _t([[0.9], [0.1]])),
                  (_t([[0, 0, 10, 10], [20, 20, 30, 30], [40, 0, 50, 10]]), torch.arange(9.).view(3, 3),
                   _t([[0.5, 0.9, 0.2], [0.4, 0.1, 0.8]])),
                  (_t([[0, 0, 10, 10], [1, 1, 11, 11]]), torch.arange(6.).view(2, 3),
                   _t([[0.9, 0.8], [0.1, 0.2]])),
                  (_t([[0, 0, 10, 10], [1, 1, 11, 11], [2, 2, 12, 12], [30, 30, 40, 40]]),
                   torch.arange(12.).view(4, 3), _t([[0.9, 0.8, 0.7, 0.6], [0.1, 0.2, 0.3, 0.95]])),
                  (_t([[0, 0, 10, 10], [2, 0, 12, 10], [4, 0, 14, 10], [6, 0, 16, 10], [8, 0, 18, 10]]),
                   torch.arange(15.).view(5, 3), _t([[0.9, 0.8, 0.7, 0.6, 0.5], [0, 0, 0, 0, 0]]))],
        exits=["1 box: equal on trip 1", "3 apart: equal on trip 1", "pair: one suppressed, equal on trip 1",
               "chain of 3 + 1: break on trip 2", "chain of 5: break on trip 4 (the 200 bound is not "
               "reachable: the loop converges within n trips)"],
    ),
    LoopCase(
        name="centertrack_greedy_assignment",
        origin="xingyizhou/CenterTrack src/lib/utils/tracker.py greedy_assignment + Tracker.step",
        make=_seeded(CenterTrackGreedyAssignment, 0),
        example=(_t([[0, 0], [5, 5], [1, 0]]), _t([10., 10., 10.]), _L([0, 0, 0]),
                 _t([[0.5, 0], [5, 6]]), _t([10., 10.]), _L([0, 0])),
        dynamic_shapes={"dets": {0: "N"}, "item_size": {0: "N"}, "item_cat": {0: "N"},
                        "tracks": {0: "M"}, "track_size": {0: "M"}, "track_cat": {0: "M"}},
        held_out=[(torch.zeros(0, 2), torch.zeros(0), _L([], dtype=torch.long),
                   _t([[0, 0]]), _t([5.]), _L([0])),
                  (_t([[0, 0]]), _t([5.]), _L([0]), torch.zeros(0, 2), torch.zeros(0), _L([], dtype=torch.long)),
                  (_t([[0, 0]]), _t([5.]), _L([0]), _t([[1, 1]]), _t([5.]), _L([0])),
                  (_t([[0, 0], [0.5, 0], [9, 9]]), _t([5., 5., 5.]), _L([0, 0, 1]),
                   _t([[0.2, 0], [20, 20]]), _t([5., 5.]), _L([0, 1])),
                  (_t([[0, 0], [5, 5], [1, 0]]), _t([10., 10., 10.]), _L([0, 1, 0]),
                   _t([[0.5, 0], [5, 6], [1, 1]]), _t([10., 10., 10.]), _L([0, 0, 0]))],
        exits=["N=0: the for loop runs 0 times", "M=0: early `return` before the loop",
               "1x1 matched: 1 trip, append", "conflict: row 1 finds its column blanked, no append; row 2 too far",
               "class mismatch and distance: 2 of 3 rows matched"],
    ),
    LoopCase(
        name="lbfgs_strong_wolfe",
        origin="pytorch/pytorch torch/optim/lbfgs.py _strong_wolfe + _cubic_interpolate",
        make=_seeded(LbfgsStrongWolfe, 0),
        example=_rosen_dir([0.5, 0.5, 0.5], 0.1),
        dynamic_shapes={"x": {0: "n"}, "d": {0: "n"}},
        held_out=[_rosen_dir([-1.2, 1.0], 1e-4),
                  _rosen_dir([-1.2, 1.0], 0.002),
                  _rosen_dir([-1.2, 1.0], 0.01),
                  _rosen_dir([0.0, 0.0], 0.001),
                  _rosen_dir([0.0, 0.0], 5e-4),
                  _rosen_dir([0.0, 0.0], 1e-6),
                  _rosen_dir([-1.2, 1.0], 1e-12),
                  _rosen_dir([2.0, 3.0], -0.002)],
        exits=["bracketing: strong Wolfe `break` (done) on trip 1, zoom not entered",
               "bracketing: Armijo `break` on trip 1; zoom: 1 trip, Wolfe satisfied (done)",
               "Armijo `break` on trip 1; zoom: 2 trips",
               "2 extrapolation trips then strong Wolfe `break`",
               "3 extrapolation trips then `gtd_new >= 0` `break`; zoom 1 trip",
               "6 extrapolation trips then `gtd_new >= 0` `break`; zoom 1 trip",
               "tiny step: f unchanged, `ls_iter > 1 and f_new >= f_prev` `break`; zoom: tolerance `break`",
               "ascent direction: Armijo `break`; zoom runs to the max_ls bound (25 evaluations)"],
    ),
    LoopCase(
        name="demucs_separate_sources_chunks",
        origin="pytorch/audio examples/tutorials/hybrid_demucs_tutorial.py separate_sources + transforms.Fade",
        make=_seeded(DemucsSeparateSources, 0),
        example=(_randn(20, 1, 2, 20),),
        dynamic_shapes={"mix": {2: "length"}},
        held_out=[(_randn(2, 1, 2, 2),), (_randn(8, 1, 2, 8),), (_randn(13, 1, 2, 13),),
                  (_randn(25, 1, 2, 25),), (_randn(40, 1, 2, 40),)],
        exits=["length 2: while test false at once (all zeros)",
               "length 8: 1 chunk shorter than chunk_len, fade_out set after it",
               "length 13: 2 chunks, fade_out_len = 0 before the last (3 samples)",
               "length 25: 3 chunks", "length 40: 4 chunks"],
    ),
    LoopCase(
        name="dbscan_grow_cluster_queue",
        origin="chrisjmccormick/dbscan dbscan.py MyDBSCAN + growCluster + regionQuery",
        make=_seeded(DBSCANQueue, 0),
        example=(_t([[0, 0], [0.5, 0], [0.9, 0], [5, 5]]),),
        dynamic_shapes={"D": {0: "n"}},
        held_out=[(_t([[0, 0]]),),
                  (_t([[0, 0], [0.5, 0]]),),
                  (_t([[0, 0], [0.9, 0], [1.5, 0]]),),
                  (_t([[0, 0], [0.6, 0], [1.2, 0], [1.8, 0], [2.7, 0], [9, 9]]),),
                  (_t([[0, 0], [0.5, 0], [0, 0.5], [1.4, 0], [5, 5], [5.5, 5], [5, 5.5], [9, 0]]),)],
        exits=["1 point: noise, no growCluster", "2 points: both noise",
               "point 0 noise first, then claimed by point 1's cluster (labels[Pn] == -1 branch)",
               "a chain: the FIFO queue grows inside while i < len(NeighborPts); a border point",
               "two clusters, `continue` on labelled points, one noise"],
    ),
    LoopCase(
        name="aiayn_translator_beam_item_break",
        origin="jadore801120/attention-is-all-you-need-pytorch transformer/Translator.py Translator.translate_sentence",
        make=_seeded(AiayTranslatorBeam, 2),
        example=(_ints(1, 12, 1, 3, low=3),),
        dynamic_shapes={"src_seq": {1: "src_len"}},
        held_out=[(_ints(10, 12, 1, 4, low=3),), (_ints(1, 12, 1, 3, low=3),), (_ints(0, 12, 1, 2, low=3),),
                  (_ints(8, 12, 1, 2, low=3),), (_ints(2, 12, 1, 4, low=3),)],
        exits=["all beams hold eos at step 2: `.item() == beam_size` break on trip 1",
               "break on trip 2", "break on trip 3", "break on trip 4",
               "no break: range bound (5 trips), ans_idx stays 0"],
    ),
    LoopCase(
        name="torchvision_batched_nms_vanilla",
        origin="pytorch/vision torchvision/ops/boxes.py _batched_nms_vanilla",
        make=_seeded(TorchvisionBatchedNmsVanilla, 0),
        example=(_t([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [21, 21, 31, 31], [0, 0, 10, 10]]),
                 _t([0.9, 0.8, 0.7, 0.6, 0.5]), _L([0, 0, 1, 1, 2])),
        dynamic_shapes={"boxes": {0: "n"}, "scores": {0: "n"}, "idxs": {0: "n"}},
        held_out=[(torch.zeros(0, 4), torch.zeros(0), _L([], dtype=torch.long)),
                  (_t([[0, 0, 10, 10]]), _t([0.3]), _L([4])),
                  (_t([[0, 0, 10, 10], [1, 1, 11, 11], [30, 30, 40, 40]]), _t([0.5, 0.9, 0.7]), _L([2, 2, 2])),
                  (_t([[0, 0, 10, 10], [1, 1, 11, 11], [0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60],
                       [0, 0, 10, 10]]), _t([0.9, 0.8, 0.7, 0.95, 0.5, 0.1]), _L([0, 0, 1, 1, 3, 7]))],
        exits=["0 boxes: torch.unique is empty, 0 trips", "1 box: 1 trip", "one class of 3: 1 trip, a box suppressed",
               "4 classes: 4 trips, overlaps only within a class suppressed"],
    ),
    LoopCase(
        name="tensor_priority_queue_dijkstra",
        origin="Chase1325/tasc_frontiers Methods/dijkstra.py dijkstra + priorityQ_torch",
        make=_seeded(TensorPriorityQueueDijkstra, 0),
        example=(_adj(4, [(0, 1, 1.), (1, 0, 1.), (1, 2, 2.), (2, 3, 1.), (0, 3, 9.), (3, 0, 1.)]),),
        dynamic_shapes={"adj": {0: "n", 1: "n"}},
        held_out=[(_adj(2, [(0, 1, 3.), (1, 0, 2.)]),),
                  (_adj(3, [(0, 1, 1.), (1, 2, 1.), (0, 2, 5.), (2, 0, 4.)]),),
                  (_adj(5, [(0, 1, 4.), (0, 2, 1.), (2, 1, 1.), (1, 3, 1.), (3, 4, 3.), (2, 4, 7.),
                            (4, 0, 1.)]),),
                  (_adj(1, []),),
                  (_adj(3, [(0, 1, 1.), (1, 2, 1.), (0, 2, 5.)]),)],
        exits=["2 nodes: queue emptied after 2 trips per source",
               "3 nodes: a stale entry (d_v != d[v]) `continue`",
               "5 nodes: several relaxations, stale entries, missing-edge `continue`s",
               "1 node: 1 trip, no push: the returned queue stays int64 (as in eager)",
               "3 nodes, last source without out-edges: the returned queue is int64 in eager"],
    ),
    LoopCase(
        name="xtransformers_generate_eos_break",
        origin="lucidrains/x-transformers x_transformers/autoregressive_wrapper.py AutoregressiveWrapper.generate",
        make=_seeded(XTransformersGenerate, 0),
        example=(_ints(2, 20, 2, 2, low=4),),
        dynamic_shapes={"start_tokens": {1: "t"}},
        held_out=[(_ints(0, 20, 2, 3, low=4),), (_ints(0, 20, 2, 2, low=4),), (_ints(1, 20, 2, 1, low=4),),
                  (_ints(5, 20, 2, 1, low=4),), (_ints(6, 20, 2, 3, low=4),)],
        exits=["both rows emit eos on trip 1: break", "break on trip 2 (one row ended on trip 1, masked after)",
               "break on trip 3", "both rows end on trip 3 together",
               "no eos in one row: seq_len bound (6 trips), window out[:, -4:] slides"],
    ),
]
