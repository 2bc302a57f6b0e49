"""The errors a user of fxport sees.

Every failure fxport reports is a :class:`ConversionError` whose ``str()`` is one line:
*what* went wrong, *where* in the user's code (``file:line``) when known, and *what to do*.
The CLI prints exactly that line (the traceback only with ``--debug``) and maps the class to
an exit code: :class:`UsageError` and its subclasses exit with 2, everything else with 1.

Example::

    >>> from fxport.errors import CaptureError, SourceLocation
    >>> str(CaptureError("data-dependent branch", where=SourceLocation("net.py", 12),
    ...                  hint="enable control-flow conversion"))
    'data-dependent branch at net.py:12; enable control-flow conversion'
"""

from __future__ import annotations

import re

from fxport.common.frames import SourceLocation


class ConversionError(Exception):
    """Base of every error fxport reports; ``str(err)`` is the one-line user message.

    Attributes:
        what: what went wrong.
        where: the user's source location, when known.
        hint: what the user can do about it.
        stage: the pipeline stage that failed (``load``, ``capture``, ``rewrite``, ``lower``,
            ``verify``, ``write``).
    """

    stage = "convert"
    exit_code = 1

    def __init__(self, what: str, *, where: SourceLocation | None = None, hint: str | None = None):
        self.what = _one_line(what)
        self.where = where
        self.hint = _one_line(hint) if hint else None
        super().__init__(self.message)

    @property
    def message(self) -> str:
        text = self.what
        if self.where is not None:
            text += f" at {self.where}"
        if self.hint:
            text += f"; {self.hint}"
        return text

    def __str__(self) -> str:
        return self.message

    #: What the stages that ran before the failure produced (set by :func:`fxport.convert`):
    #: ``timings``, ``rewrites`` (AppliedRewrite), ``warnings``.
    partial: dict | None = None

    def to_dict(self) -> dict:
        """The error as JSON data, with the failed run's partial results and verification rows."""
        data = {
            "error": type(self).__name__,
            "stage": self.stage,
            "message": self.message,
            "where": self.where.to_dict() if self.where else None,
        }
        partial = self.partial or {}
        if partial:
            data["timings"] = {stage: round(seconds, 4) for stage, seconds in partial.get("timings", {}).items()}
            data["rewrites"] = [rewrite.to_dict() for rewrite in partial.get("rewrites", [])]
            data["warnings"] = list(partial.get("warnings", []))
        rows = getattr(self, "report", None)
        if rows:
            data["verification"] = [row.to_dict() for row in rows]
        return data


class UsageError(ConversionError):
    """The request itself is wrong: a bad target, input spec, option or rule file (exit 2)."""

    stage = "load"
    exit_code = 2


class ModelLoadError(UsageError):
    """The target could not be imported or instantiated."""


class InputSpecError(UsageError):
    """An input shape/dtype/dynamic-dimension specification is malformed or inconsistent."""


class RuleError(UsageError):
    """A rewrite rule is malformed, targets something that does not exist, or conflicts."""


class EagerRunError(ConversionError):
    """The model's own forward raised on the example inputs (the bug is in the user's code)."""

    stage = "load"


class CaptureError(ConversionError):
    """torch.export could not capture the model (after all enabled rewrites)."""

    stage = "capture"


class ControlFlowError(CaptureError):
    """Control flow the converter cannot express faithfully; names construct, variable, line.

    ``size_zero_dims``: the declared dimensions whose size 0 alone takes the refused side of an
    ``if`` (operators/size_zero_sides.py), ``size_zero_sources`` the input sizes they are
    (``L['x'].size()[0]``); the capture exports again with them from 1."""

    stage = "rewrite"
    size_zero_dims: tuple = ()
    size_zero_sources: tuple = ()
    #: the statement (StatementInfo) whose sides give values of another structure or rank
    values_differ_at = None


class UnsupportedOpsError(ConversionError):
    """Ops without an ONNX translation; lists all of them at once.

    Attributes:
        ops: one entry per missing op: ``(qualified op name, SourceLocation or None)``.
        skeleton: a rule file with one ``@fxport.onnx_op`` stub per op (may be empty).
    """

    stage = "lower"

    def __init__(self, ops: list[tuple[str, SourceLocation | None]], *, hint: str | None = None,
                 skeleton: str = ""):
        self.ops = ops
        self.skeleton = skeleton
        names = []
        for op, where in ops:
            names.append(f"{op} ({where})" if where else op)
        super().__init__(
            f"{len(ops)} op(s) have no ONNX translation: " + ", ".join(names),
            hint=hint
            or "write an @fxport.onnx_op rule for each (see `fxport ops TARGET` for skeletons)",
        )

    def to_dict(self) -> dict:
        """As :meth:`ConversionError.to_dict`; ``where`` is the first op's line (the message names
        each op's), ``ops`` every op with its line."""
        data = super().to_dict()
        first = next((where for _, where in self.ops if where is not None), None)
        data["where"] = first.to_dict() if first else None
        data["ops"] = [{"op": op, "where": where.to_dict() if where else None} for op, where in self.ops]
        return data


class LoweringError(ConversionError):
    """The dynamo exporter failed to translate the captured graph to ONNX."""

    stage = "lower"


class VerificationError(ConversionError):
    """ONNX Runtime and eager PyTorch disagree (or the ONNX model cannot run).

    Attributes:
        report: the verification rows (``fxport.report.result.VerificationRow``) that were computed.
    """

    stage = "verify"

    def __init__(self, what: str, *, report=None, where=None, hint=None):
        self.report = list(report or [])
        super().__init__(what, where=where, hint=hint)


class OutputWriteError(ConversionError):
    """The ONNX file could not be written; any existing file at the path is left untouched."""

    stage = "write"


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_OBJECT_REPR = re.compile(r"<([\w.]+) object at 0x[0-9a-fA-F]+>")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _one_line(text: str) -> str:
    """One line for a user: no ANSI codes, no memory addresses (``<torch...MapImpl object at
    0x7f..>`` → ``torch...MapImpl``), whitespace collapsed."""
    text = _ADDRESS.sub("", _OBJECT_REPR.sub(r"\1", _ANSI.sub("", str(text))))
    return " ".join(text.split())


def first_line(exc: BaseException) -> str:
    """The first non-blank line of an exception's message (300 characters at most), else its type."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0][:300] if lines else type(exc).__name__
