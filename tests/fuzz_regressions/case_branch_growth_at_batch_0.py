"""Fuzz regression (long profile, chunk 21, issue 26's grown-state generators): ONNX Runtime
failed at batch 0 and verification refused the file.

At batch 0 the loop runs (``(h < 2.0).all()`` of an empty tensor is True), ``h.sum()`` is 0
and the else branch grows ``acc`` by ``g[:1]``, zero rows; the true branch grows it by a mean
row. The body, captured on its own, saw one row in both and selected them with a where. An if
that assigns a value the loop grows is now an If in the Loop body, each branch keeping its own
length. (Verification had passed the file when its batch-0 set redrew ``n`` to a count that
ran no step; sets of other sizes now keep the inputs they do not resize.)
"""
# expect: equal

import torch
from torch import nn


class Fuzzed(nn.Module):
    def forward(self, x, n):
        h = x.clone()
        g = torch.tanh(x)
        acc = g.clone()
        k = torch.zeros((), dtype=torch.int64)
        while (k < n) and ((h.mean() < 0.1) or ((h < 2.0).all())):
            k = k + 1
            h = h * 0.5 + 1.0
            if h.sum() > 0.5:
                acc = torch.cat([acc, h.mean(dim=0, keepdim=True)], 0)
            else:
                acc = torch.cat([acc, g[:1]], 0)
        return acc.sum(dim=0) + g.sum(dim=0)
