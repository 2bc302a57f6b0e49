"""What ``fxport diff`` runs: load the target (or two ONNX files), diff, write the HTML report.

Example::

    >>> d = run_diff("examples/gated_mlp.py:GatedMLP", verify=False)
    >>> [r.rewrite.rule for r in d.rewrites]
    ['if-to-cond', 'ifexp-to-where', 'aten::mean', 'aten::max']
"""

from __future__ import annotations

import os
from typing import Callable

from fxport.diff.model_diff import ModelDiff, diff_model, diff_onnx_files
from fxport.errors import UsageError


def run_diff(target: str, other: str | None = None, *, inputs=(), dynamic=(), inputs_fn=None,
             opset: int | None = None, verify: bool = True, html: str | os.PathLike | None = None,
             progress: Callable[[str, str], None] | None = None, **convert_options) -> ModelDiff:
    """Diff a model target against the stock exporters, or two ONNX files; optionally write HTML.

    ``convert_options`` go to :func:`fxport.convert` (e.g. ``if_strategy="cond"``).
    """
    if opset is not None and not 7 <= opset <= 30:
        raise UsageError(f"--opset {opset} is out of range", hint="use an opset between 7 and 30, e.g. 18")
    if other is not None or target.endswith(".onnx"):
        result = _diff_files(target, other, inputs or dynamic or inputs_fn)
    else:
        result = _diff_target(target, inputs, dynamic, inputs_fn, opset, verify, progress, convert_options)
    if html is not None:
        from fxport.diff.render_html import render_html
        from fxport.common.files import write_text_atomically

        write_text_atomically(render_html(result), html)
    return result


def _diff_files(first: str, second: str | None, has_model_options) -> ModelDiff:
    if second is None or not (first.endswith(".onnx") and second.endswith(".onnx")):
        raise UsageError("fxport diff takes one model target or two .onnx files",
                         hint="e.g. fxport diff a.onnx b.onnx, or fxport diff net.py:Net")
    if has_model_options:
        raise UsageError("input options apply to a model target, not to two ONNX files",
                         hint="drop -i/--dynamic/--inputs-fn")
    return diff_onnx_files(first, second)


def _diff_target(target, inputs, dynamic, inputs_fn, opset, verify, progress, convert_options) -> ModelDiff:
    from fxport.load.targets import load_model

    loaded = load_model(target, input_specs=list(inputs), dynamic_specs=list(dynamic), inputs_fn=inputs_fn)
    example, *extra = loaded.input_sets
    return diff_model(
        loaded.module, example.args, kwargs=example.kwargs, dynamic_shapes=loaded.dynamic_shapes,
        target=target, opset=opset, verify=verify, progress=progress,
        verify_inputs=[s.args if not s.kwargs else s.kwargs for s in extra] or None, **convert_options,
    )
