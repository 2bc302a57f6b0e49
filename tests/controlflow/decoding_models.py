"""Decoding loops around a tiny causal LM in plain PyTorch (issue 26): greedy with tokens grown by
``torch.cat``, a KV cache grown by ``torch.cat``. Weights are seeded; ``EOS`` is a token the
tests make reachable at chosen steps."""

import math

import torch
from torch import nn

VOCAB, WIDTH, MAX_NEW, EOS = 11, 16, 6, 0


class TinyLM(nn.Module):
    """Embedding + positions, one causal self-attention layer, output head."""

    def __init__(self, seed: int = 0, positions: int = 64, countdown: bool = False):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = nn.Embedding(VOCAB, WIDTH)
        self.pos = nn.Embedding(positions, WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.out = nn.Linear(WIDTH, WIDTH)
        self.head = nn.Linear(WIDTH, VOCAB)
        if countdown:
            self.count_down()

    @torch.no_grad()
    def count_down(self):
        """Weights under which the next token is the last one minus 1 (and 0 = EOS stays 0):
        a row whose last token is k stops after k steps. Attention and positions still add
        small random terms, so they are computed, but cannot change the argmax."""
        for p in self.parameters():
            p.mul_(0.05)
        self.embed.weight[:, :VOCAB] += 4 * torch.eye(VOCAB)
        target = torch.clamp(torch.arange(VOCAB) - 1, min=0)
        self.head.weight[target, torch.arange(VOCAB)] += 4

    def attend(self, q, k, v, offset):
        """Causal attention of queries at positions offset.. over keys at 0..k.shape[1]."""
        scores = q @ k.transpose(1, 2) / math.sqrt(WIDTH)
        qpos = torch.arange(q.shape[1])[:, None] + offset
        kpos = torch.arange(k.shape[1])[None, :]
        scores = scores.masked_fill(kpos > qpos, float("-inf"))
        return self.out(torch.softmax(scores, -1) @ v)

    def forward(self, tokens):
        """Logits of every position: (batch, length, VOCAB)."""
        h = self.embed(tokens) + self.pos(torch.arange(tokens.shape[1]))
        q, k, v = self.qkv(h).chunk(3, -1)
        return self.head(h + self.attend(q, k, v, 0))

    def step(self, tokens, k_past, v_past):
        """Logits of the new positions and the grown cache."""
        start = k_past.shape[1]
        h = self.embed(tokens) + self.pos(torch.arange(tokens.shape[1]) + start)
        q, k, v = self.qkv(h).chunk(3, -1)
        k = torch.cat([k_past, k], 1)
        v = torch.cat([v_past, v], 1)
        return self.head(h + self.attend(q, k, v, start)), k, v


class GreedyNoCache(nn.Module):
    """Greedy decoding without a cache: the whole sequence runs every step."""

    def __init__(self, seed: int = 0, countdown: bool = False):
        super().__init__()
        self.lm = TinyLM(seed, countdown=countdown)

    def forward(self, tokens):
        finished = torch.zeros(tokens.shape[0], dtype=torch.bool)
        for _ in range(MAX_NEW):
            logits = self.lm(tokens)[:, -1]
            nxt = logits.argmax(-1)
            nxt = torch.where(finished, torch.full_like(nxt, EOS), nxt)
            tokens = torch.cat([tokens, nxt[:, None]], 1)
            finished = finished | (nxt == EOS)
            if finished.all():
                break
        return tokens


class GreedyKVCache(nn.Module):
    """Prefill, then one token per step with a KV cache grown by cat; ``max_new`` a tensor."""

    def __init__(self, seed: int = 0, countdown: bool = False):
        super().__init__()
        self.lm = TinyLM(seed, countdown=countdown)

    def forward(self, tokens, max_new):
        batch = tokens.shape[0]
        empty = torch.zeros(batch, 0, WIDTH)
        logits, k, v = self.lm.step(tokens, empty, empty)
        nxt = logits[:, -1].argmax(-1)
        finished = nxt == EOS
        out = nxt[:, None]
        step = 1
        while step < max_new and not finished.all():
            logits, k, v = self.lm.step(nxt[:, None], k, v)
            nxt = logits[:, -1].argmax(-1)
            nxt = torch.where(finished, torch.full_like(nxt, EOS), nxt)
            out = torch.cat([out, nxt[:, None]], 1)
            finished = finished | (nxt == EOS)
            step = step + 1
        return out


BEAMS = 3


class BeamSearch(nn.Module):
    """Beam search over one prompt: beams regrouped and grown by cat each step; stops when the
    best beam ends in EOS."""

    def __init__(self, seed: int = 0, countdown: bool = False):
        super().__init__()
        self.lm = TinyLM(seed, countdown=countdown)

    def forward(self, tokens):
        beams = tokens.repeat(BEAMS, 1)
        scores = torch.cat([torch.zeros(1), torch.full((BEAMS - 1,), float("-inf"))])
        for _ in range(MAX_NEW):
            logp = torch.log_softmax(self.lm(beams)[:, -1], -1)
            top, idx = (scores[:, None] + logp).reshape(-1).topk(BEAMS)
            beams = torch.cat([beams[idx // VOCAB], (idx % VOCAB)[:, None]], 1)
            scores = top
            if beams[0, -1] == EOS:
                break
        return beams, scores


class GreedyIntoBuffer(nn.Module):
    """Greedy decoding into a preallocated buffer, the model run on ``out[:, :n + step]``."""

    def __init__(self, seed: int = 0, countdown: bool = False):
        super().__init__()
        self.lm = TinyLM(seed, countdown=countdown)

    def forward(self, tokens):
        n = tokens.shape[1]
        out = torch.cat([tokens, torch.zeros(tokens.shape[0], MAX_NEW, dtype=tokens.dtype)], 1)
        finished = torch.zeros(tokens.shape[0], dtype=torch.bool)
        step = 0
        for step in range(MAX_NEW):
            nxt = self.lm(out[:, :n + step])[:, -1].argmax(-1)
            nxt = torch.where(finished, torch.full_like(nxt, EOS), nxt)
            out[:, n + step] = nxt
            finished = finished | (nxt == EOS)
            if finished.all():
                break
        return out[:, :n + step + 1]


class Block(nn.Module):
    """One causal self-attention block with its own cache."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.out = nn.Linear(WIDTH, WIDTH)

    def forward(self, h, cache):
        k_past, v_past = cache
        start = k_past.shape[1]
        q, k, v = self.qkv(h).chunk(3, -1)
        k, v = torch.cat([k_past, k], 1), torch.cat([v_past, v], 1)
        scores = q @ k.transpose(1, 2) / math.sqrt(WIDTH)
        qpos = torch.arange(q.shape[1])[:, None] + start
        scores = scores.masked_fill(torch.arange(k.shape[1])[None, :] > qpos, float("-inf"))
        return h + self.out(torch.softmax(scores, -1) @ v), (k, v)


class GreedyLayerCaches(nn.Module):
    """Two layers, a list of (key, value) caches, one pair per layer, grown by cat each step."""

    def __init__(self, seed: int = 0, countdown: bool = False, layers: int = 2):
        super().__init__()
        self.lm = TinyLM(seed, countdown=countdown)
        self.blocks = nn.ModuleList(Block() for _ in range(layers))
        if countdown:
            with torch.no_grad():
                for p in self.blocks.parameters():
                    p.mul_(0.05)

    def logits(self, tokens, caches):
        start = caches[0][0].shape[1]
        h = self.lm.embed(tokens) + self.lm.pos(torch.arange(tokens.shape[1]) + start)
        grown = []
        for block, cache in zip(self.blocks, caches):
            h, cache = block(h, cache)
            grown.append(cache)
        return self.lm.head(h)[:, -1], grown

    def forward(self, tokens, max_new):
        empty = torch.zeros(tokens.shape[0], 0, WIDTH)
        caches = [(empty, empty) for _ in self.blocks]
        logits, caches = self.logits(tokens, caches)
        nxt = logits.argmax(-1)
        finished = nxt == EOS
        out = nxt[:, None]
        step = 1
        while step < max_new and not finished.all():
            logits, caches = self.logits(nxt[:, None], caches)
            nxt = torch.where(finished, torch.full_like(nxt, EOS), logits.argmax(-1))
            out = torch.cat([out, nxt[:, None]], 1)
            finished = finished | (nxt == EOS)
            step = step + 1
        return out


class ItemPredicateInGrowingLoop(nn.Module):
    """A growing loop whose body branches on ``.item()`` compared with a constant that float32
    would round to 1.0: the body must get the graph pass ``item-predicate-to-tensor`` too."""

    def forward(self, x, n):
        out = x[:1]
        i = torch.zeros((), dtype=torch.long)
        while i < n:
            last = out[-1]
            if last.sum().item() > 0.99999999:
                nxt = last * 0.5
            else:
                nxt = last + 0.25
            out = torch.cat([out, nxt[None]])
            i = i + 1
        return out


class SampleTopK(nn.Module):
    """Sampling among the top 3 tokens with Gumbel-like noise given as an input, one row per step."""

    def __init__(self, seed: int = 0, countdown: bool = False):
        super().__init__()
        self.lm = TinyLM(seed, countdown=countdown)

    def forward(self, tokens, noise):
        finished = torch.zeros(tokens.shape[0], dtype=torch.bool)
        for step in range(noise.shape[1]):
            top, idx = self.lm(tokens)[:, -1].topk(3, -1)
            choice = (torch.log_softmax(top, -1) + noise[:, step]).argmax(-1)
            nxt = torch.where(finished, torch.full_like(choice, EOS), idx.gather(1, choice[:, None])[:, 0])
            tokens = torch.cat([tokens, nxt[:, None]], 1)
            finished = finished | (nxt == EOS)
            if finished.all():
                break
        return tokens


class GrowsAlongTwoAxes(nn.Module):
    """F.pad along one axis, torch.stack onto a history along another, two steps per iteration
    of the history, in a while loop on a tensor condition."""

    def forward(self, x, n):
        hist = x[None]
        i = torch.zeros((), dtype=torch.long)
        while i < n:
            x = torch.nn.functional.pad(x, (0, 1), value=0.5) * 0.5
            rows = torch.stack([x[:, : hist.shape[2]], x[:, -hist.shape[2]:]])
            hist = torch.cat([hist, rows], 0)
            i = i + 1
        return x, hist


class GrowsByARowOrByTheFirstRow(nn.Module):
    """Grows ``acc`` by one row in one branch and by ``x[:1]`` in the other: the same length as
    long as the batch is not empty, one row less at batch 0 (the fuzzer's find: a where over the
    branches failed in ONNX Runtime there)."""

    def forward(self, x, n):
        acc = torch.tanh(x)
        k = torch.zeros((), dtype=torch.int64)
        while (k < n) and (x < 2.0).all():
            k = k + 1
            if x.sum() > 0.5:
                acc = torch.cat([acc, x.mean(dim=0, keepdim=True)], 0)
            else:
                acc = torch.cat([acc, x[:1]], 0)
        return acc


class GrowsFromEmptyByThreeOrOne(nn.Module):
    """Starts empty (``h[:, :0]``) and grows by three columns in one branch, one in the other,
    in a ``for`` loop with a ``break`` (the fuzzer's find: the body capture failed)."""

    def forward(self, x, n):
        h = x.clone()
        acc = h[:, :0].clone()
        for _ in range(int(n)):
            h = h * 0.5 + 1.0
            if h.mean() > 0.2:
                acc = torch.cat([acc, h[:, :3]], 1)
            else:
                acc = torch.cat([acc, h[:, 1:2]], 1)
            if acc.sum() > 50.0:
                break
        return acc


class GrowsInANestedWhile(nn.Module):
    """A tensor grown by torch.cat in a while nested in another while whose own state keeps its
    shape (the outer loop becomes a Loop around its exported body too)."""

    def forward(self, x, n):
        h = x.clone()
        k = torch.zeros((), dtype=torch.int64)
        while k < n:
            acc = h[:, :1]
            j = torch.zeros((), dtype=torch.int64)
            while j < k:
                acc = torch.cat([acc, h[:, 1:2] * 0.5], 1)
                j = j + 1
            h = h + acc.mean(1, keepdim=True)
            k = k + 1
        return h


class GrowsInANestedForWithBreak(nn.Module):
    """The same with for loops over data-dependent ranges and a break in the inner one."""

    def forward(self, x, n):
        h = x.clone()
        for i in range(int(n)):
            acc = h[:, :2]
            for j in range(i):
                acc = torch.cat([acc, torch.tanh(acc[:, -1:]) + j], 1)
                if acc.mean() > 2.0:
                    break
            h = h + acc.sum(1, keepdim=True) * 0.1
        return h


class GrowsByItsOwnLastColumn(nn.Module):
    """Starts empty and grows by a column of ``h`` and by its own last column, which is 0 long
    on the first step (the fuzzer's find: the body, captured with the axis at least 2 long,
    recorded ``acc[:, -1:]`` as 1 long and ONNX Runtime failed planning its buffer)."""

    def forward(self, x, n):
        h = torch.tanh(x)
        acc = h[:, :0].clone()
        for i in range(int(n)):
            h = torch.tanh(h) * 0.9 + h * 0.1
            acc = torch.cat([acc, h[:, :1], torch.tanh(acc[:, -1:])], 1)
            h = h + acc[:, :i + 1].sum(dim=-1, keepdim=True) * 0.1
            if h.mean() > 5.0:
                break
        return acc, h
