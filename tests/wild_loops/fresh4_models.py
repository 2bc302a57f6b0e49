"""Fresh loops ported from public code, fourth batch (group "fresh4"): an out-of-sample measurement.

None of these 12 loops is in ``search_models.py`` / ``decoding_models.py`` / ``fresh_models.py`` /
``fresh2_models.py`` / ``fresh3_models.py`` (two origins' repositories are there with other functions:
ikostrikov/pytorch-trpo's ``conjugate_gradients`` and the Soft-NMS of DocF/Soft-NMS, a different
implementation from efficientdet-pytorch's). They were chosen for spread (a CTC prefix beam search, an
attention decoder with a stop token, a TTS loop with a stop test, a CRF Viterbi, an NMS variant, a box
assignment, k-means, a line search, a graph power iteration, a BPE tokenizer, top-p sampling, a
priority-queue beam search) before fxport was run on any of them, read in their repositories and
ported as written there: the ``for``/``while`` shape, ``break``/``continue``, list appends,
``.item()``/``.tolist()`` calls, in-place writes, attribute writes. What was adapted is named in each
docstring and is limited to:

- sizes shrunk, checkpoints replaced by tiny modules seeded in ``make()``; nothing downloads;
- Python 2 / numpy / einops written with today's Python / torch (``Queue`` -> ``queue``,
  ``next(seq_iter)``, ``np.log`` -> ``torch.log``, ``rearrange(x, '... -> ... 1')`` ->
  ``x.unsqueeze(-1)``), dropout that the origin runs at inference (``training=True``) set to 0;
- a random draw made an input (``torch.multinomial`` takes its uniform number from an input tensor);
- printing and logging dropped; token lists a loop builds returned as ``torch.tensor(...)``;
- constructor/config values (bounds, thresholds, an eos id) set so the held-out sets reach every
  exit; each docstring says which.

The held-out sets take every exit of every loop that the inputs can reach; ``exits`` says which,
``python3 -m tests.wild_loops.measure --group fresh4 --exits`` re-checks it in eager.
"""

from __future__ import annotations

import collections
import logging
import math
import operator
from functools import lru_cache
from itertools import chain
from queue import PriorityQueue

import numpy as np
import regex as re
import torch
import torch.nn.functional as F
from torch import Tensor, nn
import torch.autograd as autograd
from torch.autograd import Variable

from tests.wild_loops.harness import LoopCase, ints as _ints, randn as _randn, seeded as _seeded
from tests.wild_loops.harness import tensor_of as _t


def _L(rows) -> Tensor:
    return torch.tensor(rows, dtype=torch.long)


# ---------------------------------------------------------------------------------------------------
# 1. CTC prefix beam search (awni/speech speech/models/ctc_decoder.py decode)
# ---------------------------------------------------------------------------------------------------

NEG_INF = -float("inf")


def make_new_beam():
    fn = lambda : (NEG_INF, NEG_INF)
    return collections.defaultdict(fn)


def logsumexp(*args):
    """
    Stable log sum exp.
    """
    if all(a == NEG_INF for a in args):
        return NEG_INF
    a_max = max(args)
    lsp = math.log(sum(math.exp(a - a_max)
                       for a in args))
    return a_max + lsp


def decode(probs, beam_size=10, blank=0):
    T, S = probs.shape
    probs = torch.log(probs)  # origin: np.log(probs)

    beam = [(tuple(), (0.0, NEG_INF))]

    for t in range(T): # Loop over time

        next_beam = make_new_beam()

        for s in range(S): # Loop over vocab
            p = probs[t, s]

            for prefix, (p_b, p_nb) in beam: # Loop over beam

                if s == blank:
                  n_p_b, n_p_nb = next_beam[prefix]
                  n_p_b = logsumexp(n_p_b, p_b + p, p_nb + p)
                  next_beam[prefix] = (n_p_b, n_p_nb)
                  continue

                end_t = prefix[-1] if prefix else None
                n_prefix = prefix + (s,)
                n_p_b, n_p_nb = next_beam[n_prefix]
                if s != end_t:
                  n_p_nb = logsumexp(n_p_nb, p_b + p, p_nb + p)
                else:
                  n_p_nb = logsumexp(n_p_nb, p_b + p)

                next_beam[n_prefix] = (n_p_b, n_p_nb)

                if s == end_t:
                  n_p_b, n_p_nb = next_beam[prefix]
                  n_p_nb = logsumexp(n_p_nb, p_nb + p)
                  next_beam[prefix] = (n_p_b, n_p_nb)

        beam = sorted(next_beam.items(),
                key=lambda x : logsumexp(*x[1]),
                reverse=True)
        beam = beam[:beam_size]

    best = beam[0]
    return best[0], -logsumexp(*best[1])


class AwniCtcPrefixBeamSearch(nn.Module):
    """awni/speech ``speech/models/ctc_decoder.py``, ``decode(probs, beam_size, blank)`` (the prefix
    beam search of the distill.pub CTC article), called by ``speech/models/ctc_model.py`` ``CTC.infer`` as
    ``decode(p, beam_size=1, blank=self.blank)`` on each utterance of the model's softmax output: ``for t in range(T)`` around ``for s in range(S)``
    around ``for prefix, (p_b, p_nb) in beam`` with ``if s == blank: ...; continue``, ``end_t = prefix[-1]
    if prefix else None``, a ``collections.defaultdict`` of prefix tuples, ``logsumexp`` of Python floats
    and 0-d tensors with ``math.log``/``math.exp``, ``sorted(next_beam.items(), key=...)[:beam_size]``.
    Adapted: ``probs.data.cpu().numpy()`` -> the tensor, so ``np.log(probs)`` -> ``torch.log(probs)``; the
    acoustic model is one random ``Linear`` + softmax over 4 labels; ``beam_size`` 1 -> 3 so that the beam
    is trimmed, the blank at 0 (``decode``'s default; ``CTC`` puts it last); one utterance (T, 6); the
    label tuple is returned as ``torch.tensor(labels)`` with the score."""

    blank = 0

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)

    def forward(self, features: Tensor):
        probs = torch.softmax(self.fc(features), dim=-1)
        labels, score = decode(probs, beam_size=3, blank=self.blank)
        return torch.tensor(labels, dtype=torch.long), torch.as_tensor(score, dtype=torch.float32)


# ---------------------------------------------------------------------------------------------------
# 2. attention seq2seq translate_sentence (bentrevett/pytorch-seq2seq notebook 3)
# ---------------------------------------------------------------------------------------------------


class Seq2SeqEncoder(nn.Module):
    def __init__(self, input_dim, embedding_dim, encoder_hidden_dim, decoder_hidden_dim, dropout):
        super().__init__()
        self.embedding = nn.Embedding(input_dim, embedding_dim)
        self.rnn = nn.GRU(embedding_dim, encoder_hidden_dim, bidirectional=True)
        self.fc = nn.Linear(encoder_hidden_dim * 2, decoder_hidden_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, src):
        embedded = self.dropout(self.embedding(src))
        outputs, hidden = self.rnn(embedded)
        hidden = torch.tanh(
            self.fc(torch.cat((hidden[-2, :, :], hidden[-1, :, :]), dim=1))
        )
        return outputs, hidden


class Seq2SeqAttention(nn.Module):
    def __init__(self, encoder_hidden_dim, decoder_hidden_dim):
        super().__init__()
        self.attn_fc = nn.Linear(
            (encoder_hidden_dim * 2) + decoder_hidden_dim, decoder_hidden_dim
        )
        self.v_fc = nn.Linear(decoder_hidden_dim, 1, bias=False)

    def forward(self, hidden, encoder_outputs):
        batch_size = encoder_outputs.shape[1]
        src_length = encoder_outputs.shape[0]
        hidden = hidden.unsqueeze(1).repeat(1, src_length, 1)
        encoder_outputs = encoder_outputs.permute(1, 0, 2)
        energy = torch.tanh(self.attn_fc(torch.cat((hidden, encoder_outputs), dim=2)))
        attention = self.v_fc(energy).squeeze(2)
        return torch.softmax(attention, dim=1)


class Seq2SeqDecoder(nn.Module):
    def __init__(self, output_dim, embedding_dim, encoder_hidden_dim, decoder_hidden_dim, dropout, attention):
        super().__init__()
        self.output_dim = output_dim
        self.attention = attention
        self.embedding = nn.Embedding(output_dim, embedding_dim)
        self.rnn = nn.GRU((encoder_hidden_dim * 2) + embedding_dim, decoder_hidden_dim)
        self.fc_out = nn.Linear(
            (encoder_hidden_dim * 2) + decoder_hidden_dim + embedding_dim, output_dim
        )
        self.dropout = nn.Dropout(dropout)

    def forward(self, input, hidden, encoder_outputs):
        input = input.unsqueeze(0)
        embedded = self.dropout(self.embedding(input))
        a = self.attention(hidden, encoder_outputs)
        a = a.unsqueeze(1)
        encoder_outputs = encoder_outputs.permute(1, 0, 2)
        weighted = torch.bmm(a, encoder_outputs)
        weighted = weighted.permute(1, 0, 2)
        rnn_input = torch.cat((embedded, weighted), dim=2)
        output, hidden = self.rnn(rnn_input, hidden.unsqueeze(0))
        assert (output == hidden).all()
        embedded = embedded.squeeze(0)
        output = output.squeeze(0)
        weighted = weighted.squeeze(0)
        prediction = self.fc_out(torch.cat((output, weighted, embedded), dim=1))
        return prediction, hidden.squeeze(0), a.squeeze(1)


class Seq2Seq(nn.Module):
    def __init__(self, encoder, decoder, device):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder
        self.device = device


def translate_sentence(ids, model, sos_id, eos_id, device, max_output_length=25):
    # origin: (sentence, model, en_nlp, de_nlp, en_vocab, de_vocab, lower, sos_token, eos_token, device,
    # max_output_length); the spaCy tokenization and vocabulary lookups give `ids`, `sos_id`, `eos_id`
    model.eval()
    with torch.no_grad():
        tensor = ids.unsqueeze(-1).to(device)  # origin: torch.LongTensor(ids).unsqueeze(-1).to(device)
        encoder_outputs, hidden = model.encoder(tensor)
        inputs = [sos_id]  # origin: en_vocab.lookup_indices([sos_token])
        attentions = torch.zeros(max_output_length, 1, len(ids))
        for i in range(max_output_length):
            inputs_tensor = torch.LongTensor([inputs[-1]]).to(device)
            output, hidden, attention = model.decoder(
                inputs_tensor, hidden, encoder_outputs
            )
            attentions[i] = attention
            predicted_token = output.argmax(-1).item()
            inputs.append(predicted_token)
            if predicted_token == eos_id:  # origin: en_vocab[eos_token]
                break
        en_tokens = inputs  # origin: en_vocab.lookup_tokens(inputs)
    return en_tokens, ids, attentions[: len(en_tokens) - 1]


class BentrevettAttentionTranslate(nn.Module):
    """bentrevett/pytorch-seq2seq ``3 - Neural Machine Translation by Jointly Learning to Align and
    Translate.ipynb``, ``translate_sentence`` with the notebook's ``Encoder`` (bidirectional GRU),
    ``Attention`` and ``Decoder`` (its ``assert (output == hidden).all()`` kept): ``for i in
    range(max_output_length)`` with ``inputs_tensor = torch.LongTensor([inputs[-1]])``, ``attentions[i] =
    attention`` (an in-place row write), ``predicted_token = output.argmax(-1).item()``,
    ``inputs.append(predicted_token)``, ``if predicted_token == en_vocab[eos_token]: break``, then
    ``attentions[: len(en_tokens) - 1]``. Adapted: tiny random sizes (vocabularies 10 and 8, dropout 0.5 ->
    0, eval anyway), weights drawn N(0, 1) for a trained model's (``init_weights`` draws N(0, 0.01)
    before training); the sentence is given as the id tensor ``lookup_indices`` makes (``<sos>`` ... ``<eos>``
    included), ``<sos>`` = 2 and ``<eos>`` = 3 of the target vocabulary; ``max_output_length`` 25 -> 6;
    the target ids are returned as ``torch.tensor(inputs)`` instead of ``lookup_tokens`` strings."""

    sos_id, eos_id, max_output_length = 2, 3, 6

    def __init__(self):
        super().__init__()
        attention = Seq2SeqAttention(5, 6)
        self.model = Seq2Seq(Seq2SeqEncoder(10, 4, 5, 6, 0.0), Seq2SeqDecoder(8, 4, 5, 6, 0.0, attention), "cpu")
        for param in self.model.parameters():  # a trained model's stand-in (init_weights: N(0, 0.01))
            nn.init.normal_(param.data, mean=0, std=1)

    def forward(self, ids: Tensor):
        en_tokens, de_tokens, attentions = translate_sentence(ids, self.model, self.sos_id, self.eos_id, "cpu",
                                                              max_output_length=self.max_output_length)
        return torch.tensor(en_tokens), attentions


# ---------------------------------------------------------------------------------------------------
# 3. Tacotron generate (CorentinJ/Real-Time-Voice-Cloning synthesizer/models/tacotron.py)
# ---------------------------------------------------------------------------------------------------


class HighwayNetwork(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.W1 = nn.Linear(size, size)
        self.W2 = nn.Linear(size, size)
        self.W1.bias.data.fill_(0.)

    def forward(self, x):
        x1 = self.W1(x)
        x2 = self.W2(x)
        g = torch.sigmoid(x2)
        y = g * F.relu(x1) + (1. - g) * x
        return y


class RtvcEncoder(nn.Module):
    def __init__(self, embed_dims, num_chars, encoder_dims, K, num_highways, dropout):
        super().__init__()
        prenet_dims = (encoder_dims * 2, encoder_dims)
        cbhg_channels = encoder_dims
        self.embedding = nn.Embedding(num_chars, embed_dims)
        self.pre_net = PreNet(embed_dims, fc1_dims=prenet_dims[0], fc2_dims=prenet_dims[1],
                              dropout=dropout)
        self.cbhg = CBHG(K=K, in_channels=cbhg_channels, channels=cbhg_channels,
                         proj_channels=[cbhg_channels, cbhg_channels],
                         num_highways=num_highways)

    def forward(self, x, speaker_embedding=None):
        x = self.embedding(x)
        x = self.pre_net(x)
        x.transpose_(1, 2)
        x = self.cbhg(x)
        if speaker_embedding is not None:
            x = self.add_speaker_embedding(x, speaker_embedding)
        return x

    def add_speaker_embedding(self, x, speaker_embedding):
        batch_size = x.size()[0]
        num_chars = x.size()[1]

        if speaker_embedding.dim() == 1:
            idx = 0
        else:
            idx = 1

        speaker_embedding_size = speaker_embedding.size()[idx]
        e = speaker_embedding.repeat_interleave(num_chars, dim=idx)

        e = e.reshape(batch_size, speaker_embedding_size, num_chars)
        e = e.transpose(1, 2)

        x = torch.cat((x, e), 2)
        return x


class BatchNormConv(nn.Module):
    def __init__(self, in_channels, out_channels, kernel, relu=True):
        super().__init__()
        self.conv = nn.Conv1d(in_channels, out_channels, kernel, stride=1, padding=kernel // 2, bias=False)
        self.bnorm = nn.BatchNorm1d(out_channels)
        self.relu = relu

    def forward(self, x):
        x = self.conv(x)
        x = F.relu(x) if self.relu is True else x
        return self.bnorm(x)


class CBHG(nn.Module):
    def __init__(self, K, in_channels, channels, proj_channels, num_highways):
        super().__init__()

        self._to_flatten = []

        self.bank_kernels = [i for i in range(1, K + 1)]
        self.conv1d_bank = nn.ModuleList()
        for k in self.bank_kernels:
            conv = BatchNormConv(in_channels, channels, k)
            self.conv1d_bank.append(conv)

        self.maxpool = nn.MaxPool1d(kernel_size=2, stride=1, padding=1)

        self.conv_project1 = BatchNormConv(len(self.bank_kernels) * channels, proj_channels[0], 3)
        self.conv_project2 = BatchNormConv(proj_channels[0], proj_channels[1], 3, relu=False)

        if proj_channels[-1] != channels:
            self.highway_mismatch = True
            self.pre_highway = nn.Linear(proj_channels[-1], channels, bias=False)
        else:
            self.highway_mismatch = False

        self.highways = nn.ModuleList()
        for i in range(num_highways):
            hn = HighwayNetwork(channels)
            self.highways.append(hn)

        self.rnn = nn.GRU(channels, channels, batch_first=True, bidirectional=True)
        self._to_flatten.append(self.rnn)

        self._flatten_parameters()

    def forward(self, x):
        self._flatten_parameters()

        residual = x
        seq_len = x.size(-1)
        conv_bank = []

        for conv in self.conv1d_bank:
            c = conv(x) # Convolution
            conv_bank.append(c[:, :, :seq_len])

        conv_bank = torch.cat(conv_bank, dim=1)

        x = self.maxpool(conv_bank)[:, :, :seq_len]

        x = self.conv_project1(x)
        x = self.conv_project2(x)

        x = x + residual

        x = x.transpose(1, 2)
        if self.highway_mismatch is True:
            x = self.pre_highway(x)
        for h in self.highways: x = h(x)

        x, _ = self.rnn(x)
        return x

    def _flatten_parameters(self):
        [m.flatten_parameters() for m in self._to_flatten]


class PreNet(nn.Module):
    def __init__(self, in_dims, fc1_dims=256, fc2_dims=128, dropout=0.5):
        super().__init__()
        self.fc1 = nn.Linear(in_dims, fc1_dims)
        self.fc2 = nn.Linear(fc1_dims, fc2_dims)
        self.p = dropout

    def forward(self, x):
        x = self.fc1(x)
        x = F.relu(x)
        x = F.dropout(x, self.p, training=True)
        x = self.fc2(x)
        x = F.relu(x)
        x = F.dropout(x, self.p, training=True)
        return x


class LSA(nn.Module):
    def __init__(self, attn_dim, kernel_size=31, filters=32):
        super().__init__()
        self.conv = nn.Conv1d(2, filters, padding=(kernel_size - 1) // 2, kernel_size=kernel_size, bias=False)
        self.L = nn.Linear(filters, attn_dim, bias=True)
        self.W = nn.Linear(attn_dim, attn_dim, bias=True)
        self.v = nn.Linear(attn_dim, 1, bias=False)
        self.cumulative = None
        self.attention = None

    def init_attention(self, encoder_seq_proj):
        device = next(self.parameters()).device  # use same device as parameters
        b, t, c = encoder_seq_proj.size()
        self.cumulative = torch.zeros(b, t, device=device)
        self.attention = torch.zeros(b, t, device=device)

    def forward(self, encoder_seq_proj, query, t):

        if t == 0: self.init_attention(encoder_seq_proj)

        processed_query = self.W(query).unsqueeze(1)

        location = torch.cat([self.cumulative.unsqueeze(1), self.attention.unsqueeze(1)], dim=1)
        processed_loc = self.L(self.conv(location).transpose(1, 2))

        u = self.v(torch.tanh(processed_query + encoder_seq_proj + processed_loc))
        u = u.squeeze(-1)

        scores = torch.sigmoid(u) / torch.sigmoid(u).sum(dim=1, keepdim=True)
        self.attention = scores
        self.cumulative += self.attention

        return scores.unsqueeze(-1).transpose(1, 2)


class RtvcDecoder(nn.Module):
    max_r = 20
    def __init__(self, n_mels, decoder_dims, lstm_dims, dropout, speaker_embedding_size):
        super().__init__()
        self.register_buffer("r", torch.tensor(1, dtype=torch.int))
        self.n_mels = n_mels
        prenet_dims = (decoder_dims, decoder_dims // 2)
        self.prenet = PreNet(n_mels, fc1_dims=prenet_dims[0], fc2_dims=prenet_dims[1],
                             dropout=dropout)
        self.attn_net = LSA(decoder_dims)
        self.attn_rnn = nn.GRUCell(decoder_dims + prenet_dims[1] + speaker_embedding_size, decoder_dims)
        self.rnn_input = nn.Linear(2 * decoder_dims + speaker_embedding_size, lstm_dims)
        self.res_rnn1 = nn.LSTMCell(lstm_dims, lstm_dims)
        self.res_rnn2 = nn.LSTMCell(lstm_dims, lstm_dims)
        self.mel_proj = nn.Linear(lstm_dims, n_mels * self.max_r, bias=False)

    def zoneout(self, prev, current, p=0.1):
        device = next(self.parameters()).device  # Use same device as parameters
        mask = torch.zeros(prev.size(), device=device).bernoulli_(p)
        return prev * mask + current * (1 - mask)

    def forward(self, encoder_seq, encoder_seq_proj, prenet_in,
                hidden_states, cell_states, context_vec, t):

        batch_size = encoder_seq.size(0)

        attn_hidden, rnn1_hidden, rnn2_hidden = hidden_states
        rnn1_cell, rnn2_cell = cell_states

        prenet_out = self.prenet(prenet_in)

        attn_rnn_in = torch.cat([context_vec, prenet_out], dim=-1)
        attn_hidden = self.attn_rnn(attn_rnn_in.squeeze(1), attn_hidden)

        scores = self.attn_net(encoder_seq_proj, attn_hidden, t)

        context_vec = scores @ encoder_seq
        context_vec = context_vec.squeeze(1)

        x = torch.cat([context_vec, attn_hidden], dim=1)
        x = self.rnn_input(x)

        rnn1_hidden_next, rnn1_cell = self.res_rnn1(x, (rnn1_hidden, rnn1_cell))
        if self.training:
            rnn1_hidden = self.zoneout(rnn1_hidden, rnn1_hidden_next)
        else:
            rnn1_hidden = rnn1_hidden_next
        x = x + rnn1_hidden

        rnn2_hidden_next, rnn2_cell = self.res_rnn2(x, (rnn2_hidden, rnn2_cell))
        if self.training:
            rnn2_hidden = self.zoneout(rnn2_hidden, rnn2_hidden_next)
        else:
            rnn2_hidden = rnn2_hidden_next
        x = x + rnn2_hidden

        mels = self.mel_proj(x)
        mels = mels.view(batch_size, self.n_mels, self.max_r)[:, :, :self.r]
        hidden_states = (attn_hidden, rnn1_hidden, rnn2_hidden)
        cell_states = (rnn1_cell, rnn2_cell)

        return mels, scores, hidden_states, cell_states, context_vec


class Tacotron(nn.Module):
    def __init__(self, embed_dims, num_chars, encoder_dims, decoder_dims, n_mels,
                 fft_bins, postnet_dims, encoder_K, lstm_dims, postnet_K, num_highways,
                 dropout, stop_threshold, speaker_embedding_size):
        super().__init__()
        self.n_mels = n_mels
        self.lstm_dims = lstm_dims
        self.decoder_dims = decoder_dims
        self.speaker_embedding_size = speaker_embedding_size
        self.encoder = RtvcEncoder(embed_dims, num_chars, encoder_dims,
                                   encoder_K, num_highways, dropout)
        self.encoder_proj = nn.Linear(decoder_dims + speaker_embedding_size, decoder_dims, bias=False)
        self.decoder = RtvcDecoder(n_mels, decoder_dims, lstm_dims, dropout, speaker_embedding_size)
        self.postnet = CBHG(postnet_K, n_mels, postnet_dims,
                            [postnet_dims * 2, fft_bins], num_highways)
        self.post_proj = nn.Linear(postnet_dims * 2, fft_bins, bias=False)

        self.init_model()

        self.register_buffer("step", torch.zeros(1, dtype=torch.long))
        self.register_buffer("stop_threshold", torch.tensor(stop_threshold, dtype=torch.float32))

    @property
    def r(self):
        return self.decoder.r.item()

    @r.setter
    def r(self, value):
        self.decoder.r = self.decoder.r.new_tensor(value, requires_grad=False)

    def generate(self, x, speaker_embedding=None, steps=2000):
        self.eval()
        device = next(self.parameters()).device  # use same device as parameters

        batch_size, _  = x.size()

        attn_hidden = torch.zeros(batch_size, self.decoder_dims, device=device)
        rnn1_hidden = torch.zeros(batch_size, self.lstm_dims, device=device)
        rnn2_hidden = torch.zeros(batch_size, self.lstm_dims, device=device)
        hidden_states = (attn_hidden, rnn1_hidden, rnn2_hidden)

        rnn1_cell = torch.zeros(batch_size, self.lstm_dims, device=device)
        rnn2_cell = torch.zeros(batch_size, self.lstm_dims, device=device)
        cell_states = (rnn1_cell, rnn2_cell)

        go_frame = torch.zeros(batch_size, self.n_mels, device=device)

        context_vec = torch.zeros(batch_size, self.decoder_dims + self.speaker_embedding_size, device=device)

        encoder_seq = self.encoder(x, speaker_embedding)
        encoder_seq_proj = self.encoder_proj(encoder_seq)

        mel_outputs, attn_scores = [], []

        for t in range(0, steps, self.r):
            prenet_in = mel_outputs[-1][:, :, -1] if t > 0 else go_frame
            mel_frames, scores, hidden_states, cell_states, context_vec = \
            self.decoder(encoder_seq, encoder_seq_proj, prenet_in,
                         hidden_states, cell_states, context_vec, t)
            mel_outputs.append(mel_frames)
            attn_scores.append(scores)
            # Stop the loop if silent frames present
            if (mel_frames < self.stop_threshold).all() and t > 10: break

        mel_outputs = torch.cat(mel_outputs, dim=2)

        postnet_out = self.postnet(mel_outputs)
        linear = self.post_proj(postnet_out)


        linear = linear.transpose(1, 2)

        attn_scores = torch.cat(attn_scores, 1)

        self.train()

        return mel_outputs, linear, attn_scores

    def init_model(self):
        for p in self.parameters():
            if p.dim() > 1: nn.init.xavier_uniform_(p)


class RtvcTacotronGenerate(nn.Module):
    """CorentinJ/Real-Time-Voice-Cloning ``synthesizer/models/tacotron.py``, ``Tacotron.generate(x,
    speaker_embedding, steps)`` (called by ``Synthesizer.synthesize_spectrograms``): ``self.eval()`` on
    entry and ``self.train()`` on exit, ``for t in range(0, steps, self.r)`` whose step is the property
    ``self.decoder.r.item()``, ``prenet_in = mel_outputs[-1][:, :, -1] if t > 0 else go_frame``, the
    location-sensitive attention's ``if t == 0: self.init_attention(...)`` and ``self.cumulative +=
    self.attention`` (attribute writes on the module), the decoder's ``[:, :, :self.r]`` slice by a
    buffer, ``mel_outputs.append(...)``, ``if (mel_frames < self.stop_threshold).all() and t > 10:
    break``. Adapted: tiny random sizes (embed 8, encoder 4, decoder 8, lstm 8, 4 mels, K 2, one
    highway, speaker embedding 4); hparams' dropout 0.5 -> 0 (``PreNet`` calls ``F.dropout(...,
    training=True)`` even at inference, a random draw); ``r`` 2 (set through the origin's setter, as
    the training schedule leaves it); ``steps`` 2000 -> 20 (10 trips) and ``stop_threshold`` -3.4 (on
    normalised mels) -> 0.335 so that the stop test fires at different trips for different texts (t > 10: trip 7 at the
    earliest); ``num_params()``'s print dropped from ``__init__``."""

    steps = 20

    def __init__(self):
        super().__init__()
        self.tacotron = Tacotron(embed_dims=8, num_chars=12, encoder_dims=4, decoder_dims=8, n_mels=4,
                                 fft_bins=4, postnet_dims=6, encoder_K=2, lstm_dims=8, postnet_K=2,
                                 num_highways=1, dropout=0.0, stop_threshold=0.335, speaker_embedding_size=4)
        self.tacotron.r = 2

    def forward(self, x: Tensor, speaker_embedding: Tensor):
        return self.tacotron.generate(x, speaker_embedding, steps=self.steps)


# ---------------------------------------------------------------------------------------------------
# 4. NCRF++ CRF._viterbi_decode (jiesutd/NCRFpp model/crf.py)
# ---------------------------------------------------------------------------------------------------

START_TAG = -2
STOP_TAG = -1


class NcrfCRF(nn.Module):

    def __init__(self, tagset_size, gpu):
        super(NcrfCRF, self).__init__()
        self.gpu = gpu
        self.tagset_size = tagset_size
        init_transitions = torch.zeros(self.tagset_size+2, self.tagset_size+2)
        init_transitions[:,START_TAG] = -10000.0
        init_transitions[STOP_TAG,:] = -10000.0
        init_transitions[:,0] = -10000.0
        init_transitions[0,:] = -10000.0
        if self.gpu:
            init_transitions = init_transitions.cuda()
        self.transitions = nn.Parameter(init_transitions)

    def _viterbi_decode(self, feats, mask):
        batch_size = feats.size(0)
        seq_len = feats.size(1)
        tag_size = feats.size(2)
        assert(tag_size == self.tagset_size+2)
        length_mask = torch.sum(mask.long(), dim = 1).view(batch_size,1).long()
        mask = mask.transpose(1,0).contiguous()
        ins_num = seq_len * batch_size
        feats = feats.transpose(1,0).contiguous().view(ins_num, 1, tag_size).expand(ins_num, tag_size, tag_size)
        scores = feats + self.transitions.view(1,tag_size,tag_size).expand(ins_num, tag_size, tag_size)
        scores = scores.view(seq_len, batch_size, tag_size, tag_size)

        seq_iter = enumerate(scores)
        back_points = list()
        partition_history = list()
        mask =  (1 - mask.long()).bool()  # origin: .byte() (masked_fill_ takes bool masks today)
        _, inivalues = next(seq_iter)  # bat_size * from_target_size * to_target_size
        partition = inivalues[:, START_TAG, :].clone().view(batch_size, tag_size)  # bat_size * to_target_size
        partition_history.append(partition)
        for idx, cur_values in seq_iter:
            cur_values = cur_values + partition.contiguous().view(batch_size, tag_size, 1).expand(batch_size, tag_size, tag_size)
            partition, cur_bp = torch.max(cur_values, 1)
            partition_history.append(partition)
            cur_bp.masked_fill_(mask[idx].view(batch_size, 1).expand(batch_size, tag_size), 0)
            back_points.append(cur_bp)
        partition_history = torch.cat(partition_history, 0).view(seq_len, batch_size, -1).transpose(1,0).contiguous() ## (batch_size, seq_len. tag_size)
        last_position = length_mask.view(batch_size,1,1).expand(batch_size, 1, tag_size) -1
        last_partition = torch.gather(partition_history, 1, last_position).view(batch_size,tag_size,1)
        last_values = last_partition.expand(batch_size, tag_size, tag_size) + self.transitions.view(1,tag_size, tag_size).expand(batch_size, tag_size, tag_size)
        _, last_bp = torch.max(last_values, 1)
        pad_zero = autograd.Variable(torch.zeros(batch_size, tag_size)).long()
        if self.gpu:
            pad_zero = pad_zero.cuda()
        back_points.append(pad_zero)
        back_points  =  torch.cat(back_points).view(seq_len, batch_size, tag_size)

        pointer = last_bp[:, STOP_TAG]
        insert_last = pointer.contiguous().view(batch_size,1,1).expand(batch_size,1, tag_size)
        back_points = back_points.transpose(1,0).contiguous()
        back_points.scatter_(1, last_position, insert_last)
        back_points = back_points.transpose(1,0).contiguous()
        decode_idx = autograd.Variable(torch.LongTensor(seq_len, batch_size))
        if self.gpu:
            decode_idx = decode_idx.cuda()
        decode_idx[-1] = pointer.detach()
        for idx in range(len(back_points)-2, -1, -1):
            pointer = torch.gather(back_points[idx], 1, pointer.contiguous().view(batch_size, 1))
            decode_idx[idx] = pointer.detach().view(batch_size)
        path_score = None
        decode_idx = decode_idx.transpose(1,0)
        return path_score, decode_idx



class NcrfppCrfViterbi(nn.Module):
    """jiesutd/NCRFpp ``model/crf.py``, ``CRF._viterbi_decode(feats, mask)`` as ``SeqLabel.forward``
    calls it on the word sequence's tag scores: ``seq_iter = enumerate(scores)``, the first step taken
    with ``next``, then ``for idx, cur_values in seq_iter:`` (``seq_len - 1`` trips) with
    ``partition_history.append``/``back_points.append``, ``cur_bp.masked_fill_(mask[idx]...)`` (padded
    words), ``torch.gather`` of each sentence's last position, ``back_points.scatter_(...)``, and the
    backtrack ``for idx in range(len(back_points)-2, -1, -1):`` writing ``decode_idx[idx] =
    pointer.detach().view(batch_size)`` into ``torch.LongTensor(seq_len, batch_size)`` (the repository's
    Python 3 / PyTorch 1.x version of the file). Adapted: the ``print`` in ``__init__`` dropped; the reversed
    mask ``.byte()`` -> ``.bool()`` (``masked_fill_`` refuses uint8 masks today); the word
    representation is a random (batch, seq_len, 6) tensor through ``hidden2tag`` (``nn.Linear`` to 4
    labels + START/STOP), the transitions among the real labels drawn at random in ``make()`` (a trained
    CRF's stand-in); the mask is a uint8 (batch, seq_len) tensor as NCRF++ builds it."""

    def __init__(self):
        super().__init__()
        self.hidden2tag = nn.Linear(6, 4 + 2)
        self.crf = NcrfCRF(4, False)
        with torch.no_grad():
            self.crf.transitions[1:-2, 1:-2] = torch.randn(3, 3)

    def forward(self, word_represent: Tensor, mask: Tensor):
        outs = self.hidden2tag(word_represent)
        scores, tag_seq = self.crf._viterbi_decode(outs, mask)
        return tag_seq


# ---------------------------------------------------------------------------------------------------
# 5. YOLOX SimOTA dynamic_k_matching (Megvii-BaseDetection/YOLOX yolox/models/yolo_head.py)
# ---------------------------------------------------------------------------------------------------


def bboxes_iou(bboxes_a, bboxes_b, xyxy=True):
    # yolox/utils/boxes.py bboxes_iou
    if bboxes_a.shape[1] != 4 or bboxes_b.shape[1] != 4:
        raise IndexError

    if xyxy:
        tl = torch.max(bboxes_a[:, None, :2], bboxes_b[:, :2])
        br = torch.min(bboxes_a[:, None, 2:], bboxes_b[:, 2:])
        area_a = torch.prod(bboxes_a[:, 2:] - bboxes_a[:, :2], 1)
        area_b = torch.prod(bboxes_b[:, 2:] - bboxes_b[:, :2], 1)
    else:
        tl = torch.max(
            (bboxes_a[:, None, :2] - bboxes_a[:, None, 2:] / 2),
            (bboxes_b[:, :2] - bboxes_b[:, 2:] / 2),
        )
        br = torch.min(
            (bboxes_a[:, None, :2] + bboxes_a[:, None, 2:] / 2),
            (bboxes_b[:, :2] + bboxes_b[:, 2:] / 2),
        )

        area_a = torch.prod(bboxes_a[:, 2:], 1)
        area_b = torch.prod(bboxes_b[:, 2:], 1)
    en = (tl < br).type(tl.type()).prod(dim=2)
    area_i = torch.prod(br - tl, 2) * en  # * ((tl < br).all())
    return area_i / (area_a[:, None] + area_b - area_i)


class YoloxAssigner(object):
    # YOLOXHead.get_assignments / get_in_boxes_info / dynamic_k_matching, the "gpu" mode path
    def __init__(self, num_classes):
        self.num_classes = num_classes

    @torch.no_grad()
    def get_assignments(self, batch_idx, num_gt, total_num_anchors, gt_bboxes_per_image, gt_classes,
                        bboxes_preds_per_image, expanded_strides, x_shifts, y_shifts, cls_preds,
                        bbox_preds, obj_preds, labels, imgs, mode="gpu"):

        fg_mask, is_in_boxes_and_center = self.get_in_boxes_info(
            gt_bboxes_per_image,
            expanded_strides,
            x_shifts,
            y_shifts,
            total_num_anchors,
            num_gt,
        )

        bboxes_preds_per_image = bboxes_preds_per_image[fg_mask]
        cls_preds_ = cls_preds[batch_idx][fg_mask]
        obj_preds_ = obj_preds[batch_idx][fg_mask]
        num_in_boxes_anchor = bboxes_preds_per_image.shape[0]

        pair_wise_ious = bboxes_iou(gt_bboxes_per_image, bboxes_preds_per_image, False)

        gt_cls_per_image = (
            F.one_hot(gt_classes.to(torch.int64), self.num_classes)
            .float()
            .unsqueeze(1)
            .repeat(1, num_in_boxes_anchor, 1)
        )
        pair_wise_ious_loss = -torch.log(pair_wise_ious + 1e-8)

        with torch.cuda.amp.autocast(enabled=False):
            cls_preds_ = (
                cls_preds_.float().unsqueeze(0).repeat(num_gt, 1, 1).sigmoid_()
                * obj_preds_.float().unsqueeze(0).repeat(num_gt, 1, 1).sigmoid_()
            )
            pair_wise_cls_loss = F.binary_cross_entropy(
                cls_preds_.sqrt_(), gt_cls_per_image, reduction="none"
            ).sum(-1)
        del cls_preds_

        cost = (
            pair_wise_cls_loss
            + 3.0 * pair_wise_ious_loss
            + 100000.0 * (~is_in_boxes_and_center)
        )

        (
            num_fg,
            gt_matched_classes,
            pred_ious_this_matching,
            matched_gt_inds,
        ) = self.dynamic_k_matching(cost, pair_wise_ious, gt_classes, num_gt, fg_mask)
        del pair_wise_cls_loss, cost, pair_wise_ious, pair_wise_ious_loss

        return (
            gt_matched_classes,
            fg_mask,
            pred_ious_this_matching,
            matched_gt_inds,
            num_fg,
        )

    def get_in_boxes_info(self, gt_bboxes_per_image, expanded_strides, x_shifts, y_shifts,
                          total_num_anchors, num_gt):
        expanded_strides_per_image = expanded_strides[0]
        x_shifts_per_image = x_shifts[0] * expanded_strides_per_image
        y_shifts_per_image = y_shifts[0] * expanded_strides_per_image
        x_centers_per_image = (
            (x_shifts_per_image + 0.5 * expanded_strides_per_image)
            .unsqueeze(0)
            .repeat(num_gt, 1)
        )  # [n_anchor] -> [n_gt, n_anchor]
        y_centers_per_image = (
            (y_shifts_per_image + 0.5 * expanded_strides_per_image)
            .unsqueeze(0)
            .repeat(num_gt, 1)
        )

        gt_bboxes_per_image_l = (
            (gt_bboxes_per_image[:, 0] - 0.5 * gt_bboxes_per_image[:, 2])
            .unsqueeze(1)
            .repeat(1, total_num_anchors)
        )
        gt_bboxes_per_image_r = (
            (gt_bboxes_per_image[:, 0] + 0.5 * gt_bboxes_per_image[:, 2])
            .unsqueeze(1)
            .repeat(1, total_num_anchors)
        )
        gt_bboxes_per_image_t = (
            (gt_bboxes_per_image[:, 1] - 0.5 * gt_bboxes_per_image[:, 3])
            .unsqueeze(1)
            .repeat(1, total_num_anchors)
        )
        gt_bboxes_per_image_b = (
            (gt_bboxes_per_image[:, 1] + 0.5 * gt_bboxes_per_image[:, 3])
            .unsqueeze(1)
            .repeat(1, total_num_anchors)
        )

        b_l = x_centers_per_image - gt_bboxes_per_image_l
        b_r = gt_bboxes_per_image_r - x_centers_per_image
        b_t = y_centers_per_image - gt_bboxes_per_image_t
        b_b = gt_bboxes_per_image_b - y_centers_per_image
        bbox_deltas = torch.stack([b_l, b_t, b_r, b_b], 2)

        is_in_boxes = bbox_deltas.min(dim=-1).values > 0.0
        is_in_boxes_all = is_in_boxes.sum(dim=0) > 0

        center_radius = 2.5

        gt_bboxes_per_image_l = (gt_bboxes_per_image[:, 0]).unsqueeze(1).repeat(
            1, total_num_anchors
        ) - center_radius * expanded_strides_per_image.unsqueeze(0)
        gt_bboxes_per_image_r = (gt_bboxes_per_image[:, 0]).unsqueeze(1).repeat(
            1, total_num_anchors
        ) + center_radius * expanded_strides_per_image.unsqueeze(0)
        gt_bboxes_per_image_t = (gt_bboxes_per_image[:, 1]).unsqueeze(1).repeat(
            1, total_num_anchors
        ) - center_radius * expanded_strides_per_image.unsqueeze(0)
        gt_bboxes_per_image_b = (gt_bboxes_per_image[:, 1]).unsqueeze(1).repeat(
            1, total_num_anchors
        ) + center_radius * expanded_strides_per_image.unsqueeze(0)

        c_l = x_centers_per_image - gt_bboxes_per_image_l
        c_r = gt_bboxes_per_image_r - x_centers_per_image
        c_t = y_centers_per_image - gt_bboxes_per_image_t
        c_b = gt_bboxes_per_image_b - y_centers_per_image
        center_deltas = torch.stack([c_l, c_t, c_r, c_b], 2)
        is_in_centers = center_deltas.min(dim=-1).values > 0.0
        is_in_centers_all = is_in_centers.sum(dim=0) > 0

        is_in_boxes_anchor = is_in_boxes_all | is_in_centers_all

        is_in_boxes_and_center = (
            is_in_boxes[:, is_in_boxes_anchor] & is_in_centers[:, is_in_boxes_anchor]
        )
        return is_in_boxes_anchor, is_in_boxes_and_center

    def dynamic_k_matching(self, cost, pair_wise_ious, gt_classes, num_gt, fg_mask):
        matching_matrix = torch.zeros_like(cost, dtype=torch.uint8)

        ious_in_boxes_matrix = pair_wise_ious
        n_candidate_k = min(10, ious_in_boxes_matrix.size(1))
        topk_ious, _ = torch.topk(ious_in_boxes_matrix, n_candidate_k, dim=1)
        dynamic_ks = torch.clamp(topk_ious.sum(1).int(), min=1)
        dynamic_ks = dynamic_ks.tolist()
        for gt_idx in range(num_gt):
            _, pos_idx = torch.topk(
                cost[gt_idx], k=dynamic_ks[gt_idx], largest=False
            )
            matching_matrix[gt_idx][pos_idx] = 1

        del topk_ious, dynamic_ks, pos_idx

        anchor_matching_gt = matching_matrix.sum(0)
        if anchor_matching_gt.max() > 1:
            _, cost_argmin = torch.min(cost[:, anchor_matching_gt > 1], dim=0)
            matching_matrix[:, anchor_matching_gt > 1] *= 0
            matching_matrix[cost_argmin, anchor_matching_gt > 1] = 1
        fg_mask_inboxes = matching_matrix.sum(0) > 0
        num_fg = fg_mask_inboxes.sum().item()

        fg_mask[fg_mask.clone()] = fg_mask_inboxes

        matched_gt_inds = matching_matrix[:, fg_mask_inboxes].argmax(0)
        gt_matched_classes = gt_classes[matched_gt_inds]

        pred_ious_this_matching = (matching_matrix * pair_wise_ious).sum(0)[
            fg_mask_inboxes
        ]
        return num_fg, gt_matched_classes, pred_ious_this_matching, matched_gt_inds


def _yolox_grids(hw_strides):
    # YOLOXHead.get_output_and_grid: grid = stack((xv, yv), 2) per level, expanded_strides = stride
    xs, ys, strides = [], [], []
    for (hsize, wsize), stride in hw_strides:
        yv, xv = torch.meshgrid([torch.arange(hsize), torch.arange(wsize)], indexing="ij")
        xs.append(xv.reshape(1, -1).float())
        ys.append(yv.reshape(1, -1).float())
        strides.append(torch.full((1, hsize * wsize), float(stride)))
    return torch.cat(xs, 1), torch.cat(ys, 1), torch.cat(strides, 1)


class YoloxSimOtaAssign(nn.Module):
    """Megvii-BaseDetection/YOLOX ``yolox/models/yolo_head.py``, ``YOLOXHead.get_assignments`` ->
    ``get_in_boxes_info`` and ``dynamic_k_matching`` (SimOTA) for one image as ``get_losses`` calls it:
    ``n_candidate_k = min(10, ious_in_boxes_matrix.size(1))``, ``dynamic_ks = torch.clamp(topk_ious.sum(
    1).int(), min=1).tolist()``, ``for gt_idx in range(num_gt):`` with ``torch.topk(cost[gt_idx],
    k=dynamic_ks[gt_idx], largest=False)`` (a k read from the data) and ``matching_matrix[gt_idx][pos_idx]
    = 1``, ``if anchor_matching_gt.max() > 1:`` (an anchor claimed by two gts), ``num_fg =
    fg_mask_inboxes.sum().item()``, ``fg_mask[fg_mask.clone()] = fg_mask_inboxes``. Adapted: the "gpu"
    mode path on CPU (the ``mode == "cpu"`` moves dropped); a 32x32 image with one level (4x4 at stride 8:
    16 anchors, so that the in-box anchors number below and above ``n_candidate_k``'s 10), its grid
    made as ``get_output_and_grid`` makes it; 3 classes; the head's decoded predictions for the image
    are the inputs (``bboxes_preds_per_image`` (16, 4) cxcywh, ``cls_preds`` (1, 16, 3), ``obj_preds``
    (1, 16, 1)) with the gt boxes (num_gt >= 1: ``get_losses``
    skips images without gts before calling it) and classes; returns the assignment and ``num_fg``."""

    def __init__(self):
        super().__init__()
        x_shifts, y_shifts, expanded_strides = _yolox_grids([((4, 4), 8)])
        self.register_buffer("x_shifts", x_shifts)
        self.register_buffer("y_shifts", y_shifts)
        self.register_buffer("expanded_strides", expanded_strides)
        self.assigner = YoloxAssigner(num_classes=3)

    def forward(self, gt_bboxes_per_image: Tensor, gt_classes: Tensor, bboxes_preds_per_image: Tensor,
                cls_preds: Tensor, obj_preds: Tensor):
        num_gt = gt_bboxes_per_image.shape[0]
        total_num_anchors = self.expanded_strides.shape[1]
        (gt_matched_classes, fg_mask, pred_ious_this_matching, matched_gt_inds, num_fg) = \
            self.assigner.get_assignments(0, num_gt, total_num_anchors, gt_bboxes_per_image, gt_classes,
                                          bboxes_preds_per_image, self.expanded_strides, self.x_shifts,
                                          self.y_shifts, cls_preds, None, obj_preds, None, None)
        return gt_matched_classes, fg_mask, pred_ious_this_matching, matched_gt_inds, torch.tensor(num_fg)


# ---------------------------------------------------------------------------------------------------
# 6. vector-quantize-pytorch kmeans (lucidrains/vector-quantize-pytorch)
# ---------------------------------------------------------------------------------------------------


def noop(*args, **kwargs):
    pass


def l2norm(t):
    return F.normalize(t, p = 2, dim = -1)


def cdist(x, y):
    x2 = (x ** 2).sum(-1)  # origin: reduce(x ** 2, 'b n d -> b n', 'sum')
    y2 = (y ** 2).sum(-1)  # origin: reduce(y ** 2, 'b n d -> b n', 'sum')
    xy = torch.einsum('b i d, b j d -> b i j', x, y) * -2
    return (x2.unsqueeze(-1) + y2.unsqueeze(-2) + xy).clamp(min = 0).sqrt()


def batched_bincount(x, *, minlength):
    batch, dtype, device = x.shape[0], x.dtype, x.device
    target = torch.zeros(batch, minlength, dtype = dtype, device = device)
    values = torch.ones_like(x)
    target.scatter_add_(-1, x, values)
    return target


def kmeans(
    samples,
    num_clusters,
    num_iters = 10,
    use_cosine_sim = False,
    sample_fn = None,
    all_reduce_fn = noop
):
    num_codebooks, dim, dtype, device = samples.shape[0], samples.shape[-1], samples.dtype, samples.device

    means = sample_fn(samples, num_clusters)

    for _ in range(num_iters):
        if use_cosine_sim:
            dists = samples @ means.transpose(1, 2)  # origin: rearrange(means, 'h n d -> h d n')
        else:
            dists = -cdist(samples, means)

        buckets = torch.argmax(dists, dim = -1)
        bins = batched_bincount(buckets, minlength = num_clusters)
        all_reduce_fn(bins)

        zero_mask = bins == 0
        bins_min_clamped = bins.masked_fill(zero_mask, 1)

        new_means = buckets.new_zeros(num_codebooks, num_clusters, dim, dtype = dtype)

        new_means.scatter_add_(1, buckets.unsqueeze(-1).expand(-1, -1, dim), samples)  # origin: repeat(buckets, 'h n -> h n d', d = dim)
        new_means = new_means / bins_min_clamped.unsqueeze(-1)  # origin: rearrange(bins_min_clamped, '... -> ... 1')
        all_reduce_fn(new_means)

        if use_cosine_sim:
            new_means = l2norm(new_means)

        means = torch.where(
            zero_mask.unsqueeze(-1),  # origin: rearrange(zero_mask, '... -> ... 1')
            means,
            new_means
        )

    return means, bins


class VectorQuantizeKmeans(nn.Module):
    """lucidrains/vector-quantize-pytorch ``vector_quantize_pytorch/vector_quantize_pytorch.py``,
    ``kmeans(samples, num_clusters, num_iters, use_cosine_sim, sample_fn, all_reduce_fn)`` as
    ``EuclideanCodebook.init_embed_`` calls it for ``kmeans_init=True`` (``kmeans_iters`` 10): ``for _ in
    range(num_iters):`` with ``torch.argmax`` buckets, ``batched_bincount`` (``scatter_add_`` into a
    zeros tensor), ``zero_mask = bins == 0`` (an empty cluster keeps its mean through ``torch.where``),
    ``new_means.scatter_add_(1, ...)``, ``all_reduce_fn`` (``noop`` off DDP). Adapted: einops (not
    installed here) written with torch (``rearrange``/``repeat``/``reduce`` -> ``transpose``/``unsqueeze``/
    ``expand``/``sum``, each marked); the initial means are an input through the origin's own
    ``sample_fn`` argument (``batched_sample_vectors`` draws them with ``torch.randperm``); one codebook
    of 3 codes over (1, n, 2) samples; returns means and bins."""

    num_clusters, num_iters = 3, 10

    def forward(self, samples: Tensor, initial_means: Tensor):
        means, bins = kmeans(samples, self.num_clusters, self.num_iters,
                             sample_fn=lambda samples, num: initial_means)
        return means, bins


# ---------------------------------------------------------------------------------------------------
# 7. TRPO backtracking line search (ikostrikov/pytorch-trpo trpo.py linesearch)
# ---------------------------------------------------------------------------------------------------


def normal_log_density(x, mean, log_std, std):
    var = std.pow(2)
    log_density = -(x - mean).pow(2) / (
        2 * var) - 0.5 * math.log(2 * math.pi) - log_std
    return log_density.sum(1)


def get_flat_params_from(model):
    params = []
    for param in model.parameters():
        params.append(param.data.view(-1))

    flat_params = torch.cat(params)
    return flat_params


def set_flat_params_to(model, flat_params):
    prev_ind = 0
    for param in model.parameters():
        flat_size = int(np.prod(list(param.size())))
        param.data.copy_(
            flat_params[prev_ind:prev_ind + flat_size].view(param.size()))
        prev_ind += flat_size


def linesearch(model,
               f,
               x,
               fullstep,
               expected_improve_rate,
               max_backtracks=10,
               accept_ratio=.1):
    fval = f(True).data
    for (_n_backtracks, stepfrac) in enumerate(.5**np.arange(max_backtracks)):
        xnew = x + stepfrac * fullstep
        set_flat_params_to(model, xnew)
        newfval = f(True).data
        actual_improve = fval - newfval
        expected_improve = expected_improve_rate * stepfrac
        ratio = actual_improve / expected_improve

        if ratio[0] > accept_ratio and actual_improve[0] > 0:
            return True, xnew
    return False, x


class TrpoPolicy(nn.Module):
    def __init__(self, num_inputs, num_outputs):
        super(TrpoPolicy, self).__init__()
        self.affine1 = nn.Linear(num_inputs, 64)
        self.affine2 = nn.Linear(64, 64)

        self.action_mean = nn.Linear(64, num_outputs)
        self.action_mean.weight.data.mul_(0.1)
        self.action_mean.bias.data.mul_(0.0)

        self.action_log_std = nn.Parameter(torch.zeros(1, num_outputs))

        self.saved_actions = []
        self.rewards = []
        self.final_value = 0

    def forward(self, x):
        x = torch.tanh(self.affine1(x))  # origin: F.tanh
        x = torch.tanh(self.affine2(x))

        action_mean = self.action_mean(x)
        action_log_std = self.action_log_std.expand_as(action_mean)
        action_std = torch.exp(action_log_std)

        return action_mean, action_log_std, action_std


class TrpoLinesearch(nn.Module):
    """ikostrikov/pytorch-trpo ``trpo.py``, ``linesearch(model, f, x, fullstep, expected_improve_rate,
    max_backtracks=10, accept_ratio=.1)`` as ``trpo_step`` calls it with ``main.py``'s ``get_loss``:
    ``for (_n_backtracks, stepfrac) in enumerate(.5**np.arange(max_backtracks)):`` with ``xnew = x +
    stepfrac * fullstep``, ``set_flat_params_to(model, xnew)`` (``param.data.copy_`` into the policy's
    parameters, then the loss re-evaluated through them), ``if ratio[0] > accept_ratio and
    actual_improve[0] > 0: return True, xnew`` and ``return False, x`` after the bound. Adapted: the
    ``print`` calls dropped; ``Variable(..., volatile=volatile)`` -> ``torch.no_grad()``; PyTorch 0.1's
    1-element loss kept (``action_loss.mean().view(1)``, so ``fval[0]``/``ratio[0]`` index as in the
    origin); the step direction ``fullstep`` and ``expected_improve_rate`` (what ``trpo_step`` computes
    with ``conjugate_gradients``, ported in search_models.py) are inputs with the batch (states,
    actions, advantages); the policy (3 inputs, 2 actions) starts each call from the parameters it was
    made with (``set_flat_params_to(model, prev_params)``), so that calls repeat."""

    def __init__(self):
        super().__init__()
        self.policy_net = TrpoPolicy(3, 2)
        self.register_buffer("prev_params", get_flat_params_from(self.policy_net).clone())

    def forward(self, states: Tensor, actions: Tensor, advantages: Tensor, fullstep: Tensor,
                expected_improve_rate: Tensor):
        policy_net = self.policy_net
        set_flat_params_to(policy_net, self.prev_params)
        with torch.no_grad():
            action_means, action_log_stds, action_stds = policy_net(Variable(states))
            fixed_log_prob = normal_log_density(Variable(actions), action_means, action_log_stds, action_stds).data

        def get_loss(volatile=False):
            with torch.no_grad():  # origin: policy_net(Variable(states, volatile=volatile))
                action_means, action_log_stds, action_stds = policy_net(Variable(states))
            log_prob = normal_log_density(Variable(actions), action_means, action_log_stds, action_stds)
            action_loss = -Variable(advantages) * torch.exp(log_prob - Variable(fixed_log_prob))
            return action_loss.mean().view(1)  # origin (PyTorch 0.1): a 1-element tensor

        prev_params = get_flat_params_from(policy_net)
        success, new_params = linesearch(policy_net, get_loss, prev_params, fullstep, expected_improve_rate)
        set_flat_params_to(policy_net, new_params)
        return torch.tensor(success), new_params.clone()


# ---------------------------------------------------------------------------------------------------
# 8. PageRank power iteration (tkngch/playground-pagerank-python pagerank/pagerank_with_torch.py)
# ---------------------------------------------------------------------------------------------------


class ConvergenceError(Exception):
    pass


class PageRankTorch:
    """PageRank algorithm with Torch."""

    def __init__(
        self,
        damping_parameter: float = 0.85,
        tolerance: float = 1e-4,
        max_iter: int = 1000,
        verbose: bool = True,
    ) -> None:
        self.damping_parameter = damping_parameter
        self.tolerance = tolerance
        self.max_iter = max_iter
        self.logger = logging.getLogger("PageRankTorch")  # origin: get_logger("PageRankTorch", ...)

    def score(self, adjacency_matrix: torch.Tensor) -> torch.Tensor:
        n_webpages = adjacency_matrix.size(0)
        ones = torch.ones((n_webpages, 1))

        outlinks = ones.T.mm(adjacency_matrix).view((n_webpages,))
        weights = torch.diag(1.0 / outlinks)

        transition_matrix = (
            (1 - self.damping_parameter) * ones.mm(ones.T) / n_webpages
        ) + (self.damping_parameter * adjacency_matrix.mm(weights))

        pagerank = torch.ones((n_webpages, 1))

        converged = False
        for i in range(self.max_iter):
            new_pagerank = transition_matrix.mm(pagerank)
            new_pagerank = n_webpages * new_pagerank / ones.T.mm(new_pagerank)

            max_update = max(abs(new_pagerank - pagerank))
            pagerank = new_pagerank

            if max_update < self.tolerance:
                converged = True
                self.logger.info("The algorithm converged after %i iterations.", i)
                break

        if not converged:
            raise ConvergenceError(
                "The algorithm did not converge within %i iterations." % self.max_iter
            )

        return pagerank


class PlaygroundPageRankTorch(nn.Module):
    """tkngch/playground-pagerank-python ``pagerank/pagerank_with_torch.py``, ``PageRankTorch.score(
    adjacency_matrix)``: the transition matrix from ``torch.diag(1.0 / outlinks)``, ``for i in
    range(self.max_iter):`` with ``max_update = max(abs(new_pagerank - pagerank))`` (Python's ``max``
    iterating the (n, 1) tensor's rows), ``if max_update < self.tolerance: converged = True;
    self.logger.info(...); break``, then ``if not converged: raise ConvergenceError(...)``. Adapted: the
    package's ``get_logger`` -> ``logging.getLogger``; defaults kept (damping 0.85, tolerance 1e-4,
    ``max_iter`` 1000); the graph's (n, n) adjacency matrix (column j: the pages j links to, every page
    with an outlink) is the input. No held-out set takes the ``raise`` (eager raises there)."""

    def forward(self, adjacency_matrix: Tensor):
        return PageRankTorch(verbose=False).score(adjacency_matrix)


# ---------------------------------------------------------------------------------------------------
# 9. GPT-2 byte-pair encoding (openai/gpt-2 src/encoder.py Encoder.bpe + encode)
# ---------------------------------------------------------------------------------------------------


@lru_cache()
def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~")+1))+list(range(ord("¡"), ord("¬")+1))+list(range(ord("®"), ord("ÿ")+1))
    cs = bs[:]
    n = 0
    for b in range(2**8):
        if b not in bs:
            bs.append(b)
            cs.append(2**8+n)
            n += 1
    cs = [chr(n) for n in cs]
    return dict(zip(bs, cs))


def get_pairs(word):
    pairs = set()
    prev_char = word[0]
    for char in word[1:]:
        pairs.add((prev_char, char))
        prev_char = char
    return pairs


class Gpt2Encoder:
    def __init__(self, encoder, bpe_merges, errors='replace'):
        self.encoder = encoder
        self.decoder = {v:k for k,v in self.encoder.items()}
        self.errors = errors # how to handle errors in decoding
        self.byte_encoder = bytes_to_unicode()
        self.byte_decoder = {v:k for k, v in self.byte_encoder.items()}
        self.bpe_ranks = dict(zip(bpe_merges, range(len(bpe_merges))))
        self.cache = {}

        self.pat = re.compile(r"""'s|<\|endoftext\|>|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")

    def bpe(self, token):
        if token in self.cache:
            return self.cache[token]
        word = tuple(token)
        pairs = get_pairs(word)

        if not pairs:
            return token

        while True:
            bigram = min(pairs, key = lambda pair: self.bpe_ranks.get(pair, float('inf')))
            if bigram not in self.bpe_ranks:
                break
            first, second = bigram
            new_word = []
            i = 0
            while i < len(word):
                try:
                    j = word.index(first, i)
                    new_word.extend(word[i:j])
                    i = j
                except:
                    new_word.extend(word[i:])
                    break

                if word[i] == first and i < len(word)-1 and word[i+1] == second:
                    new_word.append(first+second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            new_word = tuple(new_word)
            word = new_word
            if len(word) == 1:
                break
            else:
                pairs = get_pairs(word)
        word = ' '.join(word)
        self.cache[token] = word
        return word

    def encode(self, text):
        bpe_tokens = []
        for token in re.findall(self.pat, text):
            token = ''.join(self.byte_encoder[b] for b in token.encode('utf-8'))
            if token == "<|endoftext|>":
                bpe_tokens.append(self.encoder[token])
            else:
                bpe_tokens.extend(self.encoder[bpe_token] for bpe_token in self.bpe(token).split(' '))
        return bpe_tokens


_GPT2_MERGES = [("l", "o"), ("lo", "w"), ("e", "r"), ("Ġ", "l"), ("Ġl", "ow"), ("e", "s"), ("es", "t"),
                ("n", "e"), ("ne", "w"), ("a", "a")]


class Gpt2BpeEncode(nn.Module):
    """openai/gpt-2 ``src/encoder.py``, ``Encoder.encode(text)`` -> ``Encoder.bpe(token)``: ``for token in
    re.findall(self.pat, text)``, the byte-to-unicode join, then in ``bpe`` ``if token in self.cache``,
    ``if not pairs: return token``, ``while True:`` with ``bigram = min(pairs, key=lambda pair:
    self.bpe_ranks.get(pair, float('inf')))``, ``if bigram not in self.bpe_ranks: break``, the inner
    ``while i < len(word):`` with ``try: j = word.index(first, i) ... except: ...; break`` and the merge
    ``if``/``else``, ``if len(word) == 1: break``. Adapted: the text arrives as a tensor of its UTF-8 bytes
    (decoded with ``bytes(text.tolist()).decode('utf-8')``), and the ids are returned as a tensor; the
    vocabulary is tiny and made up (the 256 byte symbols, then 10 merges such as ``l o``, ``lo w``,
    ``Ġl ow``, ``e s``, ``es t``; ``get_encoder`` reads encoder.json/vocab.bpe from disk); the
    ``Encoder`` object (and so its ``cache``) lives as long as the module, as in ``get_encoder``'s
    caller."""

    def __init__(self):
        super().__init__()
        symbols = list(bytes_to_unicode().values()) + [a + b for a, b in _GPT2_MERGES]
        self.enc = Gpt2Encoder(encoder={s: i for i, s in enumerate(symbols)}, bpe_merges=_GPT2_MERGES)

    def forward(self, text: Tensor):
        ids = self.enc.encode(bytes(text.tolist()).decode('utf-8'))
        return torch.tensor(ids, dtype=torch.long)


def _text(s: str) -> Tensor:
    return torch.tensor(list(s.encode('utf-8')), dtype=torch.long)


# ---------------------------------------------------------------------------------------------------
# 10. ConvAI sample_sequence + top_filtering (huggingface/transfer-learning-conv-ai interact.py)
# ---------------------------------------------------------------------------------------------------

SPECIAL_TOKENS = ["<bos>", "<eos>", "<speaker1>", "<speaker2>", "<pad>"]


def top_filtering(logits, top_k=0, top_p=0.0, threshold=-float('Inf'), filter_value=-float('Inf')):
    top_k = min(top_k, logits.size(-1))
    if top_k > 0:
        indices_to_remove = logits < torch.topk(logits, top_k)[0][..., -1, None]
        logits[indices_to_remove] = filter_value

    if top_p > 0.0:
        sorted_logits, sorted_indices = torch.sort(logits, descending=True)
        cumulative_probabilities = torch.cumsum(F.softmax(sorted_logits, dim=-1), dim=-1)

        sorted_indices_to_remove = cumulative_probabilities > top_p
        sorted_indices_to_remove[..., 1:] = sorted_indices_to_remove[..., :-1].clone()
        sorted_indices_to_remove[..., 0] = 0

        indices_to_remove = sorted_indices[sorted_indices_to_remove]
        logits[indices_to_remove] = filter_value

    indices_to_remove = logits < threshold
    logits[indices_to_remove] = filter_value

    return logits


def build_input_from_segments(persona, history, reply, tokenizer, lm_labels=False, with_eos=True):
    """ Build a sequence of input from 3 segments: persona, history and last reply """
    bos, eos, speaker1, speaker2 = tokenizer.convert_tokens_to_ids(SPECIAL_TOKENS[:-1])

    instance = {}
    sequence = [[bos] + list(chain(*persona))] + history + [reply + ([eos] if with_eos else [])]
    sequence = [sequence[0]] + [[speaker2 if (len(sequence)-i) % 2 else speaker1] + s for i, s in enumerate(sequence[1:])]

    instance["input_ids"] = list(chain(*sequence))
    instance["token_type_ids"] = [speaker2 if i % 2 else speaker1 for i, s in enumerate(sequence) for _ in s]
    instance["mc_token_ids"] = len(instance["input_ids"]) - 1
    instance["lm_labels"] = [-1] * len(instance["input_ids"])
    if lm_labels:
        instance["lm_labels"] = ([-1] * sum(len(s) for s in sequence[:-1])) + [-1] + sequence[-1][1:]
    return instance, sequence


class _SpecialTokenizer:
    # the part of OpenAIGPTTokenizer that sample_sequence uses: the ids of the 5 special tokens
    def __init__(self, first_special_id):
        self.special = {tok: first_special_id + k for k, tok in enumerate(SPECIAL_TOKENS)}

    def convert_tokens_to_ids(self, tokens):
        return [self.special[t] for t in tokens]


class _Draws:
    # the seeded draw made an input: each multinomial takes the next uniform number of `u`
    def __init__(self, u):
        self.u = u
        self.k = 0

    def multinomial(self, probs, num_samples):
        u = self.u[self.k]
        self.k += 1
        return torch.searchsorted(torch.cumsum(probs, -1), u.view(1)).clamp(max=probs.size(-1) - 1)


class _Args:
    no_sample = False
    max_length = 6  # origin default: 20
    min_length = 1
    temperature = 0.7
    top_k = 0
    top_p = 0.9
    device = "cpu"


def sample_sequence(personality, history, tokenizer, model, args, draws, current_output=None):
    special_tokens_ids = tokenizer.convert_tokens_to_ids(SPECIAL_TOKENS)
    if current_output is None:
        current_output = []

    for i in range(args.max_length):
        instance, sequence = build_input_from_segments(personality, history, current_output, tokenizer, with_eos=False)

        input_ids = torch.tensor(instance["input_ids"], device=args.device).unsqueeze(0)
        token_type_ids = torch.tensor(instance["token_type_ids"], device=args.device).unsqueeze(0)

        logits = model(input_ids, token_type_ids=token_type_ids).logits  # origin: model(...) (the logits)

        logits = logits[0, -1, :] / args.temperature
        logits = top_filtering(logits, top_k=args.top_k, top_p=args.top_p)
        probs = F.softmax(logits, dim=-1)

        prev = torch.topk(probs, 1)[1] if args.no_sample else draws.multinomial(probs, 1)
        if i < args.min_length and prev.item() in special_tokens_ids:
            while prev.item() in special_tokens_ids:
                prev = draws.multinomial(probs, num_samples=1)

        if prev.item() in special_tokens_ids:
            break
        current_output.append(prev.item())

    return current_output


class ConvaiSampleSequence(nn.Module):
    """huggingface/transfer-learning-conv-ai ``interact.py``, ``sample_sequence(personality, history,
    tokenizer, model, args)`` with ``top_filtering`` (top-p 0.9) and ``train.py``'s
    ``build_input_from_segments``: ``for i in range(args.max_length):`` rebuilding the whole input from
    Python lists each trip, ``logits[indices_to_remove] = filter_value`` (in-place writes), ``prev =
    torch.multinomial(probs, 1)``, ``if i < args.min_length and prev.item() in special_tokens_ids: while
    prev.item() in special_tokens_ids: prev = torch.multinomial(...)`` (a redraw loop), ``if prev.item() in
    special_tokens_ids: break``, ``current_output.append(prev.item())``. Adapted: a tiny random
    ``OpenAIGPTLMHeadModel`` (transformers, 1 layer, width 16, vocabulary 20 whose last 5 ids are the
    special tokens) for pytorch_pretrained_bert's, whose call returned the logits (``.logits`` now); the
    tokenizer reduced to the special-token ids; the seeded draw made an input: ``torch.multinomial(probs,
    1)`` -> the inverse CDF at the next number of ``u`` (``_Draws.multinomial``); ``max_length`` 20 -> 6;
    the persona (one sentence) and the history (one utterance) are id tensors (``.tolist()``), the reply
    ids are returned as a tensor."""

    def __init__(self):
        super().__init__()
        from transformers import OpenAIGPTConfig, OpenAIGPTLMHeadModel
        cfg = OpenAIGPTConfig(vocab_size=20, n_positions=64, n_embd=16, n_layer=1, n_head=2,
                              initializer_range=0.3)
        self.model = OpenAIGPTLMHeadModel(cfg).eval()
        self.tokenizer = _SpecialTokenizer(15)

    def forward(self, persona: Tensor, history: Tensor, u: Tensor):
        with torch.no_grad():
            out_ids = sample_sequence([persona.tolist()], [history.tolist()], self.tokenizer, self.model,
                                      _Args(), _Draws(u))
        return torch.tensor(out_ids, dtype=torch.long)


# ---------------------------------------------------------------------------------------------------
# 11. priority-queue beam search (budzianowski/PyTorch-Beam-Search-Decoding decode_beam.py)
# ---------------------------------------------------------------------------------------------------

SOS_token = 0
EOS_token = 1


class DecoderRNN(nn.Module):
    def __init__(self, embedding_size, hidden_size, output_size, cell_type, dropout=0.1):
        super(DecoderRNN, self).__init__()
        self.hidden_size = hidden_size
        self.cell_type = cell_type
        self.embedding = nn.Embedding(num_embeddings=output_size,
                                      embedding_dim=embedding_size,
                                      )

        # origin: bidirectional=True, dropout=dropout (the 2H output does not fit self.out's H inputs)
        self.rnn = nn.GRU(embedding_size, hidden_size, batch_first=False)
        self.dropout_rate = dropout
        self.out = nn.Linear(hidden_size, output_size)

    def forward(self, input, hidden, not_used):
        embedded = self.embedding(input).transpose(0, 1)  # [B,1] -> [ 1, B, D]
        embedded = F.dropout(embedded, self.dropout_rate)

        output = embedded

        output, hidden = self.rnn(output, hidden)

        out = self.out(output.squeeze(0))
        output = F.log_softmax(out, dim=1)
        return output, hidden


class BeamSearchNode(object):
    def __init__(self, hiddenstate, previousNode, wordId, logProb, length):
        self.h = hiddenstate
        self.prevNode = previousNode
        self.wordid = wordId
        self.logp = logProb
        self.leng = length

    def eval(self, alpha=1.0):
        reward = 0

        return self.logp / float(self.leng - 1 + 1e-6) + alpha * reward


def beam_decode(decoder, target_tensor, decoder_hiddens, encoder_outputs=None, max_queue=2000):
    beam_width = 10
    topk = 1  # how many sentence do you want to generate
    decoded_batch = []

    for idx in range(target_tensor.size(0)):
        if isinstance(decoder_hiddens, tuple):  # LSTM case
            decoder_hidden = (decoder_hiddens[0][:,idx, :].unsqueeze(0),decoder_hiddens[1][:,idx, :].unsqueeze(0))
        else:
            decoder_hidden = decoder_hiddens[:, idx, :].unsqueeze(0)
        encoder_output = encoder_outputs[:,idx, :].unsqueeze(1)

        decoder_input = torch.LongTensor([[SOS_token]])  # origin: torch.LongTensor([[SOS_token]], device=device)

        endnodes = []
        number_required = min((topk + 1), topk - len(endnodes))

        node = BeamSearchNode(decoder_hidden, None, decoder_input, 0, 1)
        nodes = PriorityQueue()

        nodes.put((-node.eval(), node))
        qsize = 1

        while True:
            if qsize > max_queue: break  # origin: 2000

            score, n = nodes.get()
            decoder_input = n.wordid
            decoder_hidden = n.h

            if n.wordid.item() == EOS_token and n.prevNode != None:
                endnodes.append((score, n))
                if len(endnodes) >= number_required:
                    break
                else:
                    continue

            decoder_output, decoder_hidden = decoder(decoder_input, decoder_hidden, encoder_output)

            log_prob, indexes = torch.topk(decoder_output, beam_width)
            nextnodes = []

            for new_k in range(beam_width):
                decoded_t = indexes[0][new_k].view(1, -1)
                log_p = log_prob[0][new_k].item()

                node = BeamSearchNode(decoder_hidden, n, decoded_t, n.logp + log_p, n.leng + 1)
                score = -node.eval()
                nextnodes.append((score, node))

            for i in range(len(nextnodes)):
                score, nn = nextnodes[i]
                nodes.put((score, nn))
            qsize += len(nextnodes) - 1

        if len(endnodes) == 0:
            endnodes = [nodes.get() for _ in range(topk)]

        utterances = []
        for score, n in sorted(endnodes, key=operator.itemgetter(0)):
            utterance = []
            utterance.append(n.wordid)
            while n.prevNode != None:
                n = n.prevNode
                utterance.append(n.wordid)

            utterance = utterance[::-1]
            utterances.append(utterance)

        decoded_batch.append(utterances)

    return decoded_batch


class BudzianowskiBeamDecode(nn.Module):
    """budzianowski/PyTorch-Beam-Search-Decoding ``decode_beam.py``, ``beam_decode(target_tensor,
    decoder_hiddens, encoder_outputs)``: ``for idx in range(target_tensor.size(0))`` (sentence by
    sentence), a ``queue.PriorityQueue`` of ``(-node.eval(), node)``, ``while True:`` with ``if qsize >
    2000: break``, ``score, n = nodes.get()``, ``if n.wordid.item() == EOS_token and n.prevNode != None:
    endnodes.append(...); if len(endnodes) >= number_required: break else: continue``, the ``for new_k in
    range(beam_width)`` expansion with ``log_prob[0][new_k].item()``, ``if len(endnodes) == 0: endnodes =
    [nodes.get() for _ in range(topk)]`` and the back trace ``while n.prevNode != None:``. Adapted:
    Python 2's ``Queue`` -> ``queue``; the illustrative ``DecoderRNN`` made runnable (``bidirectional=True``
    -> False: its 2H output did not fit ``self.out``; its ``F.dropout(embedded, 0.1)``, on at inference,
    -> rate 0); tiny random sizes (vocabulary 12, hidden 6); the module-level ``decoder`` passed in; the
    queue limit 2000 -> 40 so the give-up exit is reachable (``max_queue``); beam width 10 and topk 1
    kept (so ``number_required`` is 1 and the ``continue`` is unreachable); the utterances' word-id
    tensors are returned concatenated with their lengths."""

    def __init__(self):
        super().__init__()
        self.decoder = DecoderRNN(4, 6, 12, "GRU", dropout=0.0)

    def forward(self, target_tensor: Tensor, decoder_hiddens: Tensor, encoder_outputs: Tensor):
        with torch.no_grad():
            decoded_batch = beam_decode(self.decoder, target_tensor, decoder_hiddens, encoder_outputs, max_queue=40)
        words = [torch.cat(utterance).view(-1) for utterances in decoded_batch for utterance in utterances]
        return torch.cat(words), torch.tensor([len(w) for w in words])


# ---------------------------------------------------------------------------------------------------
# 12. Soft-NMS (rwightman/efficientdet-pytorch effdet/soft_nms.py)
# ---------------------------------------------------------------------------------------------------


def pairwise_iou(boxes1, boxes2) -> torch.Tensor:
    area1 = (boxes1[:, 2] - boxes1[:, 0]) * (boxes1[:, 3] - boxes1[:, 1])  # [N,]
    area2 = (boxes2[:, 2] - boxes2[:, 0]) * (boxes2[:, 3] - boxes2[:, 1])  # [M,]

    width_height = torch.min(boxes1[:, None, 2:], boxes2[:, 2:]) - torch.max(
        boxes1[:, None, :2], boxes2[:, :2]
    )  # [N,M,2]

    width_height.clamp_(min=0)  # [N,M,2]
    inter = width_height.prod(dim=2)  # [N,M]

    iou = torch.where(
        inter > 0,
        inter / (area1[:, None] + area2 - inter),
        torch.zeros(1, dtype=inter.dtype, device=inter.device),
    )
    return iou


def soft_nms(
    boxes,
    scores,
    method_gaussian: bool = True,
    sigma: float = 0.5,
    iou_threshold: float = .5,
    score_threshold: float = 0.005
):
    device = boxes.device
    boxes_remain = boxes.clone()
    scores_remain = scores.clone()
    num_elem = scores_remain.size()[0]
    idxs = torch.arange(num_elem)
    idxs_out = torch.zeros(num_elem, dtype=torch.int64, device=device)
    scores_out = torch.zeros(num_elem, dtype=torch.float32, device=device)
    count: int = 0

    while scores_remain.numel() > 0:
        top_idx = torch.argmax(scores_remain)
        idxs_out[count] = idxs[top_idx]
        scores_out[count] = scores_remain[top_idx]
        count += 1

        top_box = boxes_remain[top_idx]
        ious = pairwise_iou(top_box.unsqueeze(0), boxes_remain)[0]

        if method_gaussian:
            decay = torch.exp(-torch.pow(ious, 2) / sigma)
        else:
            decay = torch.ones_like(ious)
            decay_mask = ious > iou_threshold
            decay[decay_mask] = 1 - ious[decay_mask]

        scores_remain *= decay
        keep = scores_remain > score_threshold
        keep[top_idx] = torch.tensor(False, device=device)

        boxes_remain = boxes_remain[keep]
        scores_remain = scores_remain[keep]
        idxs = idxs[keep]

    return idxs_out[:count], scores_out[:count]


def batched_soft_nms(
    boxes, scores, idxs,
    method_gaussian: bool = True,
    sigma: float = 0.5,
    iou_threshold: float = .5,
    score_threshold: float = 0.001):
    if boxes.numel() == 0:
        return (
            torch.empty((0,), dtype=torch.int64, device=boxes.device),
            torch.empty((0,), dtype=torch.float32, device=scores.device),
        )
    max_coordinate = boxes.max()
    offsets = idxs.to(boxes) * (max_coordinate + 1)
    boxes_for_nms = boxes + offsets[:, None]
    return soft_nms(
        boxes_for_nms, scores, method_gaussian=method_gaussian, sigma=sigma,
        iou_threshold=iou_threshold, score_threshold=score_threshold
    )


class EffdetBatchedSoftNms(nn.Module):
    """rwightman/efficientdet-pytorch ``effdet/soft_nms.py`` (from a detectron2 PR), ``batched_soft_nms(
    boxes, scores, idxs)`` -> ``soft_nms``, as ``effdet/anchors.py`` ``generate_detections`` calls it with
    ``soft_nms=True`` (``method_gaussian=True, iou_threshold=.3, score_threshold=.001``): ``if
    boxes.numel() == 0: return (empty, empty)``, the class offset trick, then ``while
    scores_remain.numel() > 0:`` with ``idxs_out[count] = idxs[top_idx]`` (in-place writes at a Python
    int counter), ``count += 1``, ``scores_remain *= decay``, ``keep[top_idx] = torch.tensor(False)``, the
    boolean-mask shrinking of ``boxes_remain``/``scores_remain``/``idxs``, and ``idxs_out[:count]``.
    Adapted: nothing in the functions; the boxes (N, 4), scores (N,) and class ids (N,) are the
    inputs."""

    def forward(self, boxes: Tensor, scores: Tensor, classes: Tensor):
        return batched_soft_nms(boxes, scores, classes, method_gaussian=True, iou_threshold=.3,
                                score_threshold=.001)


# ---------------------------------------------------------------------------------------------------
# cases
# ---------------------------------------------------------------------------------------------------

_ANCHORS = torch.tensor([[4.0 + 8 * (k % 4), 4.0 + 8 * (k // 4)] for k in range(16)])


def _yolox_preds(seed: int, wh: float = 10.0) -> Tensor:
    """Decoded boxes near the 16 anchor centres (cx, cy, w, h), as a trained head's would be."""
    return torch.cat([_ANCHORS + _randn(seed, 16, 2, scale=2.0), torch.full((16, 2), wh) + _randn(seed + 1, 16, 2)], 1)


def _blobs(seed: int, *sizes) -> Tensor:
    centres = [(0.0, 0.0), (4.0, 0.0), (0.0, 4.0)]
    parts = [_randn(seed + k, n, 2, scale=0.3) + _t(centres[k]) for k, n in enumerate(sizes)]
    return torch.cat(parts).unsqueeze(0)


def _trpo_batch(seed: int, n: int):
    return _randn(seed, n, 3), _randn(seed + 1, n, 2), _randn(seed + 2, n, 1)


def _trpo_step(seed: int, n: int, scale: float):
    """(states, actions, advantages, fullstep, expected_improve_rate): a step of length ``scale``
    along the loss's steepest descent at the policy's parameters (what trpo_step's conjugate gradients
    approximate), and the improvement rate it predicts."""
    torch.manual_seed(0)
    model = TrpoLinesearch()
    states, actions, advantages = _trpo_batch(seed, n)
    policy = model.policy_net
    mean, log_std, std = policy(states)
    fixed = normal_log_density(actions, mean, log_std, std).detach()
    loss = (-advantages * torch.exp(normal_log_density(actions, mean, log_std, std) - fixed)).mean()
    grad = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, list(policy.parameters()))])
    fullstep = (-grad / grad.norm() * scale).detach()
    return states, actions, advantages, fullstep, (-grad * fullstep).sum().view(1).detach()


def _convai(seed: int):
    return (_ints(seed, 15, 1 + seed % 4), _ints(seed + 50, 15, 1 + seed % 3),
            torch.rand(32, generator=torch.Generator().manual_seed(seed)))


def _beam(seed: int, batch: int):
    return torch.zeros(batch, 3, dtype=torch.long), _randn(seed, 1, batch, 6), _randn(seed + 9, 4, batch, 6)


CASES: list[LoopCase] = [
    LoopCase(
        name="awni_ctc_prefix_beam_search",
        origin="awni/speech speech/models/ctc_decoder.py decode (prefix beam search)",
        make=_seeded(AwniCtcPrefixBeamSearch, 0),
        example=(_randn(4, 4, 6),),
        dynamic_shapes={"features": {0: "T"}},
        held_out=[(_randn(1, 1, 6),), (_randn(2, 2, 6),), (_randn(3, 3, 6, scale=3.0),), (_randn(5, 5, 6),),
                  (_randn(8, 8, 6, scale=2.0),)],
        exits=["T=1: the time loop takes 1 trip (the beam holds only the empty prefix), blank `continue`s",
               "T=2: 2 trips over a beam of 3 prefixes", "T=3, peaked probabilities", "T=5", "T=8"],
    ),
    LoopCase(
        name="bentrevett_attention_translate",
        origin="bentrevett/pytorch-seq2seq 3 - Neural Machine Translation by Jointly Learning to Align and Translate.ipynb translate_sentence",
        make=_seeded(BentrevettAttentionTranslate, 2),
        example=(_ints(5, 10, 6),),
        dynamic_shapes={"ids": {0: "src_len"}},
        held_out=[(_ints(0, 10, 1),), (_ints(19, 10, 2),), (_ints(13, 10, 2),), (_ints(2, 10, 3),),
                  (_ints(46, 10, 5),), (_ints(86, 10, 3),), (_ints(3, 10, 4),), (_ints(6, 10, 1),)],
        exits=["1 source id: `<eos>` break on trip 1", "eos break on trip 2", "eos break on trip 3",
               "eos break on trip 4", "eos break on trip 5", "eos break on trip 6 (the last trip)",
               "no eos: the max_output_length bound (6 trips)", "1 source id, no eos: the bound"],
    ),
    LoopCase(
        name="rtvc_tacotron_generate",
        origin="CorentinJ/Real-Time-Voice-Cloning synthesizer/models/tacotron.py Tacotron.generate",
        make=_seeded(RtvcTacotronGenerate, 0),
        example=(_ints(4, 12, 1, 5), _randn(104, 4)),
        dynamic_shapes={"x": {1: "T_text"}, "speaker_embedding": None},
        held_out=[(_ints(8, 12, 1, 4), _randn(108, 4)), (_ints(26, 12, 1, 2), _randn(126, 4)),
                  (_ints(18, 12, 1, 4), _randn(118, 4)), (_ints(21, 12, 1, 2), _randn(121, 4)),
                  (_ints(0, 12, 1, 1), _randn(100, 4)), (_ints(37, 12, 1, 3), _randn(137, 4)),
                  (_ints(39, 12, 1, 5), _randn(139, 4))],
        exits=["silent frames: the stop break on trip 7 (t = 12, the earliest past t > 10)",
               "2 symbols: the stop break on trip 7", "the stop break on trip 8", "the stop break on trip 10",
               "1 symbol, never silent: the `range(0, steps, r)` bound (10 trips)", "the bound",
               "5 symbols: the bound"],
    ),
    LoopCase(
        name="ncrfpp_crf_viterbi_decode",
        origin="jiesutd/NCRFpp model/crf.py CRF._viterbi_decode",
        make=_seeded(NcrfppCrfViterbi, 0),
        example=(_randn(0, 2, 4, 6), _L([[1, 1, 1, 1], [1, 1, 1, 0]]).to(torch.uint8)),
        dynamic_shapes={"word_represent": {0: "batch", 1: "seq_len"}, "mask": {0: "batch", 1: "seq_len"}},
        held_out=[(_randn(1, 1, 1, 6), _L([[1]]).to(torch.uint8)),
                  (_randn(2, 1, 2, 6), _L([[1, 1]]).to(torch.uint8)),
                  (_randn(3, 3, 5, 6), _L([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0], [1, 0, 0, 0, 0]]).to(torch.uint8)),
                  (_randn(4, 2, 1, 6, scale=3.0), _L([[1], [1]]).to(torch.uint8)),
                  (_randn(5, 1, 7, 6, scale=2.0), _L([[1] * 7]).to(torch.uint8))],
        exits=["1 word: the forward loop takes 0 trips (after `next`), the backtrack 0 trips",
               "2 words: 1 trip each", "batch 3 of lengths 5, 2, 1: padded steps masked (`masked_fill_`), 4 trips",
               "batch 2 of 1 word", "7 words: 6 trips each"],
    ),
    LoopCase(
        name="yolox_simota_dynamic_k",
        origin="Megvii-BaseDetection/YOLOX yolox/models/yolo_head.py YOLOXHead.get_assignments + dynamic_k_matching",
        make=_seeded(YoloxSimOtaAssign, 0),
        example=(_t([[12.0, 12.0, 10.0, 10.0], [20.0, 22.0, 14.0, 12.0]]), _L([0, 2]), _yolox_preds(0),
                 _randn(1, 1, 16, 3), _randn(2, 1, 16, 1)),
        dynamic_shapes={"gt_bboxes_per_image": {0: "num_gt"}, "gt_classes": {0: "num_gt"},
                        "bboxes_preds_per_image": None, "cls_preds": None, "obj_preds": None},
        held_out=[(_t([[16.0, 16.0, 12.0, 12.0]]), _L([1]), _yolox_preds(3), _randn(4, 1, 16, 3), _randn(5, 1, 16, 1)),
                  (_t([[2.0, 2.0, 3.0, 3.0]]), _L([2]), _yolox_preds(6, wh=4.0), _randn(7, 1, 16, 3),
                   _randn(8, 1, 16, 1)),
                  (_t([[12.0, 12.0, 16.0, 16.0], [14.0, 13.0, 16.0, 14.0]]), _L([0, 1]), _yolox_preds(9, wh=14.0),
                   _randn(10, 1, 16, 3), _randn(11, 1, 16, 1)),
                  (_t([[6.0, 6.0, 8.0, 8.0], [26.0, 26.0, 8.0, 8.0], [6.0, 26.0, 8.0, 8.0], [26.0, 6.0, 8.0, 8.0]]),
                   _L([0, 1, 2, 0]), _yolox_preds(12, wh=8.0), _randn(13, 1, 16, 3), _randn(14, 1, 16, 1)),
                  (_t([[16.0, 16.0, 28.0, 28.0], [16.0, 16.0, 24.0, 24.0], [18.0, 14.0, 20.0, 26.0]]),
                   _L([2, 2, 1]), _yolox_preds(15, wh=20.0), _randn(16, 1, 16, 3), _randn(17, 1, 16, 1))],
        exits=["1 gt: 1 trip, no anchor claimed twice (`anchor_matching_gt.max() > 1` false)",
               "1 small gt in a corner: fewer than 10 in-box anchors (n_candidate_k < 10)",
               "2 overlapping gts: 2 trips, an anchor claimed by both (the conflict branch)",
               "4 gts apart: 4 trips, no conflict", "3 nested gts: 3 trips, conflicts"],
    ),
    LoopCase(
        name="vector_quantize_kmeans",
        origin="lucidrains/vector-quantize-pytorch vector_quantize_pytorch/vector_quantize_pytorch.py kmeans",
        make=_seeded(VectorQuantizeKmeans, 0),
        example=(_blobs(0, 4, 3, 5), _t([[[0.5, 0.5], [3.0, 0.5], [0.5, 3.0]]])),
        dynamic_shapes={"samples": {1: "n"}, "initial_means": None},
        held_out=[(_blobs(3, 3, 4, 2), _t([[[0.0, 0.0], [4.0, 0.0], [0.0, 4.0]]])),
                  (_blobs(6, 5, 5, 0), _t([[[0.0, 0.0], [4.0, 0.0], [20.0, 20.0]]])),
                  (_blobs(9, 1, 0, 0), _t([[[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]]])),
                  (_blobs(12, 1, 1, 0), _t([[[0.0, 0.0], [0.1, 0.0], [0.2, 0.0]]])),
                  (_blobs(15, 6, 2, 3), _t([[[2.0, 2.0], [2.1, 2.0], [2.0, 2.1]]]))],
        exits=["initial means at the blobs: the 10 trips, no empty cluster",
               "a far mean no sample is nearest to: `zero_mask` keeps it every trip",
               "n=1: two empty clusters every trip", "n=2: one empty cluster",
               "means bunched at the middle: every cluster filled, the means move apart"],
    ),
    LoopCase(
        name="trpo_linesearch",
        origin="ikostrikov/pytorch-trpo trpo.py linesearch (+ main.py get_loss, utils.py set_flat_params_to)",
        make=_seeded(TrpoLinesearch, 0),
        example=_trpo_step(0, 8, 1.0),
        dynamic_shapes={"states": {0: "n"}, "actions": {0: "n"}, "advantages": {0: "n"}, "fullstep": None,
                        "expected_improve_rate": None},
        held_out=[_trpo_step(1, 8, 0.1), _trpo_step(2, 6, 3.0), _trpo_step(3, 8, 10.0), _trpo_step(4, 8, 40.0),
                  _trpo_step(5, 1, 1.0), _trpo_step(6, 8, 0.0), _trpo_step(7, 5, -1.0)],
        exits=["a short step: accepted on trip 1 (`return True, xnew`)", "6 samples: accepted on trip 2 (one halving)",
               "accepted on trip 2", "a long step: accepted on trip 4",
               "1 sample: accepted", "a zero step: no improvement, the 10-trip bound (`return False, x`)",
               "an uphill step: the bound"],
    ),
    LoopCase(
        name="playground_pagerank_torch",
        origin="tkngch/playground-pagerank-python pagerank/pagerank_with_torch.py PageRankTorch.score",
        make=_seeded(PlaygroundPageRankTorch, 0),
        example=(_t([[0, 0, 1, 1], [1, 0, 0, 0], [1, 1, 0, 1], [0, 1, 1, 0]]),),
        dynamic_shapes={"adjacency_matrix": {0: "n", 1: "n"}},
        held_out=[(_t([[1.0]]),), (_t([[0, 1], [1, 0]]),), (_t([[0, 1, 1], [1, 0, 1], [1, 1, 0]]),),
                  (_t([[0, 0, 1], [1, 0, 0], [1, 1, 0]]),), (_t([[0, 1, 0, 0, 1], [1, 0, 1, 0, 0], [0, 0, 0, 1, 0],
                                                                 [0, 0, 1, 0, 1], [1, 1, 0, 1, 0]]),),
                  (_t([[0, 0, 0, 1], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]),)],
        exits=["1 page linking to itself: `max_update < tolerance` break on trip 1",
               "2 pages: uniform, break on trip 1", "a triangle: break on trip 1", "3 pages, asymmetric: break after N trips",
               "5 pages: break after N trips", "a 4-cycle: uniform, break on trip 1"],
    ),
    LoopCase(
        name="gpt2_bpe_encode",
        origin="openai/gpt-2 src/encoder.py Encoder.encode + Encoder.bpe",
        make=_seeded(Gpt2BpeEncode, 0),
        example=(_text("lower newest"),),
        dynamic_shapes={"text": {0: "n_bytes"}},
        held_out=[(_text("a"),), (_text("low"),), (_text("lowest"),), (_text("low low low"),), (_text("aaa ab"),),
                  (_text("xyz, 42!"),)],
        exits=["1 byte: `if not pairs: return token`", "'low': merged to one symbol, `len(word) == 1` break",
               "'lowest': merges then `bigram not in self.bpe_ranks` break",
               "' low' twice: the second a `token in self.cache` hit",
               "'aaa': a merge at the word's end (`i < len(word)-1` false), the inner while ends by its test",
               "no merges apply: the first bigram is unranked (break), digits and punctuation"],
    ),
    LoopCase(
        name="convai_sample_sequence",
        origin="huggingface/transfer-learning-conv-ai interact.py sample_sequence + top_filtering",
        make=_seeded(ConvaiSampleSequence, 1),
        example=_convai(3),
        dynamic_shapes={"persona": {0: "persona_len"}, "history": {0: "history_len"}, "u": None},
        held_out=[_convai(29), _convai(5), _convai(24), _convai(0), _convai(4), _convai(2)],
        exits=["a special token on trip 2: `if prev.item() in special_tokens_ids: break`",
               "a special first draw redrawn (the inner while, 1 trip), then break on trip 2",
               "break on trip 4 after a redraw", "the redraw while 2 trips, then the max_length bound (6 trips)",
               "no special draw: the bound", "the redraw while 6 trips, then the bound"],
    ),
    LoopCase(
        name="budzianowski_beam_decode",
        origin="budzianowski/PyTorch-Beam-Search-Decoding decode_beam.py beam_decode",
        make=_seeded(BudzianowskiBeamDecode, 0),
        example=_beam(1, 2),
        dynamic_shapes={"target_tensor": {0: "batch"}, "decoder_hiddens": {1: "batch"},
                        "encoder_outputs": {1: "batch"}},
        held_out=[_beam(0, 1), _beam(2, 1), _beam(3, 2), _beam(4, 1), _beam(5, 2)],
        exits=["an EOS node popped on trip 3 (after 2 expansions): break, a 3-word back trace",
               "EOS popped on trip 3", "batch 2: both sentences end on EOS",
               "no EOS before the queue limit: `qsize > 2000` (40) break, `endnodes = [nodes.get() ...]`",
               "batch 2: the limit in both"],
    ),
    LoopCase(
        name="effdet_batched_soft_nms",
        origin="rwightman/efficientdet-pytorch effdet/soft_nms.py batched_soft_nms + soft_nms",
        make=_seeded(EffdetBatchedSoftNms, 0),
        example=(_t([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 9, 9]]), _t([0.9, 0.8, 0.7, 0.3]),
                 _L([0, 0, 1, 0])),
        dynamic_shapes={"boxes": {0: "N"}, "scores": {0: "N"}, "classes": {0: "N"}},
        held_out=[(torch.zeros(0, 4), torch.zeros(0), _L([])), (_t([[5, 5, 15, 15]]), _t([0.6]), _L([2])),
                  (_t([[0, 0, 10, 10], [0, 0, 10, 10.5], [0, 0, 10, 11]]), _t([0.9, 0.002, 0.0015]), _L([0, 0, 0])),
                  (_t([[0, 0, 10, 10], [2, 2, 12, 12], [4, 4, 14, 14], [30, 30, 40, 40], [31, 31, 41, 41]]),
                   _t([0.5, 0.6, 0.7, 0.8, 0.2]), _L([0, 0, 0, 1, 1])),
                  (_t([[0, 0, 10, 10], [0, 0, 10, 10]]), _t([0.5, 0.5]), _L([0, 1]))],
        exits=["no boxes: the `boxes.numel() == 0` early return", "1 box: 1 trip",
               "low-scoring overlaps decayed below the threshold: the while ends after 1 trip",
               "5 boxes in 2 classes: decayed but kept, 5 trips", "2 identical boxes of different classes: 2 trips"],
    ),
]
