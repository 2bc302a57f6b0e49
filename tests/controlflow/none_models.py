"""Models whose variables are None on some paths once that is data (issue #47's class "None in
loop state / None in one branch"), each the shape of a loop from public code:

* :class:`MaskNoneOnOneSide` — Llama's ``mask = None; if seqlen > 1: mask = ...`` and the
  attention's ``if mask is not None: scores = scores + mask`` in a module it calls;
* :class:`FirstOverThreshold` — BERT's WordPiece ``cur_substr = None`` before a ``while`` that
  sets it and breaks, then ``if cur_substr is None:``;
* :class:`HiddenNoneUntilKept` — NeMo's RNN-T ``hidden = None`` before the frames loop, passed to
  the prediction RNN (None: zeros) and set only when a symbol is kept;
* :class:`SumSinceFirstPositive` — set under a tensor condition, ``if best is None: continue``,
  then read by torch functions in the loop body;
* :class:`SetOnFirstTrip`, :class:`SetOnFirstTripOfARange`, :class:`CacheNoneBeforeAGrowingLoop`
  — None before a loop whose first trip always sets it (transformers 3's ``past``): peeled;
* :class:`NoneAsATorchInput` — a torch function's input, read where the check said it is set;
* refused in one line: passing it to a library module that takes no None there, beside a torch
  function's input (``F.linear(x, w, bias)``), returning it.
"""

from __future__ import annotations

import torch
from torch import nn


class _Scores(nn.Module):
    def forward(self, q, mask):
        s = q @ q.transpose(0, 1)
        if mask is not None:
            s = s + mask
        return s.softmax(-1)


class MaskNoneOnOneSide(nn.Module):
    def __init__(self):
        super().__init__()
        self.scores = _Scores()

    def forward(self, q):
        mask = None
        if q.sum() > 0:
            mask = torch.triu(torch.full((q.shape[0], q.shape[0]), -1000.0), diagonal=1)
        bias = q.mean() if mask is None else q.mean() + 1.0
        return self.scores(q, mask) + bias


class FirstOverThreshold(nn.Module):
    def forward(self, x, thr):
        found = None
        i = 0
        while i < x.shape[0]:
            if x[i] > thr:
                found = x[i] * 10
                break
            i += 1
        if found is None:
            value = x.new_full((), -1.0)
        else:
            value = found + 1
        return torch.stack([value, x.new_zeros(()) + i])


class HiddenNoneUntilKept(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.rnn = nn.GRU(3, 4)
        self.out = nn.Linear(4, 1)

    def forward(self, x, n):
        hidden = None
        kept = x.new_zeros(())
        for t in range(int(n)):
            y, h = self.rnn(x[t:t + 1], hidden)
            if self.out(y).sum() + x[t].sum() > 0:  # a symbol kept: the frame's data decides
                hidden = h
                kept = kept + 1
        if hidden is None:
            return kept, x.new_zeros(1, 1, 4)
        return kept, hidden


class SumSinceFirstPositive(nn.Module):
    """``best = None``; set under a tensor condition in the loop; ``if best is None: continue``;
    then torch functions read it (inside the traced body, not narrowed by the check)."""

    def forward(self, x, n):
        acc = x.new_zeros(())
        best = None
        for t in range(int(n)):
            if x[t] > 0:
                best = x[t]
            if best is None:
                continue
            acc = acc + torch.abs(best) * 2 + best
        return acc


class SetOnFirstTrip(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.cell = nn.GRUCell(3, 3)

    def forward(self, x, n):
        state = None
        i = torch.zeros((), dtype=torch.long)
        while i < n:
            if state is None:
                state = torch.tanh(x)
            else:
                state = self.cell(x, state)
            i = i + 1
        return state if state is not None else x


class SetOnFirstTripOfARange(nn.Module):
    """The same over ``range(int(n))``: the first trip (counter 0) is peeled, the rest from 1."""

    def forward(self, x, n):
        state = None
        for t in range(int(n)):
            state = x * (t + 1) if state is None else torch.tanh(state) + t
        return state if state is not None else -x


class _StateStep(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.emb = nn.Embedding(6, 4)

    def forward(self, token, state):
        if state == None:  # noqa: E711 - ChatRWKV writes it so
            state = torch.zeros(2, 4)
            state[1] = -1e30
        x = self.emb.weight[token]
        state = torch.stack([state[0] * 0.5 + x, torch.maximum(state[1], x)])
        return x.sum() + state[0].sum(), state


class StateNoneBeforeRows(nn.Module):
    """ChatRWKV's ``init_state = None; for token in ids: out, init_state = model.forward(token,
    init_state)``, the model building the state under ``if state == None:``: the first row peeled."""

    def __init__(self):
        super().__init__()
        self.step = _StateStep()

    def forward(self, ids):
        state = None
        out = torch.zeros(())
        for token in ids:
            out, state = self.step(token, state)
        return out, state if state is not None else torch.zeros(2, 4)


class AssignedEveryTrip(nn.Module):
    """``last = None`` before a loop that assigns it before any read: None again after no trip."""

    def forward(self, x, n):
        last = None
        for t in range(int(n)):
            last = x * t
        return last if last is not None else -x


class CacheNoneBeforeAGrowingLoop(nn.Module):
    """transformers 3's ``past = None`` before ``while cur_len < max_length``: the first trip runs
    the whole prompt and makes the cache, the next ones one token and grow it (peeled: a cache
    of another length than the step's, which no select could carry)."""

    def forward(self, tokens, n):
        past = None
        i = 0
        while i < n:
            if past is None:
                k = tokens.float().cumsum(0)
            else:
                k = past[-1:] + tokens[-1:].float()
            past = k if past is None else torch.cat([past, k])
            tokens = torch.cat([tokens, (k[-1:] % 7).long()])
            i += 1
        return tokens


class NoneToALibraryModuleThatNeedsAValue(nn.Module):
    def __init__(self):
        super().__init__()
        self.mix = nn.Bilinear(3, 3, 2)  # forward(input1, input2): no None

    def forward(self, x):
        extra = None
        if x.sum() > 0:
            extra = x * 2
        return self.mix(x, extra)  # error-line


class NoneBesideATorchInput(nn.Module):
    def forward(self, x):
        bias = None
        if x.sum() > 0:
            bias = x[0] * 2
        return torch.nn.functional.linear(x, torch.ones(3, 3), bias)  # error-line


class NoneAsATorchInput(nn.Module):
    def forward(self, x):
        extra = None
        if x.sum() > 0:
            extra = x * 2
        if extra is None:
            return x
        return torch.mul(extra, 3) * torch.sigmoid(extra) + extra.shape[0]


class ReturnsMaybeNone(nn.Module):
    def forward(self, x):
        y = None
        if x.sum() > 0:  # error-line
            y = x + 1
        return y
