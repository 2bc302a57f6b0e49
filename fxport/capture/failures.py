"""Why a capture failed, and where: torch's exceptions turned into one-line fxport errors.

Failures are data: :func:`classify_capture_failure` names the kind (data-dependent control flow
in the user's code or in a library, a number read from a tensor inside a converted body, a
dimension the model specialises) and the user's file:line, read from torch's message or from the
frames below fxport's call to ``torch.export`` (fxport/capture/program.py ``_export``).

Size: one classifier over torch's many failure texts, and the readers of the exception chain it
and the capture's retries share (library frames, guards at sizes); split, each part would import
the others.

Example::

    >>> error = classify_capture_failure(RuntimeError("Could not guard on data-dependent expression u0 > 0"))
    >>> type(error).__name__, error.message.split(" (")[0]
    ('CaptureError', 'data-dependent control flow')
"""

from __future__ import annotations

import linecache
import math
import os
import re
import traceback
from types import FrameType

from fxport.errors import CaptureError, ControlFlowError, ConversionError, SourceLocation
from fxport.common.frames import is_user_file, user_location_from_exception, user_location_from_stack
from fxport.common.frames import exception_chain as _exception_chain
from fxport.common.frames import package_relative, user_location_in


#: the module whose ``_export`` calls torch.export: frames below it are the traced model's
_CAPTURE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "program.py")


def traced_user_frame():
    """The innermost user frame of the current stack below fxport's call to torch.export."""
    frames = traceback.extract_stack()
    start = max((i for i, f in enumerate(frames)
                 if f.name == "_export" and os.path.abspath(f.filename) == _CAPTURE_FILE), default=-1)
    return user_location_from_stack(frames[start + 1:])


def traced_location_from_exception(exc: BaseException):
    """The innermost user frame of ``exc``'s tracebacks below fxport's call to torch.export (not
    the script that called fxport)."""
    found = None
    for error in _exception_chain(exc):
        frames = traceback.extract_tb(error.__traceback__)
        start = max((i for i, f in enumerate(frames)
                     if f.name == "_export" and os.path.abspath(f.filename) == _CAPTURE_FILE), default=None)
        if start is not None:
            found = user_location_from_stack(frames[start + 1:]) or found
    return found


def why_oblivious_failed(exc: BaseException | None) -> str | None:
    """Why the size-oblivious capture failed, in a few words with the user's line if known."""
    if exc is None:
        return None
    text = "\n".join(str(e) for e in _exception_chain(exc))
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    first = _TORCH_BANNER.sub("", first).strip()[:120]
    guard = re.search(r"satisfy the generated guard (.+?)\.?$", text, re.M)
    if guard:
        first = "it needs " + re.sub(r"L\['(\w+)'\]\.size\(\)\[(\d+)\]", r"\1.shape[\2]", guard.group(1))[:120]
    where = location_named_in_message(text) or traced_location_from_exception(exc)
    return f"the size-oblivious capture failed{f' at {where}' if where else ''}: {first}"


#: dynamo's explanation of why it could not trace a converted body → what the user can do
_TRACED_BODY_HINTS = (
    ("Mutating a variable from outside the scope", "an attribute or outer object written inside a converted "
     "loop or branch body, here through a function it calls",
     "keep the state in local variables the body returns (h = self.step(x, h)) and write the attribute "
     "after the loop"),
)


def _traced_body_refusal(exc: BaseException, text: str, where: SourceLocation | None) -> ControlFlowError | None:
    """dynamo could not trace a converted loop or branch body (UncapturedHigherOrderOpError): its
    explanation in a sentence, at the innermost line of the user's code it names."""
    if not any(type(e).__name__ == "UncapturedHigherOrderOpError" for e in _exception_chain(exc)):
        return None
    explanation = re.search(r"Explanation: (.+)", text)
    said = explanation.group(1).strip().rstrip(".") if explanation else "torch's tracer stopped"
    what, hint = next(((w, h) for key, w, h in _TRACED_BODY_HINTS if key in said), (
        f"torch could not trace a converted loop or branch body ({said})",
        "simplify the code at that line (a plain function of tensors), or run with --debug for torch's trace"))
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)', text.split("from user code:", 1)[-1])
    user = [SourceLocation(f, int(n), fn) for f, n, fn in frames if is_user_file(f)]
    return ControlFlowError(f"{what}, which torch's while_loop/cond cannot trace", where=user[-1] if user else where,
                            hint=hint)


def _cond_branch_refusal(exc: BaseException, text: str, where: SourceLocation | None) -> ControlFlowError | None:
    """The refusal of a branch torch.cond could not trace (a size read from a tensor, a value that
    changes size across trips), or None when the failure is not one."""
    if _is_data_dependent(exc, text) and where is not None and _in_cond_compile(exc):
        return ControlFlowError(
            "a branch of this if uses a size read from a tensor (a slice by a loop counter or a "
            "carried length, g[:, :i + 1]; .item(), int()), which torch.cond cannot trace",
            where=where,
            hint="give the branches sizes that do not depend on tensor values (a fixed slice width), "
            "or make the condition a Python value",
        )
    if "making fake tensor call" in text and _in_cond_compile(exc):
        return ControlFlowError(
            "torch.cond could not trace a branch of this statement: a value in it changes size from one "
            "loop iteration to the next (a list of slices by the loop counter, a tensor grown by torch.cat) "
            "inside a converted branch, or in the rest of the function after a loop that returns",
            where=where,
            hint="move that loop before the loop that returns (or out of the if), or give the values it "
            "collects one size",
        )
    return None


def classify_capture_failure(exc: BaseException, pinned_at: SourceLocation | None = None) -> ConversionError:
    """Name the kind of failure and the user's file:line; failures are data, not strings.
    ``pinned_at``: where the model pins a dimension declared dynamic (:func:`pinned_location`).

    fxport's own errors raised during capture (a control-flow construct the converter refuses,
    a patch rule's error), however deeply torch wrapped them, are the answer as they are.
    """
    own = next((e for e in _exception_chain(exc) if isinstance(e, ConversionError)), None)
    if own is not None:
        return own
    text = "\n".join(str(e) for e in _exception_chain(exc))
    where = failure_location(exc)
    first_line = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    first_line = _TORCH_BANNER.sub("", first_line).strip() or type(exc).__name__
    in_branch = _cond_branch_refusal(exc, text, where)
    if in_branch is not None:
        return in_branch
    traced_body = _traced_body_refusal(exc, text, where)
    if traced_body is not None:
        return traced_body
    if _is_data_dependent(exc, text) and where is not None and (
            (where.function or "").startswith("_fx_") or _below_converted_body(exc) and is_user_file(where.filename)):
        return _number_in_body_refusal(exc, text, where)  # in a body, or in a function of the user's it calls
    if _is_data_dependent(exc, text) and where is not None and where.function == "<lambda>":
        return ControlFlowError(
            "a tensor condition inside a lambda cannot be converted (fxport converts def functions "
            "and methods; a lambda's source is not reliably its own)",
            where=where,
            hint="write the lambda as a def function or a method, or use torch.where in it",
        )
    library = library_location_from_exception(exc)
    if _is_data_dependent(exc, text) and library is not None:
        return CaptureError(
            f"data-dependent control flow in library code at {package_location(library)} cannot be "
            "captured (library code conversion is off)",
            where=where,
            hint="fxport converts that library function when neither --no-convert-libraries "
            "(convert_libraries=False) nor --no-control-flow is given; or pick an implementation of the "
            "library without it (transformers: config experts_implementation / attn_implementation), "
            "or patch it with a rule",
        )
    if _is_data_dependent(exc, text):
        return CaptureError(
            "data-dependent control flow (a Python branch or loop on a tensor value, or a number read "
            "from a tensor with .item(), float(), int()) cannot be captured",
            where=where,
            hint="keep values read from tensors as tensors (x * t rather than x * float(t)); with "
            "--no-control-flow, turn conversion back on; or rewrite it with torch.where/torch.cond",
        )
    if "Constraints violated" in text or "specialized" in text.lower() and "dim" in text.lower():
        pinned = list(dict.fromkeys(f"{m.group(1)!r} to {m.group(2)}"
                                    for m in SUGGESTED_CONSTANT.finditer(text.split("Suggested fixes", 1)[-1])))
        what = (f"the model specialises dynamic dimension {', '.join(pinned)}" if pinned and "Suggested fixes" in text
                else f"a dimension declared dynamic was specialised by the model: {first_line}")
        return CaptureError(
            what,
            where=where or (pinned_at if pinned else None),
            hint="drop that axis from the dynamic shapes (the model runs at one size only), or "
            "make the code that fixes it size-generic",
        )
    if _in_torch_func_derivative(exc):
        return CaptureError(
            "a torch.func derivative (jacfwd, jacrev, jvp, vjp, grad) cannot be captured by torch.export",
            where=where,
            hint="write the derivative out with tensor ops (the Jacobian of an elementwise function is a "
            "diagonal of its derivative), or compute it before export and pass it in")
    return _unclassified(exc, where, first_line)


_TORCH_FUNC_TRANSFORMS = os.path.join("_functorch", "eager_transforms.py")


def _in_torch_func_derivative(exc: BaseException) -> bool:
    """The failure was raised inside one of torch.func's derivative transforms (forward- or
    reverse-mode: their dual or grad-tracking tensors are not fake tensors export can trace)."""
    return any(frame.filename.endswith(_TORCH_FUNC_TRANSFORMS) for error in _exception_chain(exc)
               for frame in traceback.extract_tb(error.__traceback__))


#: how torch read a number from a tensor as a Python value (the guard's frame) → the use, the hint
_NUMBER_USES = {
    "int": ("used as a Python int (a list length, range() outside a for header, str(), a library's int argument)",
            "use it where a tensor can stand for it (an index, a slice bound, narrow, arithmetic, a comparison, "
            "min/max, torch.tensor([n]), x.new_tensor, range() in a for header), or compute it before the loop"),
    "float": ("used as a Python float (a library argument, a format, a function without a tensor form)",
              "keep it a tensor (x * x.max() rather than x * float(x.max().item())); arithmetic, min/max and "
              "math functions of it convert"),
    "bool": ("tested as a Python bool (a condition in code fxport does not convert: a library's, a lambda's)",
             "compare it as a tensor in the converted code itself (if/while on it, torch.where)"),
}
_GUARD_FRAMES = {"guard_int": "int", "__index__": "int", "__int__": "int", "guard_float": "float",
                 "__float__": "float", "guard_bool": "bool", "__bool__": "bool"}


def _number_in_body_refusal(exc: BaseException, text: str, where: SourceLocation) -> ControlFlowError:
    """A number read from a tensor, used as a Python number inside a converted body: what it was
    used as (the guard torch stopped at), the user's line as written, and what to do instead."""
    frames = [f.name for error in _exception_chain(exc) for f in traceback.extract_tb(error.__traceback__)]
    use = next((_GUARD_FRAMES[name] for name in frames if name in _GUARD_FRAMES),
               "int" if "specialized integer" in text else None)
    what, hint = _NUMBER_USES.get(use, ("used as a Python number", _NUMBER_USES["float"][1]))
    line = linecache.getline(where.filename, where.lineno).strip() if where.filename else ""
    written = f" (`{line[:80]}`)" if line else ""
    return ControlFlowError(
        f"{_number_subject(line)} is {what} inside a converted branch or loop "
        f"body{written}, which torch.cond/while_loop cannot trace", where=where, hint=hint)


#: a line that reads a number from a tensor itself
_READS_A_NUMBER = re.compile(r"\.item\(|\bint\(|\bfloat\(|\.tolist\(")


def _number_subject(line: str) -> str:
    """What the number is: read from a tensor on this line, or (no read here) a loop counter or a
    value read earlier, which the message then does not blame on a read the line does not hold."""
    if not line or _READS_A_NUMBER.search(line):
        return "a number read from a tensor (.item(), float(), int())"
    return "a number known only at run time (a loop counter, a number computed from one, or read from a tensor earlier)"


def _unclassified(exc: BaseException, where, first_line: str) -> ConversionError:
    """A failure of no known kind: inside a converted body, said so with what to try."""
    if _in_higher_order_compile(exc):
        return ControlFlowError(
            f"torch could not trace a converted loop or branch body ({type(exc).__name__}: {first_line[:160]}), "
            "which torch's while_loop/cond cannot trace", where=where,
            hint="simplify the code at that line (a plain function of tensors; no torch.func transforms, "
            "no .numpy()), or run with --debug for torch's trace")
    return CaptureError(f"torch.export failed: {type(exc).__name__}: {first_line}", where=where,
                        hint="run with --debug for the full trace")


SUGGESTED_CONSTANT = re.compile(r"^\s*(\w+) = (\d+)\s*$", re.M)


def pinned_location(exc: BaseException, narrowed_at: dict, dims: dict) -> SourceLocation | None:
    """The user's line that pinned a dimension declared dynamic to one value (``x.reshape(2, 6)``),
    which torch's message does not name: where that input size's range became one value while the
    model was traced, else where it was first narrowed (``narrowed_at``, the
    :class:`~fxport.capture.narrowings.RangeNarrowings` of
    :func:`~fxport.capture.narrowings.watch_range_narrowing`; a plain dict has first narrowings only).
    ``dims``: :func:`fxport.capture.dynamic_dims.dims_by_input`'s index → axis → (Dim, parameter name).
    """
    text = "\n".join(str(e) for e in _exception_chain(exc))
    if "Suggested fixes" not in text:
        return None
    pinned = {m.group(1) for m in SUGGESTED_CONSTANT.finditer(text.split("Suggested fixes", 1)[1])}
    for axes in dims.values():
        for axis, (dim, parameter) in axes.items():
            key = (f"L['{parameter}'].size()[{axis}]",)
            where = getattr(narrowed_at, "pinned", {}).get(key) or narrowed_at.get(key)
            if where is not None and (dim if isinstance(dim, str) else getattr(dim, "__name__", None)) in pinned:
                return where
    return None


#: torch's advice about its own logging, which a user of fxport cannot act on (--debug shows all).
_TORCH_BANNER = re.compile(r"\s*(For more information, run with TORCH_LOGS|Set TORCH_LOGS|Set TORCHDYNAMO_VERBOSE"
                           r"|For more details about this graph break|The error above occurred when)[^\n]*")


def failure_location(exc: BaseException) -> SourceLocation | None:
    """The user's file:line of a capture failure: the call torch names in its message, else the
    innermost user frame of the deepest exception."""
    text = "\n".join(str(e) for e in _exception_chain(exc))
    return location_named_in_message(text) or user_location_from_exception(exc)


def location_named_in_message(text: str):
    """torch names the call that raised a data-dependent guard in its message; the last user frame."""
    return user_location_in(text)


def _is_data_dependent(exc: BaseException, text: str) -> bool:
    names = {type(e).__name__ for e in _exception_chain(exc)}
    return bool(names & {"GuardOnDataDependentSymNode", "DataDependentOutputException"}) or (
        "data-dependent" in text.lower() or "data dependent" in text.lower()
    )


def _in_cond_compile(exc: BaseException) -> bool:
    """True when the failure was raised while torch.cond compiled its branches (dynamo)."""
    marker = os.path.join("_higher_order_ops", "cond.py")
    return any(marker in frame.filename for error in _exception_chain(exc)
               for frame in traceback.extract_tb(error.__traceback__))


#: the outlined bodies of converted loops and branches (converters: _fx_body_0, _fx_true_2, ...)
_CONVERTED_BODY = re.compile(r"^_fx_(body|true|false|test)_\d+$")


def _below_converted_body(exc: BaseException) -> bool:
    """True when the failure was raised below the outlined body of a converted loop or branch
    (in a function of the user's that the body calls: ``fade(out)`` reading ``self.fade_in_len``)."""
    return any(_CONVERTED_BODY.match(frame.name) for error in _exception_chain(exc)
               for frame in traceback.extract_tb(error.__traceback__))


def _in_higher_order_compile(exc: BaseException) -> bool:
    """True when the failure was raised while torch traced the body of a converted loop or
    branch (dynamo inside while_loop or cond)."""
    markers = (os.path.join("_higher_order_ops", "cond.py"), os.path.join("_higher_order_ops", "while_loop.py"))
    return any(marker in frame.filename for error in _exception_chain(exc)
               for frame in traceback.extract_tb(error.__traceback__) for marker in markers)


def library_frame_from_exception(exc: BaseException) -> tuple[FrameType, int] | None:
    """The innermost frame (and its line) in an installed package other than torch
    (transformers' modeling code, say) below the user's code in the deepest exception's
    traceback, or None."""
    deepest = list(_exception_chain(exc))[-1]
    found = None
    for frame, lineno in traceback.walk_tb(deepest.__traceback__):
        filename = frame.f_code.co_filename
        if is_user_file(filename):
            found = None  # only library frames called from (below) the user's code count
        elif _is_other_library(filename):
            found = (frame, lineno)
    return found


def library_location_from_exception(exc: BaseException) -> SourceLocation | None:
    """Where :func:`library_frame_from_exception` is, as a location, or None."""
    found = library_frame_from_exception(exc)
    if found is None:
        return None
    frame, lineno = found
    return SourceLocation(frame.f_code.co_filename, lineno, frame.f_code.co_name)


def stopped_in_library(exc: BaseException) -> tuple[FrameType, int] | None:
    """The library frame (and line) where capture stopped on data-dependent control flow, or
    None when ``exc`` is something else: fxport's own error, another failure, or no library
    frame below the user's code."""
    if any(isinstance(e, ConversionError) for e in _exception_chain(exc)):
        return None
    if not _is_data_dependent(exc, "\n".join(str(e) for e in _exception_chain(exc))):
        return None
    return library_frame_from_exception(exc)


def package_location(location: SourceLocation) -> str:
    """``transformers/models/mixtral/modeling_mixtral.py:80`` rather than the site-packages path."""
    return f"{package_relative(location.filename) or location.filename}:{location.lineno}"


def _is_other_library(filename: str) -> bool:
    path = os.path.abspath(filename)
    parts = path.split(os.sep)
    if "site-packages" not in parts and "dist-packages" not in parts:
        return False
    package = parts[(parts.index("site-packages") if "site-packages" in parts else parts.index("dist-packages")) + 1]
    return package not in ("torch", "fxport", "onnxscript", "onnx", "onnx_ir", "sympy", "functorch", "typing_extensions")


def source_unavailable(module) -> ConversionError | None:
    """For a capture failure with no line to show: the error naming a forward of ``module`` (or of
    a submodule) defined where fxport cannot read its source (the REPL, stdin, ``exec``), so its
    control flow could not be converted; None when every forward has a source file."""
    from fxport.errors import ControlFlowError, SourceLocation

    for sub in module.modules():
        code = getattr(getattr(type(sub), "forward", None), "__code__", None)
        if code is None or not code.co_filename.startswith("<") or code.co_filename.startswith("<frozen"):
            continue
        name = f"{type(sub).__name__}.forward"
        return ControlFlowError(
            f"cannot convert {name}: its source code is not available (defined in {code.co_filename}: the REPL, "
            "stdin or exec), so its data-dependent control flow was not converted and torch.export cannot capture it",
            where=SourceLocation(code.co_filename, code.co_firstlineno, name),
            hint="define the model in a .py file and convert file.py:Name",
        )
    return None


#: torch runs its "Specializations unexpectedly required" summary on into the last guard's line.
_GUARD = re.compile(r"Not all values of (\w+) = (.+?) in the specified range satisfy the generated guard "
                    r"(.+?)(?:\.|Specializations unexpectedly required.*)?$", re.M)
_GUARD_FUNCTIONS = {"trunc": math.trunc, "floor": math.floor, "ceil": math.ceil, "Min": min, "Max": max,
                    "min": min, "max": max, "Abs": abs, "abs": abs}


def guards_at_sizes(text: str, *sizes: int) -> list[tuple[str, tuple[bool | None, ...]]]:
    """``(dimension name, whether its guard holds at each of sizes)`` for each guard torch's
    constraint violation reports; None where the guard cannot be evaluated.

    Example::

        >>> guards_at_sizes("Not all values of b = L['x'].size()[0] in the specified "
        ...                 "range satisfy the generated guard L['x'].size()[0] != 1.", 0, 1)
        [('b', (True, False))]
    """
    def holds(guard: str, size: str, value: int) -> bool | None:
        try:
            return bool(eval(guard.replace(size, str(value)), {"__builtins__": {}}, dict(_GUARD_FUNCTIONS)))
        except Exception:  # noqa: BLE001 - an expression we cannot evaluate
            return None

    return [(name, tuple(holds(guard, size, value) for value in sizes))
            for name, size, guard in (match.groups() for match in _GUARD.finditer(text))]
