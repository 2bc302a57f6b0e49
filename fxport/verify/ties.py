"""Outputs a sort orders, compared tie-tolerantly: rows whose sort keys are equal within the
comparison's tolerance may come out of ONNX Runtime in another order than eager's.

Detections are the common case: boxes, scores and labels of one image ordered by decreasing
score (NMS, top-k). Two scores 1e-5 apart are equal within float32 noise, and the ONNX file may
order them the other way; compared position by position, its boxes then differ by the whole
box. :func:`align_tied_rows` pairs such rows before the comparison:

- the *key* is a 1-D float output, sorted (non-increasing or non-decreasing) in eager, that a
  sort-like op produced (:func:`sorted_output_indices` reads those from the program);
- its *rows* are the outputs in the same container of the output structure (one image's
  dict or tuple) whose first dimension has the key's length;
- a *tie block* is a run of neighbouring key values within the tolerance of each other; inside
  a block each eager row is paired with the ONNX row closest to it (every output of the row,
  in units of the tolerance; integers must be equal), then compared as usual. Rows never move
  out of their block, so a wrong order (ascending for descending, an off-by-one shift) still
  fails, and a paired row that differs still fails.

What it cannot pair: a tie that changes *which* rows exist (two equal-score boxes of which NMS
keeps the first, or the last place of a top-k); those still fail.

Example::

    >>> import numpy as np, torch
    >>> eager = ({"scores": torch.tensor([0.9, 0.50001, 0.5]), "labels": torch.tensor([1, 2, 3])},)
    >>> onnx = [np.array([0.9, 0.5, 0.50001], np.float32), np.array([1, 3, 2])]
    >>> aligned = align_tied_rows(eager, onnx, lambda dtype: (1e-4, 1e-3))
    >>> [a.tolist() for a in aligned.outputs][1], aligned.notes
    ([1, 2, 3], ['output[0..1]: 2 rows with sort keys equal within tolerance (key output[0]) came out in another order; compared after pairing them'])
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np
import torch

#: Ops whose output order follows the values of a key (namespace::name, any overload).
ORDERING_OPS = frozenset({"aten::sort", "aten::argsort", "aten::topk", "aten::msort",
                          "torchvision::nms", "fxport_vision::batched_nms"})

Limits = Callable[[torch.dtype], "tuple[float, float]"]


@dataclasses.dataclass
class TieAlignment:
    """The ONNX outputs with tied rows put in eager's order, and one note per group moved."""

    outputs: list[np.ndarray]
    notes: list[str]


def sorted_output_indices(program: Any) -> frozenset[int]:
    """Indices of the program's user outputs that an ordering op (:data:`ORDERING_OPS`) feeds,
    directly or through other ops (subgraphs of cond/while_loop/scan included).

    >>> class Top(torch.nn.Module):
    ...     def forward(self, x):
    ...         return x.topk(2).values, x * 2
    >>> sorted_output_indices(torch.export.export(Top(), (torch.randn(4),)))
    frozenset({0})
    """
    graph = program.graph_module.graph
    output = graph.output_node()
    specs = program.graph_signature.output_specs
    user = [arg for arg, spec in zip(output.args[0], specs) if spec.kind.name == "USER_OUTPUT"]
    cache: dict[torch.fx.Node, bool] = {}
    return frozenset(i for i, node in enumerate(user)
                     if isinstance(node, torch.fx.Node) and _ordered(node, program.graph_module, cache))


def _ordered(node: torch.fx.Node, owner: torch.nn.Module, cache: dict) -> bool:
    stack, seen = [node], set()
    while stack:
        current = stack.pop()
        if current in cache:
            if cache[current]:
                cache[node] = True
                return True
            continue
        if current in seen:
            continue
        seen.add(current)
        if _is_ordering(current) or _subgraph_orders(current, owner):
            cache[node] = True
            return True
        stack.extend(current.all_input_nodes)
    for visited in seen:
        cache.setdefault(visited, False)
    return False


def _is_ordering(node: torch.fx.Node) -> bool:
    schema_name = getattr(getattr(node.target, "_schema", None), "name", None)
    return node.op == "call_function" and schema_name in ORDERING_OPS


def _subgraph_orders(node: torch.fx.Node, owner: torch.nn.Module) -> bool:
    for arg in node.args:
        if isinstance(arg, torch.fx.Node) and arg.op == "get_attr":
            sub = getattr(owner, str(arg.target), None)
            if isinstance(sub, torch.fx.GraphModule) and any(
                    _is_ordering(n) or _subgraph_orders(n, sub) for n in sub.graph.nodes):
                return True
    return False


def align_tied_rows(eager_outputs: Any, onnx_outputs: Sequence[np.ndarray], limits: Limits,
                    keys: frozenset[int] | None = None) -> TieAlignment:
    """ONNX outputs with rows of tied sort keys paired to eager's rows (module docstring).

    ``limits(dtype)`` is the comparison's (atol, rtol) for a float dtype; ``keys`` the flat
    output indices a sort may order (None: any sorted 1-D float output may be a key).
    """
    leaves = _leaves_with_parents(eager_outputs)
    aligned = [np.asarray(value) for value in onnx_outputs]
    notes = []
    groups: dict[Any, list[int]] = {}
    for index, (parent, _) in enumerate(leaves):
        groups.setdefault(parent, []).append(index)
    for members in groups.values():
        note = _align_group([leaves[i][1] for i in members], members, aligned, limits, keys)
        if note:
            notes.append(note)
    return TieAlignment(aligned, notes)


def _leaves_with_parents(outputs: Any) -> list[tuple[Any, torch.Tensor]]:
    """(parent path, tensor) per output, in :func:`fxport.verify.compare.flatten_outputs`' order."""
    flat, _ = torch.utils._pytree.tree_flatten_with_path(outputs)
    return [(tuple(path[:-1]), value if isinstance(value, torch.Tensor) else torch.tensor(value))
            for path, value in flat if isinstance(value, (torch.Tensor, bool, int, float))]


def _align_group(eager: list[torch.Tensor], indices: list[int], onnx: list[np.ndarray],
                 limits: Limits, keys: frozenset[int] | None) -> str | None:
    key = next((k for k, i in enumerate(indices) if (keys is None or i in keys)
                and i < len(onnx) and _is_sorted_key(eager[k], onnx[i])), None)
    if key is None:
        return None
    length = eager[key].shape[0]
    rows = [k for k, t in enumerate(eager) if t.dim() >= 1 and t.shape[0] == length
            and indices[k] < len(onnx) and tuple(onnx[indices[k]].shape) == tuple(t.shape)]
    want = [_as_numpy(eager[k]) for k in rows]
    got = [onnx[indices[k]] for k in rows]
    tolerances = [limits(eager[k].dtype) if eager[k].dtype.is_floating_point else None for k in rows]
    order = list(range(length))
    moved = 0
    for block in _tie_blocks(want[rows.index(key)], limits(eager[key].dtype)):
        for eager_row, onnx_row in _pair_rows(block, want, got, tolerances).items():
            order[eager_row] = onnx_row
            moved += eager_row != onnx_row
    if not moved:
        return None
    for k, values in zip(rows, got):
        onnx[indices[k]] = values[order]
    first, last = min(indices[k] for k in rows), max(indices[k] for k in rows)
    return (f"output[{first}..{last}]: {moved} rows with sort keys equal within tolerance "
            f"(key output[{indices[key]}]) came out in another order; compared after pairing them")


def _is_sorted_key(eager: torch.Tensor, onnx: np.ndarray) -> bool:
    if eager.dim() != 1 or not eager.dtype.is_floating_point or eager.shape[0] < 2:
        return False
    if tuple(onnx.shape) != tuple(eager.shape) or bool(torch.isnan(eager).any()):
        return False
    steps = eager[1:] - eager[:-1]
    return bool((steps <= 0).all() or (steps >= 0).all())


def _as_numpy(tensor: torch.Tensor) -> np.ndarray:
    return tensor.detach().cpu().to(torch.float64 if tensor.dtype.is_floating_point else tensor.dtype).numpy()


def _tie_blocks(key: np.ndarray, limit: tuple[float, float]) -> list[list[int]]:
    """Runs of neighbouring positions whose key values are equal within the tolerance."""
    atol, rtol = limit
    blocks, current = [], [0]
    for i in range(1, len(key)):
        if abs(key[i] - key[i - 1]) <= 2 * atol + rtol * (abs(key[i]) + abs(key[i - 1])):
            current.append(i)
        else:
            blocks.append(current)
            current = [i]
    blocks.append(current)
    return [block for block in blocks if len(block) > 1]


def _pair_rows(block: list[int], want: list[np.ndarray], got: list[np.ndarray],
               tolerances: list) -> dict[int, int]:
    """eager row → ONNX row inside ``block``: the pairs that differ least (in units of the
    tolerance; integers must be equal), cheapest first; eager's order where it already fits.
    Pairing only decides which rows to compare; the comparison after it judges them."""
    cost = {(e, o): _distance(e, o, want, got, tolerances) for e in block for o in block}
    if all(cost[e, e] <= 1.0 for e in block):
        return {e: e for e in block}
    pairs: dict[int, int] = {}
    for (e, o) in sorted(cost, key=lambda pair: (cost[pair], pair[0] != pair[1])):
        if e not in pairs and o not in pairs.values():
            pairs[e] = o
    return pairs


def _distance(e: int, o: int, want: list[np.ndarray], got: list[np.ndarray], tolerances: list) -> float:
    worst = 0.0
    for w, g, tol in zip(want, got, tolerances):
        if tol is None:
            if not np.array_equal(w[e], g[o]):
                return float("inf")
            continue
        a, b = w[e], g[o].astype(np.float64)
        same_nan = np.isnan(a) == np.isnan(b)
        if not same_nan.all():
            return float("inf")
        finite = np.isfinite(a) & np.isfinite(b)
        if not np.array_equal(a[~finite & ~np.isnan(a)], b[~finite & ~np.isnan(b)]):
            return float("inf")
        if finite.any():
            worst = max(worst, float((np.abs(a[finite] - b[finite]) / (tol[0] + tol[1] * np.abs(a[finite]))).max()))
    return worst
