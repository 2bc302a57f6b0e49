"""An ``if`` on a traced condition whose branch holds a loop whose state grows.

``torch.cond`` traces its branches with dynamo, where a loop whose state grows cannot be
recorded (its body is captured on its own, from Python: :mod:`growing`). Such an ``if`` (the
corpus's ``if boxes.numel() == 0: return torch.empty(0)`` before an NMS loop) becomes one call of
the custom op ``fxport::grown_cond`` instead, the branches captured on their own like a grown
loop's body (``fxport/capture/loop_bodies.py``) and written as one ONNX ``If`` whose branches
hold the loops' ``Loop`` nodes (``fxport/lower/grown_loops.py``). Only the side taken runs, as
in eager: no loop runs on values eager never computes.

The op's inputs are the condition, then the tensors the branches read (numbers and sizes as
for a grown loop: :func:`~fxport.controlflow.operators.loops.grown_inputs.free_inputs`), then
the weights of the modules they call. Its fake implementation gives each output the size both
branches give it, or a fresh size where they differ; its eager implementation runs the side
taken.

Example::

    >>> import torch
    >>> import torch.utils._pytree as pytree
    >>> from fxport.controlflow.operators import StatementInfo
    >>> info = StatementInfo("if", None, ("y",), params=("x",))
    >>> leaves, args_spec = pytree.tree_flatten([torch.tensor([5, 6])])
    >>> inputs, free = free_inputs(leaves, [])
    >>> outputs = [(torch.int64, torch.device("cpu"), [None])]  # one tensor, its length data
    >>> cond = GrownBranches("doc", info, lambda x: (x + 1,), lambda x: (x[:1],), free, [], args_spec, outputs)
    >>> cond.run(torch.tensor(False), inputs)
    [tensor([5])]
"""

from __future__ import annotations

import dataclasses
import itertools

import torch
import torch.utils._pytree as pytree

from fxport.controlflow.operators.failures import fail
from fxport.controlflow.operators.loops.growing import LOOPS, modules_of, register, reparametrized, tensors_of_modules
from fxport.controlflow.operators.loops.grown_inputs import free_inputs, free_values, input_count
from fxport.controlflow.operators.rule_names import rule_name
from fxport.controlflow.operators.state import disabled, probing, record, strategy
from fxport.controlflow.operators.values import as_bool_tensor, dense, is_symbolic, same_size, scalar

_KEYS = itertools.count()
_CONSTANTS = (int, float, bool, str, type(None), torch.dtype, torch.device, type, torch.nn.Module)


@dataclasses.dataclass
class GrownBranches:
    """An ``if`` whose branches are captured on their own (see the module doc).

    ``free``: one :class:`~fxport.controlflow.operators.loops.grown_inputs.Free` per leaf of the
    ``if``'s arguments (``args_spec`` their tree); ``modules``: ``(module, names)`` whose tensors
    follow the free tensors among the op's inputs; ``outputs``: per flat output a tensor
    template ``(dtype, device, sizes)`` (a size: an int, ``(input, axis)`` or None for a fresh
    one) or ``("constant", value)``; ``out_spec``: the tree of the branches' results.
    """

    key: str
    info: object
    true_fn: object
    false_fn: object
    free: list
    modules: list
    args_spec: object
    outputs: list
    out_spec: object = None
    strategy: str = "auto"
    disabled: frozenset = frozenset()
    programs: dict = dataclasses.field(default_factory=dict)  # side → the branch's ExportedProgram

    @property
    def tensor_outputs(self) -> list:
        return [i for i, out in enumerate(self.outputs) if out[0] != "constant"]

    def split(self, inputs):
        """``(condition, free tensors, module tensors)`` from the op's flat inputs."""
        inputs = list(inputs)
        tensors = input_count(self.free)
        return inputs[0], inputs[1: 1 + tensors], inputs[1 + tensors:]

    def arguments(self, tensors) -> list:
        """The ``if``'s arguments rebuilt from the free tensor inputs."""
        return list(pytree.tree_unflatten(free_values(self.free, tensors, list(tensors)), self.args_spec))

    def branch(self, side: str, tensors) -> list:
        """One side run on the rebuilt arguments: its flat tensor outputs."""
        fn = self.true_fn if side == "true" else self.false_fn
        leaves = pytree.tree_leaves(tuple(fn(*self.arguments(tensors))))
        return [_as_output(leaves[i], self.outputs[i]) for i in self.tensor_outputs]

    def run(self, pred, tensors) -> list:
        """The side ``pred`` takes, eagerly (the op's eager implementation)."""
        return self.branch("true" if bool(pred) else "false", tensors)

    def rebuilt(self, flat) -> tuple:
        """The op's outputs → the ``if``'s values (constants put back)."""
        flat, leaves = list(flat), []
        for out in self.outputs:
            leaves.append(out[1] if out[0] == "constant" else flat.pop(0))
        return pytree.tree_unflatten(leaves, self.out_spec)


def _as_output(value, template):
    return dense(value if isinstance(value, torch.Tensor) else scalar(value, template[0]))


@torch.library.custom_op("fxport::grown_cond", mutates_args=())
def grown_cond_op(inputs: list[torch.Tensor], key: str) -> list[torch.Tensor]:
    """An ``if`` whose branch holds a loop whose state grows (see the module doc)."""
    cond = LOOPS[key]
    pred, tensors, module_tensors = cond.split(inputs)
    with reparametrized(cond.modules, module_tensors):
        return cond.run(pred, tensors)


@grown_cond_op.register_fake
def _grown_cond_fake(inputs, key):
    cond = LOOPS[key]
    _, tensors, _ = cond.split(inputs)
    ctx = torch.library.get_ctx()
    outputs = []
    for i in cond.tensor_outputs:
        dtype, device, sizes = cond.outputs[i]
        shape = [size if isinstance(size, int) else tensors[size[0]].shape[size[1]] if size is not None
                 else ctx.new_dynamic_size() for size in sizes]
        outputs.append(torch.empty(shape, dtype=dtype, device=device))
    return outputs


def grown_cond(pred, true_fn, false_fn, args: tuple, info):
    """Emit the ``fxport::grown_cond`` call for an ``if`` whose branch holds a loop whose state
    grows; the values the ``if`` assigns (``info.names``) as the branches would give them."""
    leaves, args_spec = pytree.tree_flatten(list(args))
    for name, value in _named_leaves(args, info):
        if not isinstance(value, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool, *_CONSTANTS)) \
                and not callable(value) and type(value).__name__ not in ("Undefined", "Missing"):
            fail(f"if: a branch holds a loop whose state grows and reads {name!r} ({type(value).__name__}), which "
                 "its branches, captured on their own, cannot take", info,
                 f"pass {name!r} into the if as tensors (or lists and tuples of tensors)")
    inputs, free = free_inputs(leaves, [])
    modules = modules_of(leaves)
    module_tensors = tensors_of_modules(modules)
    sides = _probed(true_fn, false_fn, args)
    outputs, out_spec = _templates(sides, inputs, info)
    cond = GrownBranches(f"grown_cond_{next(_KEYS)}", info, true_fn, false_fn, free, modules, args_spec, outputs,
                         out_spec, strategy(), disabled())
    register(cond)
    flat = grown_cond_op([dense(as_bool_tensor(pred))] + inputs + module_tensors, cond.key)  # pred: a SymBool too
    record(info, rule_name(info.kind, "cond"), "cond: a branch holds a loop whose state grows (branches captured on "
           "their own)", lowering="ONNX If around the branches' exported graphs", carried=list(info.names))
    return cond.rebuilt(flat)


def _named_leaves(args, info):
    for name, value in zip(info.params, args):
        for leaf in pytree.tree_leaves(value):
            yield name, leaf


def _probed(true_fn, false_fn, args) -> tuple:
    """Both sides run once (dead code, as a loop probe's) to learn what they give."""
    def fresh():
        return [a.clone() if isinstance(a, torch.Tensor) else list(a) if type(a) is list else a for a in args]

    with probing():
        return tuple(true_fn(*fresh())), tuple(false_fn(*fresh()))


def _templates(sides, inputs, info) -> tuple[list, object]:
    """One template per flat output (see :class:`GrownBranches`) and the outputs' tree."""
    (true_leaves, spec), (false_leaves, false_spec) = (pytree.tree_flatten(side) for side in sides)
    if spec != false_spec:
        fail("if: the branches produce differently structured values (a branch holds a loop whose state grows)", info,
             "make both branches assign values of the same structure", values_differ=True)
    names = [name for name, value in zip(info.names, sides[0]) for _ in pytree.tree_leaves(value)]
    return [_template(name, a, b, inputs, info) for name, a, b in zip(names, true_leaves, false_leaves)], spec


def _template(name, a, b, inputs, info):
    if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor):
        if not is_symbolic(a) and not is_symbolic(b) and type(a) is type(b) and a == b and isinstance(a, _CONSTANTS):
            return ("constant", a)
    tensor_a, tensor_b = _as_tensor(name, a, b, info), _as_tensor(name, b, a, info)
    if tensor_a.dtype != tensor_b.dtype or tensor_a.dim() != tensor_b.dim():
        fail(f"if: {name!r} is {tensor_a.dtype} {tuple(tensor_a.shape)} in the true branch but {tensor_b.dtype} "
             f"{tuple(tensor_b.shape)} in the false branch (a branch holds a loop whose state grows)", info,
             "give both branches a tensor of one dtype and rank", values_differ=tensor_a.dim() != tensor_b.dim())
    return (tensor_a.dtype, tensor_a.device, [_size(x, y, inputs) for x, y in zip(tensor_a.shape, tensor_b.shape)])


def _as_tensor(name, value, other, info):
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return scalar(value, other.dtype if isinstance(other, torch.Tensor) else None)
    fail(f"if: {name!r} is a {type(value).__name__} in a branch that holds a loop whose state grows, which its "
         "If cannot return", info, "assign tensors in both branches")


def _size(a, b, inputs):
    """A size both sides give: an int, ``(input, axis)`` of the op's tensor inputs; else None."""
    if not same_size(a, b):
        return None
    if not isinstance(a, torch.SymInt):
        return int(a)
    for index, tensor in enumerate(inputs):
        for axis, size in enumerate(tensor.shape):
            if isinstance(size, torch.SymInt) and size.node.expr == a.node.expr:
                return (index, axis)
    return None
