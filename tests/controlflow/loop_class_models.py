"""Loops of the classes ported public code showed failing (issue #47), each in its smallest form.

Each model keeps the shape its origin has (named in its docstring); tests/wild_loops/ holds the
ports themselves.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


class SinkhornItemError(torch.nn.Module):
    """rythei/PyTorchOT ``sink``: an error read with ``.item()`` every 10th trip ends the loop;
    ``M.t() @ u`` (a transposed matrix times a vector) is what ONNX Runtime 1.32 miscomputed."""

    def forward(self, cost):
        u = torch.ones(cost.shape[0]) / cost.shape[0]
        cpt, err = 0, 1
        while err > 1e-3 and cpt < 40:
            v = 1.0 / (cost.t() @ u)
            u = 1.0 / (cost @ v)
            if cpt % 10 == 0:
                err = (u.sum() - 1).abs().item()
            cpt += 1
        return u


class BfsLevels(torch.nn.Module):
    """Matrix BFS (textbook; stineje/ecen4293F25 matrix_graph_traversal): a Python-int level
    written into a float buffer by a masked assignment inside a ``while True`` loop."""

    def forward(self, adjacency):
        f = torch.zeros(adjacency.shape[0])
        f[0] = 1
        depth = torch.zeros(adjacency.shape[0])
        level = 0
        while True:
            nf = (adjacency.T @ f) * (depth == 0) * (f == 0)
            if not nf.any():
                break
            level += 1
            depth[nf > 0] = level
            f = (nf > 0).float()
        return depth


class PowerIterationAllclose(torch.nn.Module):
    """f-dangel/cockpit-style power iteration: the iterate ``w`` is first bound in the body and
    returned after the loop; the loop ends on ``torch.allclose``."""

    def forward(self, a):
        v = torch.ones(a.shape[0]) / a.shape[0] ** 0.5
        for _ in range(100):
            w = a @ v
            w = w / w.norm()
            if torch.allclose(w, v, atol=1e-4):
                break
            v = w
        return w


class FloodFillUntilEqual(torch.nn.Module):
    """Region growing by dilation until nothing changes (doctr-style dilate loop)."""

    def forward(self, seed, allowed):
        r = seed
        while True:
            new = F.max_pool2d(r, 3, 1, 1) * allowed
            if torch.equal(new, r):
                break
            r = new
        return r


class ForcedAlignTrellis(torch.nn.Module):
    """torchaudio's forced-alignment tutorial ``get_trellis``: a row written at the loop counter
    (``trellis[t + 1, 1:] = ...``) from rows read at it and a gather by token ids."""

    def forward(self, emission, tokens):
        num_frame = emission.size(0)
        num_tokens = tokens.size(0)
        trellis = torch.zeros((num_frame, num_tokens))
        trellis[1:, 0] = torch.cumsum(emission[1:, 0], 0)
        trellis[0, 1:] = -float("inf")
        trellis[-num_tokens + 1:, 0] = float("inf")
        for t in range(num_frame - 1):
            trellis[t + 1, 1:] = torch.maximum(
                trellis[t, 1:] + emission[t, 0],
                trellis[t, :-1] + emission[t, tokens[1:]],
            )
        return trellis


class CrfScore(torch.nn.Module):
    """kmkurn/pytorch-crf ``CRF._compute_score`` (batch second): emissions and transitions read
    at the counter beside index tensors."""

    def __init__(self, num_tags: int = 5):
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.start_transitions = torch.nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1, generator=generator))
        self.end_transitions = torch.nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1, generator=generator))
        self.transitions = torch.nn.Parameter(torch.empty(num_tags, num_tags).uniform_(-0.1, 0.1, generator=generator))

    def forward(self, emissions, tags, mask):
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


class StopGateDecoder(torch.nn.Module):
    """NVIDIA/tacotron2 ``Decoder.inference``'s loop: ``while True``, outputs collected with
    ``+= [...]``, a stop gate that breaks, and a step bound that prints a warning and breaks."""

    def __init__(self, n_mel: int = 4, max_decoder_steps: int = 6):
        super().__init__()
        generator = torch.Generator().manual_seed(3)
        self.rnn = torch.nn.GRUCell(n_mel + 8, 8)
        self.proj = torch.nn.Linear(8, n_mel)
        self.gate = torch.nn.Linear(8, 1)
        for p in self.parameters():
            p.data = torch.randn(p.shape, generator=generator) * 0.5
        self.max_decoder_steps, self.gate_threshold, self.n_mel = max_decoder_steps, 0.5, n_mel

    def forward(self, memory, bias):
        context = memory.mean(1)
        decoder_input = memory.new_zeros(memory.size(0), self.n_mel)
        hidden = memory.new_zeros(memory.size(0), 8)
        mel_outputs, gate_outputs = [], []
        while True:
            hidden = self.rnn(torch.cat([decoder_input, context], -1), hidden)
            mel_output = self.proj(hidden)
            gate_output = self.gate(hidden) + bias
            mel_outputs += [mel_output]
            gate_outputs += [gate_output]
            if torch.sigmoid(gate_output) > self.gate_threshold:
                break
            elif len(mel_outputs) == self.max_decoder_steps:
                print("Warning! Reached max decoder steps")
                break
            decoder_input = mel_output
        return torch.stack(mel_outputs, 1), torch.stack(gate_outputs, 1)


def _iou_one_to_many(box, boxes):
    x1 = torch.maximum(box[0], boxes[:, 0])
    y1 = torch.maximum(box[1], boxes[:, 1])
    x2 = torch.minimum(box[2], boxes[:, 2])
    y2 = torch.minimum(box[3], boxes[:, 3])
    inter = (x2 - x1).clamp(min=0) * (y2 - y1).clamp(min=0)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    return inter / (area + areas - inter)


class TutorialNms(torch.nn.Module):
    """The detection tutorials' Python NMS (py-faster-rcnn's py_cpu_nms in torch): ``order``
    shrinks by a mask each trip and may empty; ``if order.numel() == 1: break``."""

    def __init__(self, threshold: float = 0.3):
        super().__init__()
        self.threshold = threshold

    def forward(self, boxes, scores):
        order = scores.argsort(descending=True)
        keep = []
        while order.numel() > 0:
            i = order[0]
            keep.append(i)
            if order.numel() == 1:
                break
            iou = _iou_one_to_many(boxes[i], boxes[order[1:]])
            order = order[1:][iou <= self.threshold]
        return torch.stack(keep)


class StateInAttributesOfACallee(torch.nn.Module):
    """NVIDIA/tacotron2's ``decode``: the loop body calls a method that keeps the recurrent state
    in attributes (``self.hidden = ...``)."""

    def __init__(self):
        super().__init__()
        self.cell = torch.nn.GRUCell(4, 4)

    def decode(self, x):
        self.hidden = self.cell(x, self.hidden)  # the write torch's while_loop cannot carry
        return self.hidden

    def forward(self, x):
        self.hidden = torch.zeros_like(x)
        out = x
        while out.sum() < 10:
            out = out + self.decode(out).abs() + 1
        return out


class PositionFromPromptLength(torch.nn.Module):
    """A decoding loop's position arithmetic: the prompt length read before the loop
    (``length = tokens.shape[1]``) beside a sequence that starts as a copy of the prompt and grows."""

    def forward(self, tokens, n):
        length = tokens.shape[1]
        seq = tokens.clone()
        pos = torch.zeros((), dtype=torch.int64)
        for step in range(int(n.clamp(0, 6))):
            pos = pos + length + step
            seq = torch.cat([seq, seq[:, -1:]], 1)
        return seq, pos


class GruDecoderFromNone(torch.nn.Module):
    """torch-nmt's greedy decoder in small: ``pred = None`` before the loop, ``x = start if pred
    is None else pred`` in it, ``preds.append(pred)``, ``if all(lens.le(t)): break`` (the builtin
    ``all`` over a tensor), then a masked write of the lengths; a GRU encoder over a source of
    any length."""

    EOS, MAXLEN = 2, 6

    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.emb = torch.nn.Embedding(7, 8)
        self.encoder = torch.nn.GRU(8, 8, batch_first=True)
        self.decoder = torch.nn.GRU(8, 8, batch_first=True)
        self.out = torch.nn.Linear(8, 7)

    def forward(self, src, start):
        _, state = self.encoder(self.emb(src))
        preds, pred = [], None
        lens = self.MAXLEN * torch.ones(src.shape[0]).long()
        for t in range(self.MAXLEN):
            x = start if pred is None else pred
            o, state = self.decoder(self.emb(x), state)
            pred = self.out(o).argmax(2)
            preds.append(pred)
            if all(lens.le(t)):
                break
            lens[lens.gt(t) & pred.squeeze(1).eq(self.EOS)] = t
        return torch.cat(preds, dim=-1), lens


class AnyFinishedStop(torch.nn.Module):
    """A stop on the builtin ``any`` over a per-row flag: ``while True: ...; if any(done): break``."""

    def forward(self, x):
        steps = torch.zeros(x.shape[0], dtype=torch.int64)
        while True:
            x = x * 2
            steps = steps + 1
            done = x.gt(10)
            if any(done):
                break
        return x, steps


class DecayTailByCounter(torch.nn.Module):
    """Soft-NMS's decay in small: ``for i in range(N)``, ``pos = i + 1``, the rest of the scores read
    and written by the counter (``scores[pos:] = w * scores[pos:]``), a running arg-max of the rest
    only while a rest exists (``if i != N - 1``: an arg-max of the empty rest fails)."""

    def forward(self, scores):
        n = scores.shape[0]
        scores = scores.clone()
        best = torch.zeros(n, dtype=torch.int64)
        for i in range(n):
            pos = i + 1
            if i != n - 1:
                best[i] = scores[pos:].argmax() + pos
            scores[pos:] = torch.exp(-scores[i]) * scores[pos:]
        return scores, best


class WindowWriteAtCounter(torch.nn.Module):
    """A static buffer written at a traced position, two columns at a time: ``buf[:, t:t + 2] = v``."""

    def forward(self, x, steps):
        buf = torch.zeros(x.shape[0], 12)
        t = torch.zeros((), dtype=torch.int64)
        while t < steps.clamp(max=5) * 2:
            buf[:, t:t + 2] = x * (t + 1)
            t = t + 2
        return buf


class NearestSelectedRows(torch.nn.Module):
    """k-means' update in small (subhadarship/kmeans_pytorch): inside a ``while`` loop, the points
    nearest a centre are selected by a mask (a data-dependent count), and a centre with no point
    keeps a random one — branches whose values differ in shape, inside a loop body."""

    def forward(self, points, centres):
        shift = torch.ones(())
        trips = torch.zeros((), dtype=torch.int64)
        while shift > 1e-3 and trips < 20:
            before = centres.clone()
            nearest = torch.cdist(points, centres).argmin(dim=1)
            for k in range(centres.shape[0]):
                selected = points[nearest == k]
                if selected.shape[0] == 0:
                    selected = points[:1]
                centres[k] = selected.mean(dim=0)
            shift = (centres - before).pow(2).sum().sqrt()
            trips = trips + 1
        return centres, trips


class LeadingBreakGreedy(torch.nn.Module):
    """A hand-written greedy loop as written around small LMs: ``if finished.all(): break`` as the
    body's first statement, a mask and the sequence grown by ``torch.cat``, the scores appended to
    a list. ``header`` is ``"for"`` (``for _ in range(int(n))``) or ``"while"``."""

    def __init__(self, header: str):
        super().__init__()
        torch.manual_seed(6)
        self.header = header
        self.emb = torch.nn.Embedding(6, 4)
        self.proj = torch.nn.Linear(4, 6)

    def step(self, seq, mask):
        h = (self.emb(seq) * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        logits = self.proj(h) * 0.1 + 10.0 * torch.nn.functional.one_hot((seq[:, -1] - 1).clamp(min=0), 6)
        return logits.argmax(-1), logits.max(-1).values

    def forward(self, tokens, n):
        seq, mask = tokens, torch.ones(tokens.shape, dtype=torch.float32)
        finished = torch.zeros(tokens.shape[0], dtype=torch.bool)
        scores = []
        if self.header == "for":
            for _ in range(int(n)):
                if finished.all():
                    break
                nxt, score = self.step(seq, mask)
                nxt = torch.where(finished, torch.zeros_like(nxt), nxt)
                finished = finished | (nxt == 0)
                seq = torch.cat([seq, nxt[:, None]], 1)
                mask = torch.cat([mask, (~finished).float()[:, None]], 1)
                scores.append(score)
        else:
            step = 0
            while step < n:
                if finished.all():
                    break
                nxt, score = self.step(seq, mask)
                nxt = torch.where(finished, torch.zeros_like(nxt), nxt)
                finished = finished | (nxt == 0)
                seq = torch.cat([seq, nxt[:, None]], 1)
                mask = torch.cat([mask, (~finished).float()[:, None]], 1)
                scores.append(score)
                step += 1
        return seq, torch.stack(scores + [torch.zeros(tokens.shape[0])], 1)


class ReversedRangeScan(torch.nn.Module):
    """A backward pass over time as coqui-ai/TTS's ``maximum_path`` writes it: ``for j in
    reversed(range(t_y))`` over a dynamic length, reading and writing rows at ``j``."""

    def forward(self, x):
        out = torch.zeros_like(x)
        acc = torch.zeros(x.shape[1])
        for j in reversed(range(x.shape[0])):
            acc = acc * 0.5 + x[j]
            out[j] = acc
        return out


class EqualMethodStop(torch.nn.Module):
    """Cluster-NMS's stop (Zzh-tju/CIoU ``Detect.cc_cluster_nms``): ``for i in range(200)``, ``if
    A.equal(B) == True: break`` — the method form, compared with True — and the trip count written
    into ``torch.tensor([[i, 0]])`` after the loop."""

    def forward(self, iou):
        keep = torch.ones(iou.shape[0])
        trips = 0
        for i in range(200):
            before = keep
            keep = (iou * keep[:, None]).triu(1).max(0).values.le(0.5).float()
            trips = i
            if before.equal(keep) == True:  # noqa: E712 - as written in the origin
                break
        return keep, torch.tensor([[trips, 0]])


class AppendsAListPerStep(torch.nn.Module):
    """The PyTorch BiLSTM-CRF tutorial's Viterbi: ``bptrs_t = []`` filled per tag, then
    ``backpointers.append(bptrs_t)`` — a list of tensors appended per step of a loop over a
    dynamic length."""

    def forward(self, feats, transitions):
        backpointers = []
        forward_var = feats[0]
        for feat in feats[1:]:
            bptrs_t = []
            for next_tag in range(transitions.shape[0]):
                scores = forward_var + transitions[next_tag]
                bptrs_t.append(scores.argmax())
            backpointers.append(bptrs_t)
            forward_var = (forward_var[None] + transitions).max(1).values + feat
        return forward_var, len(backpointers)


class AppendsAListOfVectorsPerStep(torch.nn.Module):
    """As :class:`AppendsAListPerStep`, with each step's list holding vectors, not numbers."""

    def forward(self, feats, transitions):
        backpointers = []
        forward_var = feats[0]
        for feat in feats[1:]:
            scores_t = []
            for next_tag in range(transitions.shape[0]):
                scores_t.append(forward_var + transitions[next_tag])
            backpointers.append(scores_t)
            forward_var = (forward_var[None] + transitions).max(1).values + feat
        return forward_var, len(backpointers)


class LegacyTensorOfCounter(torch.nn.Module):
    """``q.push(torch.Tensor([to, d[to]]))`` as tasc_frontiers' Dijkstra writes it: the legacy
    constructor over a traced counter and an element read at it, inside a loop over a dynamic
    length."""

    def forward(self, d):
        rows = torch.zeros(0, 2)
        for to in range(d.shape[0]):
            rows = torch.cat([rows, torch.Tensor([to, d[to]])[None]])
        return rows
