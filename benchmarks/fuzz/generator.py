"""Random small nn.Modules with tensor-dependent control flow, drawn with hypothesis.

A program is a module whose ``forward(self, x, n)`` takes a float tensor ``x`` of shape
``(batch, 4)`` (batch dynamic) and an int64 scalar ``n`` (a trip count), and mixes
tensor-conditioned if/elif/else, while loops on counters and on tensor conditions, for loops
with data-dependent, dynamic and static trip counts, break/continue/return inside loops,
nesting (loops in loops, branches in loops), list append + stack (also in while loops on a
tensor condition, stacked or concatenated), buffer and column writes (also at the index of a
data-dependent while loop), in-place writes (methods and their function forms, masked and
augmented subscript assignment, ``index_add_``, writes through a view), a Python int counted
through branches and loops, reductions, elementwise math that can yield inf/nan on an untaken
path, and calls into submodules (a Linear, and a user module with its own data-dependent
branch).

Programs are drawn from hypothesis strategies, so a failing program shrinks to a minimal one.
Their source is real Python written to a file, because fxport converts the model's own source.

Example::

    >>> from hypothesis import given
    >>> @given(programs())                        # doctest: +SKIP
    ... def test(program): print(program.source)
"""

from __future__ import annotations

import dataclasses
import textwrap

from hypothesis import strategies as st

#: Every variable in a program is a float tensor of shape (batch, 4).
FEATURES = 4
MAX_DEPTH = 2

CONSTANTS = st.sampled_from(["0.0", "0.5", "-0.5", "1.0", "2.0", "-1.0"])
#: Predicate thresholds. Never 0.0: ``(h - h.mean(...)).sum() > 0.0`` compares rounding noise with
#: its exact value, and eager and ONNX Runtime legitimately round differently (a knife edge, not
#: a converter bug; the first CI campaign met one).
THRESHOLDS = st.sampled_from(["0.1", "0.5", "-0.5", "1.0", "2.0", "-1.0", "-0.1"])


@dataclasses.dataclass
class Program:
    """A generated module: its source and the statements it was built from."""

    body: list[str]

    @property
    def source(self) -> str:
        forward = textwrap.indent("\n".join(self.body), " " * 8)
        return PROGRAM_TEMPLATE.format(forward=forward)


PROGRAM_TEMPLATE = '''import torch
from torch import nn


class Gate(nn.Module):
    """A user submodule with its own data-dependent branch and early return."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(1.5))

    def forward(self, t):
        if t.mean() > 0.1:
            return t * self.scale
        return torch.tanh(t) - 0.5


class Fuzzed(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.lin = nn.Linear({features}, {features})
        self.gate = Gate()
        self.register_buffer("threshold", torch.tensor(0.25))

    def forward(self, x, n):
        h = x.clone()
        g = torch.tanh(x)
        steps = 0
{{forward}}
'''.format(features=FEATURES)


class Scope:
    """The variables a statement may read and write (all float (batch, 4) tensors).

    None of them aliases the input or another one (every expression makes a new tensor), so
    an in-place write changes exactly the variable written (or, through a view, its base).
    """

    def __init__(self, names: list[str]):
        self.names = list(names)


@st.composite
def operand(draw, scope: Scope) -> str:
    return draw(st.sampled_from(scope.names))


@st.composite
def expression(draw, scope: Scope) -> str:
    """An elementwise/reduction expression producing a (batch, 4) float tensor."""
    a = draw(operand(scope))
    b = draw(operand(scope))
    c = draw(CONSTANTS)
    return draw(st.sampled_from([
        f"torch.tanh({a}) + {b}",
        f"{a} * {c} + {b}",
        f"torch.relu({a}) - {b} * {c}",
        f"self.lin({a})",
        f"self.gate({a})",
        f"{a} - {a}.mean(dim=-1, keepdim=True)",
        f"torch.log({a})",                    # NaN for negative values: must not leak
        f"torch.exp({a} * 40.0)",             # overflows to inf on large values
        f"{a} / ({b}.abs().sum(dim=-1, keepdim=True) + 1.0)",
        f"torch.sqrt({a}) * {c}",             # NaN for negatives
        f"torch.maximum({a}, {b})",
    ]))


@st.composite
def predicate(draw, scope: Scope) -> str:
    """A condition on tensor values (or a dynamic dimension)."""
    a = draw(operand(scope))
    b = draw(operand(scope))
    c = draw(THRESHOLDS)
    simple = [
        f"{a}.sum() > {c}",
        f"{a}.mean() < {c}",
        f"({a} > {c}).any()",
        f"({a} < 2.0).all()",
        f"{a}.max() > {b}.min()",
        f"{a}.sum().item() > {c}",
        f"{a}.abs().mean() > self.threshold",
        f"{a}.shape[0] > 3",
    ]
    base = draw(st.sampled_from(simple))
    combine = draw(st.sampled_from(["", "and", "or", "not"]))
    if combine == "not":
        return f"not ({base})"
    if combine:
        return f"({base}) {combine} ({draw(st.sampled_from(simple))})"
    return base


@st.composite
def block(draw, scope: Scope, depth: int, in_loop: bool) -> list[str]:
    count = draw(st.integers(1, 2))
    lines: list[str] = []
    for _ in range(count):
        lines += draw(statement(scope, depth, in_loop))
    return lines


def indent(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


@st.composite
def statement(draw, scope: Scope, depth: int = 0, in_loop: bool = False) -> list[str]:
    """One statement (possibly compound). Only existing variables are reassigned in blocks."""
    kinds = ["assign", "assign", "write_column", "count", "in_place", "in_place"]
    if depth < MAX_DEPTH:
        kinds += ["if", "if_else", "elif", "for_n", "while_n", "while_cond", "for_dim", "for_static"]
    if in_loop:
        kinds += ["break", "continue", "return"]
    kind = draw(st.sampled_from(kinds))
    target = draw(operand(scope))
    if kind == "assign":
        return [f"{target} = {draw(expression(scope))}"]
    if kind == "write_column":  # an in-place write into a local tensor (a copy: never the input)
        column = draw(st.integers(0, FEATURES - 1))
        return [f"{target} = {target}.clone()", f"{target}[:, {column}] = ({draw(expression(scope))})[:, 0]"]
    if kind == "in_place":  # mutation is state: the write must survive the branch or loop
        return draw(in_place_write(scope, target))
    if kind == "count":  # a Python int carried through branches and loops
        return ["steps = steps + 1"]
    if kind in ("break", "continue"):
        return [f"if {draw(predicate(scope))}:", f"    {kind}"]
    if kind == "return":  # early return from inside a loop
        return [f"if {draw(predicate(scope))}:", f"    return ({target} * 2.0).sum(dim=-1) + steps"]
    if kind == "if":
        return [f"if {draw(predicate(scope))}:", *indent(draw(block(scope, depth + 1, in_loop)))]
    if kind == "if_else":
        return [f"if {draw(predicate(scope))}:", *indent(draw(block(scope, depth + 1, in_loop))),
                "else:", *indent(draw(block(scope, depth + 1, in_loop)))]
    if kind == "elif":
        return [f"if {draw(predicate(scope))}:", *indent(draw(block(scope, depth + 1, in_loop))),
                f"elif {draw(predicate(scope))}:", *indent(draw(block(scope, depth + 1, in_loop))),
                "else:", *indent(draw(block(scope, depth + 1, in_loop)))]
    body = draw(block(scope, depth + 1, True))
    if kind == "for_n":
        uses_index = [f"{target} = {target} + 0.1 * i"] if draw(st.booleans()) else []
        return ["for i in range(int(n)):", *indent(uses_index + body)]
    if kind == "for_dim":
        return ["for i in range(x.shape[0]):", *indent(body)]
    if kind == "for_static":  # a Python trip count: unrolled, with tensor control flow inside
        return ["for i in range(2):", *indent(body)]
    # the counter moves first, so a `continue` in the body cannot make the loop endless; each
    # nesting depth has its own counter
    counter = f"k{depth}"
    test = f"{counter} < n" if kind == "while_n" else f"({counter} < n + 2) and ({draw(predicate(scope))})"
    return [f"{counter} = torch.zeros((), dtype=torch.int64)", f"while {test}:",
            *indent([f"{counter} = {counter} + 1"] + body)]


@st.composite
def in_place_write(draw, scope: Scope, target: str) -> list[str]:
    """An in-place write into ``target`` (never an input: every variable is a fresh tensor)."""
    c = draw(CONSTANTS)
    t = draw(THRESHOLDS)
    column = draw(st.integers(0, FEATURES - 1))
    low = draw(st.integers(0, FEATURES - 2))
    high = draw(st.integers(low + 1, FEATURES))
    return draw(st.sampled_from([
        [f"{target}.mul_({c})"],
        [f"{target}.add_({draw(expression(scope))})"],
        [f"torch.relu_({target})"],
        [f"{target}.masked_fill_({target} > {t}, {c})"],
        [f"{target}.clamp_(min=-1.0, max={t})"],
        [f"{target}.copy_({draw(expression(scope))})"],
        [f"{target}[{target} < {t}] = {c}"],                       # masked assignment
        [f"{target}[:, {column}] += {c}"],                         # augmented subscript assignment
        [f"{target}.index_add_(1, torch.tensor([{low}, {high - 1}]), ({draw(expression(scope))})[:, :2])"],
        [f"view = {target}[:, {low}:{high}]", f"view.mul_({c})"],  # a write through a view of it
    ]))


@st.composite
def epilogue(draw, scope: Scope) -> list[str]:
    """Optionally a list-append loop, a buffer write loop, or an early return; then the return."""
    kind = draw(st.sampled_from(["plain", "append", "buffer", "early_return", "append_while", "buffer_while"]))
    a = draw(operand(scope))
    if kind == "append_while":  # a list grown in a loop on a tensor condition
        combine = draw(st.sampled_from(["torch.stack(outs).sum(dim=0)", "torch.cat(outs).sum()"]))
        return ["outs = [h.sum(dim=-1)]", "k = torch.zeros((), dtype=torch.int64)",
                f"while (k < n) and ({draw(predicate(scope))}):", "    k = k + 1",
                f"    {a} = torch.tanh({a}) * 0.9", f"    outs.append({a}.sum(dim=-1))",
                f"return {combine} + g.sum(dim=-1)"]
    if kind == "buffer_while":  # writes into a buffer at the index of a data-dependent loop
        return ["buf = torch.zeros(6, x.shape[0])", "k = torch.zeros((), dtype=torch.int64)",
                f"while (k < n) and ({draw(predicate(scope))}):", f"    {a} = {a} * 0.5 + 1.0",
                f"    buf[k] = {a}.sum(dim=-1)", "    k = k + 1", "return buf.sum(dim=0) + g.sum(dim=-1)"]
    if kind == "append":
        return ["outs = []", "for i in range(int(n) + 1):", f"    {a} = torch.tanh({a}) * 0.9",
                f"    outs.append({a}.sum(dim=-1))", "return torch.stack(outs).sum(dim=0) + h.sum(dim=-1)"]
    if kind == "buffer":
        return ["buf = torch.zeros(6, x.shape[0])", "for i in range(int(n)):",
                f"    {a} = {a} * 0.5 + 1.0", f"    buf[i] = {a}.sum(dim=-1)", "return buf.sum(dim=0) + g.sum(dim=-1)"]
    if kind == "early_return":
        return [f"if {draw(predicate(scope))}:", f"    return ({a} * 2.0).sum(dim=-1)",
                "return (h + g).sum(dim=-1)"]
    return ["return (h + g).sum(dim=-1) + steps"]


@st.composite
def programs(draw) -> Program:
    """A random program: 1–4 top-level statements and an epilogue."""
    scope = Scope(["h", "g"])
    body: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        body += draw(statement(scope))
    body += draw(epilogue(scope))
    return Program(body)
