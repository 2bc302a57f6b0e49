"""Decoding loops ported from public code (group "decoding"), measured with the wild-loops harness.

Every model below keeps the *loop* of its origin as written there (loop statement, break/while style,
list appends, slicing by the counter, ``.item()``, reading input sizes in the body, attribute state);
what was adapted is said in the docstring, and is limited to:

- sizes: tiny (hidden ≤ 32, vocab ≤ 50, sequences ≤ 12), weights seeded in ``make()``;
- callee networks (prediction nets, attention cells, tiny transformers) written small where the origin
  used a big one, keeping the interface the loop calls;
- outputs: a Python list of ints / namedtuples returned by the origin becomes a tensor built from it
  (``torch.tensor(list)``) so the module has tensor outputs;
- randomness removed (Tacotron's always-on prenet dropout, sampling), device moves removed.

The held-out input sets were chosen (by seed, found by running eager with temporary trip counters,
removed since: code after a loop that reads its variables changes what fxport has to carry) so that
together they take the exits of every loop that random tiny weights can reach; ``exits`` says which.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict, namedtuple
from typing import List, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tests.wild_loops.harness import LoopCase

V = 20  # vocabulary of the tiny models (ids 0..V-1)

def _seeded(seed: int):
    g = torch.Generator().manual_seed(seed)
    return g


def _randn(seed: int, *shape, scale: float = 1.0) -> Tensor:
    return torch.randn(*shape, generator=_seeded(seed)) * scale


def _randint(seed: int, high: int, *shape, low: int = 0) -> Tensor:
    return torch.randint(low, high, shape, generator=_seeded(seed))


# ---------------------------------------------------------------------------------------------------
# 1-3. pytorch-crf (kmkurn/pytorch-crf torchcrf/__init__.py, class CRF)
# ---------------------------------------------------------------------------------------------------


class _CRFBase(nn.Module):
    def __init__(self, num_tags: int = 5):
        super().__init__()
        self.num_tags = num_tags
        self.start_transitions = nn.Parameter(torch.empty(num_tags))
        self.end_transitions = nn.Parameter(torch.empty(num_tags))
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags))
        # pytorch-crf: reset_parameters() -> uniform_(-0.1, 0.1); wider here so paths differ
        nn.init.uniform_(self.start_transitions, -1, 1)
        nn.init.uniform_(self.end_transitions, -1, 1)
        nn.init.uniform_(self.transitions, -1, 1)


class CRFNormalizer(_CRFBase):
    """kmkurn/pytorch-crf torchcrf/__init__.py CRF._compute_normalizer (forward algorithm): ``for i in
    range(1, seq_length)`` over the time dimension, masked update with ``torch.where(mask[i]...)``.
    Mask is bool (the origin's ByteTensor is rejected by torch.where in current torch)."""

    def forward(self, emissions: Tensor, mask: Tensor) -> Tensor:
        return self._compute_normalizer(emissions, mask)

    def _compute_normalizer(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        # emissions: (seq_length, batch_size, num_tags)
        # mask: (seq_length, batch_size)
        seq_length = emissions.size(0)
        score = self.start_transitions + emissions[0]
        for i in range(1, seq_length):
            broadcast_score = score.unsqueeze(2)
            broadcast_emissions = emissions[i].unsqueeze(1)
            next_score = broadcast_score + self.transitions + broadcast_emissions
            next_score = torch.logsumexp(next_score, dim=1)
            score = torch.where(mask[i].unsqueeze(1), next_score, score)
        score += self.end_transitions
        return torch.logsumexp(score, dim=1)


class CRFScore(_CRFBase):
    """kmkurn/pytorch-crf torchcrf/__init__.py CRF._compute_score: ``for i in range(1, seq_length)``
    with ``score +=`` of gathered transitions/emissions (``torch.arange(batch_size)`` inside the body),
    then ``tags[seq_ends, torch.arange(batch_size)]``."""

    def forward(self, emissions: Tensor, tags: Tensor, mask: Tensor) -> Tensor:
        return self._compute_score(emissions, tags, mask)

    def _compute_score(self, emissions: torch.Tensor, tags: torch.LongTensor, mask: torch.Tensor) -> torch.Tensor:
        seq_length, batch_size = tags.shape
        mask = mask.float()
        score = self.start_transitions[tags[0]]
        score += emissions[0, torch.arange(batch_size), tags[0]]
        for i in range(1, seq_length):
            score += self.transitions[tags[i - 1], tags[i]] * mask[i]
            score += emissions[i, torch.arange(batch_size), tags[i]] * mask[i]
        seq_ends = mask.long().sum(dim=0) - 1
        last_tags = tags[seq_ends, torch.arange(batch_size)]
        score += self.end_transitions[last_tags]
        return score


class CRFViterbi(_CRFBase):
    """kmkurn/pytorch-crf torchcrf/__init__.py CRF._viterbi_decode: ``history.append(indices)`` in the
    forward loop, then per batch item ``best_tags = [best_last_tag.item()]``, ``for hist in
    reversed(history[:seq_ends[idx]])``, ``hist[idx][best_tags[-1]]``, ``best_tags.append(x.item())``,
    ``best_tags.reverse()``. Output adapted: the list of lists is returned concatenated as one tensor."""

    def forward(self, emissions: Tensor, mask: Tensor) -> Tensor:
        best_tags_list = self._viterbi_decode(emissions, mask)
        return torch.cat([torch.tensor(t, dtype=torch.long) for t in best_tags_list])

    def _viterbi_decode(self, emissions: torch.FloatTensor, mask: torch.Tensor) -> List[List[int]]:
        seq_length, batch_size = mask.shape
        score = self.start_transitions + emissions[0]
        history = []
        for i in range(1, seq_length):
            broadcast_score = score.unsqueeze(2)
            broadcast_emission = emissions[i].unsqueeze(1)
            next_score = broadcast_score + self.transitions + broadcast_emission
            next_score, indices = next_score.max(dim=1)
            score = torch.where(mask[i].unsqueeze(1), next_score, score)
            history.append(indices)
        score += self.end_transitions
        seq_ends = mask.long().sum(dim=0) - 1
        best_tags_list = []
        for idx in range(batch_size):
            _, best_last_tag = score[idx].max(dim=0)
            best_tags = [best_last_tag.item()]
            for hist in reversed(history[:seq_ends[idx]]):
                best_last_tag = hist[idx][best_tags[-1]]
                best_tags.append(best_last_tag.item())
            best_tags.reverse()
            best_tags_list.append(best_tags)
        return best_tags_list


def _crf_mask(lengths: list[int], T: int) -> Tensor:
    return torch.arange(T)[:, None] < torch.tensor(lengths)[None, :]


# ---------------------------------------------------------------------------------------------------
# 4. allennlp viterbi_decode (allennlp/nn/util.py, 0.9 era)
# ---------------------------------------------------------------------------------------------------


class AllenNLPViterbi(nn.Module):
    """allenai/allennlp allennlp/nn/util.py viterbi_decode (0.9): ``tag_observations = [-1 for _ in
    range(sequence_length)]``; ``path_scores.append`` / ``path_indices.append`` in ``for timestep in
    range(1, sequence_length)`` reading ``path_scores[timestep - 1]``; backtrack ``for backward_timestep
    in reversed(path_indices): viterbi_path.append(int(backward_timestep[viterbi_path[-1]]))``.
    The transition matrix is a parameter; output adapted: ``torch.tensor(viterbi_path)``, score."""

    def __init__(self, num_tags: int = 4):
        super().__init__()
        torch.manual_seed(4)
        self.transition_matrix = nn.Parameter(torch.randn(num_tags, num_tags))

    def forward(self, tag_sequence: Tensor):
        viterbi_path, viterbi_score = viterbi_decode(tag_sequence, self.transition_matrix)
        return torch.tensor(viterbi_path, dtype=torch.long), viterbi_score


def viterbi_decode(tag_sequence: torch.Tensor, transition_matrix: torch.Tensor,
                   tag_observations: Optional[List[int]] = None):
    sequence_length, num_tags = list(tag_sequence.size())
    if tag_observations:
        if len(tag_observations) != sequence_length:
            raise ValueError("Observations were provided, but they were not the same length "
                             "as the sequence. Found sequence of length: {} and evidence: {}"
                             .format(sequence_length, tag_observations))
    else:
        tag_observations = [-1 for _ in range(sequence_length)]

    path_scores = []
    path_indices = []

    if tag_observations[0] != -1:
        one_hot = torch.zeros(num_tags)
        one_hot[tag_observations[0]] = 100000.
        path_scores.append(one_hot)
    else:
        path_scores.append(tag_sequence[0, :])

    for timestep in range(1, sequence_length):
        summed_potentials = path_scores[timestep - 1].unsqueeze(-1) + transition_matrix
        scores, paths = torch.max(summed_potentials, 0)
        observation = tag_observations[timestep]
        if observation != -1:
            one_hot = torch.zeros(num_tags)
            one_hot[observation] = 100000.
            path_scores.append(one_hot)
        else:
            path_scores.append(tag_sequence[timestep, :] + scores.squeeze())
        path_indices.append(paths.squeeze())

    viterbi_score, best_path = torch.max(path_scores[-1], 0)
    viterbi_path = [int(best_path.numpy())]
    for backward_timestep in reversed(path_indices):
        viterbi_path.append(int(backward_timestep[viterbi_path[-1]]))
    viterbi_path.reverse()
    return viterbi_path, viterbi_score


# ---------------------------------------------------------------------------------------------------
# 5. NeMo RNN-T greedy (GreedyRNNTInfer._greedy_decode)
# ---------------------------------------------------------------------------------------------------


def label_collate(labels):  # nemo.collections.common.parts.rnn.label_collate (list-of-lists branch)
    batch_size = len(labels)
    max_len = max(len(label) for label in labels)
    cat_labels = torch.full((batch_size, max_len), fill_value=0.0, dtype=torch.int32)
    for e, l in enumerate(labels):
        cat_labels[e, : len(l)] = torch.tensor(l, dtype=torch.int32)
    return cat_labels


class NemoRNNTGreedy(nn.Module):
    """NVIDIA/NeMo nemo/collections/asr/parts/submodules/rnnt_greedy_decoding.py
    GreedyRNNTInfer._greedy_decode: ``for time_idx in range(out_len): f = x.narrow(dim=0,
    start=time_idx, length=1)``; inner ``while not_blank and (self.max_symbols is None or symbols_added
    < self.max_symbols)``; ``last_label = self._SOS if label == [] else label[-1]``; ``k = k.item()``;
    ``if k == self._blank_index: not_blank = False else: label.append(k); timesteps.append(time_idx);
    hidden = hidden_prime``. Prediction net (embedding + LSTM, blank-as-pad SOS = zero embedding) and
    joint (RNNTJoint: enc/pred linear, ReLU, linear) written small. Output adapted as in NeMo's
    ``pack_hypotheses``: ``torch.tensor(label, dtype=torch.long)`` plus the timesteps."""

    def __init__(self, d_enc: int = 8, d_pred: int = 8, vocab: int = 6, max_symbols: int = 3):
        super().__init__()
        torch.manual_seed(5)
        self._blank_index = vocab  # NeMo: blank is the last index
        self._SOS = self._blank_index
        self.max_symbols = max_symbols
        self.embed = nn.Embedding(vocab + 1, d_pred, padding_idx=self._blank_index)
        self.pred_rnn = nn.LSTM(d_pred, d_pred, batch_first=True)
        self.enc_lin = nn.Linear(d_enc, 16)
        self.pred_lin = nn.Linear(d_pred, 16)
        self.joint_out = nn.Linear(16, vocab + 1)

    def forward(self, x: Tensor, out_len: Tensor):
        label, timesteps = self._greedy_decode(x, out_len)
        return (torch.tensor(label, dtype=torch.long), torch.tensor(timesteps, dtype=torch.long))

    def predict(self, y, state):
        if y is None:
            emb = torch.zeros(1, 1, self.embed.embedding_dim)
        else:
            emb = self.embed(y.long())
        g, hid = self.pred_rnn(emb, state)
        return g, hid

    def _pred_step(self, label, hidden):
        if label == self._SOS:
            return self.predict(None, hidden)
        label = label_collate([[label]])
        return self.predict(label, hidden)

    def _joint_step(self, enc, pred, log_normalize=None):
        f = self.enc_lin(enc).unsqueeze(2)
        g = self.pred_lin(pred).unsqueeze(1)
        return self.joint_out(torch.relu(f + g))

    def _greedy_decode(self, x: torch.Tensor, out_len: torch.Tensor):
        # x: [T, 1, D]
        # out_len: [seq_len]
        hidden = None
        label = []
        timesteps = []
        for time_idx in range(out_len):
            f = x.narrow(dim=0, start=time_idx, length=1)
            not_blank = True
            symbols_added = 0
            while not_blank and (self.max_symbols is None or symbols_added < self.max_symbols):
                last_label = self._SOS if label == [] else label[-1]
                g, hidden_prime = self._pred_step(last_label, hidden)
                logp = self._joint_step(f, g, log_normalize=None)[0, 0, 0, :]
                del g
                if logp.dtype != torch.float32:
                    logp = logp.float()
                v, k = logp.max(0)
                k = k.item()
                if k == self._blank_index:
                    not_blank = False
                else:
                    label.append(k)
                    timesteps.append(time_idx)
                    hidden = hidden_prime
                symbols_added += 1
        return label, timesteps


# ---------------------------------------------------------------------------------------------------
# 6-8. Tacotron 2 decoders (NVIDIA/tacotron2 model.py, pytorch/audio torchaudio/models/_tacotron2.py,
#      coqui-ai/TTS TTS/tts/layers/tacotron/tacotron2.py)
# ---------------------------------------------------------------------------------------------------

N_MEL, PRENET, ATT_RNN, DEC_RNN, ENC_DIM, ATT_DIM, LOC_F, LOC_K = 4, 8, 16, 16, 8, 8, 4, 3


class _LocationLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.location_conv = nn.Conv1d(2, LOC_F, kernel_size=LOC_K, padding=(LOC_K - 1) // 2, bias=False)
        self.location_dense = nn.Linear(LOC_F, ATT_DIM, bias=False)

    def forward(self, attention_weights_cat):
        processed_attention = self.location_conv(attention_weights_cat)
        processed_attention = processed_attention.transpose(1, 2)
        return self.location_dense(processed_attention)


class _Attention(nn.Module):
    """NVIDIA/tacotron2 model.py Attention (location-sensitive), small."""

    def __init__(self):
        super().__init__()
        self.query_layer = nn.Linear(ATT_RNN, ATT_DIM, bias=False)
        self.memory_layer = nn.Linear(ENC_DIM, ATT_DIM, bias=False)
        self.v = nn.Linear(ATT_DIM, 1, bias=False)
        self.location_layer = _LocationLayer()
        self.score_mask_value = -float("inf")

    def get_alignment_energies(self, query, processed_memory, attention_weights_cat):
        processed_query = self.query_layer(query.unsqueeze(1))
        processed_attention_weights = self.location_layer(attention_weights_cat)
        energies = self.v(torch.tanh(processed_query + processed_attention_weights + processed_memory))
        return energies.squeeze(-1)

    def forward(self, attention_hidden_state, memory, processed_memory, attention_weights_cat, mask):
        alignment = self.get_alignment_energies(attention_hidden_state, processed_memory, attention_weights_cat)
        if mask is not None:
            alignment = alignment.masked_fill(mask, self.score_mask_value)
        attention_weights = F.softmax(alignment, dim=1)
        attention_context = torch.bmm(attention_weights.unsqueeze(1), memory)
        attention_context = attention_context.squeeze(1)
        return attention_context, attention_weights


class _Prenet(nn.Module):
    """NVIDIA Prenet without its always-on dropout (``F.dropout(..., training=True)``), for determinism."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(N_MEL, PRENET), nn.Linear(PRENET, PRENET)])

    def forward(self, x):
        for linear in self.layers:
            x = F.relu(linear(x))
        return x


class Tacotron2NvidiaInference(nn.Module):
    """NVIDIA/tacotron2 model.py Decoder.inference: ``while True:`` with ``mel_outputs +=
    [mel_output.squeeze(1)]`` (three lists), ``if torch.sigmoid(gate_output.data) >
    self.gate_threshold: break`` / ``elif len(mel_outputs) == self.max_decoder_steps: print(...);
    break``; the decoder state lives in attributes (``self.attention_hidden`` ... set in
    ``initialize_decoder_states`` and reassigned by ``decode``). Batch 1 (the gate test is a 1x1
    tensor); encoder length dynamic. Sizes tiny, prenet dropout removed."""

    def __init__(self, max_decoder_steps: int = 6, gate_threshold: float = 0.5):
        super().__init__()
        torch.manual_seed(7)
        self.n_mel_channels = N_MEL
        self.n_frames_per_step = 1
        self.max_decoder_steps = max_decoder_steps
        self.gate_threshold = gate_threshold
        self.p_attention_dropout = 0.1
        self.p_decoder_dropout = 0.1
        self.prenet = _Prenet()
        self.attention_rnn = nn.LSTMCell(PRENET + ENC_DIM, ATT_RNN)
        self.attention_layer = _Attention()
        self.decoder_rnn = nn.LSTMCell(ATT_RNN + ENC_DIM, DEC_RNN)
        self.linear_projection = nn.Linear(DEC_RNN + ENC_DIM, N_MEL)
        self.gate_layer = nn.Linear(DEC_RNN + ENC_DIM, 1)

    def forward(self, memory: Tensor):
        mel_outputs, gate_outputs, alignments = self.inference(memory)
        return mel_outputs, gate_outputs, alignments

    def get_go_frame(self, memory):
        B = memory.size(0)
        return memory.data.new(B, self.n_mel_channels * self.n_frames_per_step).zero_()

    def initialize_decoder_states(self, memory, mask):
        B = memory.size(0)
        MAX_TIME = memory.size(1)
        self.attention_hidden = memory.data.new(B, ATT_RNN).zero_()
        self.attention_cell = memory.data.new(B, ATT_RNN).zero_()
        self.decoder_hidden = memory.data.new(B, DEC_RNN).zero_()
        self.decoder_cell = memory.data.new(B, DEC_RNN).zero_()
        self.attention_weights = memory.data.new(B, MAX_TIME).zero_()
        self.attention_weights_cum = memory.data.new(B, MAX_TIME).zero_()
        self.attention_context = memory.data.new(B, ENC_DIM).zero_()
        self.memory = memory
        self.processed_memory = self.attention_layer.memory_layer(memory)
        self.mask = mask

    def parse_decoder_outputs(self, mel_outputs, gate_outputs, alignments):
        alignments = torch.stack(alignments).transpose(0, 1)
        gate_outputs = torch.stack(gate_outputs).transpose(0, 1)
        gate_outputs = gate_outputs.contiguous()
        mel_outputs = torch.stack(mel_outputs).transpose(0, 1).contiguous()
        mel_outputs = mel_outputs.view(mel_outputs.size(0), -1, self.n_mel_channels)
        mel_outputs = mel_outputs.transpose(1, 2)
        return mel_outputs, gate_outputs, alignments

    def decode(self, decoder_input):
        cell_input = torch.cat((decoder_input, self.attention_context), -1)
        self.attention_hidden, self.attention_cell = self.attention_rnn(
            cell_input, (self.attention_hidden, self.attention_cell))
        self.attention_hidden = F.dropout(self.attention_hidden, self.p_attention_dropout, self.training)
        attention_weights_cat = torch.cat(
            (self.attention_weights.unsqueeze(1), self.attention_weights_cum.unsqueeze(1)), dim=1)
        self.attention_context, self.attention_weights = self.attention_layer(
            self.attention_hidden, self.memory, self.processed_memory, attention_weights_cat, self.mask)
        self.attention_weights_cum += self.attention_weights
        decoder_input = torch.cat((self.attention_hidden, self.attention_context), -1)
        self.decoder_hidden, self.decoder_cell = self.decoder_rnn(
            decoder_input, (self.decoder_hidden, self.decoder_cell))
        self.decoder_hidden = F.dropout(self.decoder_hidden, self.p_decoder_dropout, self.training)
        decoder_hidden_attention_context = torch.cat((self.decoder_hidden, self.attention_context), dim=1)
        decoder_output = self.linear_projection(decoder_hidden_attention_context)
        gate_prediction = self.gate_layer(decoder_hidden_attention_context)
        return decoder_output, gate_prediction, self.attention_weights

    def inference(self, memory):
        decoder_input = self.get_go_frame(memory)
        self.initialize_decoder_states(memory, mask=None)
        mel_outputs, gate_outputs, alignments = [], [], []
        while True:
            decoder_input = self.prenet(decoder_input)
            mel_output, gate_output, alignment = self.decode(decoder_input)
            mel_outputs += [mel_output.squeeze(1)]
            gate_outputs += [gate_output]
            alignments += [alignment]
            if torch.sigmoid(gate_output.data) > self.gate_threshold:
                break
            elif len(mel_outputs) == self.max_decoder_steps:
                print("Warning! Reached max decoder steps")
                break
            decoder_input = mel_output
        mel_outputs, gate_outputs, alignments = self.parse_decoder_outputs(mel_outputs, gate_outputs, alignments)
        return mel_outputs, gate_outputs, alignments


class CoquiTacotron2Inference(Tacotron2NvidiaInference):
    """coqui-ai/TTS TTS/tts/layers/tacotron/tacotron2.py Decoder.inference: ``outputs, stop_tokens,
    alignments, t = [], [], [], 0``; ``while True:`` ... ``stop_token = torch.sigmoid(stop_token.data)``;
    ``if stop_token > 0.7 and t > inputs.shape[0] / 2: break`` (reads the input's first size inside the
    body); ``if len(outputs) == self.max_decoder_steps: print(...); break``; ``t += 1``. The decode
    step (attribute state) is the NVIDIA one above; ``inputs`` is the encoder output (B, T, D), B = 1."""

    def forward(self, inputs: Tensor):
        return self.inference(inputs)

    def inference(self, inputs):
        memory = self.get_go_frame(inputs)
        self.initialize_decoder_states(inputs, mask=None)
        outputs, stop_tokens, alignments, t = [], [], [], 0
        while True:
            memory = self.prenet(memory)
            decoder_output, stop_token, alignment = self.decode(memory)
            stop_token = torch.sigmoid(stop_token.data)
            outputs += [decoder_output.squeeze(1)]
            stop_tokens += [stop_token]
            alignments += [alignment]
            if stop_token > 0.7 and t > inputs.shape[0] / 2:
                break
            if len(outputs) == self.max_decoder_steps:
                print("   | > Decoder stopped with 'max_decoder_steps")
                break
            memory = decoder_output
            t += 1
        return self.parse_decoder_outputs(outputs, stop_tokens, alignments)


class Tacotron2TorchaudioInfer(nn.Module):
    """pytorch/audio torchaudio/models/_tacotron2.py _Decoder.infer: ``for _ in
    range(self.decoder_max_step)`` with explicit state passed through ``self.decode(...)``, three lists
    appended, ``mel_specgram_lengths[~finished] += 1``, ``finished |= torch.sigmoid(gate_output.squeeze(1))
    > self.gate_threshold``, ``if self.decoder_early_stopping and torch.all(finished): break``; then
    ``if len(mel_specgrams) == self.decoder_max_step: warnings.warn(...)`` and ``torch.cat`` of the lists.
    Batch and encoder length dynamic, memory_lengths give the padding mask. Sizes tiny."""

    def __init__(self, decoder_max_step: int = 6, gate_threshold: float = 0.5):
        super().__init__()
        torch.manual_seed(8)
        self.n_mels = N_MEL
        self.n_frames_per_step = 1
        self.decoder_max_step = decoder_max_step
        self.gate_threshold = gate_threshold
        self.decoder_early_stopping = True
        self.attention_dropout = 0.1
        self.decoder_dropout = 0.1
        self.prenet = _Prenet()
        self.attention_rnn = nn.LSTMCell(PRENET + ENC_DIM, ATT_RNN)
        self.attention_layer = _Attention()
        self.decoder_rnn = nn.LSTMCell(ATT_RNN + ENC_DIM, DEC_RNN)
        self.linear_projection = nn.Linear(DEC_RNN + ENC_DIM, N_MEL)
        self.gate_layer = nn.Linear(DEC_RNN + ENC_DIM, 1)

    def forward(self, memory: Tensor, memory_lengths: Tensor):
        return self.infer(memory, memory_lengths)

    def _get_go_frame(self, memory):
        n_batch = memory.size(0)
        return torch.zeros(n_batch, self.n_mels * self.n_frames_per_step, dtype=memory.dtype)

    def _initialize_decoder_states(self, memory):
        n_batch = memory.size(0)
        max_time = memory.size(1)
        dtype = memory.dtype
        attention_hidden = torch.zeros(n_batch, ATT_RNN, dtype=dtype)
        attention_cell = torch.zeros(n_batch, ATT_RNN, dtype=dtype)
        decoder_hidden = torch.zeros(n_batch, DEC_RNN, dtype=dtype)
        decoder_cell = torch.zeros(n_batch, DEC_RNN, dtype=dtype)
        attention_weights = torch.zeros(n_batch, max_time, dtype=dtype)
        attention_weights_cum = torch.zeros(n_batch, max_time, dtype=dtype)
        attention_context = torch.zeros(n_batch, ENC_DIM, dtype=dtype)
        processed_memory = self.attention_layer.memory_layer(memory)
        return (attention_hidden, attention_cell, decoder_hidden, decoder_cell, attention_weights,
                attention_weights_cum, attention_context, processed_memory)

    def decode(self, decoder_input, attention_hidden, attention_cell, decoder_hidden, decoder_cell,
               attention_weights, attention_weights_cum, attention_context, memory, processed_memory, mask):
        cell_input = torch.cat((decoder_input, attention_context), -1)
        attention_hidden, attention_cell = self.attention_rnn(cell_input, (attention_hidden, attention_cell))
        attention_hidden = F.dropout(attention_hidden, self.attention_dropout, self.training)
        attention_weights_cat = torch.cat((attention_weights.unsqueeze(1), attention_weights_cum.unsqueeze(1)), dim=1)
        attention_context, attention_weights = self.attention_layer(
            attention_hidden, memory, processed_memory, attention_weights_cat, mask)
        attention_weights_cum += attention_weights
        decoder_input = torch.cat((attention_hidden, attention_context), -1)
        decoder_hidden, decoder_cell = self.decoder_rnn(decoder_input, (decoder_hidden, decoder_cell))
        decoder_hidden = F.dropout(decoder_hidden, self.decoder_dropout, self.training)
        decoder_hidden_attention_context = torch.cat((decoder_hidden, attention_context), dim=1)
        decoder_output = self.linear_projection(decoder_hidden_attention_context)
        gate_prediction = self.gate_layer(decoder_hidden_attention_context)
        return (decoder_output, gate_prediction, attention_hidden, attention_cell, decoder_hidden,
                decoder_cell, attention_weights, attention_weights_cum, attention_context)

    def _parse_decoder_outputs(self, mel_specgram, gate_outputs, alignments):
        alignments = alignments.transpose(0, 1).contiguous()
        gate_outputs = gate_outputs.transpose(0, 1).contiguous()
        mel_specgram = mel_specgram.transpose(0, 1).contiguous()
        shape = (mel_specgram.shape[0], -1, self.n_mels)
        mel_specgram = mel_specgram.view(*shape)
        mel_specgram = mel_specgram.transpose(1, 2)
        return mel_specgram, gate_outputs, alignments

    def infer(self, memory: Tensor, memory_lengths: Tensor):
        batch_size = memory.size(0)
        dtype = memory.dtype
        # torchaudio _get_mask_from_lengths(memory_lengths): True where valid; the decoder masks ~mask
        max_len = memory.size(1)
        ids = torch.arange(0, max_len, dtype=memory_lengths.dtype)
        mask = (ids < memory_lengths.unsqueeze(1)).byte()
        mask = torch.le(mask, 0)
        decoder_input = self._get_go_frame(memory)
        (attention_hidden, attention_cell, decoder_hidden, decoder_cell, attention_weights,
         attention_weights_cum, attention_context, processed_memory) = self._initialize_decoder_states(memory)
        mel_specgram_lengths = torch.zeros([batch_size], dtype=torch.int32)
        finished = torch.zeros([batch_size], dtype=torch.bool)
        mel_specgrams: List[Tensor] = []
        gate_outputs: List[Tensor] = []
        alignments: List[Tensor] = []
        for _ in range(self.decoder_max_step):
            decoder_input = self.prenet(decoder_input)
            (mel_specgram, gate_output, attention_hidden, attention_cell, decoder_hidden, decoder_cell,
             attention_weights, attention_weights_cum, attention_context) = self.decode(
                decoder_input, attention_hidden, attention_cell, decoder_hidden, decoder_cell,
                attention_weights, attention_weights_cum, attention_context, memory, processed_memory, mask)
            mel_specgrams.append(mel_specgram.unsqueeze(0))
            gate_outputs.append(gate_output.transpose(0, 1))
            alignments.append(attention_weights)
            mel_specgram_lengths[~finished] += 1
            finished |= torch.sigmoid(gate_output.squeeze(1)) > self.gate_threshold
            if self.decoder_early_stopping and torch.all(finished):
                break
            decoder_input = mel_specgram
        if len(mel_specgrams) == self.decoder_max_step:
            warnings.warn("Reached max decoder steps. The generated spectrogram might not cover "
                          "the whole transcript.")
        mel_specgrams = torch.cat(mel_specgrams, dim=0)
        gate_outputs = torch.cat(gate_outputs, dim=0)
        alignments = torch.cat(alignments, dim=0)
        mel_specgrams, gate_outputs, alignments = self._parse_decoder_outputs(mel_specgrams, gate_outputs, alignments)
        return mel_specgrams, mel_specgram_lengths, gate_outputs, alignments


# ---------------------------------------------------------------------------------------------------
# 9. PyTorch tutorial: seq2seq translation with attention, evaluate()
# ---------------------------------------------------------------------------------------------------

SOS_token, EOS_token, MAX_LENGTH = 0, 1, 6


class _EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size)

    def forward(self, input, hidden):
        embedded = self.embedding(input).view(1, 1, -1)
        output = embedded
        output, hidden = self.gru(output, hidden)
        return output, hidden

    def initHidden(self):
        return torch.zeros(1, 1, self.hidden_size)


class _AttnDecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size, dropout_p=0.1, max_length=MAX_LENGTH):
        super().__init__()
        self.hidden_size = hidden_size
        self.output_size = output_size
        self.max_length = max_length
        self.embedding = nn.Embedding(self.output_size, self.hidden_size)
        self.attn = nn.Linear(self.hidden_size * 2, self.max_length)
        self.attn_combine = nn.Linear(self.hidden_size * 2, self.hidden_size)
        self.dropout = nn.Dropout(dropout_p)
        self.gru = nn.GRU(self.hidden_size, self.hidden_size)
        self.out = nn.Linear(self.hidden_size, self.output_size)

    def forward(self, input, hidden, encoder_outputs):
        embedded = self.embedding(input).view(1, 1, -1)
        embedded = self.dropout(embedded)
        attn_weights = F.softmax(self.attn(torch.cat((embedded[0], hidden[0]), 1)), dim=1)
        attn_applied = torch.bmm(attn_weights.unsqueeze(0), encoder_outputs.unsqueeze(0))
        output = torch.cat((embedded[0], attn_applied[0]), 1)
        output = self.attn_combine(output).unsqueeze(0)
        output = F.relu(output)
        output, hidden = self.gru(output, hidden)
        output = F.log_softmax(self.out(output[0]), dim=1)
        return output, hidden, attn_weights


class Seq2SeqTutorialEvaluate(nn.Module):
    """pytorch/tutorials intermediate_source/seq2seq_translation_tutorial.py evaluate() (2017-2022
    version): encoder loop ``for ei in range(input_length): encoder_output, encoder_hidden =
    encoder(input_tensor[ei], encoder_hidden); encoder_outputs[ei] += encoder_output[0, 0]`` (input_length
    = input_tensor.size()[0]), decoder loop ``for di in range(max_length)`` with
    ``decoder_attentions[di] = decoder_attention.data``, ``if topi.item() == EOS_token:
    decoded_words.append('<EOS>'); break``, ``decoder_input = topi.squeeze().detach()``, and
    ``decoder_attentions[:di + 1]`` after the loop. Words adapted to ids (``index2word`` dropped)."""

    def __init__(self, hidden: int = 16, vocab: int = V):
        super().__init__()
        torch.manual_seed(9)
        self.encoder = _EncoderRNN(vocab, hidden)
        self.decoder = _AttnDecoderRNN(hidden, vocab)

    def forward(self, input_tensor: Tensor):
        decoded_words, attentions = self.evaluate(input_tensor)
        return torch.tensor(decoded_words, dtype=torch.long), attentions

    def evaluate(self, input_tensor, max_length=MAX_LENGTH):
        encoder, decoder = self.encoder, self.decoder
        with torch.no_grad():
            input_length = input_tensor.size()[0]
            encoder_hidden = encoder.initHidden()
            encoder_outputs = torch.zeros(max_length, encoder.hidden_size)
            for ei in range(input_length):
                encoder_output, encoder_hidden = encoder(input_tensor[ei], encoder_hidden)
                encoder_outputs[ei] += encoder_output[0, 0]
            decoder_input = torch.tensor([[SOS_token]])
            decoder_hidden = encoder_hidden
            decoded_words = []
            decoder_attentions = torch.zeros(max_length, max_length)
            for di in range(max_length):
                decoder_output, decoder_hidden, decoder_attention = decoder(
                    decoder_input, decoder_hidden, encoder_outputs)
                decoder_attentions[di] = decoder_attention.data
                topv, topi = decoder_output.data.topk(1)
                if topi.item() == EOS_token:
                    decoded_words.append(EOS_token)  # tutorial: '<EOS>'
                    break
                else:
                    decoded_words.append(topi.item())  # tutorial: output_lang.index2word[topi.item()]
                decoder_input = topi.squeeze().detach()
            return decoded_words, decoder_attentions[:di + 1]


# ---------------------------------------------------------------------------------------------------
# 10. PyTorch tutorial: translation_transformer greedy_decode
# ---------------------------------------------------------------------------------------------------

BOS_IDX, EOS_IDX, PAD_IDX = 2, 3, 1


class _PositionalEncoding(nn.Module):
    def __init__(self, emb_size: int, dropout: float, maxlen: int = 64):
        super().__init__()
        den = torch.exp(- torch.arange(0, emb_size, 2) * math.log(10000) / emb_size)
        pos = torch.arange(0, maxlen).reshape(maxlen, 1)
        pos_embedding = torch.zeros((maxlen, emb_size))
        pos_embedding[:, 0::2] = torch.sin(pos * den)
        pos_embedding[:, 1::2] = torch.cos(pos * den)
        pos_embedding = pos_embedding.unsqueeze(-2)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer('pos_embedding', pos_embedding)

    def forward(self, token_embedding: Tensor):
        return self.dropout(token_embedding + self.pos_embedding[:token_embedding.size(0), :])


class _TokenEmbedding(nn.Module):
    def __init__(self, vocab_size: int, emb_size):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, emb_size)
        self.emb_size = emb_size

    def forward(self, tokens: Tensor):
        return self.embedding(tokens.long()) * math.sqrt(self.emb_size)


class _Seq2SeqTransformer(nn.Module):
    def __init__(self, emb_size=16, nhead=2, vocab=V, dim_feedforward=32, dropout=0.1):
        super().__init__()
        self.transformer = nn.Transformer(d_model=emb_size, nhead=nhead, num_encoder_layers=1,
                                          num_decoder_layers=1, dim_feedforward=dim_feedforward,
                                          dropout=dropout)
        self.generator = nn.Linear(emb_size, vocab)
        self.src_tok_emb = _TokenEmbedding(vocab, emb_size)
        self.tgt_tok_emb = _TokenEmbedding(vocab, emb_size)
        self.positional_encoding = _PositionalEncoding(emb_size, dropout=dropout)

    def encode(self, src: Tensor, src_mask: Tensor):
        return self.transformer.encoder(self.positional_encoding(self.src_tok_emb(src)), src_mask)

    def decode(self, tgt: Tensor, memory: Tensor, tgt_mask: Tensor):
        return self.transformer.decoder(self.positional_encoding(self.tgt_tok_emb(tgt)), memory, tgt_mask)


def generate_square_subsequent_mask(sz):
    mask = (torch.triu(torch.ones((sz, sz))) == 1).transpose(0, 1)
    mask = mask.float().masked_fill(mask == 0, float('-inf')).masked_fill(mask == 1, float(0.0))
    return mask


class TranslationTransformerGreedy(nn.Module):
    """pytorch/tutorials beginner_source/translation_transformer.py greedy_decode + translate():
    ``num_tokens = src.shape[0]``, ``max_len=num_tokens + 5``; ``for i in range(max_len-1)``: tgt mask
    ``generate_square_subsequent_mask(ys.size(0))`` (grows), ``next_word = next_word.item()``, ``ys =
    torch.cat([ys, torch.ones(1, 1).type_as(src.data).fill_(next_word)], dim=0)``, ``if next_word ==
    EOS_IDX: break``. nn.Transformer with 1+1 layers, d_model 16."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(10)
        self.model = _Seq2SeqTransformer()

    def forward(self, src: Tensor):
        num_tokens = src.shape[0]
        src_mask = (torch.zeros(num_tokens, num_tokens)).type(torch.bool)
        tgt_tokens = self.greedy_decode(self.model, src, src_mask, max_len=num_tokens + 5,
                                        start_symbol=BOS_IDX).flatten()
        return tgt_tokens

    def greedy_decode(self, model, src, src_mask, max_len, start_symbol):
        memory = model.encode(src, src_mask)
        ys = torch.ones(1, 1).fill_(start_symbol).type(torch.long)
        for i in range(max_len - 1):
            tgt_mask = (generate_square_subsequent_mask(ys.size(0)).type(torch.bool))
            out = model.decode(ys, memory, tgt_mask)
            out = out.transpose(0, 1)
            prob = model.generator(out[:, -1])
            _, next_word = torch.max(prob, dim=1)
            next_word = next_word.item()
            ys = torch.cat([ys, torch.ones(1, 1).type_as(src.data).fill_(next_word)], dim=0)
            if next_word == EOS_IDX:
                break
        return ys


# ---------------------------------------------------------------------------------------------------
# 11. hkproj/pytorch-transformer train.py greedy_decode (leading break on a size)
# ---------------------------------------------------------------------------------------------------


def causal_mask(size):  # hkproj/pytorch-transformer dataset.py
    mask = torch.triu(torch.ones((1, size, size)), diagonal=1).type(torch.int)
    return mask == 0


class _TinyEncDec(nn.Module):
    """Stand-in for hkproj's Transformer (encode/decode/project with 0/1 masks, batch first)."""

    def __init__(self, d=16, vocab=V):
        super().__init__()
        self.src_embed = nn.Embedding(vocab, d)
        self.tgt_embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(16, d) * 0.1)
        self.enc = nn.Linear(d, d)
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.cross = nn.Linear(d, d)
        self.projection_layer = nn.Linear(d, vocab)

    def encode(self, src, src_mask):
        x = self.src_embed(src) + self.pos[: src.size(1)]
        return torch.tanh(self.enc(x))

    def decode(self, encoder_output, src_mask, tgt, tgt_mask):
        x = self.tgt_embed(tgt) + self.pos[: tgt.size(1)]
        s = self.q(x) @ self.k(x).transpose(1, 2) / 4.0
        s = s.masked_fill(tgt_mask == 0, -1e9)
        x = x + torch.softmax(s, -1) @ self.v(x)
        c = x @ encoder_output.transpose(1, 2) / 4.0
        c = c.masked_fill(src_mask[:, 0] == 0, -1e9)
        return x + self.cross(torch.softmax(c, -1) @ encoder_output)

    def project(self, x):
        return self.projection_layer(x)


class HkprojGreedyDecode(nn.Module):
    """hkproj/pytorch-transformer train.py greedy_decode: ``while True: if decoder_input.size(1) ==
    max_len: break`` as the FIRST statement of the body (a leading break on the grown size), mask
    ``causal_mask(decoder_input.size(1))``, ``torch.cat([decoder_input, torch.empty(1,
    1).type_as(source).fill_(next_word.item())], dim=1)``, ``if next_word == eos_idx: break``.
    The transformer is a small stand-in with the same encode/decode/project calls."""

    SOS, EOS, MAX_LEN = 2, 3, 7

    def __init__(self):
        super().__init__()
        torch.manual_seed(11)
        self.model = _TinyEncDec()

    def forward(self, source: Tensor, source_mask: Tensor):
        return self.greedy_decode(self.model, source, source_mask, self.MAX_LEN)

    def greedy_decode(self, model, source, source_mask, max_len):
        sos_idx = self.SOS
        eos_idx = self.EOS
        encoder_output = model.encode(source, source_mask)
        decoder_input = torch.empty(1, 1).fill_(sos_idx).type_as(source)
        while True:
            if decoder_input.size(1) == max_len:
                break
            decoder_mask = causal_mask(decoder_input.size(1)).type_as(source_mask)
            out = model.decode(encoder_output, source_mask, decoder_input, decoder_mask)
            prob = model.project(out[:, -1])
            _, next_word = torch.max(prob, dim=1)
            decoder_input = torch.cat(
                [decoder_input, torch.empty(1, 1).type_as(source).fill_(next_word.item())], dim=1)
            if next_word == eos_idx:
                break
        return decoder_input.squeeze(0)


# ---------------------------------------------------------------------------------------------------
# 12-13. chengui/torch-nmt RNNSeq2Seq.predict / beam_predict (GRU decoder, topk beam)
# ---------------------------------------------------------------------------------------------------


class _RNNEncoder(nn.Module):
    def __init__(self, n_vocab, n_embed, n_hiddens, n_layers, dropout=0.0):
        super().__init__()
        self.emb = nn.Embedding(n_vocab, n_embed)
        self.rnn = nn.GRU(n_embed, n_hiddens, num_layers=n_layers, dropout=dropout, batch_first=True)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, l):
        # origin packs with pack_padded_sequence(e, l.cpu(), ...); the held-out sets use full lengths
        e = self.dropout(self.emb(x))
        o, h = self.rnn(e)
        return h


class _RNNDecoder(nn.Module):
    def __init__(self, n_vocab, n_embed, n_hiddens, n_layers, dropout=0.0):
        super().__init__()
        self.emb = nn.Embedding(n_vocab, n_embed)
        self.rnn = nn.GRU(n_embed, n_hiddens, num_layers=n_layers, dropout=dropout, batch_first=True)
        self.fc = nn.Linear(n_hiddens, n_vocab)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, hidden):
        x = self.dropout(self.emb(x))
        o, hidden = self.rnn(x, hidden)
        o = self.fc(o)
        return o, hidden


def beam_initial(out, beam):  # chengui/torch-nmt nmt/model/beam.py
    probs, indics = out[:, -1, :].topk(beam, dim=-1)
    return indics.unsqueeze(-1), torch.log(probs)


def beam_search(out, preds, scores, beam):  # chengui/torch-nmt nmt/model/beam.py
    bs = scores.shape[0]
    probs, indics = out[:, -1, :].topk(beam, dim=-1)
    probs = probs.view(bs, beam, beam)
    indics = indics.view(bs, beam, beam)
    scores = scores.unsqueeze(-1) + torch.log(probs)
    scores, b_indics = scores.view(bs, -1).topk(beam, dim=-1)
    b_row, b_col = b_indics.div(beam).long(), b_indics.fmod(beam).long()
    batch = torch.arange(bs).unsqueeze(1).repeat(1, beam).view(-1)
    index = indics[batch, b_row.view(-1), b_col.view(-1)].long()
    preds = preds[batch, b_row.view(-1), :].view(bs, beam, -1)
    preds = torch.cat([preds, index.view(bs, beam, 1)], dim=-1)
    return preds, scores


class _TorchNmtBase(nn.Module):
    EOS = 3
    MAXLEN = 6

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.encoder = _RNNEncoder(V, 8, 16, 1)
        self.decoder = _RNNDecoder(V, 8, 16, 1)


class TorchNmtPredict(_TorchNmtBase):
    """chengui/torch-nmt torch-nmt/nmt/model/seq2seq_rnn.py RNNSeq2Seq.predict: ``for t in
    range(maxlen)``: ``x = dec_x[:, t].unsqueeze(1) if pred is None else pred``; ``preds.append(pred)``;
    ``if all(pred_lens.le(t)): break`` (Python ``all`` over a tensor of batch size) and the masked write
    ``pred_lens[pred_lens.gt(t) & pred.squeeze(1).eq(eos_idx)] = t``; ``torch.cat(preds, dim=-1)``.
    Softmax-free outputs (the origin feeds logits to topk/argmax). Encoder without packing."""

    def __init__(self):
        super().__init__(12)

    def forward(self, enc_x, enc_len, dec_x, dec_len):
        return self.predict(enc_x, enc_len, dec_x, dec_len, eos_idx=self.EOS, maxlen=self.MAXLEN)

    def predict(self, enc_x, enc_len, dec_x, dec_len, eos_idx=3, maxlen=100):
        state = self.encoder(enc_x, enc_len)
        preds, pred = [], None
        pred_lens = maxlen * torch.ones(dec_x.shape[0]).long()
        for t in range(maxlen):
            x = dec_x[:, t].unsqueeze(1) if pred is None else pred
            out, state = self.decoder(x, state)
            pred = out.argmax(2)
            preds.append(pred)
            if all(pred_lens.le(t)):
                break
            pred_lens[pred_lens.gt(t) & pred.squeeze(1).eq(eos_idx)] = t
        return torch.cat(preds, dim=-1), pred_lens


class TorchNmtBeamPredict(_TorchNmtBase):
    """chengui/torch-nmt torch-nmt/nmt/model/seq2seq_rnn.py RNNSeq2Seq.beam_predict with
    nmt/model/beam.py beam_initial/beam_search: ``for t in range(maxlen)``: ``if t == 0: preds, scores =
    beam_initial(out, beam); state = state.repeat(1, beam, 1)`` (state grows from batch to batch*beam in
    the first iteration) ``else: preds, scores = beam_search(out, preds, scores, beam)`` (topk over
    beam*beam, regroup ``preds[batch, b_row]``, ``torch.cat`` grows preds); ``if all(pred_lens.le(t)):
    break``; masked write of ``pred_lens``. The origin's decoder output goes through softmax-free
    ``topk`` then ``torch.log(probs)``; the decoder here ends in log_softmax->exp so probs are > 0."""

    BEAM = 2

    def __init__(self):
        super().__init__(13)

    def forward(self, enc_x, enc_len, dec_x, dec_len):
        return self.beam_predict(enc_x, enc_len, dec_x, dec_len, beam=self.BEAM, eos_idx=self.EOS,
                                 maxlen=self.MAXLEN)

    def _decode(self, x, state):
        out, state = self.decoder(x, state)
        return out.softmax(-1), state

    def beam_predict(self, enc_x, enc_len, dec_x, dec_len, beam=2, eos_idx=3, maxlen=100):
        state = self.encoder(enc_x, enc_len)
        pred = None
        pred_lens = maxlen * torch.ones(dec_x.shape[0] * beam).long()
        for t in range(maxlen):
            if t == 0:
                x = dec_x[:, t].unsqueeze(1)
            else:
                x = pred.view(-1, 1)
            out, state = self._decode(x, state)
            if t == 0:
                preds, scores = beam_initial(out, beam)
                state = state.repeat(1, beam, 1)
            else:
                preds, scores = beam_search(out, preds, scores, beam)
            pred = preds[:, :, -1]
            if all(pred_lens.le(t)):
                break
            pred_lens[pred_lens.gt(t) & pred.view(-1).eq(eos_idx)] = t
        return preds, pred_lens.view(-1, beam)


# ---------------------------------------------------------------------------------------------------
# 14. karpathy/minGPT mingpt/model.py GPT.generate (crop to block_size inside a growing loop)
# ---------------------------------------------------------------------------------------------------


class MinGPTGenerate(nn.Module):
    """karpathy/minGPT mingpt/model.py GPT.generate (do_sample=False): ``for _ in
    range(max_new_tokens)``: ``idx_cond = idx if idx.size(1) <= self.block_size else idx[:,
    -self.block_size:]``, ``logits, _ = self(idx_cond)``, ``logits = logits[:, -1, :] / temperature``,
    ``_, idx_next = torch.topk(probs, k=1, dim=-1)``, ``idx = torch.cat((idx, idx_next), dim=1)``.
    max_new_tokens a Python int (static trip count, unrolled); the GPT is one causal attention block
    with minGPT's ``pos = torch.arange(0, t)`` and ``assert t <= self.block_size``."""

    def __init__(self, block_size: int = 8, n_embd: int = 16, max_new_tokens: int = 4):
        super().__init__()
        torch.manual_seed(14)
        self.block_size = block_size
        self.max_new_tokens = max_new_tokens
        self.wte = nn.Embedding(V, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.attn = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.lm_head = nn.Linear(n_embd, V, bias=False)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size)).view(1, block_size, block_size))

    def gpt(self, idx):
        b, t = idx.size()
        assert t <= self.block_size, f"Cannot forward sequence of length {t}, block size is only {self.block_size}"
        pos = torch.arange(0, t, dtype=torch.long).unsqueeze(0)
        x = self.wte(idx) + self.wpe(pos)
        q, k, v = self.attn(x).split(x.size(-1), dim=2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :t, :t] == 0, float('-inf'))
        x = x + self.proj(F.softmax(att, dim=-1) @ v)
        return self.lm_head(x), None

    def forward(self, idx: Tensor):
        return self.generate(idx, self.max_new_tokens)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, do_sample=False, top_k=None):
        for _ in range(max_new_tokens):
            idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]
            logits, _ = self.gpt(idx_cond)
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, top_k)
                logits[logits < v[:, [-1]]] = -float('Inf')
            probs = F.softmax(logits, dim=-1)
            if do_sample:
                idx_next = torch.multinomial(probs, num_samples=1)
            else:
                _, idx_next = torch.topk(probs, k=1, dim=-1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


# ---------------------------------------------------------------------------------------------------
# 15-16. huggingface transformers: hand-written loops around tiny random Llama / GPT-2
# ---------------------------------------------------------------------------------------------------


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(15)
    cfg = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                      bos_token_id=0, eos_token_id=2, pad_token_id=1)
    return LlamaForCausalLM(cfg).eval()


def _tiny_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(16)
    cfg = GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=50, n_positions=64,
                     bos_token_id=0, eos_token_id=2, pad_token_id=1)
    return GPT2LMHeadModel(cfg).eval()


class HFDynamicCacheDocsLoop(nn.Module):
    """huggingface/transformers docs/source/en/cache_explanation.md ("under the hood" loop):
    ``past_key_values = DynamicCache()``; ``for _ in range(max_new_tokens)``: ``outputs =
    model(**inputs, cache_position=cache_position, past_key_values=past_key_values, use_cache=True)``,
    ``next_token_ids = outputs.logits[:, -1:].argmax(-1)``, ``generated_ids = torch.cat(...)``,
    attention mask grown by ``torch.cat([attention_mask, attention_mask.new_ones(...)], dim=-1)``,
    ``inputs = {...}`` rebuilt, ``cache_position = cache_position[-1:] + 1``. Tiny random Llama.
    max_new_tokens a Python int (static, unrolled)."""

    def __init__(self, max_new_tokens: int = 4):
        super().__init__()
        self.model = _tiny_llama()
        self.max_new_tokens = max_new_tokens

    def forward(self, input_ids: Tensor, attention_mask: Tensor):
        from transformers import DynamicCache
        model = self.model
        past_key_values = DynamicCache(config=model.config)
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
        generated_ids = inputs["input_ids"]
        cache_position = torch.arange(inputs["input_ids"].shape[1], dtype=torch.int64)
        max_new_tokens = self.max_new_tokens
        for _ in range(max_new_tokens):
            outputs = model(**inputs, cache_position=cache_position, past_key_values=past_key_values, use_cache=True)
            next_token_ids = outputs.logits[:, -1:].argmax(-1)
            generated_ids = torch.cat([generated_ids, next_token_ids], dim=-1)
            attention_mask = inputs["attention_mask"]
            attention_mask = torch.cat([attention_mask, attention_mask.new_ones((attention_mask.shape[0], 1))], dim=-1)
            inputs = {"input_ids": next_token_ids, "attention_mask": attention_mask}
            cache_position = cache_position[-1:] + 1
        return generated_ids


class HFNoBeamSearchV3(nn.Module):
    """huggingface/transformers src/transformers/generation_utils.py (v3.x)
    GenerationMixin._generate_no_beam_search, greedy branch: ``while cur_len < max_length:`` with
    ``cur_len = input_ids.shape[-1]``, ``past`` None then the model's cache, GPT-2's
    ``prepare_inputs_for_generation`` (``if past: input_ids = input_ids[:, -1].unsqueeze(-1)``),
    ``tokens_to_add = next_token * unfinished_sents + pad_token_id * (1 - unfinished_sents)``,
    ``sent_lengths.masked_fill_(...)``, ``unfinished_sents.mul_(...)``, ``if unfinished_sents.max() ==
    0: break``, attention mask grown by ``torch.cat``. Tiny random GPT-2 (eos 2, pad 1)."""

    MAX_LENGTH = 9

    def __init__(self):
        super().__init__()
        self.model = _tiny_gpt2()

    def prepare_inputs_for_generation(self, input_ids, past=None, **kwargs):
        if past:
            input_ids = input_ids[:, -1].unsqueeze(-1)
        return {"input_ids": input_ids, "past_key_values": past, "use_cache": kwargs.get("use_cache")}

    def forward(self, input_ids: Tensor, attention_mask: Tensor):
        return self._generate_no_beam_search(input_ids, cur_len=input_ids.shape[-1], max_length=self.MAX_LENGTH,
                                             pad_token_id=1, eos_token_id=2, batch_size=input_ids.shape[0],
                                             attention_mask=attention_mask, use_cache=True)

    def _generate_no_beam_search(self, input_ids, cur_len, max_length, pad_token_id, eos_token_id,
                                 batch_size, attention_mask, use_cache):
        unfinished_sents = input_ids.new(batch_size).fill_(1)
        sent_lengths = input_ids.new(batch_size).fill_(max_length)
        past = None
        while cur_len < max_length:
            model_inputs = self.prepare_inputs_for_generation(input_ids, past=past, attention_mask=attention_mask,
                                                              use_cache=use_cache)
            outputs = self.model(**model_inputs)
            next_token_logits = outputs[0][:, -1, :]
            past = outputs[1]
            next_token = torch.argmax(next_token_logits, dim=-1)
            if eos_token_id is not None:
                tokens_to_add = next_token * unfinished_sents + (pad_token_id) * (1 - unfinished_sents)
            else:
                tokens_to_add = next_token
            input_ids = torch.cat([input_ids, tokens_to_add.unsqueeze(-1)], dim=-1)
            cur_len = cur_len + 1
            if eos_token_id is not None:
                eos_in_sents = tokens_to_add == eos_token_id
                is_sents_unfinished_and_token_to_add_is_eos = unfinished_sents.mul(eos_in_sents.long()).bool()
                sent_lengths.masked_fill_(is_sents_unfinished_and_token_to_add_is_eos, cur_len)
                unfinished_sents.mul_((~eos_in_sents).long())
            if unfinished_sents.max() == 0:
                break
            attention_mask = torch.cat([attention_mask, attention_mask.new_ones((attention_mask.shape[0], 1))], dim=-1)
        return input_ids


# ---------------------------------------------------------------------------------------------------
# 17. meta-llama/llama llama/generation.py Llama.generate + llama/model.py (static KV cache buffers)
# ---------------------------------------------------------------------------------------------------


class _RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        out = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return out.type_as(x) * self.weight


def _precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0):  # gpt-fast, real-valued
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end)
    freqs = torch.outer(t, freqs)
    return torch.stack([torch.cos(freqs), torch.sin(freqs)], dim=-1)


def _apply_rotary_emb(x, freqs_cis):  # pytorch-labs/gpt-fast model.py apply_rotary_emb
    xshaped = x.float().reshape(*x.shape[:-1], -1, 2)
    freqs_cis = freqs_cis.view(1, xshaped.size(1), 1, xshaped.size(3), 2)
    x_out2 = torch.stack([
        xshaped[..., 0] * freqs_cis[..., 0] - xshaped[..., 1] * freqs_cis[..., 1],
        xshaped[..., 1] * freqs_cis[..., 0] + xshaped[..., 0] * freqs_cis[..., 1],
    ], -1)
    return x_out2.flatten(3).type_as(x)


class _LlamaAttention(nn.Module):
    def __init__(self, dim, n_heads, max_batch_size, max_seq_len):
        super().__init__()
        self.n_local_heads = n_heads
        self.head_dim = dim // n_heads
        self.wq = nn.Linear(dim, dim, bias=False)
        self.wk = nn.Linear(dim, dim, bias=False)
        self.wv = nn.Linear(dim, dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)
        # llama/model.py: plain tensor attributes (not buffers), written in place
        self.cache_k = torch.zeros((max_batch_size, max_seq_len, self.n_local_heads, self.head_dim))
        self.cache_v = torch.zeros((max_batch_size, max_seq_len, self.n_local_heads, self.head_dim))

    def forward(self, x, start_pos, freqs_cis, mask):
        bsz, seqlen, _ = x.shape
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        xq = xq.view(bsz, seqlen, self.n_local_heads, self.head_dim)
        xk = xk.view(bsz, seqlen, self.n_local_heads, self.head_dim)
        xv = xv.view(bsz, seqlen, self.n_local_heads, self.head_dim)
        xq, xk = _apply_rotary_emb(xq, freqs_cis), _apply_rotary_emb(xk, freqs_cis)
        self.cache_k = self.cache_k.to(xq)
        self.cache_v = self.cache_v.to(xq)
        self.cache_k[:bsz, start_pos: start_pos + seqlen] = xk
        self.cache_v[:bsz, start_pos: start_pos + seqlen] = xv
        keys = self.cache_k[:bsz, : start_pos + seqlen]
        values = self.cache_v[:bsz, : start_pos + seqlen]
        xq = xq.transpose(1, 2)
        keys = keys.transpose(1, 2)
        values = values.transpose(1, 2)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores + mask
        scores = F.softmax(scores.float(), dim=-1).type_as(xq)
        output = torch.matmul(scores, values)
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
        return self.wo(output)


class LlamaGenerateStaticKV(nn.Module):
    """meta-llama/llama llama/generation.py Llama.generate (greedy, temperature 0) around llama/model.py
    Transformer/Attention: ``for cur_pos in range(min_prompt_len, total_len)``: ``logits =
    self.model.forward(tokens[:, prev_pos:cur_pos], prev_pos)`` (slices by the counter), the attention
    writes its static cache ``self.cache_k[:bsz, start_pos : start_pos + seqlen] = xk`` and reads
    ``self.cache_k[:bsz, : start_pos + seqlen]``, ``if seqlen > 1:`` builds the mask with
    ``torch.hstack([torch.zeros((seqlen, start_pos)), mask])``; ``next_token = torch.where(
    input_text_mask[:, cur_pos], tokens[:, cur_pos], next_token)``, ``tokens[:, cur_pos] = next_token``,
    ``eos_reached |= ...``, ``prev_pos = cur_pos``, ``if all(eos_reached): break``.
    Adapted: prompts come as one (bsz, L) tensor of equal-length rows (min = max prompt length = L),
    rotary embedding real-valued (gpt-fast form, ONNX has no complex), one layer, no FFN,
    ``@torch.inference_mode`` dropped."""

    EOS, PAD = 2, -1
    MAX_GEN_LEN, MAX_SEQ_LEN, MAX_BATCH = 5, 12, 4

    def __init__(self, dim: int = 16, n_heads: int = 2):
        super().__init__()
        torch.manual_seed(17)
        self.tok_embeddings = nn.Embedding(V, dim)
        self.attention = _LlamaAttention(dim, n_heads, self.MAX_BATCH, self.MAX_SEQ_LEN)
        self.attention_norm = _RMSNorm(dim)
        self.norm = _RMSNorm(dim)
        self.output = nn.Linear(dim, V, bias=False)
        self.register_buffer("freqs_cis", _precompute_freqs_cis(dim // n_heads, self.MAX_SEQ_LEN * 2), persistent=False)

    def transformer(self, tokens: torch.Tensor, start_pos: int):
        _bsz, seqlen = tokens.shape
        h = self.tok_embeddings(tokens)
        freqs_cis = self.freqs_cis[start_pos: start_pos + seqlen]
        mask = None
        if seqlen > 1:
            mask = torch.full((seqlen, seqlen), float("-inf"))
            mask = torch.triu(mask, diagonal=1)
            mask = torch.hstack([torch.zeros((seqlen, start_pos)), mask]).type_as(h)
        h = h + self.attention(self.attention_norm(h), start_pos, freqs_cis, mask)
        h = self.norm(h)
        return self.output(h).float()

    def forward(self, prompt_tokens: Tensor):
        return self.generate(prompt_tokens, self.MAX_GEN_LEN)

    def generate(self, prompt_tokens, max_gen_len):
        bsz = len(prompt_tokens)
        assert bsz <= self.MAX_BATCH, (bsz, self.MAX_BATCH)
        min_prompt_len = prompt_tokens.shape[1]
        max_prompt_len = prompt_tokens.shape[1]
        total_len = min(self.MAX_SEQ_LEN, max_gen_len + max_prompt_len)
        pad_id = self.PAD
        tokens = torch.full((bsz, total_len), pad_id, dtype=torch.long)
        tokens[:, :max_prompt_len] = prompt_tokens
        prev_pos = 0
        eos_reached = torch.zeros(bsz, dtype=torch.bool)  # origin: torch.tensor([False] * bsz)
        input_text_mask = tokens != pad_id
        for cur_pos in range(min_prompt_len, total_len):
            logits = self.transformer(tokens[:, prev_pos:cur_pos], prev_pos)
            next_token = torch.argmax(logits[:, -1], dim=-1)
            next_token = next_token.reshape(-1)
            next_token = torch.where(input_text_mask[:, cur_pos], tokens[:, cur_pos], next_token)
            tokens[:, cur_pos] = next_token
            eos_reached |= (~input_text_mask[:, cur_pos]) & (next_token == self.EOS)
            prev_pos = cur_pos
            if all(eos_reached):
                break
        return tokens


# ---------------------------------------------------------------------------------------------------
# 18-19. lorenlugosch/pytorch_HMM (HMM forward algorithm, Viterbi with .insert(0, ...))
# ---------------------------------------------------------------------------------------------------


def log_domain_matmul(log_A, log_B):
    m = log_A.shape[0]
    n = log_A.shape[1]
    p = log_B.shape[1]
    log_A_expanded = torch.reshape(log_A, (m, n, 1))
    log_B_expanded = torch.reshape(log_B, (1, n, p))
    elementwise_sum = log_A_expanded + log_B_expanded
    out = torch.logsumexp(elementwise_sum, dim=1)
    return out


def maxmul(log_A, log_B):
    m = log_A.shape[0]
    n = log_A.shape[1]
    p = log_B.shape[1]
    log_A_expanded = torch.stack([log_A] * p, dim=2)
    log_B_expanded = torch.stack([log_B] * m, dim=0)
    elementwise_sum = log_A_expanded + log_B_expanded
    out1, out2 = torch.max(elementwise_sum, dim=1)
    return out1, out2


class _TransitionModel(nn.Module):
    def __init__(self, N):
        super().__init__()
        self.N = N
        self.unnormalized_transition_matrix = nn.Parameter(torch.randn(N, N))

    def forward(self, log_alpha):
        log_transition_matrix = F.log_softmax(self.unnormalized_transition_matrix, dim=0)
        return log_domain_matmul(log_transition_matrix, log_alpha.transpose(0, 1)).transpose(0, 1)

    def maxmul(self, log_alpha):
        log_transition_matrix = F.log_softmax(self.unnormalized_transition_matrix, dim=0)
        out1, out2 = maxmul(log_transition_matrix, log_alpha.transpose(0, 1))
        return out1.transpose(0, 1), out2.transpose(0, 1)


class _EmissionModel(nn.Module):
    def __init__(self, N, M):
        super().__init__()
        self.unnormalized_emission_matrix = nn.Parameter(torch.randn(N, M))

    def forward(self, x_t):
        log_emission_matrix = F.log_softmax(self.unnormalized_emission_matrix, dim=1)
        return log_emission_matrix[:, x_t].transpose(0, 1)


class _HMMBase(nn.Module):
    def __init__(self, N=3, M=V):
        super().__init__()
        torch.manual_seed(18)
        self.N = N
        self.M = M
        self.transition_model = _TransitionModel(N)
        self.emission_model = _EmissionModel(N, M)
        self.unnormalized_state_priors = nn.Parameter(torch.randn(N))
        self.is_cuda = False


class HMMForward(_HMMBase):
    """lorenlugosch/pytorch_HMM (HMM tutorial) HMM.forward: ``log_alpha = torch.zeros(batch_size, T_max,
    self.N)``; ``for t in range(1, T_max): log_alpha[:, t, :] = self.emission_model(x[:,t]) +
    self.transition_model(log_alpha[:, t-1, :])``; ``torch.gather(log_sums, 1, T.view(-1,1) - 1)``."""

    def forward(self, x, T):
        batch_size = x.shape[0]
        T_max = x.shape[1]
        log_state_priors = F.log_softmax(self.unnormalized_state_priors, dim=0)
        log_alpha = torch.zeros(batch_size, T_max, self.N)
        log_alpha[:, 0, :] = self.emission_model(x[:, 0]) + log_state_priors
        for t in range(1, T_max):
            log_alpha[:, t, :] = self.emission_model(x[:, t]) + self.transition_model(log_alpha[:, t - 1, :])
        log_sums = log_alpha.logsumexp(dim=2)
        log_probs = torch.gather(log_sums, 1, T.view(-1, 1) - 1)
        return log_probs


class HMMViterbi(_HMMBase):
    """lorenlugosch/pytorch_HMM (HMM tutorial) viterbi: forward loop writing ``log_delta[:, t, :]`` and
    ``psi[:, t, :]`` through ``maxmul`` (``torch.stack([log_A] * p, dim=2)`` with p the batch size),
    then per example ``z_star_i = [log_delta[i, T[i] - 1, :].max(dim=0)[1].item()]``, ``for t in
    range(T[i] - 1, 0, -1): z_t = psi[i, t, z_star_i[0]].item(); z_star_i.insert(0, z_t)``.
    Output adapted: the paths concatenated into one tensor, and best_path_scores."""

    def forward(self, x, T):
        z_star, best_path_scores = self.viterbi(x, T)
        return torch.cat([torch.tensor(z, dtype=torch.long) for z in z_star]), best_path_scores

    def viterbi(self, x, T):
        batch_size = x.shape[0]
        T_max = x.shape[1]
        log_state_priors = F.log_softmax(self.unnormalized_state_priors, dim=0)
        log_delta = torch.zeros(batch_size, T_max, self.N).float()
        psi = torch.zeros(batch_size, T_max, self.N).long()
        log_delta[:, 0, :] = self.emission_model(x[:, 0]) + log_state_priors
        for t in range(1, T_max):
            max_val, argmax_val = self.transition_model.maxmul(log_delta[:, t - 1, :])
            log_delta[:, t, :] = self.emission_model(x[:, t]) + max_val
            psi[:, t, :] = argmax_val
        log_max = log_delta.max(dim=2)[0]
        best_path_scores = torch.gather(log_max, 1, T.view(-1, 1) - 1)
        z_star = []
        for i in range(0, batch_size):
            z_star_i = [log_delta[i, T[i] - 1, :].max(dim=0)[1].item()]
            for t in range(T[i] - 1, 0, -1):
                z_t = psi[i, t, z_star_i[0]].item()
                z_star_i.insert(0, z_t)
            z_star.append(z_star_i)
        return z_star, best_path_scores


# ---------------------------------------------------------------------------------------------------
# 20-21. torchaudio forced-alignment tutorial: get_trellis, backtrack
# ---------------------------------------------------------------------------------------------------


def get_trellis(emission, tokens, blank_id=0):
    num_frame = emission.size(0)
    num_tokens = len(tokens)
    trellis = torch.zeros((num_frame, num_tokens))
    trellis[1:, 0] = torch.cumsum(emission[1:, blank_id], 0)
    trellis[0, 1:] = -float("inf")
    trellis[-num_tokens + 1:, 0] = float("inf")
    for t in range(num_frame - 1):
        trellis[t + 1, 1:] = torch.maximum(
            trellis[t, 1:] + emission[t, blank_id],
            trellis[t, :-1] + emission[t, tokens[1:]],
        )
    return trellis


Point = namedtuple("Point", ["token_index", "time_index", "score"])


def backtrack(trellis, emission, tokens, blank_id=0):
    t, j = trellis.size(0) - 1, trellis.size(1) - 1
    path = [Point(j, t, emission[t, blank_id].exp().item())]
    while j > 0:
        assert t > 0
        p_stay = emission[t - 1, blank_id]
        p_change = emission[t - 1, tokens[j]]
        stayed = trellis[t - 1, j] + p_stay
        changed = trellis[t - 1, j - 1] + p_change
        t -= 1
        if changed > stayed:
            j -= 1
        prob = (p_change if changed > stayed else p_stay).exp().item()
        path.append(Point(j, t, prob))
    while t > 0:
        prob = emission[t - 1, blank_id].exp().item()
        path.append(Point(j, t - 1, prob))
        t -= 1
    return path[::-1]


class ForcedAlignTrellis(nn.Module):
    """pytorch/audio examples/tutorials/forced_alignment_tutorial.py get_trellis: ``num_tokens =
    len(tokens)``, ``trellis[-num_tokens + 1:, 0] = float("inf")`` (a slice whose start is computed
    from a size: the whole column when num_tokens is 1), ``for t in range(num_frame - 1):
    trellis[t + 1, 1:] = torch.maximum(trellis[t, 1:] + ..., trellis[t, :-1] + emission[t,
    tokens[1:]])``. Emission is the input (log-probs over C classes)."""

    def forward(self, emission: Tensor, tokens: Tensor):
        return get_trellis(emission, tokens)


class ForcedAlignBacktrack(nn.Module):
    """pytorch/audio examples/tutorials/forced_alignment_tutorial.py backtrack (after get_trellis):
    ``t, j = trellis.size(0) - 1, trellis.size(1) - 1``; ``while j > 0:`` with ``if changed > stayed:
    j -= 1``, ``.exp().item()`` probabilities and ``path.append(Point(j, t, prob))``; then ``while t >
    0:``; ``return path[::-1]``. Output adapted: the Points as a (len, 2) long tensor and the scores."""

    def forward(self, emission: Tensor, tokens: Tensor):
        trellis = get_trellis(emission, tokens)
        path = backtrack(trellis, emission, tokens)
        return (torch.tensor([[p.token_index, p.time_index] for p in path], dtype=torch.long),
                torch.tensor([p.score for p in path]))


# ---------------------------------------------------------------------------------------------------
# 22-23. wenet: ctc_greedy_search + remove_duplicates_and_blank, ctc prefix beam search
# ---------------------------------------------------------------------------------------------------


def make_pad_mask(lengths: torch.Tensor, max_len: int = 0) -> torch.Tensor:  # wenet/utils/mask.py
    batch_size = lengths.size(0)
    max_len = max_len if max_len > 0 else lengths.max().item()
    seq_range = torch.arange(0, max_len, dtype=torch.int64, device=lengths.device)
    seq_range_expand = seq_range.unsqueeze(0).expand(batch_size, max_len)
    seq_length_expand = lengths.unsqueeze(-1)
    mask = seq_range_expand >= seq_length_expand
    return mask


def remove_duplicates_and_blank(hyp: List[int], blank_id: int = 0) -> List[int]:  # wenet/utils/common.py
    new_hyp: List[int] = []
    cur = 0
    while cur < len(hyp):
        if hyp[cur] != blank_id:
            new_hyp.append(hyp[cur])
        prev = cur
        while cur < len(hyp) and hyp[cur] == hyp[prev]:
            cur += 1
    return new_hyp


class WenetCTCGreedy(nn.Module):
    """wenet-e2e/wenet wenet/transformer/search.py ctc_greedy_search + wenet/utils/common.py
    remove_duplicates_and_blank: ``topk_index.masked_fill_(mask, blank_id)``, ``hyps = [hyp.tolist()
    for hyp in topk_index]``, then ``while cur < len(hyp): if hyp[cur] != blank_id:
    new_hyp.append(hyp[cur]); prev = cur; while cur < len(hyp) and hyp[cur] == hyp[prev]: cur += 1``.
    Output adapted: the collapsed hyps concatenated into one tensor, plus their lengths."""

    def forward(self, ctc_probs: Tensor, ctc_lens: Tensor):
        batch_size = ctc_probs.shape[0]
        maxlen = ctc_probs.size(1)
        topk_prob, topk_index = ctc_probs.topk(1, dim=2)
        topk_index = topk_index.view(batch_size, maxlen)
        mask = make_pad_mask(ctc_lens, maxlen)
        topk_index = topk_index.masked_fill_(mask, 0)
        hyps = [hyp.tolist() for hyp in topk_index]
        results = []
        for hyp in hyps:
            r = remove_duplicates_and_blank(hyp, 0)
            results.append(r)
        return (torch.tensor([t for r in results for t in r], dtype=torch.long),
                torch.tensor([len(r) for r in results], dtype=torch.long))


def log_add(args: List[float]) -> float:  # wenet/utils/common.py
    if all(a == -float('inf') for a in args):
        return -float('inf')
    a_max = max(args)
    lsp = math.log(sum(math.exp(a - a_max) for a in args))
    return a_max + lsp


class WenetCTCPrefixBeamSearch(nn.Module):
    """wenet-e2e/wenet wenet/transformer/asr_model.py ASRModel._ctc_prefix_beam_search (single
    utterance): ``for t in range(0, maxlen)``: ``next_hyps = defaultdict(lambda: (-inf, -inf))``,
    ``for s in top_k_index: s = s.item(); ps = logp[s].item()``, ``for prefix, (pb, pnb) in cur_hyps``
    with blank / repeat / new-symbol branches on Python tuples and floats, ``sorted(...)[:beam_size]``.
    Input: CTC log-probs (maxlen, vocab). Output adapted: best prefix as a tensor, and its score."""

    BEAM = 3

    def forward(self, ctc_probs: Tensor):
        hyps = self._ctc_prefix_beam_search(ctc_probs, self.BEAM)
        return torch.tensor(hyps[0][0], dtype=torch.long), torch.tensor(hyps[0][1])

    def _ctc_prefix_beam_search(self, ctc_probs, beam_size):
        maxlen = ctc_probs.size(0)
        cur_hyps = [(tuple(), (0.0, -float('inf')))]
        for t in range(0, maxlen):
            logp = ctc_probs[t]
            next_hyps = defaultdict(lambda: (-float('inf'), -float('inf')))
            top_k_logp, top_k_index = logp.topk(beam_size)
            for s in top_k_index:
                s = s.item()
                ps = logp[s].item()
                for prefix, (pb, pnb) in cur_hyps:
                    last = prefix[-1] if len(prefix) > 0 else None
                    if s == 0:
                        n_pb, n_pnb = next_hyps[prefix]
                        n_pb = log_add([n_pb, pb + ps, pnb + ps])
                        next_hyps[prefix] = (n_pb, n_pnb)
                    elif s == last:
                        n_pb, n_pnb = next_hyps[prefix]
                        n_pnb = log_add([n_pnb, pnb + ps])
                        next_hyps[prefix] = (n_pb, n_pnb)
                        n_prefix = prefix + (s, )
                        n_pb, n_pnb = next_hyps[n_prefix]
                        n_pnb = log_add([n_pnb, pb + ps])
                        next_hyps[n_prefix] = (n_pb, n_pnb)
                    else:
                        n_prefix = prefix + (s, )
                        n_pb, n_pnb = next_hyps[n_prefix]
                        n_pnb = log_add([n_pnb, pb + ps, pnb + ps])
                        next_hyps[n_prefix] = (n_pb, n_pnb)
            next_hyps = sorted(next_hyps.items(), key=lambda x: log_add(list(x[1])), reverse=True)
            cur_hyps = next_hyps[:beam_size]
        hyps = [(y[0], log_add([y[1][0], y[1][1]])) for y in cur_hyps]
        return hyps


# ---------------------------------------------------------------------------------------------------
# 24. openai/whisper whisper/decoding.py DecodingTask._main_loop + GreedyDecoder.update
# ---------------------------------------------------------------------------------------------------


class _TinyTextDecoder(nn.Module):
    """Stand-in for whisper's TextDecoder: token + positional embedding, causal self-attention,
    cross-attention to the audio features, logits tied to the token embedding."""

    def __init__(self, n_vocab=V, n_ctx=10, n_state=16, n_audio_state=8):
        super().__init__()
        self.token_embedding = nn.Embedding(n_vocab, n_state)
        self.positional_embedding = nn.Parameter(torch.randn(n_ctx, n_state) * 0.1)
        self.qkv = nn.Linear(n_state, 3 * n_state)
        self.cross_k = nn.Linear(n_audio_state, n_state)
        self.cross_v = nn.Linear(n_audio_state, n_state)
        self.register_buffer("mask", torch.empty(n_ctx, n_ctx).fill_(-float("inf")).triu_(1), persistent=False)

    def forward(self, x, xa):
        n = x.shape[-1]
        h = self.token_embedding(x) + self.positional_embedding[:n]
        q, k, v = self.qkv(h).chunk(3, dim=-1)
        a = (q @ k.transpose(1, 2)) / 4.0 + self.mask[:n, :n]
        h = h + a.softmax(-1) @ v
        c = (h @ self.cross_k(xa).transpose(1, 2)) / 4.0
        h = h + c.softmax(-1) @ self.cross_v(xa)
        return (h @ self.token_embedding.weight.T).float()


class WhisperMainLoop(nn.Module):
    """openai/whisper whisper/decoding.py DecodingTask._main_loop with GreedyDecoder.update (temperature
    0): ``sum_logprobs = torch.zeros(n_batch)``; ``for i in range(self.sample_len)``: ``logits =
    self.inference.logits(tokens, audio_features)``, ``logits = logits[:, -1]``, ``for logit_filter in
    self.logit_filters``, ``tokens, completed = self.decoder.update(tokens, logits, sum_logprobs)``
    (``sum_logprobs += current_logprobs * (tokens[:, -1] != self.eot)`` in place,
    ``next_tokens[tokens[:, -1] == self.eot] = self.eot``, ``tokens = torch.cat(...)``, ``completed =
    (tokens[:, -1] == self.eot).all()``), ``if completed or tokens.shape[-1] > self.n_ctx: break``.
    The initial tokens (sot sequence) length is dynamic; no_speech/logit filters unused (empty)."""

    EOT = 3

    def __init__(self, sample_len: int = 6, n_ctx: int = 7):
        super().__init__()
        torch.manual_seed(24)
        self.sample_len = sample_len
        self.n_ctx = n_ctx
        self.eot = self.EOT
        self.temperature = 0
        self.logit_filters = []
        self.text_decoder = _TinyTextDecoder(n_ctx=16)

    def forward(self, audio_features: Tensor, tokens: Tensor):
        tokens, sum_logprobs = self._main_loop(audio_features, tokens)
        return tokens, sum_logprobs

    def update(self, tokens: Tensor, logits: Tensor, sum_logprobs: Tensor):
        if self.temperature == 0:
            next_tokens = logits.argmax(dim=-1)
        logprobs = F.log_softmax(logits.float(), dim=-1)
        current_logprobs = logprobs[torch.arange(logprobs.shape[0]), next_tokens]
        sum_logprobs += current_logprobs * (tokens[:, -1] != self.eot)
        next_tokens[tokens[:, -1] == self.eot] = self.eot
        tokens = torch.cat([tokens, next_tokens[:, None]], dim=-1)
        completed = (tokens[:, -1] == self.eot).all()
        return tokens, completed

    def _main_loop(self, audio_features: Tensor, tokens: Tensor):
        n_batch = tokens.shape[0]
        sum_logprobs: Tensor = torch.zeros(n_batch)
        for i in range(self.sample_len):
            logits = self.text_decoder(tokens, audio_features)
            logits = logits[:, -1]
            for logit_filter in self.logit_filters:
                logit_filter.apply(logits, tokens)
            tokens, completed = self.update(tokens, logits, sum_logprobs)
            if completed or tokens.shape[-1] > self.n_ctx:
                break
        return tokens, sum_logprobs


# ---------------------------------------------------------------------------------------------------
# 25. AleksanderMisztal/gec-with-copying src/copygec/decoding.py greedy_decode (slice by the counter)
# ---------------------------------------------------------------------------------------------------


class _GecModel(nn.Module):
    """Stand-in for the repo's seq-first transformer: encode(src) -> memory, decode(ys, memory) returns
    one output row per target position (seq, batch, vocab)."""

    def __init__(self, d=16):
        super().__init__()
        self.transformer = nn.Transformer(d_model=d, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                          dim_feedforward=32, dropout=0.0)
        self.src_emb = nn.Embedding(V, d)
        self.tgt_emb = nn.Embedding(V, d)
        self.out = nn.Linear(d, V)

    def encode(self, batch):
        return self.transformer.encoder(self.src_emb(batch))

    def decode(self, ys, memory):
        n = ys.size(0)
        tgt_mask = self.transformer.generate_square_subsequent_mask(n)
        return self.out(self.transformer.decoder(self.tgt_emb(ys), memory, tgt_mask=tgt_mask))


class GecGreedyDecode(nn.Module):
    """AleksanderMisztal/gec-with-copying src/copygec/decoding.py greedy_decode: ``for i in
    range(max_len)``: ``out = model.decode(ys, memory)[i:i+1,:,:]`` (a slice by the loop counter),
    ``_, next_words = torch.max(log_probs, dim=2)``, ``ys = torch.cat([ys, next_words], dim=0)``,
    ``done += (next_words[0] == EOS_IDX)``, ``if torch.all(done) == bs: break``. Output adapted:
    ``ys`` itself (the origin then goes through ``.tolist()`` and a tokenizer)."""

    BOS, EOS, MAX_LEN = 2, 3, 6

    def __init__(self):
        super().__init__()
        torch.manual_seed(25)
        self.model = _GecModel()

    def forward(self, batch: Tensor):
        return self.greedy_decode(self.model, batch, self.MAX_LEN)

    def greedy_decode(self, model, batch, max_len=100):
        bs = batch.shape[1]
        memory = model.encode(batch)
        ys = torch.tensor([[self.BOS] * bs])
        done = torch.zeros(bs)
        for i in range(max_len):
            out = model.decode(ys, memory)[i:i + 1, :, :]
            log_probs = F.log_softmax(out, dim=2)
            _, next_words = torch.max(log_probs, dim=2)
            ys = torch.cat([ys, next_words], dim=0)
            done += (next_words[0] == self.EOS)
            if torch.all(done) == bs:
                break
        return ys


# ===================================================================================================
# Cases: example (capture) input, dynamic shapes, held-out sets chosen (seeds found by running eager)
# so that together they take each loop's exits (trip counts checked in eager while writing).
# ===================================================================================================

R = _randint


def _emis(seed, T, B, C=5):
    return _randn(seed, T, B, C)


def _crf_sets():
    # (emissions, mask): T=1 (loop runs 0 times), T=2 (1 trip), T=3 (2 trips), T=7 (N), padded masks
    return [
        (_emis(1, 1, 1), _crf_mask([1], 1)),
        (_emis(2, 2, 3), _crf_mask([2, 1, 2], 2)),
        (_emis(3, 3, 1), _crf_mask([3], 3)),
        (_emis(4, 7, 2), _crf_mask([7, 4], 7)),
    ]


_CRF_EXITS = ["T=1 B=1: range(1, 1) runs 0 times", "T=2 B=3 lengths 2,1,2: 1 trip, one padded row",
              "T=3 B=1: 2 trips", "T=7 B=2 lengths 7,4: 6 trips, padded tail"]
_CRF_DYN = {"emissions": {0: "time", 1: "batch"}, "mask": {0: "time", 1: "batch"}}


def _with_tags(sets):
    return [(e, R(i + 50, 5, *m.shape), m) for i, (e, m) in enumerate(sets)]


def _taco_mem(seed, T, scale, B=1):
    return _randn(seed, B, T, ENC_DIM, scale=scale)


def _ta_rows(rows, T):
    """torchaudio Tacotron2 batch from per-row (seed, scale, length) with padding to T."""
    mem = torch.cat([_taco_mem(s, T, sc) for s, sc, _ in rows])
    lengths = torch.tensor([n for _, _, n in rows])
    return mem, lengths


def _mingpt(seed, B, L):
    return (R(seed, V, B, L),)


def _hf(seed, B, L, vocab=50, left_pad=0):
    ids = R(seed, vocab, B, L)
    mask = torch.ones(B, L, dtype=torch.long)
    if left_pad:
        mask[0, :left_pad] = 0
        ids[0, :left_pad] = 1
    return ids, mask


def _nmt(seed, B, S=4):
    return (R(seed, V, B, S), torch.full((B,), S), R(seed + 100, V, B, 6), torch.full((B,), 6))


def _log_softmax(seed, *shape):
    return _randn(seed, *shape, scale=2.0).log_softmax(-1)


def _align(seed, F_, K, C=6):
    return (_log_softmax(seed, F_, C), R(seed + 1, C, K, low=1))


CASES: list[LoopCase] = [
    LoopCase(
        name="crf_normalizer",
        origin="kmkurn/pytorch-crf torchcrf/__init__.py CRF._compute_normalizer",
        make=CRFNormalizer,
        example=(_emis(0, 4, 2), _crf_mask([4, 3], 4)),
        dynamic_shapes=_CRF_DYN,
        held_out=_crf_sets(), exits=_CRF_EXITS,
    ),
    LoopCase(
        name="crf_score",
        origin="kmkurn/pytorch-crf torchcrf/__init__.py CRF._compute_score",
        make=CRFScore,
        example=(_emis(0, 4, 2), R(0, 5, 4, 2), _crf_mask([4, 3], 4)),
        dynamic_shapes={"emissions": {0: "time", 1: "batch"}, "tags": {0: "time", 1: "batch"},
                        "mask": {0: "time", 1: "batch"}},
        held_out=_with_tags(_crf_sets()), exits=_CRF_EXITS,
    ),
    LoopCase(
        name="crf_viterbi",
        origin="kmkurn/pytorch-crf torchcrf/__init__.py CRF._viterbi_decode",
        make=CRFViterbi,
        example=(_emis(0, 4, 2), _crf_mask([4, 3], 4)),
        dynamic_shapes=_CRF_DYN,
        held_out=_crf_sets(),
        exits=[e + "; backtrack over history[:seq_end] per row" for e in _CRF_EXITS],
    ),
    LoopCase(
        name="allennlp_viterbi_decode",
        origin="allenai/allennlp allennlp/nn/util.py viterbi_decode (0.9)",
        make=AllenNLPViterbi,
        example=(_randn(0, 4, 4),),
        dynamic_shapes={"tag_sequence": {0: "time"}},
        held_out=[(_randn(1, 1, 4),), (_randn(2, 2, 4),), (_randn(3, 3, 4),), (_randn(4, 8, 4),)],
        exits=["T=1: forward loop 0 trips, backtrack over empty path_indices", "T=2: 1 trip",
               "T=3: 2 trips", "T=8: 7 trips"],
    ),
    LoopCase(
        name="nemo_rnnt_greedy",
        origin="NVIDIA/NeMo nemo/collections/asr/parts/submodules/rnnt_greedy_decoding.py GreedyRNNTInfer._greedy_decode",
        make=NemoRNNTGreedy,
        example=(_randn(3, 3, 1, 8, scale=2), torch.tensor(3)),
        dynamic_shapes={"x": {0: "time"}, "out_len": None},
        held_out=[(_randn(0, 0, 1, 8, scale=2), torch.tensor(0)),
                  (_randn(1, 1, 1, 8, scale=2), torch.tensor(1)),
                  (_randn(14, 2, 1, 8, scale=2), torch.tensor(2)),
                  (_randn(55, 3, 1, 8, scale=2), torch.tensor(3))],
        exits=["T=0: outer loop 0 trips (empty label list)",
               "T=1: inner while stops at max_symbols=3 (3 symbols, no blank)",
               "T=2: frame 0 blank at once (1 inner trip), frame 1 max_symbols",
               "T=3: frame 0 blank at once, frames 1-2 max_symbols"],
    ),
    LoopCase(
        name="tacotron2_nvidia_inference",
        origin="NVIDIA/tacotron2 model.py Decoder.inference",
        make=Tacotron2NvidiaInference,
        example=(_taco_mem(1, 3, 1.0),),
        dynamic_shapes={"memory": {1: "enc_time"}},
        held_out=[(_taco_mem(1, 1, 0.3),), (_taco_mem(6, 1, 0.3),), (_taco_mem(1, 1, 3.0),),
                  (_taco_mem(0, 5, 1.0),), (_taco_mem(1, 5, 1.0),)],
        exits=["T_enc=1: gate break after 1 step", "T_enc=1: gate break after 2 steps",
               "T_enc=1: gate break after 3 steps", "T_enc=5: max_decoder_steps (6) break",
               "T_enc=5: gate break after 2 steps"],
    ),
    LoopCase(
        name="coqui_tacotron2_inference",
        origin="coqui-ai/TTS TTS/tts/layers/tacotron/tacotron2.py Decoder.inference",
        make=CoquiTacotron2Inference,
        example=(_taco_mem(0, 3, 1.0),),
        dynamic_shapes={"inputs": {1: "enc_time"}},
        held_out=[(_taco_mem(9, 1, 3.0),), (_taco_mem(5, 3, 3.0),), (_taco_mem(0, 3, 0.3),),
                  (_taco_mem(14, 5, 3.0),)],
        exits=["T_enc=1: stop token > 0.7 and t > B/2 after 2 steps", "T_enc=3: stop after 2 steps",
               "T_enc=3: max_decoder_steps (6) break", "T_enc=5: stop after 2 steps"],
    ),
    LoopCase(
        name="tacotron2_torchaudio_infer",
        origin="pytorch/audio torchaudio/models/_tacotron2.py _Decoder.infer",
        make=Tacotron2TorchaudioInfer,
        example=_ta_rows([(1, 1.0, 4), (30, 1.0, 3)], 4),
        dynamic_shapes={"memory": {0: "batch", 1: "enc_time"}, "memory_lengths": {0: "batch"}},
        held_out=[_ta_rows([(1, 3.0, 4)], 4), _ta_rows([(8, 3.0, 4)], 4),
                  _ta_rows([(1, 1.0, 4), (30, 1.0, 4), (1, 3.0, 4)], 4), _ta_rows([(0, 0.3, 4)], 4),
                  _ta_rows([(2, 1.0, 1)], 1), _ta_rows([(3, 1.0, 5), (4, 1.0, 2)], 5)],
        exits=["B=1: all finished after 1 step", "B=1: finished after 2 steps",
               "B=3: rows finish at steps 3, 4, 1: break after 4", "B=1: never finished, range bound 6",
               "B=1 T_enc=1", "B=2 T_enc=5, lengths 5,2 (padding mask)"],
    ),
    LoopCase(
        name="seq2seq_tutorial_evaluate",
        origin="pytorch/tutorials intermediate_source/seq2seq_translation_tutorial.py evaluate (2017-2022)",
        make=Seq2SeqTutorialEvaluate,
        example=(R(3, V, 4, 1),),
        dynamic_shapes={"input_tensor": {0: "src_len"}},
        held_out=[(R(88, V, 5, 1),), (R(0, V, 1, 1),), (R(212, V, 3, 1),), (R(5, V, 6, 1),)],
        exits=["L=5: EOS at decoder step 1 (break)", "L=1: encoder 1 trip, decoder to MAX_LENGTH (6)",
               "L=3: EOS at step 1", "L=6: encoder 6 trips, decoder to MAX_LENGTH"],
    ),
    LoopCase(
        name="translation_transformer_greedy",
        origin="pytorch/tutorials beginner_source/translation_transformer.py greedy_decode",
        make=TranslationTransformerGreedy,
        example=(R(3, V, 4, 1),),
        dynamic_shapes={"src": {0: "src_len"}},
        held_out=[(R(0, V, 1, 1),), (R(21, V, 2, 1),), (R(195, V, 1, 1),), (R(4, V, 5, 1),)],
        exits=["S=1: range(max_len-1) bound, 5 steps", "S=2: EOS break after 3 steps",
               "S=1: EOS break after 3 steps", "S=5: range bound, 9 steps"],
    ),
    LoopCase(
        name="hkproj_greedy_leading_break",
        origin="hkproj/pytorch-transformer train.py greedy_decode",
        make=HkprojGreedyDecode,
        example=(R(2, V, 1, 3), torch.ones(1, 1, 1, 3, dtype=torch.long)),
        dynamic_shapes={"source": {1: "src_len"}, "source_mask": {3: "src_len"}},
        held_out=[(R(0, V, 1, 1), torch.ones(1, 1, 1, 1, dtype=torch.long)),
                  (R(120, V, 1, 1), torch.ones(1, 1, 1, 1, dtype=torch.long)),
                  (R(4, V, 1, 5), torch.ones(1, 1, 1, 5, dtype=torch.long))],
        exits=["S=1: leading size break (max_len 7 -> 6 steps)", "S=1: EOS break after 3 steps",
               "S=5: leading size break"],
    ),
    LoopCase(
        name="torchnmt_predict",
        origin="chengui/torch-nmt torch-nmt/nmt/model/seq2seq_rnn.py RNNSeq2Seq.predict",
        make=TorchNmtPredict,
        example=_nmt(1, 2),
        dynamic_shapes={"enc_x": {0: "batch", 1: "src_len"}, "enc_len": {0: "batch"},
                        "dec_x": {0: "batch"}, "dec_len": {0: "batch"}},
        held_out=[_nmt(84, 1), _nmt(130, 2), _nmt(183, 1), _nmt(2, 3), _nmt(5, 1, S=1)],
        exits=["B=1: all(pred_lens.le(t)) break after 2 steps", "B=2: break after 3 steps",
               "B=1: break after 3 steps", "B=3: range bound (6)", "B=1 S=1"],
    ),
    LoopCase(
        name="torchnmt_beam_predict",
        origin="chengui/torch-nmt torch-nmt/nmt/model/seq2seq_rnn.py RNNSeq2Seq.beam_predict + nmt/model/beam.py",
        make=TorchNmtBeamPredict,
        example=_nmt(3, 2),
        dynamic_shapes={"enc_x": {0: "batch", 1: "src_len"}, "enc_len": {0: "batch"},
                        "dec_x": {0: "batch"}, "dec_len": {0: "batch"}},
        held_out=[_nmt(0, 1), _nmt(1, 2), _nmt(5, 1, S=1), _nmt(7, 3)],
        exits=["B=1: range bound (6), no row reaches EOS", "B=2: range bound", "B=1 S=1: range bound",
               "B=3: range bound"],
    ),
    LoopCase(
        name="mingpt_generate",
        origin="karpathy/minGPT mingpt/model.py GPT.generate",
        make=MinGPTGenerate,
        example=_mingpt(0, 2, 4),
        dynamic_shapes={"idx": {0: "batch", 1: "prompt_len"}},
        held_out=[_mingpt(1, 1, 1), _mingpt(2, 2, 3), _mingpt(3, 1, 6), _mingpt(4, 3, 8)],
        exits=["B=1 L=1: no crop in any step", "B=2 L=3: no crop",
               "B=1 L=6: crop to block_size from step 3 on", "B=3 L=8: crop in every step"],
    ),
    LoopCase(
        name="hf_dynamic_cache_docs_loop",
        origin="huggingface/transformers docs/source/en/cache_explanation.md (DynamicCache loop, tiny random Llama)",
        make=HFDynamicCacheDocsLoop,
        example=_hf(0, 2, 4),
        dynamic_shapes={"input_ids": {0: "batch", 1: "prompt_len"}, "attention_mask": {0: "batch", 1: "prompt_len"}},
        held_out=[_hf(1, 1, 1), _hf(2, 2, 3), _hf(3, 3, 6, left_pad=2)],
        exits=["B=1 L=1", "B=2 L=3", "B=3 L=6 with 2 left-padding positions in row 0"],
    ),
    LoopCase(
        name="hf_generate_no_beam_search_v3",
        origin="huggingface/transformers src/transformers/generation_utils.py (v3.x) _generate_no_beam_search",
        make=HFNoBeamSearchV3,
        example=_hf(10, 2, 3),
        dynamic_shapes={"input_ids": {0: "batch", 1: "prompt_len"}, "attention_mask": {0: "batch", 1: "prompt_len"}},
        held_out=[_hf(126, 1, 3), _hf(213, 1, 2), _hf(0, 1, 1), _hf(7, 2, 4), _hf(11, 3, 4)],
        exits=["B=1 L=3: EOS at step 1 -> unfinished_sents.max() == 0 break", "B=1 L=2: EOS at step 1",
               "B=1 L=1: while cur_len < max_length bound (8 steps)", "B=2 L=4: bound (5 steps)",
               "B=3 L=4: bound"],
    ),
    LoopCase(
        name="llama_generate_static_kv",
        origin="meta-llama/llama llama/generation.py Llama.generate + llama/model.py Attention (static cache_k/cache_v)",
        make=LlamaGenerateStaticKV,
        example=(R(7, V, 2, 4),),
        dynamic_shapes={"prompt_tokens": {0: "batch", 1: "prompt_len"}},
        held_out=[(R(12, V, 1, 1),), (R(1, V, 2, 2),), (R(10, V, 2, 3),), (R(3, V, 1, 4),), (R(2, V, 3, 3),)],
        exits=["B=1 L=1: all(eos_reached) break after 3 steps", "B=2 L=2: break after 3 steps",
               "B=2 L=3: break after 4 steps", "B=1 L=4: range bound total_len (5 steps)",
               "B=3 L=3: range bound"],
    ),
    LoopCase(
        name="hmm_forward",
        origin="lorenlugosch/pytorch_HMM HMM.forward (forward algorithm)",
        make=HMMForward,
        example=(R(0, V, 2, 4), torch.tensor([4, 3])),
        dynamic_shapes={"x": {0: "batch", 1: "time"}, "T": {0: "batch"}},
        held_out=[(R(1, V, 1, 1), torch.tensor([1])), (R(2, V, 3, 2), torch.tensor([2, 1, 2])),
                  (R(3, V, 1, 3), torch.tensor([3])), (R(4, V, 2, 8), torch.tensor([8, 5]))],
        exits=["T_max=1: 0 trips", "T_max=2 B=3: 1 trip", "T_max=3: 2 trips", "T_max=8 B=2: 7 trips"],
    ),
    LoopCase(
        name="hmm_viterbi",
        origin="lorenlugosch/pytorch_HMM HMM.viterbi (maxmul, z_star_i.insert(0, ...))",
        make=HMMViterbi,
        example=(R(0, V, 2, 4), torch.tensor([4, 3])),
        dynamic_shapes={"x": {0: "batch", 1: "time"}, "T": {0: "batch"}},
        held_out=[(R(1, V, 1, 1), torch.tensor([1])), (R(2, V, 3, 2), torch.tensor([2, 1, 2])),
                  (R(3, V, 1, 3), torch.tensor([3])), (R(4, V, 2, 8), torch.tensor([8, 5]))],
        exits=["T_max=1: forward 0 trips, backtrack 0 trips", "T_max=2 B=3: 1 trip, backtrack 1/0/1",
               "T_max=3: 2 trips", "T_max=8 B=2: 7 trips, backtrack 7 and 4"],
    ),
    LoopCase(
        name="forced_align_trellis",
        origin="pytorch/audio examples/tutorials/forced_alignment_tutorial.py get_trellis",
        make=ForcedAlignTrellis,
        example=_align(0, 5, 3),
        dynamic_shapes={"emission": {0: "frames"}, "tokens": {0: "num_tokens"}},
        held_out=[_align(1, 1, 1), _align(2, 2, 1), _align(3, 3, 2), _align(4, 8, 4)],
        exits=["F=1 K=1: 0 trips; trellis[-0:, 0] is the whole column", "F=2 K=1: 1 trip",
               "F=3 K=2: 2 trips", "F=8 K=4: 7 trips"],
    ),
    LoopCase(
        name="forced_align_backtrack",
        origin="pytorch/audio examples/tutorials/forced_alignment_tutorial.py backtrack",
        make=ForcedAlignBacktrack,
        example=_align(0, 5, 3),
        dynamic_shapes={"emission": {0: "frames"}, "tokens": {0: "num_tokens"}},
        held_out=[_align(1, 1, 1), _align(2, 2, 1), _align(3, 3, 2), _align(4, 8, 4), _align(5, 5, 5)],
        exits=["F=1 K=1: both whiles 0 trips", "F=2 K=1: while j>0 0 trips, while t>0 1 trip",
               "F=3 K=2", "F=8 K=4", "F=5 K=5: j reaches 0 exactly when t does"],
    ),
    LoopCase(
        name="wenet_ctc_greedy",
        origin="wenet-e2e/wenet wenet/transformer/search.py ctc_greedy_search + wenet/utils/common.py remove_duplicates_and_blank",
        make=WenetCTCGreedy,
        example=(_log_softmax(0, 2, 5, 4), torch.tensor([5, 3])),
        dynamic_shapes={"ctc_probs": {0: "batch", 1: "time"}, "ctc_lens": {0: "batch"}},
        held_out=[(_log_softmax(1, 1, 1, 4), torch.tensor([1])), (_log_softmax(2, 3, 2, 4), torch.tensor([2, 1, 2])),
                  (_log_softmax(3, 1, 8, 4), torch.tensor([8]))],
        exits=["B=1 T=1", "B=3 T=2 with a padded row", "B=1 T=8: runs of repeats and blanks"],
    ),
    LoopCase(
        name="wenet_ctc_prefix_beam_search",
        origin="wenet-e2e/wenet wenet/transformer/asr_model.py ASRModel._ctc_prefix_beam_search",
        make=WenetCTCPrefixBeamSearch,
        example=(_log_softmax(0, 4, 5),),
        dynamic_shapes={"ctc_probs": {0: "time"}},
        held_out=[(_log_softmax(1, 1, 5),), (_log_softmax(2, 2, 5),), (_log_softmax(3, 3, 5),),
                  (_log_softmax(4, 8, 5),)],
        exits=["T=1: 1 trip", "T=2", "T=3", "T=8"],
    ),
    LoopCase(
        name="whisper_main_loop",
        origin="openai/whisper whisper/decoding.py DecodingTask._main_loop + GreedyDecoder.update",
        make=WhisperMainLoop,
        example=(_randn(1, 2, 5, 8), R(8, V, 2, 2)),
        dynamic_shapes={"audio_features": {0: "batch", 1: "audio_ctx"}, "tokens": {0: "batch", 1: "sot_len"}},
        held_out=[(_randn(64, 1, 5, 8), R(71, V, 1, 1)), (_randn(58, 1, 5, 8), R(65, V, 1, 3)),
                  (_randn(2, 1, 5, 8), R(9, V, 1, 3)), (_randn(3, 2, 5, 8), R(10, V, 2, 4)),
                  (_randn(0, 1, 5, 8), R(7, V, 1, 1))],
        exits=["B=1 L=1: completed (all EOT) after 1 step", "B=1 L=3: completed after 1 step",
               "B=1 L=3: tokens.shape[-1] > n_ctx break after 5 steps",
               "B=2 L=4: tokens.shape[-1] > n_ctx break after 4 steps", "B=1 L=1: range bound (6)"],
    ),
    LoopCase(
        name="gec_greedy_slice_by_counter",
        origin="AleksanderMisztal/gec-with-copying src/copygec/decoding.py greedy_decode",
        make=GecGreedyDecode,
        example=(R(2, V, 3, 1),),
        dynamic_shapes={"batch": {0: "src_len"}},
        held_out=[(R(6, V, 2, 1),), (R(65, V, 1, 1),), (R(0, V, 1, 1),), (R(4, V, 5, 1),)],
        exits=["S=2: EOS at step 1, torch.all(done) == bs break", "S=1: EOS break after 5 steps",
               "S=1: range bound (6)", "S=5: range bound"],
    ),
]
