"""Loops whose carried state grows (``tokens = torch.cat([tokens, nxt[:, None]], 1)``).

``torch._higher_order_ops.while_loop`` carries only tensors whose shape does not change, but an
ONNX ``Loop`` may carry values whose shape changes from one iteration to the next (ONNX
Runtime runs that). So a data-dependent loop whose probe shows a carried tensor growing is not
given to ``while_loop``: :func:`grown_loop` records the loop as a :class:`GrownLoop` (the body
and test functions, which values are carried, which axes grow) and puts one call of the custom
op ``fxport::grown_loop`` into the captured graph. Its fake implementation returns the carried
values with fresh unbacked sizes along the growing axes (the loop decides them), its eager
implementation runs the loop. The lower stage (``fxport/lower/grown_loops.py``) exports the body on
its own, with the sizes of its carried values dynamic, and writes the op as one ONNX ``Loop``
around that body (the design card's "scripted Loop nodes").

The op's inputs are, flat: the loop's first test, the counter of a range (``for``), the carried
state, then the tensors the body reads (the enclosing function's tensors, the range's stop) and
the parameters and buffers of the modules it calls. The ONNX body refers to the last two as
values of the enclosing graph, so the weights are stored once.

Example::

    >>> import torch
    >>> from fxport.controlflow.operators import StatementInfo
    >>> from fxport.controlflow.operators.loops.growing import GrownLoop
    >>> info = StatementInfo("while", None, ("t",), params=("t",))
    >>> loop = GrownLoop("doc", info, lambda t: (torch.cat([t, t[-1:] + 1]),), lambda t: t.shape[0] < 4,
    ...                  None, [], {0: (0,)}, [])
    >>> loop.run_python(torch.tensor([1]), None, (torch.tensor([7]),), ())
    (tensor([ 7,  8,  9, 10]),)
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import weakref

import torch
import torch.utils._pytree as pytree
from torch.nn.utils.stateless import _reparametrize_module

from fxport.controlflow.operators.counters import note_counter
from fxport.controlflow.operators.containers import is_container
from fxport.controlflow.operators.failures import fail
from fxport.controlflow.operators.logical import not_
from fxport.controlflow.operators.loops.closures import closure_modules
from fxport.controlflow.operators.loops.grown_inputs import free_inputs, free_values, input_count
from fxport.controlflow.operators.state import disabled, record, strategy
from fxport.controlflow.operators.values import as_bool_tensor, as_int64, dense

#: key → the loop; the lower stage reads it to build the ONNX ``Loop`` of each op call. Weak:
#: the conversion that made a loop holds it (:func:`loops_made`), so a finished conversion's
#: loops, with the modules and weights they reach, are freed with it.
LOOPS: "weakref.WeakValueDictionary[str, GrownLoop]" = weakref.WeakValueDictionary()
_KEYS = itertools.count()
#: the open :func:`loops_made` scopes; loops made outside any are kept for the process
_SCOPES: list[dict[str, "GrownLoop"]] = []
_UNSCOPED: dict[str, "GrownLoop"] = {}


@contextlib.contextmanager
def loops_made():
    """Collect (and hold) the loops made inside the block: ``{key: GrownLoop}``.

    >>> with loops_made() as made:
    ...     pass
    >>> made
    {}
    """
    made: dict[str, GrownLoop] = {}
    _SCOPES.append(made)
    try:
        yield made
    finally:
        _SCOPES.remove(made)


def loops_made_so_far() -> int:
    """How many grown loops this process has emitted (a probe that made one holds such a loop)."""
    return _MADE[0]


_MADE = [0]


def register(loop) -> None:
    """Keep ``loop`` (a :class:`GrownLoop`, or an ``if`` whose branches are captured on their own)
    where the op's implementations and the conversion find it by its key."""
    _MADE[0] += 1
    LOOPS[loop.key] = loop
    for scope in _SCOPES or [_UNSCOPED]:
        scope[loop.key] = loop


@dataclasses.dataclass
class GrownLoop:
    """A data-dependent loop whose carried state grows, as the op's fake, eager and ONNX forms see it.

    The carried state is flat: a state value that is a list or tuple of tensors (a KV cache per
    layer) is its leaves, ``specs`` the tree of each state value. ``growing``: flat state index
    → the axes that grow. ``free``: one :class:`~fxport.controlflow.operators.loops.grown_inputs.Free` per value the body reads. ``modules``:
    ``(module, parameter/buffer names)`` whose tensors follow the free tensors among the op's
    inputs, in that order.
    """

    key: str
    info: object
    body_fn: object
    test_fn: object
    step: int | None  # the range's step (a ``for``), else None
    free: list
    growing: dict
    modules: list
    item_from_rows: bool = False
    strategy: str = "auto"
    disabled: frozenset = frozenset()
    specs: list | None = None  # one pytree spec per state value (None: every value a tensor)
    bounds: tuple | None = None  # (start, stop) of a counting-up range of Python ints: counters.py
    program: object = None  # the body's ExportedProgram once captured (fxport/lower/grown_loops.py)

    @property
    def counted(self) -> bool:
        return self.step is not None

    def state_count(self) -> int:
        return sum(spec.num_leaves for spec in self.specs) if self.specs else len(self.info.names)

    def flatten(self, values) -> list:
        """State values → the flat carried tensors (the leaves of lists and tuples)."""
        if not self.specs:
            return list(values)
        flat = []
        for name, value, spec in zip(self.info.names, values, self.specs):
            leaves, got = pytree.tree_flatten(value)
            if got != spec:
                fail(f"{self.info.kind}: loop variable {name!r} changes structure inside a loop whose state grows",
                     self.info, f"keep {name!r} a list or tuple of the same length")
            flat.extend(leaves)
        return flat

    def unflatten(self, flat) -> tuple:
        """The flat carried tensors → state values."""
        if not self.specs:
            return tuple(flat)
        flat, values = list(flat), []
        for spec in self.specs:
            values.append(pytree.tree_unflatten(flat[: spec.num_leaves], spec))
            flat = flat[spec.num_leaves:]
        return tuple(values)

    def leaf_name(self, index: int) -> str:
        """``k`` or ``caches[1][0]``: the state value a flat index is (part of)."""
        if not self.specs:
            return self.info.names[index]
        for name, spec in zip(self.info.names, self.specs):
            if index < spec.num_leaves:
                try:
                    example = pytree.tree_unflatten(list(range(spec.num_leaves)), spec)
                    paths = [pytree.keystr(path) for path, _ in pytree.tree_flatten_with_path(example)[0]]
                except Exception:  # a library object (a transformers cache) is rebuilt from tensors only
                    return f"{name}[{index}]"
                return name + paths[index]
            index -= spec.num_leaves
        raise IndexError(index)

    def split(self, inputs):
        """``(keep, counter, state, free tensors, module tensors)`` from the op's flat inputs."""
        inputs = list(inputs)
        keep = inputs.pop(0)
        counter = inputs.pop(0) if self.counted else None
        count = self.state_count()
        state, rest = inputs[:count], inputs[count:]
        tensors = input_count(self.free)
        return keep, counter, state, rest[:tensors], rest[tensors:]

    def free_values(self, tensors, shapes_of) -> list:
        """The values the body reads, rebuilt from the free tensor inputs (``shapes_of``: the
        tensors whose sizes ``dim`` values are read from, the state + free inputs)."""
        return free_values(self.free, tensors, shapes_of)

    def parameters(self, tensors):
        """The modules the body calls, with ``tensors`` as their parameters and buffers."""
        return reparametrized(self.modules, tensors)

    def step_once(self, counter, flat, free):
        """One iteration: ``(keep going, counter, flat state)`` after it."""
        info = self.info
        state = self.unflatten(flat)
        params = list(state) + list(free)
        params = [p.clone() if isinstance(p, torch.Tensor) and n in info.mutated else p
                  for n, p in zip(info.params, params)]
        if self.counted:
            item = free[self._own()][counter] if self.item_from_rows else counter.clone()
            if not self.item_from_rows and self.bounds is not None:
                note_counter(item, *self.bounds)  # start <= item < stop, also in the body captured alone
            new = tuple(self.body_fn(item, *params[: len(info.params)]))
            counter = counter + self.step
        else:
            new = tuple(self.body_fn(*params[: len(info.params)]))
        new = tuple(v if isinstance(old, (list, tuple)) or is_container(old) else _as_tensor_like(v, old)
                    for v, old in zip(new, state))
        return self.keep_going(counter, new, free), counter, tuple(self.flatten(new))

    def keep_going(self, counter, state, free):
        """The loop test on ``state`` (values, not flat): the range not exhausted, no break, the
        ``while`` test."""
        info, ok = self.info, None
        if self.counted:
            stop = free[-1]
            ok = counter < stop if self.step > 0 else counter > stop
        if info.break_flag:
            ok = _and(ok, not_(state[info.names.index(info.break_flag)]))
        if self.test_fn is not None:
            ok = _and(ok, self.test_fn(*state, *free[: self._own()]))
        return as_bool_tensor(ok)

    def _own(self) -> int:
        """How many of the free values are the body's own parameters (then: the rows of a
        ``for row in x``, the range's stop)."""
        return len(self.info.params) - len(self.info.names)

    def run_python(self, keep, counter, state, free):
        """The loop, eagerly (the op's eager implementation); flat state in and out."""
        state = tuple(state)
        while bool(keep):
            keep, counter, state = self.step_once(counter, state, free)
        return state


@contextlib.contextmanager
def reparametrized(modules, tensors):
    """``modules`` (``(module, names)``) with ``tensors`` as their parameters and buffers."""
    tensors = list(tensors)
    with contextlib.ExitStack() as stack:
        for module, names in modules:
            values = {name: tensors.pop(0) for name in names}
            stack.enter_context(_reparametrize_module(module, values))
        yield


def _and(a, b):
    return as_bool_tensor(b) if a is None else torch.logical_and(as_bool_tensor(a), as_bool_tensor(b))


def _as_tensor_like(value, like):
    if isinstance(value, torch.Tensor):
        return value
    return torch.full((), value, dtype=like.dtype)


@torch.library.custom_op("fxport::grown_loop", mutates_args=())
def grown_loop_op(inputs: list[torch.Tensor], key: str) -> list[torch.Tensor]:
    """A data-dependent loop whose state grows (see the module doc)."""
    loop = LOOPS[key]
    keep, counter, state, free_tensors, module_tensors = loop.split(inputs)
    with loop.parameters(module_tensors):
        free = loop.free_values(free_tensors, list(state) + list(free_tensors))
        final = loop.run_python(keep, counter, state, free)
    return [dense(t) for t in final]


@grown_loop_op.register_fake
def _grown_loop_fake(inputs, key):
    loop = LOOPS[key]
    _, _, state, _, _ = loop.split(inputs)
    ctx = torch.library.get_ctx()
    outputs = []
    for index, value in enumerate(state):
        shape = list(value.shape)
        for axis in loop.growing.get(index, ()):
            shape[axis] = ctx.new_dynamic_size()
        outputs.append(value.new_empty(shape))
    return outputs


#: the refusal of a growing loop inside a traced body (an ``if`` falls back to where on it)
GROWN_IN_A_BODY = "a loop whose state grows inside a converted branch or another data-dependent loop is not supported"


def grown_loop(info, state, free, *, body_fn, test_fn, rng, item_from_rows, growing):
    """Emit the ``fxport::grown_loop`` call for a loop whose probe showed ``growing`` axes.

    ``state``: the loop state after numbers were promoted to tensors; ``free``: the values the
    body reads; ``rng``: the range of a ``for`` (its start is the counter's first value).
    """
    if torch.compiler.is_dynamo_compiling():
        fail(f"{info.kind}: {GROWN_IN_A_BODY}", info, "move the loop out of the branch or loop body")
    specs, flat, flat_growing = [], [], {}
    for index, (name, value) in enumerate(zip(info.names, state)):
        leaves, spec = pytree.tree_flatten(value)
        if not leaves or not all(isinstance(leaf, torch.Tensor) for leaf in leaves):
            fail(f"{info.kind}: loop variable {name!r} ({type(value).__name__}) is carried by a loop whose state grows",
                 info, "carry tensors (or lists and tuples of tensors) only in a loop that grows a tensor")
        axes = growing.get(index, ())
        for leaf in range(len(leaves)):
            leaf_axes = axes.get(leaf, ()) if isinstance(axes, dict) else axes
            if leaf_axes:
                flat_growing[len(flat) + leaf] = tuple(leaf_axes)
        specs.append(spec)
        flat.extend(leaves)
    trees = any(not isinstance(v, torch.Tensor) for v in state)
    free = list(free) + ([as_int64(rng.stop)] if rng is not None else [])
    inputs, spec = free_inputs(free, flat, flat_growing)
    modules = modules_of(free)
    module_tensors = tensors_of_modules(modules)
    key = f"grown_loop_{next(_KEYS)}"
    loop = GrownLoop(key, info, body_fn, test_fn, rng.step if rng is not None else None, spec, flat_growing, modules,
                     item_from_rows, strategy(), disabled(), specs if trees else None, bounds=_int_bounds(rng))
    counter = as_int64(rng.start) if rng is not None else None
    entry_free = loop.free_values(inputs, flat + inputs)
    keep = loop.keep_going(counter, tuple(state), entry_free)
    register(loop)
    operands = [keep] + ([counter] if counter is not None else []) + [dense(t) for t in flat] + inputs + module_tensors
    final = loop.unflatten(grown_loop_op(operands, key))
    grows = ", ".join(f"{loop.leaf_name(i)} (axis {', '.join(map(str, axes))})" for i, axes in sorted(flat_growing.items())) \
        or "none here, a loop in its body grows its own"
    record(info, f"{info.kind}-to-while_loop", f"ONNX Loop whose carried values grow: {grows}; carries "
           f"{', '.join(info.names)}", lowering="ONNX Loop around the exported body (carried shapes change)",
           carried=list(info.names), grows=grows, least_trips=rng.least_trips() if rng is not None and test_fn is None else 0)
    return tuple(final)


def _int_bounds(rng) -> tuple | None:
    """``(start, stop)`` of a counting-up range whose ends are Python ints (a symbolic size of
    the outer capture means nothing in the body captured on its own), else None."""
    if rng is None or rng.step <= 0:
        return None
    ends = (rng.start, rng.stop)
    return ends if all(isinstance(v, int) and not isinstance(v, bool) for v in ends) else None


def modules_of(free):
    """``(module, names)`` for the modules among the values the body reads, and those the
    closures of the functions it reads hold; each module and each tensor once."""
    seen, found = set(), []
    held = [module for value in free for module in closure_modules(value)]  # read through a function's closure
    for value in list(free) + held:
        if not isinstance(value, torch.nn.Module) or any(value is module for module, _ in found):
            continue
        names = []
        for name, tensor in itertools.chain(value.named_parameters(remove_duplicate=False),
                                            value.named_buffers(remove_duplicate=False)):
            if id(tensor) not in seen:
                seen.add(id(tensor))
                names.append(name)
        found.append((value, names))
    return found


def tensors_of_modules(modules) -> list:
    """The parameters and buffers of ``modules`` (:func:`modules_of`), in the op's input order."""
    return [t for module, names in modules for t in _tensors_of(module, names)]


def _tensors_of(module, names):
    return [_lookup(module, name) for name in names]


def _lookup(module, name):
    *path, leaf = name.split(".")
    for part in path:
        module = getattr(module, part)
    return getattr(module, leaf)
