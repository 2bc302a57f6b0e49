"""A model calling every op fxport's built-in rules translate (the stock exporter on torch
2.13 refuses all but bucketize).

    fxport convert examples/missing_ops.py:MissingOps -i x=6x8 -i y=6x8
"""

import torch


class MissingOps(torch.nn.Module):
    def forward(self, x, y):
        bounded = torch.tanh(x) * 0.99
        positive = x.abs() + 0.5
        boundaries = torch.sort(y[0])[0]
        square = x[:6, :6] @ x[:6, :6].T + 6 * torch.eye(6)
        return (
            torch.erfinv(bounded),
            torch.lgamma(positive),
            torch.digamma(positive),
            torch.hypot(x, y),
            torch.cummax(x, 1)[0],
            torch.cummin(x, 0)[1],
            torch.cumprod(x, 1),
            torch.median(x, 1)[0],
            torch.median(y),
            torch.nanmedian(x, 0)[0],
            torch.kthvalue(x, 3, 1)[0],
            torch.mode(torch.round(x), 1)[0],
            torch.searchsorted(boundaries, x),
            torch.bucketize(x, boundaries, right=True),
            torch.cdist(x, y),
            torch.cdist(x, y, p=1.0),
            torch.cdist(x, y, p=float("inf")),
            torch.linalg.inv(square),
            torch.linalg.solve(square, y[:6]),
            torch.linalg.cholesky(square),
            torch.histc(x, bins=10),
            torch.linalg.solve_triangular(square.triu(), y[:6], upper=True),
        )
