"""Unified diffs of the user's source before and after a source-level rewrite.

Control-flow records carry ``data["source_before"]`` / ``data["source_after"]`` (the enclosing
function); patch records name the replaced ``data["target"]``. Hunk line numbers are the real
line numbers in the user's file when the function can be found there.

Example::

    >>> before = "def f(x):\\n    if x.sum() > 0:\\n        return x\\n    return -x\\n"
    >>> after = "def f(x):\\n    return torch.where(x.sum() > 0, x, -x)\\n"
    >>> print("\\n".join(unified_source_diff(before, after, "net.py")))
    --- net.py (before)
    +++ net.py (after fxport)
    @@ -1,4 +1,2 @@
     def f(x):
    -    if x.sum() > 0:
    -        return x
    -    return -x
    +    return torch.where(x.sum() > 0, x, -x)
"""

from __future__ import annotations

import ast
import difflib
import inspect
import textwrap
import os
import pkgutil
import re
from typing import Any

from fxport.errors import SourceLocation
from fxport.report.result import AppliedRewrite

_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def unified_source_diff(before: str, after: str, filename: str = "source", first_line: int = 1,
                        context: int = 3, *, after_name: str | None = None,
                        after_first_line: int | None = None) -> list[str]:
    """Lines of a unified diff; hunk headers count from the functions' first lines in their files."""
    lines = list(difflib.unified_diff(
        before.splitlines(), after.splitlines(), fromfile=f"{filename} (before)",
        tofile=after_name or f"{filename} (after fxport)", lineterm="", n=context,
    ))
    second = first_line if after_first_line is None else after_first_line
    return [_shift_hunk(line, first_line - 1, second - 1) for line in lines]


def _shift_hunk(line: str, old_offset: int, new_offset: int) -> str:
    match = _HUNK.match(line)
    if not match:
        return line
    old, old_len, new, new_len = match.groups()
    return f"@@ -{int(old) + old_offset}{old_len or ''} +{int(new) + new_offset}{new_len or ''} @@"


def source_diff_for(rewrite: AppliedRewrite) -> list[str]:
    """The unified diff a rewrite record implies, or [] when it carries no source change.

    Control-flow records carry both sources. A patch record names its target (``data["target"]``)
    and is located at the rule's definition, so "after" is the replacement defined there.
    """
    data = rewrite.data or {}
    where = rewrite.location
    if data.get("source_before") is not None and data.get("source_after") is not None:
        before, after = data["source_before"], data["source_after"]
        if before == after:
            return []
        filename = str(where).rsplit(":", 1)[0] if where else "source"
        return unified_source_diff(before, after, filename, function_first_line(before, where))
    if rewrite.tier == "patch" and data.get("target"):
        return _patch_diff(str(data["target"]), where)
    return []


def _patch_diff(target: str, where: SourceLocation | None) -> list[str]:
    original = _resolve(target)
    before = _source_of(original)
    replacement = definition_at(where) if where else None
    if before is None or replacement is None:
        return []
    after, after_line = replacement
    before_file, before_line = _file_and_line(original)
    return unified_source_diff(
        before, after, f"{_short(before_file)}:{before_line} {target}", before_line,
        after_name=f"{_short(where.filename)}:{after_line} (patch rule)", after_first_line=after_line,
    )


def definition_at(where: SourceLocation) -> tuple[str, int] | None:
    """The source and first line of the function/class defined at ``where`` (decorators included)."""
    if not os.path.isfile(where.filename):
        return None
    with open(where.filename, encoding="utf-8", errors="replace") as handle:
        text = handle.read()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    lines = text.splitlines()
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if start <= where.lineno <= node.end_lineno and (best is None or start >= best[0]):
                best = (start, node.end_lineno)
    if best is None:
        return None
    return textwrap.dedent("\n".join(lines[best[0] - 1:best[1]]) + "\n"), best[0]


def _file_and_line(obj: Any) -> tuple[str, int]:
    try:
        return inspect.getsourcefile(inspect.unwrap(obj)) or "?", inspect.getsourcelines(inspect.unwrap(obj))[1]
    except (OSError, TypeError):
        return "?", 1


def _short(filename: str) -> str:
    return str(SourceLocation(filename, 0)).rsplit(":", 1)[0]


def _resolve(name: str) -> Any:
    try:
        return pkgutil.resolve_name(name)
    except (ImportError, AttributeError, ValueError):
        return None


def _source_of(obj: Any) -> str | None:
    if obj is None:
        return None
    try:
        return textwrap.dedent(inspect.getsource(inspect.unwrap(obj)))
    except (OSError, TypeError):
        return None


def function_first_line(source: str, where: SourceLocation | None) -> int:
    """The line in ``where``'s file where ``source`` starts (the last match at or above the rewrite)."""
    first = next((line.strip() for line in source.splitlines() if line.strip()), "")
    if where is None or not first or not os.path.isfile(where.filename):
        return 1
    with open(where.filename, encoding="utf-8", errors="replace") as handle:
        file_lines = handle.read().splitlines()
    candidates = [number for number, line in enumerate(file_lines, start=1)
                  if line.strip() == first and number <= where.lineno]
    return candidates[-1] if candidates else 1
