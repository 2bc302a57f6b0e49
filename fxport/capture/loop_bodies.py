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

import operator
from typing import Mapping

import torch

from fxport.controlflow.operators.left_out import take_markers
from fxport.controlflow.operators.loops import grown_branches  # noqa: F401 - defines fxport::grown_cond
from fxport.controlflow.operators.rule_names import rule_name
from fxport.controlflow.operators.state import growing_body, session
from fxport.capture.recurrent import refresh_recurrent_weights
from fxport.errors import ControlFlowError
from fxport.common.quiet import quiet_torch

OP = torch.ops.fxport.grown_loop.default
#: an ``if`` whose branch holds a loop whose state grows (its branches captured here too)
COND_OP = torch.ops.fxport.grown_cond.default


def loop_nodes(program) -> list:
    return [node for module in program.graph_module.modules() if isinstance(module, torch.fx.GraphModule)
            for node in module.graph.nodes if node.op == "call_function" and node.target in (OP, COND_OP)]


def capture_loop_bodies(program: torch.export.ExportedProgram, loops: Mapping[str, object], rewrite=None) -> None:
    """Capture the body of every loop whose state grows in ``program`` (and in those bodies),
    passing each through ``rewrite`` (the rewrite stage's graph passes and rules), so that they
    see the body like every other graph; :func:`loop_translations` uses what is captured here.
    """
    for node in loop_nodes(program):
        made = loops[node.args[1]]
        if node.target is COND_OP:
            for side in ("true", "false"):
                if side not in made.programs:
                    made.programs[side] = _with_bodies(capture_branch(made, node, side), loops, rewrite)
        elif getattr(made, "program", None) is None:
            made.program = _with_bodies(capture_body(made, node), loops, rewrite)


def _with_bodies(program, loops, rewrite):
    """``program`` with the loops and branches in it captured, passed through ``rewrite``."""
    capture_loop_bodies(program, loops, rewrite)
    return rewrite(program) if rewrite is not None else program


def capture_branch(cond, node, side: str) -> torch.export.ExportedProgram:
    """``torch.export`` of one side of an ``if`` whose branch holds a loop whose state grows
    (:mod:`~fxport.controlflow.operators.loops.grown_branches`), the sizes dynamic outside
    dynamic here."""
    from torch.fx.experimental import _config as shape_config

    _, tensors, _ = cond.split([arg.meta["val"] for arg in node.args[0]])
    examples = [_example(value) for value in tensors]
    dynamic = [{a: torch.export.Dim.AUTO for a, size in enumerate(value.shape) if isinstance(size, torch.SymInt)}
               or None for value in tensors]
    try:
        with quiet_torch(), session(cond.strategy, [], cond.disabled), shape_config.patch(backed_size_oblivious=True), \
                torch.no_grad():
            program = torch.export.export(_Branch(cond, side), tuple(examples), dynamic_shapes=(tuple(dynamic),),
                                          strict=False)
    except ControlFlowError:
        raise
    except Exception as exc:
        raise ControlFlowError(f"if: the {side} branch, which holds a loop whose state grows, could not be captured "
                               f"on its own ({error_summary(exc)})", where=cond.info.location,
                               hint="run with --debug for the full trace") from exc
    cond.left_out = list(getattr(cond, "left_out", ())) + take_markers(
        program, lambda info: rule_name(info.kind, "dropped"))
    return program


def capture_body(loop, node) -> torch.export.ExportedProgram:
    """``torch.export`` of one iteration of ``loop`` (the :class:`_Body`), sizes as described above."""
    vals = [arg.meta["val"] for arg in node.args[0]]
    _, counter, state, free, _ = loop.split(vals)
    carried = ([counter] if counter is not None else []) + list(state)
    offset = 1 if counter is not None else 0
    try:
        program = _export(loop, carried, list(free), offset, {})
    except ControlFlowError:
        raise
    except Exception as exc:
        program = _export_related(loop, carried, list(free), offset, growth_relations(loop, state), exc)
    _check_still_dynamic(loop, program, offset)
    _check_differences_kept(loop, program, offset, len(state))
    loop.left_out = take_markers(program, lambda info: rule_name(info.kind, "dropped"))  # the rewrite stage warns
    return program


def _export(loop, carried, free, offset: int, related: dict) -> torch.export.ExportedProgram:
    """``torch.export`` of the :class:`_Body`; ``related``: growing axes whose lengths keep a fixed
    difference (:func:`growth_relations`), captured as one size plus that difference."""
    from torch.fx.experimental import _config as shape_config

    examples, dynamic = _examples(loop, carried + free, offset, len(carried), related)
    body = _Body(loop, len(carried), len(free))
    growing_names = {loop.leaf_name(index).split("[")[0] for index in loop.growing}
    with quiet_torch(), session(loop.strategy, [], loop.disabled), growing_body(growing_names), \
            shape_config.patch(backed_size_oblivious=True), torch.no_grad():
        return torch.export.export(body, tuple(examples), dynamic_shapes=(tuple(dynamic),), strict=False)


def _examples(loop, values, offset: int, carried: int, related: dict) -> tuple[list, list]:
    """The example inputs of the body capture and their dynamic shapes (see :func:`capture_body`)."""
    def grows(index):
        return loop.growing.get(index - offset, ()) if offset <= index < carried else ()

    examples = [_example(v, grows(index)) for index, v in enumerate(values)]
    roots, dynamic = {}, []
    for index, value in enumerate(values):
        axes = {a for a, size in enumerate(value.shape) if isinstance(size, torch.SymInt)} | set(grows(index))
        spec = {}
        for axis in sorted(axes):
            root, extra = related.get((index - offset, axis), (None, 0)) if axis in grows(index) else (None, 0)
            if root is None:
                spec[axis] = torch.export.Dim.AUTO
                continue
            if root not in roots:
                roots[root] = torch.export.Dim(f"grown_{len(roots)}", min=0)
            spec[axis] = roots[root] + extra if extra else roots[root]
            shape = list(examples[index].shape)
            shape[axis] = examples[offset + root[0]].shape[root[1]] + extra
            examples[index] = examples[index].new_zeros(shape)
        dynamic.append(spec or None)
    return examples, dynamic


def growth_relations(loop, state) -> dict:
    """``{(state index, axis): (root, difference)}`` for growing axes whose lengths differ by a
    number at the loop's entry (a decoder's ``ys`` one frame longer than each layer's cache);
    ``root`` is the shortest of them. Empty where no two growing axes are so related."""
    import sympy

    def expr(size):
        return size.node.expr if isinstance(size, torch.SymInt) else sympy.Integer(size)

    axes = [(index, axis) for index, grown in sorted(loop.growing.items()) for axis in grown]
    groups: list[list] = []
    for key in axes:
        size = expr(state[key[0]].shape[key[1]])
        for group in groups:
            difference = sympy.simplify(size - group[0][1])
            if difference.is_Integer:
                group.append((key, size))
                break
        else:
            groups.append([(key, size)])
    related = {}
    for group in (g for g in groups if len(g) > 1):
        root, least = min(group, key=lambda item: int(sympy.simplify(item[1] - group[0][1])))
        related.update({key: (root, int(sympy.simplify(size - least))) for key, size in group})
    return related


def _export_related(loop, carried, free, offset: int, related: dict, first: Exception):
    """The body captured again with its related growing axes tied (:func:`growth_relations`),
    after a capture with each free failed with ``first``. An axis one trip does not keep at its
    difference (a ``cat`` under a condition) is untied and the body captured again; what is left
    tied keeps its differences on every trip of the Loop (by induction from the entry)."""
    refusal = _refusal(loop, f"its body could not be captured on its own ({error_summary(first)})")
    for _ in range(3):
        if not related:
            raise refusal from first
        try:
            program = _export(loop, carried, free, offset, related)
        except ControlFlowError:
            raise
        except Exception:
            raise refusal from first
        kept = _kept_on_every_way(program, offset, related)
        if kept == related:
            return program
        related = kept
    raise refusal from first


def _state_nodes(program, offset: int) -> list:
    """The nodes of the captured body that return its carried state."""
    outputs = [spec.arg.name for spec in program.graph_signature.output_specs
               if spec.kind == torch.export.graph_signature.OutputKind.USER_OUTPUT]
    nodes = {node.name: node for node in program.graph.nodes}
    return [nodes[name] for name in outputs][1 + offset:]


#: ops that return a tensor of their first argument's shape (followed back to a ``torch.cond``)
_SAME_SHAPE = (torch.ops.aten.clone.default, torch.ops.aten.alias.default, torch.ops.aten.detach.default,
               torch.ops.aten._to_copy.default)


def _cond_source(node):
    """``(cond node, output index)`` where ``node`` is (a copy of) an output of a ``torch.cond``."""
    while node.op == "call_function" and node.target in _SAME_SHAPE:
        node = node.args[0]
    if node.op == "call_function" and node.target is operator.getitem \
            and getattr(node.args[0], "target", None) is torch.ops.higher_order.cond:
        return node.args[0], node.args[1]
    return None


def _ways_through(module, nodes) -> list[list]:
    """The fake values of ``nodes``, one list per way through the ``torch.cond`` they come from.

    A body that ends in a tensor ``if`` (an early ``break``) returns sizes torch merges into new
    unknowns; each branch still returns sizes in the body's own, e.g. ``[[s6, s6], [s6 + 1, s6 + 1]]``
    for two caches a trip grows together or not at all.
    """
    sources = [_cond_source(node) for node in nodes]
    conds = list(dict.fromkeys(source[0] for source in sources if source))
    plain = [node.meta.get("val") for node in nodes]
    if len(conds) != 1:
        return [plain]
    ways = []
    for branch in conds[0].args[1:3]:
        graph = getattr(module, branch.target)
        returned = next(node for node in graph.graph.nodes if node.op == "output").args[0]
        for way in _ways_through(graph, [returned[source[1]] for source in sources if source]):
            values = iter(way)
            ways.append([next(values) if source else value for source, value in zip(sources, plain)])
    return ways


def _kept_on_every_way(program, offset: int, related: dict) -> dict:
    """:func:`_kept` of every way through the body's closing ``torch.cond`` (:func:`_ways_through`)."""
    ways = _ways_through(program.graph_module, _state_nodes(program, offset))
    for _ in range(4):
        kept = related
        for after in ways:
            kept = _kept(after, kept)
        if kept == related:
            return kept
        related = kept
    return related


def _kept(after, related: dict) -> dict:
    """The relations one trip keeps: per tied group, the largest set of axes whose lengths after
    the trip still differ by what they did before (re-rooted at the shortest)."""
    import sympy

    def base(key, extra):
        value = after[key[0]] if key[0] < len(after) else None
        size = value.shape[key[1]] if isinstance(value, torch.Tensor) else None
        if size is None:
            return None
        return sympy.simplify((size.node.expr if isinstance(size, torch.SymInt) else sympy.Integer(size)) - extra)

    kept = {}
    for root in {root for root, _ in related.values()}:
        buckets: dict = {}
        for key, (of, extra) in related.items():
            found = base(key, extra) if of == root else None
            if found is not None:
                buckets.setdefault(found, []).append((key, extra))
        best = max(buckets.values(), key=len, default=[])
        if len(best) > 1:
            new_root, least = min(best, key=lambda item: item[1])
            kept.update({key: (new_root, extra - least) for key, extra in best})
    return kept


class _Body(torch.nn.Module):
    """One iteration of a grown loop as a module of flat tensors (what the body export traces).

    The modules the body calls are its submodules, so their weights are the body program's
    parameters, as in the enclosing capture (a module called inside a ``torch.cond`` branch of
    the body reads them as parameters; weights swapped in as inputs would reach dynamo as
    constants it cannot lift). :func:`fxport.lower.grown_loops` points them at the enclosing graph's weights.
    Recurrent layers' flat weights are refreshed first (:mod:`fxport.capture.recurrent`).
    """

    def __init__(self, loop, carried: int, free: int):
        super().__init__()
        self.loop, self.carried, self.free = loop, carried, free
        self.modules_ = torch.nn.ModuleList([module for module, _ in loop.modules])

    def forward(self, *flat):
        loop = self.loop
        refresh_recurrent_weights(self.modules_)
        carried, free_tensors = flat[: self.carried], flat[self.carried: self.carried + self.free]
        counter, state = (carried[0], carried[1:]) if loop.counted else (None, carried)
        free = loop.free_values(free_tensors, list(state) + list(free_tensors))
        keep, counter, new = loop.step_once(counter, tuple(state), free)
        return (keep,) + ((counter,) if loop.counted else ()) + tuple(new)


class _Branch(torch.nn.Module):
    """One side of a :class:`~fxport.controlflow.operators.loops.grown_branches.GrownBranches` as a
    module of its free tensors (the modules it calls are submodules, as in :class:`_Body`)."""

    def __init__(self, cond, side: str):
        super().__init__()
        self.cond, self.side = cond, side
        self.modules_ = torch.nn.ModuleList([module for module, _ in cond.modules])

    def forward(self, *tensors):
        refresh_recurrent_weights(self.modules_)
        return tuple(self.cond.branch(self.side, tensors))


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


def _check_differences_kept(loop, program, offset: int, count: int) -> None:
    """Growing axes the capture took as differing by a number (tied here, or related by torch's
    own refinement of ``Dim.AUTO``) must still differ by it after one trip: the Loop runs the
    body on the lengths the trips before made."""
    placeholders = [n for n in program.graph.nodes if n.op == "placeholder"]
    user_inputs = [n.meta["val"] for n, spec in zip(placeholders, program.graph_signature.input_specs)
                   if spec.kind == torch.export.graph_signature.InputKind.USER_INPUT]
    related = growth_relations(loop, user_inputs[offset: offset + count])
    if related and _kept_on_every_way(program, offset, related) != related:
        names = sorted({loop.leaf_name(index) for index, _ in related})
        raise _refusal(loop, f"its body works only while the lengths of {', '.join(map(repr, names))} keep the "
                             "differences they have on entry, and one trip changes them",
                       hint="grow those values by the same number of steps in every trip")


def _refusal(loop, what: str, hint: str = "run with --debug for the full trace") -> ControlFlowError:
    return ControlFlowError(f"{loop.info.kind}: loop whose state grows: {what}", where=loop.info.location, hint=hint)


def error_summary(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:240]
