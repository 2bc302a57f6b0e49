"""Capture: the body of each loop whose carried state grows, captured on its own.

The control-flow operators (``fxport/controlflow/operators/loops/growing.py``) leave one call of the
custom op ``fxport::grown_loop`` per such loop in the captured program, keyed to a
:class:`~fxport.controlflow.operators.loops.growing.GrownLoop`. Each loop's body — one iteration and
the next test, as a function of the counter, the carried state, the free tensors and the
modules' weights — is captured here with ``torch.export`` (the dimensions that are dynamic
outside and the growing axes dynamic); the lower stage (``fxport/lower/grown_loops.py``) writes
the ONNX ``Loop`` around it. The loops are the conversion's ``grown_loops`` (``{key: loop}``),
passed in, never read from a global.

Example::

    >>> import torch
    >>> program = torch.export.export(torch.nn.ReLU(), (torch.randn(2),))
    >>> loop_nodes(program)       # no loop whose state grows
    []
"""

from __future__ import annotations

from typing import Mapping

import torch

from fxport.controlflow.operators.left_out import take_markers
from fxport.controlflow.operators.rule_names import rule_name
from fxport.controlflow.operators.state import growing_body, session
from fxport.errors import ControlFlowError
from fxport.common.quiet import quiet_torch

OP = torch.ops.fxport.grown_loop.default


def loop_nodes(program) -> list:
    return [node for module in program.graph_module.modules() if isinstance(module, torch.fx.GraphModule)
            for node in module.graph.nodes if node.op == "call_function" and node.target is OP]


def capture_loop_bodies(program: torch.export.ExportedProgram, loops: Mapping[str, object], rewrite=None) -> None:
    """Capture the body of every loop whose state grows in ``program`` (and in those bodies),
    passing each through ``rewrite`` (the rewrite stage's graph passes and rules), so that they
    see the body like every other graph; :func:`loop_translations` uses what is captured here.
    """
    for node in loop_nodes(program):
        loop = loops[node.args[1]]
        if getattr(loop, "program", None) is None:
            body = capture_body(loop, node)
            capture_loop_bodies(body, loops, rewrite)
            loop.program = rewrite(body) if rewrite is not None else body


def capture_body(loop, node) -> torch.export.ExportedProgram:
    """``torch.export`` of one iteration of ``loop`` (the :class:`_Body`), sizes as described above."""
    from torch.fx.experimental import _config as shape_config

    vals = [arg.meta["val"] for arg in node.args[0]]
    _, counter, state, free, _ = loop.split(vals)
    carried = ([counter] if counter is not None else []) + list(state)
    offset = 1 if counter is not None else 0
    examples = [_example(v, loop.growing.get(index - offset, ()) if offset <= index < offset + len(state) else ())
                for index, v in enumerate(carried + list(free))]
    dynamic = []
    for index, value in enumerate(carried + list(free)):
        axes = {a for a, size in enumerate(value.shape) if isinstance(size, torch.SymInt)}
        if offset <= index < offset + len(state):
            axes |= set(loop.growing.get(index - offset, ()))
        dynamic.append({a: torch.export.Dim.AUTO for a in sorted(axes)} or None)
    body = _Body(loop, len(carried), len(free))
    try:
        growing_names = {loop.leaf_name(index).split("[")[0] for index in loop.growing}
        with quiet_torch(), session(loop.strategy, [], loop.disabled), growing_body(growing_names), \
                shape_config.patch(backed_size_oblivious=True), torch.no_grad():
            program = torch.export.export(body, tuple(examples), dynamic_shapes=(tuple(dynamic),), strict=False)
    except ControlFlowError:
        raise
    except Exception as exc:
        raise _refusal(loop, f"its body could not be captured on its own ({error_summary(exc)})") from exc
    _check_still_dynamic(loop, program, offset)
    loop.left_out = take_markers(program, lambda info: rule_name(info.kind, "dropped"))  # the rewrite stage warns
    return program


class _Body(torch.nn.Module):
    """One iteration of a grown loop as a module of flat tensors (what the body export traces).

    The modules the body calls are its submodules, so their weights are the body program's
    parameters, as in the enclosing capture (a module called inside a ``torch.cond`` branch of
    the body reads them as parameters; weights swapped in as inputs would reach dynamo as
    constants it cannot lift). :func:`fxport.lower.grown_loops` points them at the enclosing graph's weights.
    """

    def __init__(self, loop, carried: int, free: int):
        super().__init__()
        self.loop, self.carried, self.free = loop, carried, free
        self.modules_ = torch.nn.ModuleList([module for module, _ in loop.modules])

    def forward(self, *flat):
        loop = self.loop
        carried, free_tensors = flat[: self.carried], flat[self.carried: self.carried + self.free]
        counter, state = (carried[0], carried[1:]) if loop.counted else (None, carried)
        free = loop.free_values(free_tensors, list(state) + list(free_tensors))
        keep, counter, new = loop.step_once(counter, tuple(state), free)
        return (keep,) + ((counter,) if loop.counted else ()) + tuple(new)


def _example(value: torch.Tensor, growing=()) -> torch.Tensor:
    """Zeros shaped like the fake ``value`` at its example sizes (2 where a size has no hint).

    A ``growing`` axis is at least 2 long: a state that starts empty (``acc = h[:, :0]``) would
    otherwise reach the body's ``torch.cond`` as a 0-long tensor, whose guards dynamo checks
    against ranges that exclude 0 ("0 not in VR[1, 2]").
    """
    from torch.fx.experimental.symbolic_shapes import optimization_hint

    shape = [optimization_hint(s, fallback=2) if isinstance(s, torch.SymInt) else s for s in value.shape]
    shape = [max(size, 2) if axis in growing else size for axis, size in enumerate(shape)]
    return torch.zeros(shape, dtype=value.dtype)


def _check_still_dynamic(loop, program, offset: int) -> None:
    """A growing axis the body capture specialised would make the Loop wrong after one step."""
    placeholders = [n for n in program.graph.nodes if n.op == "placeholder"]
    user_inputs = [n for n, spec in zip(placeholders, program.graph_signature.input_specs)
                   if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT]
    for index, axes in loop.growing.items():
        value = user_inputs[offset + index].meta["val"]
        for axis in axes:
            if not isinstance(value.shape[axis], torch.SymInt):
                name = loop.leaf_name(index)
                raise _refusal(loop, f"its body works only for one size {value.shape[axis]} of axis {axis} of "
                                     f"{name!r}, which grows", hint=f"avoid code that fixes the length of {name!r}")


def _refusal(loop, what: str, hint: str = "run with --debug for the full trace") -> ControlFlowError:
    return ControlFlowError(f"{loop.info.kind}: loop whose state grows: {what}", where=loop.info.location, hint=hint)


def error_summary(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:240]
