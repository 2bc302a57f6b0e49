"""Models for test_ragged_lists.py: lists grown in a data-dependent loop whose elements' lengths
are data (a list per batch row, a slice of data-dependent length), read whole by torch.cat."""

from __future__ import annotations

import torch
from torch import nn


class BacktrackPerRow(nn.Module):
    """pytorch_HMM's Viterbi backtrack, reduced: per row ``i`` a path started with one state and
    grown at the front for ``lens[i] - 1`` steps, each step reading the path's first state; the
    rows' paths collected in a list of lists, read as one tensor."""

    def forward(self, psi, lens):  # psi: (batch, time, states) int64, lens: (batch,)
        paths = []
        for i in range(psi.shape[0]):
            path = [psi[i, 0, 0].item()]
            for t in range(lens[i] - 1, 0, -1):
                path.insert(0, psi[i, t, path[0]].item())
            paths.append(path)
        return torch.cat([torch.tensor(p, dtype=torch.long) for p in paths])


class BacktrackTensorPerRow(nn.Module):
    """The same backtrack, each row's path appended as ``torch.tensor(path)``: a list of 1-d
    tensors of data-dependent lengths, read by ``torch.cat``; also returns how many rows it holds."""

    def forward(self, psi, lens):
        paths = []
        for i in range(psi.shape[0]):
            path = [psi[i, 0, 0].item()]
            for t in range(lens[i] - 1, 0, -1):
                path.insert(0, psi[i, t, path[0]].item())
            paths.append(torch.tensor(path))
        return torch.cat(paths), torch.full((), len(paths))


class ListsThatMayBeEmpty(nn.Module):
    """Per row, the argmax of the first ``lens[i]`` steps (0 to all of them) appended to a list of
    its own that starts empty; read with ``dtype=torch.long``, as eager gives it for any lengths."""

    def forward(self, x, lens):  # x: (batch, time, classes), lens: (batch,)
        tags_per_row = []
        for i in range(x.shape[0]):
            tags = []
            for t in range(lens[i]):
                tags.append(x[i, t].argmax().item())
            tags_per_row.append(tags)
        return torch.cat([torch.tensor(tags, dtype=torch.long) for tags in tags_per_row])


class UntypedListsThatMayBeEmpty(nn.Module):
    """As :class:`ListsThatMayBeEmpty`, read without a dtype: float32 in eager where a row's list
    is empty, int64 where none is."""

    def forward(self, x, lens):
        tags_per_row = []
        for i in range(x.shape[0]):
            tags = []
            for t in range(lens[i]):
                tags.append(x[i, t].argmax().item())
            tags_per_row.append(tags)
        return torch.cat([torch.tensor(tags) for tags in tags_per_row])


class ColumnsWhileHistoryGrows(nn.Module):
    """A ``while`` loop whose state grows (``history`` gains a row each trip, so it is an ONNX Loop
    around its body) that also appends ``x[k % b, :, :n[k % b]]``, a slice whose length along
    axis 1 is data (0 to all columns), and reads the slices back as ``torch.cat(parts, dim=1)``."""

    def forward(self, x, n, steps):  # x: (batch, channels, length), n: (batch,), steps: 0-d
        history = x[:0, 0, 0]
        parts = []
        k = 0
        while k < steps:
            row = k % x.shape[0]
            history = torch.cat([history, x[row, 0, :1]])
            parts.append(x[row, :, :n[row]] * 2)
            k += 1
        return torch.cat([x[0, :, :1]] + parts, dim=1), history


class FirstPathRead(nn.Module):
    """Reads one row's path of a list of lists: refused at its line."""

    def forward(self, psi, lens):
        paths = []
        for i in range(psi.shape[0]):
            path = [psi[i, 0, 0].item()]
            for t in range(lens[i] - 1, 0, -1):
                path.insert(0, psi[i, t, path[0]].item())
            paths.append(path)
        first = paths[0]
        return torch.tensor(first)


class PathsReversedEach(nn.Module):
    """Concatenates each row's path reversed (``flip`` does not commute with concatenation): refused
    at its line."""

    def forward(self, psi, lens):
        paths = []
        for i in range(psi.shape[0]):
            path = [psi[i, 0, 0].item()]
            for t in range(lens[i] - 1, 0, -1):
                path.insert(0, psi[i, t, path[0]].item())
            paths.append(torch.tensor(path))
        return torch.cat([p.flip(0) for p in paths])


class SlicesStacked(nn.Module):
    """``torch.stack`` of slices of data-dependent lengths in a loop whose state grows: refused at
    its line (only their concatenation is kept)."""

    def forward(self, x, n, steps):
        history = x[:0, 0]
        parts = []
        k = 0
        while k < steps:
            history = torch.cat([history, x[0, :1]])
            parts.append(x[0, :n[0]])
            k += 1
        return torch.stack(parts), history


class BacktrackThroughHistory(nn.Module):
    """pytorch-crf's Viterbi decode, reduced: a loop over time appends each step's best previous
    tags to ``history``; per row, a backtrack over ``reversed(history[:ends[b]])`` (the list the
    first loop grew, read in the body of a loop whose state grows) into a list of its own, the
    rows' lists read as one tensor."""

    def forward(self, emissions, mask):  # emissions: (time, batch, tags), mask: (time, batch) bool
        score = emissions[0]
        history = []
        for i in range(1, mask.shape[0]):
            best, indices = (score.unsqueeze(2) + emissions[i].unsqueeze(1)).max(dim=1)
            score = torch.where(mask[i].unsqueeze(1), best, score)
            history.append(indices)
        ends = mask.long().sum(dim=0) - 1
        tags_per_row = []
        for b in range(mask.shape[1]):
            tags = [score[b].argmax().item()]
            for hist in reversed(history[:ends[b]]):
                tags.append(hist[b][tags[-1]].item())
            tags.reverse()
            tags_per_row.append(tags)
        return torch.cat([torch.tensor(t, dtype=torch.long) for t in tags_per_row])


class PathsReturned(nn.Module):
    """Returns the list of lists itself: refused (an ONNX file returns a fixed number of tensors)."""

    def forward(self, psi, lens):
        paths = []
        for i in range(psi.shape[0]):
            path = [psi[i, 0, 0].item()]
            for t in range(lens[i] - 1, 0, -1):
                path.insert(0, psi[i, t, path[0]].item())
            paths.append(path)
        return paths


class ColumnsInsertedAtTheFront(nn.Module):
    """:class:`ColumnsWhileHistoryGrows` with each slice put first (``parts.insert(0, ...)``) after
    one that was there before the loop: read back newest first, the one from before last."""

    def forward(self, x, n, steps):
        history = x[:0, 0, 0]
        parts = [x[0, :, :1]]
        k = 0
        while k < steps:
            row = k % x.shape[0]
            history = torch.cat([history, x[row, 0, :1]])
            parts.insert(0, x[row, :, :n[row]] + k)
            k += 1
        return torch.cat(parts, dim=-1), history


class PrefixesFromAnInnerLoop(nn.Module):
    """A ``while`` whose state grows, and inside it a ``for`` over ``n[row]`` (0 to all) that appends
    the row's prefixes of lengths 1, 2, ...: the inner loop's elements join the outer list's
    concatenation after each outer trip."""

    def forward(self, x, n, steps):  # x: (batch, length), n: (batch,), steps: 0-d
        history = x[:0, 0]
        parts = [x[0, :2]]
        k = 0
        while k < steps:
            row = k % x.shape[0]
            history = torch.cat([history, x[row, :1]])
            for j in range(n[row]):
                parts.append(x[row, : j + 1])
            k += 1
        return torch.cat(parts), history
