"""Loops of the classes ported public code showed failing (issue #47), each in its smallest form.

Each model keeps the shape its origin has (named in its docstring); tests/wild_loops/ holds the
ports themselves.
"""

from __future__ import annotations

import torch


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
