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

import difflib
import inspect
import os
import pkgutil
import re
from typing import Any

from fxport.errors import SourceLocation
from fxport.report import AppliedRewrite

_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def unified_source_diff(before: str, after: str, filename: str = "source", first_line: int = 1,
                        context: int = 3) -> list[str]:
    """Lines of a unified diff; hunk headers count from ``first_line`` (the function's line)."""
    lines = list(difflib.unified_diff(
        before.splitlines(), after.splitlines(), fromfile=f"{filename} (before)",
        tofile=f"{filename} (after fxport)", lineterm="", n=context,
    ))
    return [_shift_hunk(line, first_line - 1) for line in lines]


def _shift_hunk(line: str, offset: int) -> str:
    match = _HUNK.match(line)
    if not match or not offset:
        return line
    old, old_len, new, new_len = match.groups()
    return f"@@ -{int(old) + offset}{old_len or ''} +{int(new) + offset}{new_len or ''} @@"


def source_diff_for(rewrite: AppliedRewrite) -> list[str]:
    """The unified diff a rewrite record implies, or [] when it carries no source change."""
    before, after = source_pair(rewrite)
    if before is None or after is None or before == after:
        return []
    where = rewrite.location
    filename = str(where).rsplit(":", 1)[0] if where else "source"
    return unified_source_diff(before, after, filename, function_first_line(before, where))


def source_pair(rewrite: AppliedRewrite) -> tuple[str | None, str | None]:
    """(source before, source after) from the record's data, resolving patch targets."""
    data = rewrite.data or {}
    before, after = data.get("source_before"), data.get("source_after")
    if before is None and data.get("target"):
        before = _source_of(_resolve(data["target"]))
    if after is None and data.get("replacement") is not None:
        replacement = data["replacement"]
        after = _source_of(_resolve(replacement) if isinstance(replacement, str) else replacement)
    return before, after


def _resolve(name: str) -> Any:
    try:
        return pkgutil.resolve_name(name)
    except (ImportError, AttributeError, ValueError):
        return None


def _source_of(obj: Any) -> str | None:
    if obj is None:
        return None
    try:
        import textwrap

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
