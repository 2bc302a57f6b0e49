"""A symbolic number as the Scalar argument of an aten op becomes a 0-d tensor (a graph pass).

A dynamic size (``x.shape[0]``) or a number read with ``.item()`` is a number torch keeps
symbolic, and so is arithmetic of it; ``x.long() % (k + 1)`` and ``x ** (k % 3)`` reach the captured program as
``aten.remainder.Scalar(x, sym)`` / ``aten.pow.Tensor_Scalar(x, sym)``, whose ONNX translations
in torch 2.13 read the scalar as a Python number ("int() argument must be ... not
'SymbolicTensor'"). This pass gives each such call the op's Tensor overload
(``remainder.Tensor``, ``pow.Tensor_Tensor``) with the number as a 0-d tensor of the dtype the
Scalar overload computes in (the tensor's own, or the default float for a float number and an
integer tensor), in every graph and subgraph; the values are the same. A Tensor overload given an
integer tensor and a symbolic float (``ids * (1 + float(t))``) gets the 0-d tensor too: the
exporter's type promotion would make it the Scalar overload after this pass. ``--disable
symbolic-scalar-arguments`` turns it off.

Example::

    >>> import torch, fxport
    >>> class Net(torch.nn.Module):
    ...     def forward(self, x, k):
    ...         return x % (k.item() + 1)
    >>> program = torch.export.export(Net(), (torch.arange(6), torch.tensor(3)))
    >>> records = []
    >>> program = fxport.rules.resolve().apply_graph_rules(program, records)
    >>> [r.rule for r in records if r.rule == "symbolic-scalar-arguments"]
    ['symbolic-scalar-arguments']
    >>> program.module()(torch.arange(6), torch.tensor(3)).tolist()
    [0, 1, 2, 3, 0, 1]
"""

from __future__ import annotations

import torch
import torch.fx

import fxport

aten = torch.ops.aten


@fxport.rules.graph_pass(name="symbolic-scalar-arguments", priority=fxport.rules.BUILTIN_PRIORITY)
def symbolic_scalar_arguments(graph_module: torch.fx.GraphModule, context) -> list:
    """``op.Scalar(x, sym)`` -> ``op.Tensor(x, full([], sym))`` where the Tensor overload exists."""
    graph = graph_module.graph
    records = []
    for node in list(graph.nodes):
        overload = _tensor_overload(node)
        if overload is None:
            continue
        tensor = node.args[0].meta["val"]
        args = list(node.args)
        made = []
        for index, arg in enumerate(args[1:], start=1):
            if _is_symbolic_number(arg):
                with graph.inserting_before(node):
                    made.append(graph.call_function(aten.full.default, ([], arg),
                                                    {"dtype": _dtype(tensor, arg.meta["val"])}))
                args[index] = made[-1]
        with graph.inserting_before(node):
            replacement = graph.call_function(overload, tuple(args), dict(node.kwargs))
        replacement.meta.update(node.meta)
        node.replace_all_uses_with(replacement)
        graph.erase_node(node)
        records.append(context.record(replacement, f"{node.target} of a symbolic number as {overload}",
                                      new_nodes=made + [replacement]))
    return records


def _tensor_overload(node):
    """The Tensor overload of an aten ``...Scalar`` call on a tensor given a symbolic number, or None."""
    target = node.target
    if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
        return None
    name = target._overloadname
    if not node.args or not isinstance(node.args[0], torch.fx.Node):
        return None
    tensor = node.args[0].meta.get("val")
    if not isinstance(tensor, torch.Tensor):
        return None
    if name == "Tensor" and not tensor.dtype.is_floating_point and any(
            _is_symbolic_number(arg) and isinstance(arg.meta["val"], torch.SymFloat) for arg in node.args[1:]):
        return target  # ids * (1 + float(t)): the exporter's type promotion makes it a mul.Scalar
    if "Scalar" not in name or not any(_is_symbolic_number(arg) for arg in node.args[1:]):
        return None
    return getattr(target.overloadpacket, name.replace("Scalar", "Tensor"), None)


def _is_symbolic_number(arg) -> bool:
    return isinstance(arg, torch.fx.Node) and isinstance(arg.meta.get("val"), (torch.SymInt, torch.SymFloat))


def _dtype(tensor: torch.Tensor, number) -> torch.dtype:
    """The dtype the Scalar overload computes ``tensor`` with ``number`` in."""
    if isinstance(number, torch.SymFloat) and not tensor.dtype.is_floating_point:
        return torch.get_default_dtype()
    return tensor.dtype
