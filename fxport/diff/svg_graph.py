"""A small layered-graph SVG renderer (no graphviz): boxes in layers, top to bottom.

Layers come from the longest path from a source; within a layer nodes are ordered by the mean
position of their predecessors (a few barycenter sweeps), ties broken by insertion order, so
the same graph always gives the same picture.

Example::

    >>> svg = render_svg([GraphBox("a", "Relu", "same"), GraphBox("b", "Tanh", "added")], [("a", "b")])
    >>> svg.startswith("<svg") and "Tanh" in svg and 'class="node added"' in svg
    True
"""

from __future__ import annotations

import dataclasses
from html import escape

BOX_HEIGHT = 30
LAYER_GAP = 60
NODE_GAP = 24
CHAR_WIDTH = 7.2
MARGIN = 12
MAX_LABEL = 40


@dataclasses.dataclass
class GraphBox:
    """A node to draw: its id, its label, and its diff status (added/removed/changed/same)."""

    key: str
    label: str
    status: str = "same"
    title: str = ""


def render_svg(boxes: list[GraphBox], edges: list[tuple[str, str]]) -> str:
    """An ``<svg>`` element drawing ``boxes`` connected by ``edges`` (pairs of keys)."""
    keys = [box.key for box in boxes]
    known = set(keys)
    edges = sorted({(a, b) for a, b in edges if a in known and b in known and a != b},
                   key=lambda e: (keys.index(e[0]), keys.index(e[1])))
    layers = order_layers(keys, edges)
    by_key = {box.key: box for box in boxes}
    positions, width, height = _place(layers, by_key)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" width="{width:.0f}" height="{height:.0f}" '
             f'viewBox="0 0 {width:.0f} {height:.0f}" role="img">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
             'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#777"/>'
             '</marker></defs>']
    for source, target in edges:
        parts.append(_edge(positions[source], positions[target]))
    for key in keys:
        parts.append(_box(by_key[key], positions[key]))
    parts.append("</svg>")
    return "".join(parts)


def order_layers(keys: list[str], edges: list[tuple[str, str]]) -> list[list[str]]:
    """Nodes grouped into layers (longest path from a source), each layer in barycenter order."""
    preds: dict[str, list[str]] = {k: [] for k in keys}
    for source, target in edges:
        preds[target].append(source)
    depth: dict[str, int] = {}

    def layer_of(key: str, visiting: frozenset = frozenset()) -> int:
        if key not in depth:
            parents = [p for p in preds[key] if p not in visiting]  # ignore cycles
            depth[key] = 1 + max((layer_of(p, visiting | {key}) for p in parents), default=-1)
        return depth[key]

    for key in keys:
        layer_of(key)
    layers: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for key in keys:
        layers[depth[key]].append(key)
    for _ in range(2):
        index = {k: i for layer in layers for i, k in enumerate(layer)}
        for layer in layers[1:]:
            layer.sort(key=lambda k: _barycenter(k, preds, index, layer))
    return layers


def _barycenter(key: str, preds, index, layer) -> float:
    parents = [index[p] for p in preds[key] if p in index]
    return sum(parents) / len(parents) if parents else float(layer.index(key))


def _place(layers, by_key):
    widths = {k: _box_width(by_key[k].label) for layer in layers for k in layer}
    row_widths = [sum(widths[k] for k in layer) + NODE_GAP * (len(layer) - 1) for layer in layers]
    width = max(row_widths, default=0) + 2 * MARGIN
    positions = {}
    for row, layer in enumerate(layers):
        x = MARGIN + (width - 2 * MARGIN - row_widths[row]) / 2
        y = MARGIN + row * (BOX_HEIGHT + LAYER_GAP)
        for key in layer:
            positions[key] = (x, y, widths[key])
            x += widths[key] + NODE_GAP
    height = MARGIN * 2 + len(layers) * BOX_HEIGHT + max(len(layers) - 1, 0) * LAYER_GAP
    return positions, max(width, 40), max(height, 40)


def _box_width(label: str) -> float:
    return max(60.0, len(_short(label)) * CHAR_WIDTH + 20)


def _short(label: str) -> str:
    return label if len(label) <= MAX_LABEL else label[: MAX_LABEL - 1] + "…"


def _box(box: GraphBox, position) -> str:
    x, y, width = position
    title = f"<title>{escape(box.title or box.label)}</title>"
    return (f'<g class="node {escape(box.status)}" data-key="{escape(box.key)}">{title}'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{BOX_HEIGHT}" rx="5"/>'
            f'<text x="{x + width / 2:.1f}" y="{y + BOX_HEIGHT / 2 + 4:.1f}" text-anchor="middle">'
            f"{escape(_short(box.label))}</text></g>")


def _edge(source, target) -> str:
    sx, sy, sw = source
    tx, ty, tw = target
    x1, y1 = sx + sw / 2, sy + BOX_HEIGHT
    x2, y2 = tx + tw / 2, ty
    if y2 <= y1:  # same or earlier layer (a cycle was cut): route around the side
        y2 = ty + BOX_HEIGHT
    bend = max(abs(y2 - y1) / 2, 20)
    return (f'<path class="edge" d="M {x1:.1f} {y1:.1f} C {x1:.1f} {y1 + bend:.1f}, {x2:.1f} {y2 - bend:.1f}, '
            f'{x2:.1f} {y2:.1f}" marker-end="url(#arrow)"/>')
