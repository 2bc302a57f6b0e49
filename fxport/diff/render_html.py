"""One self-contained HTML page for a :class:`~fxport.diff.model_diff.ModelDiff`.

No scripts, fonts or images are fetched: styles are inline, pictures are SVG drawn by
:mod:`fxport.diff.svg_graph`, and sections collapse with the native ``<details>`` element.
The page shows a summary, one collapsible section per applied rule (source side by side, the
ONNX nodes it produced and a picture of that region), the captured-graph diffs and the ONNX
diff (op-count deltas, inputs/outputs/initializers, changed-region pictures, every node side by
side with If/Loop/Scan bodies nested).

Example::

    >>> from fxport.diff.command import run_diff
    >>> html = render_html(run_diff("examples/gated_mlp.py:GatedMLP", verify=False))
    >>> html.startswith("<!DOCTYPE html>"), "if-to-cond" in html
    (True, True)
"""

from __future__ import annotations

import difflib
from html import escape

from fxport.diff.graph_diff import CapturedGraphDiff, iter_graph_changes
from fxport.diff.model_diff import GraphStage, ModelDiff, RewriteView
from fxport.diff.onnx_diff import OnnxGraphDiff, iter_changes
from fxport.diff.svg_graph import GraphBox, render_svg

REGION_LIMIT = 60

STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:20px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
code,pre,td.code{font:12px/1.4 ui-monospace,Menlo,Consolas,monospace}
details{border:1px solid #ddd;border-radius:6px;margin:10px 0;padding:6px 10px}
summary{cursor:pointer;font-weight:600}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #e3e3e3;padding:2px 8px;vertical-align:top}
th{background:#f6f6f6;text-align:left}
table.side{width:100%;table-layout:fixed}table.side td{white-space:pre-wrap;word-break:break-all}
tr.added td.after,td.add{background:#e6ffec}tr.removed td.before,td.del{background:#ffebe9}
tr.changed td{background:#fff8c5}tr.same td{color:#888}
.pos{color:#1a7f37;font-weight:600}.neg{color:#cf222e;font-weight:600}
.note{background:#fff8c5;padding:6px 10px;border-radius:6px}
.badge{display:inline-block;border-radius:10px;padding:0 8px;margin-left:6px;font-size:12px;background:#eee}
.badge.added{background:#dafbe1}.badge.removed{background:#ffebe9}.badge.changed{background:#fff8c5}
svg.graph .node rect{fill:#f6f8fa;stroke:#999}svg.graph .node.added rect{fill:#dafbe1;stroke:#1a7f37}
svg.graph .node.removed rect{fill:#ffebe9;stroke:#cf222e;stroke-dasharray:4 2}
svg.graph .node.changed rect{fill:#fff8c5;stroke:#9a6700}svg.graph .edge{fill:none;stroke:#777}
svg.graph text{font:12px ui-monospace,Menlo,Consolas,monospace;fill:#222}
.picture{overflow-x:auto;border:1px dashed #ccc;padding:6px;margin:8px 0}
.legend span{margin-right:12px}
"""


def render_html(diff: ModelDiff) -> str:
    """The whole page as one string (UTF-8, no external references)."""
    body = [f"<h1>fxport diff <code>{escape(diff.target)}</code></h1>"]
    body += [f'<p class="note">{escape(note)}</p>' for note in diff.notes]
    body.append(_summary(diff))
    if diff.result is not None:
        body.append('<h2 id="rewrites">Rewrites</h2>')
        if not diff.rewrites:
            body.append("<p>No rewrites were applied.</p>")
        body += [_rewrite_section(index, view, diff) for index, view in enumerate(diff.rewrites)]
    if diff.graph_stages:
        body.append('<h2 id="graph">Captured graph</h2>')
        body += [_graph_stage_section(stage) for stage in diff.graph_stages]
    body.append('<h2 id="onnx">ONNX</h2>')
    body.append(_onnx_section(diff))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>fxport diff {escape(diff.target)}</title><style>{STYLE}</style></head>"
            f"<body>{''.join(body)}</body></html>\n")


# --- summary ------------------------------------------------------------------------------

def _summary(diff: ModelDiff) -> str:
    summary = diff.onnx.summary()
    rows = [f"<tr><th>ONNX</th><td>{escape(diff.onnx_before_label)} → {escape(diff.onnx_after_label)}</td>"
            f"<td>{_counts(summary)}</td></tr>"]
    for stage in diff.graph_stages:
        rows.append(f"<tr><th>captured graph ({escape(stage.title)})</th><td>{escape(stage.before_label)} → "
                    f"{escape(stage.after_label)}</td><td>{_counts(stage.diff.summary())}</td></tr>")
    if diff.result is not None:
        rules = ", ".join(escape(v.rewrite.rule) for v in diff.rewrites) or "none"
        rows.insert(0, f"<tr><th>rewrites</th><td colspan=2>{len(diff.rewrites)}: {rules}</td></tr>")
        verdict = "verified" if diff.result.verified else "not verified"
        rows.append(f"<tr><th>verification</th><td colspan=2>{verdict}</td></tr>")
    return f'<table id="summary">{"".join(rows)}</table>{_legend()}'


def _legend() -> str:
    return ('<p class="legend"><span class="badge added">+ added</span><span class="badge removed">− removed'
            '</span><span class="badge changed">~ changed</span><span class="badge">= same</span></p>')


def _counts(summary: dict[str, int]) -> str:
    return (f'<span class="badge added">+{summary["added"]}</span><span class="badge removed">'
            f'−{summary["removed"]}</span><span class="badge changed">~{summary["changed"]}</span>'
            f'<span class="badge">={summary["same"]}</span>')


# --- per rule -----------------------------------------------------------------------------

def _rewrite_section(index: int, view: RewriteView, diff: ModelDiff) -> str:
    r = view.rewrite
    head = (f"{escape(r.rule)} <span class=\"badge\">{escape(r.tier)}</span> "
            f"<code>{escape(str(r.location or ''))}</code> — {escape(r.detail)}")
    parts = [f'<details open class="rule" id="rule-{index}" data-rule="{escape(r.rule)}"><summary>{head}</summary>']
    if view.source_diff:
        parts.append("<h3>Source</h3>" + side_by_side_source(view.source_diff))
    elif view.source_shown_by is not None:
        first = diff.rewrites[view.source_shown_by].rewrite.rule
        parts.append(f'<p>Source: the same function as <a href="#rule-{view.source_shown_by}">{escape(first)}</a> '
                     "(shown there).</p>")
    if view.graph_nodes:
        parts.append(f"<p>Captured-graph nodes from this rule: <code>{escape(', '.join(view.graph_nodes))}</code></p>")
    if view.onnx_nodes:
        parts.append(f"<p>ONNX nodes from this rule ({len(view.onnx_nodes)}): "
                     f"<code>{escape(', '.join(view.onnx_nodes[:30]))}</code>{' …' if len(view.onnx_nodes) > 30 else ''}</p>")
        focus = set(view.onnx_nodes)
        if r.data.get("fx_node"):  # the op the stock exporter left untranslated, when shown
            focus.add(f"untranslated_{r.data['fx_node']}")
        parts.append(_picture(*onnx_region(diff.onnx, focus, show_rule=False)))
    parts.append("</details>")
    return "".join(parts)


def side_by_side_source(unified: list[str]) -> str:
    """A unified diff as a two-column table: before on the left, after on the right."""
    before = [line[1:] for line in unified[2:] if line[:1] in (" ", "-") and not line.startswith("---")]
    after = [line[1:] for line in unified[2:] if line[:1] in (" ", "+") and not line.startswith("+++")]
    rows = []
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for tag, a0, a1, b0, b1 in matcher.get_opcodes():
        left, right = before[a0:a1], after[b0:b1]
        for i in range(max(len(left), len(right))):
            old = left[i] if i < len(left) else ""
            new = right[i] if i < len(right) else ""
            old_class = "del" if tag != "equal" and i < len(left) else ""
            new_class = "add" if tag != "equal" and i < len(right) else ""
            rows.append(f'<tr><td class="code {old_class}">{escape(old)}</td>'
                        f'<td class="code {new_class}">{escape(new)}</td></tr>')
    header = "".join(f"<th>{escape(line[4:])}</th>" for line in unified[:2])
    return f'<table class="side source"><tr>{header}</tr>{"".join(rows)}</table>'


# --- captured graph -----------------------------------------------------------------------

def _graph_stage_section(stage: GraphStage) -> str:
    summary = stage.diff.summary()
    parts = [f'<details open class="graph-stage"><summary>{escape(stage.title)}: {escape(stage.before_label)} → '
             f"{escape(stage.after_label)} {_counts(summary)}</summary>"]
    if stage.note:
        parts.append(f'<p class="note">{escape(stage.note)}</p>')
    if not stage.diff.identical:
        parts.append(_picture(*graph_region(stage.diff)))
    rows = []
    for depth, change in iter_graph_changes(stage.diff):
        where = change.node.location or ""
        rows.append(_side_row(change.status, depth,
                              change.before.line() if change.before else "",
                              change.after.line() if change.after else "", change.changes, where))
    parts.append(_side_table(escape(stage.before_label), escape(stage.after_label), rows))
    parts.append("</details>")
    return "".join(parts)


def graph_region(diff: CapturedGraphDiff, limit: int = REGION_LIMIT):
    """Boxes and edges of the changed nodes of a captured-graph diff plus their neighbours."""
    changes = list(diff.nodes)
    items = []
    for index, change in enumerate(changes):
        node = change.node
        side = "b" if change.status == "removed" else "a"
        outputs = [f"{prefix}:{name.strip()}" for prefix, side_node in (("b", change.before), ("a", change.after))
                   if side_node is not None for name in side_node.name.split(",")]
        inputs = [f"{side}:{arg}" for arg in _names_in(node.args)]
        items.append((f"g{index}", node.op, change.status, inputs, outputs, node.line()))
    return _region(items, limit)


def _names_in(args: list[str]) -> list[str]:
    names = []
    for arg in args:
        for token in arg.replace("[", " ").replace("]", " ").replace(",", " ").replace("=", " ").split():
            names.append(token)
    return names


# --- ONNX ---------------------------------------------------------------------------------

def _onnx_section(diff: ModelDiff) -> str:
    onnx_diff = diff.onnx
    parts = [f'<details open class="onnx"><summary>{escape(diff.onnx_before_label)} → '
             f"{escape(diff.onnx_after_label)} {_counts(onnx_diff.summary())}</summary>"]
    parts.append(_op_count_table(onnx_diff))
    changed_values = onnx_diff.changed_values()
    if changed_values:
        rows = "".join(f'<tr class="{v.status}"><td>{v.kind}</td><td><code>{escape(v.name)}</code></td>'
                       f'<td class="before">{escape(v.before or "—")}</td><td class="after">{escape(v.after or "—")}</td></tr>'
                       for v in changed_values)
        parts.append(f'<table class="values"><tr><th>kind</th><th>name</th><th>before</th><th>after</th></tr>{rows}</table>')
    if not onnx_diff.identical:
        parts.append("<h3>Changed region</h3>" + _picture(*onnx_region(onnx_diff, None)))
        for title, sub in _changed_bodies(onnx_diff):
            parts.append(f"<h4>{escape(title)}</h4>" + _picture(*onnx_region(sub, None)))
    rows = []
    for depth, change in iter_changes(onnx_diff):
        where = ", ".join(x for x in (change.node.rule and f"rule {change.node.rule}", change.node.location) if x)
        rows.append(_side_row(change.status, depth,
                              change.before.signature() if change.before else "",
                              change.after.signature() if change.after else "", change.changes, where))
    parts.append(_side_table(escape(diff.onnx_before_label), escape(diff.onnx_after_label), rows))
    parts.append("</details>")
    return "".join(parts)


def _op_count_table(onnx_diff: OnnxGraphDiff) -> str:
    rows = []
    for count in onnx_diff.op_counts:
        css = "pos" if count.delta > 0 else "neg" if count.delta < 0 else ""
        status = "changed" if count.delta else "same"
        rows.append(f'<tr class="{status}" data-op="{escape(count.op)}"><td>{escape(count.op)}</td><td>{count.before}</td>'
                    f'<td>{count.after}</td><td class="{css}">{count.delta:+d}</td></tr>')
    return (f'<table class="op-counts"><tr><th>op</th><th>before</th><th>after</th><th>Δ</th></tr>'
            f'{"".join(rows)}</table>')


def _changed_bodies(onnx_diff: OnnxGraphDiff, prefix: str = ""):
    for change in onnx_diff.nodes:
        for name, sub in change.subgraphs.items():
            title = f"{prefix}{change.node.name or change.node.op_type} / {name}"
            if not sub.identical:
                yield title, sub
                yield from _changed_bodies(sub, title + " / ")


def onnx_region(onnx_diff: OnnxGraphDiff, focus: set[str] | None, limit: int = REGION_LIMIT,
                show_rule: bool = True):
    """Boxes and edges around ``focus`` (node names), or around every changed top-level node."""
    items = []
    for index, change in enumerate(onnx_diff.nodes):
        node = change.node
        side = "b" if change.status == "removed" else "a"
        label = f"{node.op_type} [{node.rule}]" if node.rule and show_rule else node.op_type
        status = change.status
        if focus is not None and node.name not in focus and status != "same":
            status = "same"  # outside the rule's region: context only
        outputs = [f"{prefix}:{v}" for prefix, side_node in (("b", change.before), ("a", change.after))
                   if side_node is not None for v in side_node.outputs]
        items.append((f"o{index}", label, status, [f"{side}:{v}" for v in node.inputs], outputs,
                      node.signature(), node.name in (focus or ())))
    return _region(items, limit, focused=focus is not None)


def _region(items, limit: int, focused: bool = False):
    """Pick the focus nodes (changed ones, or flagged ones) and their direct neighbours."""
    producer = {}
    for item in items:
        for value in item[4]:
            producer.setdefault(value, item[0])
    edges = [(producer[value], item[0]) for item in items for value in item[3] if value in producer]
    if focused:
        core = [item[0] for item in items if len(item) > 6 and item[6]]
    else:
        core = [item[0] for item in items if item[2] != "same"]
    core = core[:limit]
    chosen = set(core)
    for source, target in edges:
        if len(chosen) >= limit:
            break
        if source in core or target in core:
            chosen.update((source, target))
    boxes = [GraphBox(item[0], item[1], item[2], item[5]) for item in items if item[0] in chosen]
    return boxes, [(s, t) for s, t in edges if s in chosen and t in chosen], len(core)


def _picture(boxes, edges, core_count) -> str:
    if not boxes:
        return "<p><em>No nodes to draw.</em></p>"
    return f'<div class="picture">{render_svg(boxes, edges)}</div>'


# --- shared -------------------------------------------------------------------------------

def _side_row(status: str, depth: int, before: str, after: str, changes: list[str], where: str) -> str:
    indent = "    " * depth
    note = f"<br><small>{escape('; '.join(changes))}</small>" if changes else ""
    return (f'<tr class="{status}"><td class="code before">{escape(indent + before)}</td>'
            f'<td class="code after">{escape(indent + after)}{note}</td><td><small>{escape(where)}</small></td></tr>')


def _side_table(before_label: str, after_label: str, rows: list[str]) -> str:
    return (f'<table class="side nodes"><colgroup><col style="width:40%"><col style="width:40%"><col style="width:20%"></colgroup>'
            f'<tr><th>{before_label}</th><th>{after_label}</th><th>where</th></tr>{"".join(rows)}</table>')
