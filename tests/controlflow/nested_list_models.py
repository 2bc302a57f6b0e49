"""Models for tests/controlflow/test_lists_in_nested_loops.py: lists grown in data-dependent loops
that a data-dependent loop inside them (or after them) appends to as well, tensors indexed by a
grown list, and Python lists written by index under a tensor condition (a data-dependent
``continue``). Each line marked ``# error-line`` is where a refusal must point."""

from __future__ import annotations

import torch
from torch import nn


def _zero():
    return torch.zeros((), dtype=torch.int64)


def _iou(box, boxes):
    """IoU of one (x1, y1, x2, y2) box with each row of ``boxes``."""
    lt = torch.maximum(box[:2], boxes[:, :2])
    rb = torch.minimum(box[2:], boxes[:, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    area = (box[2:] - box[:2]).prod(-1) + (boxes[:, 2:] - boxes[:, :2]).prod(-1)
    return inter / (area - inter + 1e-9)


class NestedWhileStack(nn.Module):
    """Only the inner loop appends: ``i`` elements on outer trip ``i``."""

    def forward(self, x, n):
        parts = [x]
        i = _zero()
        while i < n:
            j = _zero()
            while j < i:
                parts.append(x + j * 10 + i)
                j = j + 1
            i = i + 1
        return torch.stack(parts)


class NmsPerClass(nn.Module):
    """Greedy NMS per class (ultralytics' YOLOv3 shape, with fixed-shape state): a ``for`` over a
    traced number of classes appends a header row, then an inner ``while`` appends the best box
    left of the class until none is; the rows are stacked once after both loops."""

    def forward(self, boxes, scores, labels, k):
        keep = [boxes.new_zeros(4)]
        for c in range(int(k)):
            keep.append(boxes.new_ones(4) * -(c + 1))
            alive = labels == c
            while alive.any():
                best = torch.where(alive, scores, -1.0).argmax()
                keep.append(boxes[best])
                alive = alive & (_iou(boxes[best], boxes) < 0.5) & (torch.arange(boxes.shape[0]) != best)
        return torch.stack(keep), len(keep) * scores.sum()


class NestedCatVaryingRows(nn.Module):
    """Elements of changing size from the inner loop (rows chosen by data) and the outer one,
    concatenated along ``dim``; the outer loop's elements come after the inner loop's."""

    def __init__(self, dim: int = 0):
        super().__init__()
        self.dim = dim

    def forward(self, x, n):
        parts = [torch.movedim(x[:1], 0, self.dim)]
        i = _zero()
        while i < n:
            j = _zero()
            while j < i:
                parts.append(torch.movedim(x[x[:, 0] > 0.3 * j - 0.5], 0, self.dim) * (i + 1))
                j = j + 1
            parts.append(torch.movedim(x[:1], 0, self.dim) * -i)
            i = i + 1
        return torch.cat(parts, self.dim)


class NestedForRows(nn.Module):
    """A ``for`` over a traced range inside a ``while``: the inner list has a buffer of one row
    per trip (one pass), the outer one counts."""

    def forward(self, x, n):
        parts = []
        i = _zero()
        while i < n:
            for j in range(i + 1):
                parts.append(x[0] * (j + 1) - i)
            i = i + 1
        return torch.stack(parts, -1)


class NestedInABranch(nn.Module):
    """The inner loop in a converted ``if`` of the outer loop's body."""

    def forward(self, x, n):
        parts = [x]
        i = _zero()
        while i < n:
            if x.sum() > i:
                j = _zero()
                while j <= i:
                    parts.append(x * j - i)
                    j = j + 1
            else:
                parts.append(x * 0 + 100)
            i = i + 1
        return torch.stack(parts)


class NestedInAGrowingLoop(nn.Module):
    """The outer loop's state grows (``acc``), so it is an ONNX Loop around its exported body that
    carries the list as the stack of its elements so far; the inner loop appends to it."""

    def forward(self, x, n):
        acc = x[:0]
        parts = [x[0]]
        i = _zero()
        while i < n:
            acc = torch.cat([acc, x[:1] * i])
            j = _zero()
            while j < i:
                parts.append(x[0] + j * 10 + i)
                j = j + 1
            i = i + 1
        return torch.stack(parts), acc


class LoopsOneAfterTheOther(nn.Module):
    """Two data-dependent loops in a row grow one list (a Python loop around a data-dependent one
    does the same on its second trip)."""

    def forward(self, x, n):
        parts = []
        i = _zero()
        while i < n:
            parts.append(x * i)
            i = i + 1
        for c in range(2):
            while i < 2 * n + c:
                parts.append(x - i)
                i = i + 1
        return torch.stack(parts), len(parts) * x.sum()


class LenInsideTheInnerLoop(nn.Module):
    def forward(self, x, n):
        parts = [x]
        i = _zero()
        while i < n:
            j = _zero()
            while j < i:  # error-line (in the outer loop's body only the inner loop's line is known)
                parts.append(x + len(parts))
                j = j + 1
            i = i + 1
        return torch.stack(parts)


class ReplacedInTheInnerLoop(nn.Module):
    def forward(self, x, n):
        parts = [x]
        i = _zero()
        while i < n:
            parts.append(x)
            j = _zero()
            while j < i:  # error-line
                parts = [x + j]
                j = j + 1
            i = i + 1
        return torch.stack(parts)


class IndexedByPickedNumbers(nn.Module):
    """pytorch-ssd's ``box_scores[picked, :]``: a tensor indexed by a list of numbers grown in a
    ``while`` loop (``picked.append(i.item())``), in a tuple index and written through one."""

    def forward(self, boxes, scores):
        picked = []
        alive = scores > 0.1
        while alive.any():
            best = torch.where(alive, scores, -1.0).argmax()
            picked.append(best.item())
            alive = alive & (_iou(boxes[best], boxes) < 0.4) & (torch.arange(boxes.shape[0]) != best)
        out = boxes.clone()
        out[picked, :] = 0.0
        return boxes[picked, :], scores[None][:, picked], out


class IndexedInsideItsLoop(nn.Module):
    """The boxes picked so far, read inside the loop that picks them (the loop then carries the
    stack of the list)."""

    def forward(self, boxes, scores):
        picked = []
        alive = scores > 0.1
        while alive.any():
            best = torch.where(alive, scores, -1.0).argmax()
            picked.append(best)
            covered = _iou(boxes[picked, :].mean(0), boxes) > 0.3
            alive = alive & ~covered & (torch.arange(boxes.shape[0]) != best)
        return scores[picked, ...]


class IndexedBySelected(nn.Module):
    """A list appended to under tensor conditions in an unrolled loop, as a tuple index."""

    def forward(self, boxes, scores):
        keep = []
        for i in range(4):
            if scores[i] > 0.5:
                keep.append(i)
        return boxes[keep, :] * 2


class IndexedByTheBareList(nn.Module):
    def forward(self, boxes, scores):
        picked = []
        alive = scores > 0.1
        while alive.any():
            best = torch.where(alive, scores, -1.0).argmax()
            picked.append(best.item())
            alive = alive & (torch.arange(boxes.shape[0]) != best)
        return boxes[picked]  # error-line


class LocalListOfChangingRows(nn.Module):
    """A list local to the body of a data-dependent loop, grown by a loop in that body with rows
    chosen by data: its rows come from pass 1's sums, also inside the body dynamo traces."""

    def forward(self, x, n):
        total = x[:1] * 0
        count = _zero()
        i = _zero()
        while i < n:
            inner = [x[:1] * i]
            j = _zero()
            while j < i:
                inner.append(x[x[:, 0] > 0.3 * j - 0.5] + j)
                j = j + 1
            rows = torch.cat(inner)
            total = total + rows.sum(0, keepdim=True)
            count = count + rows.shape[0]
            i = i + 1
        return total, count


class WrittenUnderAContinue(nn.Module):
    """YOLOv5's per-image loop: ``output = [empty] * batch``; per image the rows above a threshold,
    ``if not x.shape[0]: continue``, then ``output[xi] = ...`` (an entry of another size than the
    empty one it replaces); the list is returned through a second name for it."""

    def forward(self, pred):
        output = [torch.zeros((0, 3))] * pred.shape[0]
        alias = output
        for xi, x in enumerate(pred):
            x = x[x[:, 0] > 0.5]
            if not x.shape[0]:
                continue
            x = x * 2
            output[xi] = x[:, 1:]
        return tuple(alias)


class WrittenInBothBranches(nn.Module):
    """Each side of a tensor ``if`` writes its own entry of a list, at a counter's index."""

    def forward(self, x):
        out = [x * 0, x * 0, x * 0]
        for i in range(2):
            if x[i].sum() > 0:
                out[i] = x * (i + 1)
            else:
                out[i + 1] = -x
        return torch.stack(out)


class NoneEntryWrittenUnderAContinue(nn.Module):
    """PyTorch-YOLOv3 (2018): ``output = [None] * batch``; an image without rows keeps None."""

    def forward(self, pred):
        output = [None for _ in range(pred.shape[0])]
        for xi, x in enumerate(pred):
            x = x[x[:, 0] > 0.5]
            if not x.shape[0]:
                continue
            output[xi] = x  # error-line
        return [o if o is not None else pred[0, :0] for o in output]
