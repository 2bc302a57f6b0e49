"""Terminal rendering of a :class:`~fxport.diff.model_diff.ModelDiff` with rich.

Summaries come first (rewrites, node counts, op-count deltas); node-level listings show only
what changed, capped at ``limit`` lines per section unless ``details`` is set, in which case
every node is listed (unchanged ones dimmed). Ordering is the diff's, so output is stable.

Example::

    >>> import io
    >>> from rich.console import Console
    >>> from fxport.diff.command import run_diff
    >>> screen = io.StringIO()
    >>> render_terminal(run_diff("examples/gated_mlp.py:GatedMLP", verify=False), Console(file=screen), details=False)
    >>> screen.getvalue().splitlines()[0]
    'fxport diff examples/gated_mlp.py:GatedMLP'
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fxport.diff.graph_diff import iter_graph_changes
from fxport.diff.model_diff import ModelDiff
from fxport.diff.onnx_diff import iter_changes

MARKS = {"added": ("+", "green"), "removed": ("-", "red"), "changed": ("~", "yellow"), "same": (" ", "dim")}
DEFAULT_LIMIT = 40
VALUE_LIMIT = 8


def render_terminal(diff: ModelDiff, console: Console, *, details: bool = False,
                    limit: int = DEFAULT_LIMIT) -> None:
    """Print ``diff``: summaries first, node listings capped unless ``details``."""
    console.print(f"[bold]fxport diff[/bold] {escape(diff.target)}", highlight=False)
    for note in diff.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False)
    if diff.result is not None:
        render_rewrites(diff, console)
    for view in diff.rewrites:
        if view.source_diff:
            render_source(view, [v.rewrite.rule for v in diff.rewrites if v.source_shown_by == diff.rewrites.index(view)],
                          console)
    for stage in diff.graph_stages:
        render_graph_stage(stage, console, details, limit)
    render_onnx(diff, console, details, limit)


def render_rewrites(diff: ModelDiff, console: Console) -> None:
    if not diff.rewrites:
        console.print("\n[bold]Rewrites:[/bold] none applied")
        return
    table = Table(title=f"Rewrites applied ({len(diff.rewrites)})", title_justify="left")
    for column in ("rule", "tier", "where", "what", "ONNX nodes"):
        table.add_column(column)
    for view in diff.rewrites:
        r = view.rewrite
        table.add_row(escape(r.rule), r.tier, escape(str(r.location or "")), escape(r.detail),
                      str(len(view.onnx_nodes)))
    console.print(table)
    for view in diff.rewrites:
        if view.graph_nodes:
            names = ", ".join(view.graph_nodes[:8]) + (" …" if len(view.graph_nodes) > 8 else "")
            console.print(f"  {escape(view.rewrite.rule)}: captured-graph node(s) {escape(names)}", highlight=False)


def render_source(view, also: list[str], console: Console) -> None:
    r = view.rewrite
    shared = f" (also {', '.join(also)}: same function)" if also else ""
    console.print(f"\n[bold]Source[/bold] — {escape(r.rule)} ({r.tier}) at {escape(str(r.location or '?'))}"
                  f"{escape(shared)}", highlight=False)
    for line in view.source_diff:
        console.print(_diff_line_markup(line), highlight=False)


def _diff_line_markup(line: str) -> str:
    text = escape(line)
    if line.startswith(("+++", "---")):
        return f"[bold]{text}[/bold]"
    if line.startswith("@@"):
        return f"[cyan]{text}[/cyan]"
    if line.startswith("+"):
        return f"[green]{text}[/green]"
    if line.startswith("-"):
        return f"[red]{text}[/red]"
    return text


def render_graph_stage(stage, console: Console, details: bool, limit: int) -> None:
    summary = stage.diff.summary()
    console.print(f"\n[bold]Captured graph ({escape(stage.title)})[/bold]: {escape(stage.before_label)} → "
                  f"{escape(stage.after_label)}   {_summary_text(summary)}", highlight=False)
    if stage.note:
        console.print(f"[dim]{escape(stage.note)}[/dim]", highlight=False)
    rows = [(depth, change.status, change.node.line(), change.changes, change.node.location, change.node.rule)
            for depth, change in iter_graph_changes(stage.diff)]
    _print_rows(rows, console, details, limit)


def render_onnx(diff: ModelDiff, console: Console, details: bool, limit: int) -> None:
    onnx_diff = diff.onnx
    console.print(f"\n[bold]ONNX[/bold]: {escape(diff.onnx_before_label)} → {escape(diff.onnx_after_label)}   "
                  f"{_summary_text(onnx_diff.summary())}", highlight=False)
    deltas = onnx_diff.op_counts if details else onnx_diff.op_deltas()
    if deltas:
        table = Table(title="Op counts (subgraphs included)", title_justify="left")
        for column in ("op", "before", "after", "Δ"):
            table.add_column(column, justify="right" if column != "op" else "left")
        for count in deltas:
            color = "green" if count.delta > 0 else "red" if count.delta < 0 else "dim"
            table.add_row(escape(count.op), str(count.before), str(count.after),
                          f"[{color}]{count.delta:+d}[/{color}]")
        console.print(table)
    else:
        console.print("Op counts: unchanged")
    changed_values = onnx_diff.changed_values()
    initializers = [v for v in changed_values if v.kind == "initializer"]
    hidden_values = 0
    if not details and len(initializers) > VALUE_LIMIT:
        hidden_values = len(initializers) - VALUE_LIMIT
        changed_values = [v for v in changed_values if v.kind != "initializer"] + initializers[:VALUE_LIMIT]
    if changed_values:
        table = Table(title="Inputs, outputs, initializers", title_justify="left")
        for column in ("kind", "name", "before", "after"):
            table.add_column(column)
        for value in changed_values:
            table.add_row(value.kind, escape(value.name), escape(value.before or "—"), escape(value.after or "—"))
        console.print(table)
    if hidden_values:
        console.print(f"[dim]… {hidden_values} more initializer change(s); --details lists them[/dim]", highlight=False)
    rows = [(depth, change.status, change.node.signature(), change.changes, change.node.location, change.node.rule)
            for depth, change in iter_changes(onnx_diff)]
    _print_rows(rows, console, details, limit)


def _print_rows(rows, console: Console, details: bool, limit: int) -> None:
    shown = rows if details else _fold_rule_runs([row for row in rows if row[1] != "same"])
    if not details and len(shown) > limit:
        hidden = len(shown) - limit
        shown = shown[:limit]
    else:
        hidden = 0
    for depth, status, line, changes, location, rule in shown:
        mark, color = MARKS[status]
        suffix = []
        if rule:
            suffix.append(f"rule {rule}")
        if location:
            suffix.append(location)
        tail = f"  [dim]# {escape(', '.join(suffix))}[/dim]" if suffix else ""
        console.print(f"[{color}]{mark} {'    ' * depth}{escape(line)}[/{color}]{tail}", highlight=False)
        for change in changes if status == "changed" else []:
            console.print(f"[yellow]  {'    ' * depth}    ↳ {escape(change)}[/yellow]", highlight=False)
    if hidden:
        console.print(f"[dim]… {hidden} more changed node(s); --details lists every node[/dim]", highlight=False)


FOLD_AT = 6


def _fold_rule_runs(rows):
    """Runs of added nodes that one rule produced become one line (``--details`` lists them)."""
    folded, run = [], []

    def flush():
        if len(run) >= FOLD_AT:
            ops: dict[str, int] = {}
            for row in run:
                op = row[2].split(" = ", 1)[-1].split("(", 1)[0]
                ops[op] = ops.get(op, 0) + 1
            text = f"{len(run)} nodes from rule {run[0][5]}: " + ", ".join(f"{k}×{v}" for k, v in sorted(ops.items()))
            folded.append((run[0][0], "added", text, [], run[0][4], None))
        else:
            folded.extend(run)
        run.clear()

    for row in rows:
        if row[1] == "added" and row[5] and (not run or (run[0][5], run[0][0]) == (row[5], row[0])):
            run.append(row)
            continue
        flush()
        if row[1] == "added" and row[5]:
            run.append(row)
        else:
            folded.append(row)
    flush()
    return folded


def _summary_text(summary: dict[str, int]) -> str:
    return (f"[green]+{summary['added']}[/green] [red]-{summary['removed']}[/red] "
            f"[yellow]~{summary['changed']}[/yellow] [dim]={summary['same']}[/dim]")
