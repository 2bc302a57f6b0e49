"""Models for test_tensor_items.py: ``t.tolist()`` of an integer vector whose length is a dynamic
dimension, read by a run-time counter, ``len()``, iteration and element comparisons."""

from __future__ import annotations

import torch
from torch import nn


def collapse_runs(hyp, blank_id=0):
    """wenet's remove_duplicates_and_blank: one item per run of equal items, blanks dropped."""
    new_hyp = []
    cur = 0
    while cur < len(hyp):
        if hyp[cur] != blank_id:
            new_hyp.append(hyp[cur])
        prev = cur
        while cur < len(hyp) and hyp[cur] == hyp[prev]:
            cur += 1
    return new_hyp


class CollapseRuns(nn.Module):
    """The list made in forward, collapsed in a helper, read back with torch.tensor."""

    def forward(self, ids):
        return torch.tensor(collapse_runs(ids.tolist(), 0), dtype=torch.long)


class CollapseTwoRows(nn.Module):
    """Two rows collapsed in a Python for over a list of two such lists; the counts read back."""

    def forward(self, ids):
        results = []
        for hyp in [ids[0].tolist(), ids[1].tolist()]:
            results.append(collapse_runs(hyp))
        return (torch.cat([torch.tensor(r, dtype=torch.long) for r in results]),
                torch.tensor([len(r) for r in results], dtype=torch.long))


class FirstPosition(nn.Module):
    """``while i < len(xs) and xs[i] != stop``: left by its test's either side; ``xs[-1]`` and a slice."""

    def forward(self, ids, stop):
        xs = ids.tolist()
        i = 0
        while i < len(xs) and xs[i] != stop:
            i += 1
        tail = xs[1:]
        return torch.tensor(i), torch.tensor(xs[-1]), torch.tensor(tail, dtype=torch.long)


class CountAbove(nn.Module):
    """``for v in xs: if v > k: n += 1`` over a list of int32 items (Python ints: exact)."""

    def forward(self, ids, k):
        xs = ids.to(torch.int32).tolist()
        n = 0
        total = 0
        for v in xs:
            if v > k:
                n += 1
            total = total + v
        return torch.tensor(n), torch.tensor(total)


class ContainsItem(nn.Module):
    """``if 3 in xs:`` a tensor condition over the items."""

    def forward(self, ids, x):
        xs = ids.tolist()
        if 3 in xs:
            x = x * 2
        return x


class JoinedList(nn.Module):
    """``xs + [0]``: a list joined with + (a tensor would add): refused."""

    def forward(self, ids):
        xs = ids.tolist()
        ys = xs + [0]
        return torch.tensor(len(ys))


class SortedList(nn.Module):
    """``sorted(xs)``: an iteration outside a for statement: refused."""

    def forward(self, ids):
        return torch.tensor(sorted(ids.tolist()), dtype=torch.long)


def drop_blanks(hyp):
    """A for over the positions of the list, appending the items that are not blank."""
    kept = []
    for cur in range(len(hyp)):
        if hyp[cur] != 0:
            kept.append(hyp[cur])
    return kept


class RowsListedThenFlattened(nn.Module):
    """``[h.tolist() for h in ids]`` over a dynamic batch (the matrix's list), a for over it whose
    body keeps each row's non-blank items, read back flat: ``torch.tensor([t for r in rs for t in r])``."""

    def forward(self, ids):
        hyps = [h.tolist() for h in ids]
        results = []
        for hyp in hyps:
            results.append(drop_blanks(hyp))
        return torch.tensor([t for r in results for t in r], dtype=torch.long)


class TwoRowsFlattened(nn.Module):
    """The flat read of a Python list of two grown lists."""

    def forward(self, ids):
        results = [drop_blanks(ids[0].tolist()), drop_blanks(ids[1].tolist())]
        return torch.tensor([t for r in results for t in r], dtype=torch.long)
