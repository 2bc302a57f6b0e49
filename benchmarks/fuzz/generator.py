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

State that grows (issue 26): a tensor grown by ``torch.cat`` along axis 0 or 1 — one or more
rows/columns a step, pieces sliced by the loop counter (``g[:, :i + 1]``), growth inside a
branch of the body, a second tensor growing along the other axis, the grown tensor read back
sliced by the counter — in ``for i in range(int(n))`` loops with ``break`` and in ``while``
loops on a tensor condition, as a statement or returned (an output whose length the loop
decides); and lists appended to in such loops, indexed (``parts[-1]``, ``parts[i]``) and
measured with ``len()`` inside and after the loop, stacked or concatenated.

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
    if depth == 0:  # a loop whose state grows (not nested: fxport refuses that, documented)
        kinds += ["grown"]
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
    if kind == "grown":
        return draw(grown_tensor_loop(scope, final=False))
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


#: Pieces a grown tensor takes per step, by the axis it grows along (``{b}`` an operand, ``{upto}``
#: the loop counter + 1): one or more rows/columns, a slice by the loop counter (a different
#: size each step), a reduction, and a function of the grown tensor's own last entry.
GROWN_PIECES = {
    1: ["{b}[:, :1]", "{b}[:, 1:3]", "{b}.sum(dim=-1, keepdim=True)", "{b}[:, :{upto}]",
        "torch.tanh(acc[:, -1:])"],
    0: ["{b}[:1]", "{b}", "{b}.mean(dim=0, keepdim=True)", "{b}[:{upto}]", "torch.tanh(acc[-1:])"],
}
#: What a grown tensor starts as, by axis: a copy, like every variable (an in-place write into
#: ``h`` in the body would change an ``acc`` that is a view of it until ``acc`` is rebound: the
#: aliasing fxport documents as not carried, docs/control-flow.md "Limitations").
GROWN_STARTS = {1: ["{a}[:, :1].clone()", "{a}.clone()", "{a}[:, :0].clone()"], 0: ["{a}.clone()", "{a}[:1].clone()"]}


def _grown_loop_header(draw, loop: str, scope: "Scope") -> tuple[list[str], list[str]]:
    """The header of a grown-state loop and its body's first lines: ``for i in range(int(n))``,
    or a ``while`` on a counter below ``n`` and a drawn tensor predicate (counter stepped first)."""
    if loop == "for":
        return ["for i in range(int(n)):"], []
    return (["k = torch.zeros((), dtype=torch.int64)", f"while (k < n) and ({draw(predicate(scope))}):"],
            ["k = k + 1"])


@st.composite
def grown_tensor_loop(draw, scope: Scope, final: bool) -> list[str]:
    """A loop whose carried tensor ``acc`` grows by ``torch.cat`` along axis 0 or 1 (issue 26).

    A ``for i in range(int(n))`` loop with a ``break`` under a tensor condition, or a ``while``
    loop on a counter and a tensor condition; one or more rows/columns per step, pieces sliced by
    the loop counter (``g[:, :i + 1]``), growth inside a branch of the body, a second tensor
    growing along the other axis, the grown tensor read back sliced by the counter, and other
    statements in the body. ``final``: the program returns the grown tensor (its length is the
    trip count the loop decided); otherwise it is folded into ``h`` and the program goes on.
    """
    dim = draw(st.sampled_from([1, 0]))
    loop = draw(st.sampled_from(["for", "while"]))
    a = draw(operand(scope))
    upto = "i + 1" if loop == "for" else "k"  # the while counter moves first: k >= 1 in the body

    def piece(choices: list[str]) -> str:
        return draw(st.sampled_from(choices)).format(b=draw(operand(scope)), upto=upto)

    def grow(in_branch: bool = False) -> str:
        # in a branch, no piece sliced by the counter or read from acc itself: fxport refuses
        # those there (docs/reliability.md), and a refused program tests nothing further
        choices = GROWN_PIECES[dim][:3] if in_branch else GROWN_PIECES[dim]
        pieces = [piece(choices) for _ in range(draw(st.integers(1, 2)))]  # one or two pieces a step
        return f"acc = torch.cat([acc, {', '.join(pieces)}], {dim})"

    where = draw(st.sampled_from(["plain", "plain", "branch", "branch_else"]))
    # no empty start for growth in a branch: fxport refuses that body (docs/reliability.md)
    starts = GROWN_STARTS[dim] if where == "plain" else [s for s in GROWN_STARTS[dim] if ":0]" not in s]
    lines = [f"acc = {draw(st.sampled_from(starts)).format(a=a)}"]
    second = draw(st.booleans())  # a second tensor growing along the other axis
    if second:
        lines.append(f"rows = {draw(operand(scope))}[:, :1].clone()" if dim == 0
                     else f"rows = {draw(operand(scope))}[:1].clone()")
    header, body = _grown_loop_header(draw, loop, scope)
    lines += header
    b = draw(operand(scope))
    body.append(f"{b} = torch.tanh({b}) * 0.9 + {draw(operand(scope))} * 0.1")
    if draw(st.booleans()):  # other statements (branches, in-place writes, loops) in the body
        body += draw(block(scope, MAX_DEPTH - 1, True))
    if where == "plain":
        body.append(grow())
    else:  # growth inside a branch of the body (the branches may grow by different sizes)
        body += [f"if {draw(predicate(scope))}:", f"    {grow(in_branch=True)}"]
        if where == "branch_else":
            body += ["else:", f"    {grow(in_branch=True)}"]
    if second:
        other = 1 - dim
        grown = draw(st.sampled_from(GROWN_PIECES[other][:3]))
        body.append(f"rows = torch.cat([rows, {grown.format(b=draw(operand(scope)), upto=upto)}], {other})")
    if draw(st.booleans()):  # the grown tensor read back, sliced by the loop counter
        read = f"acc[:, :{upto}].sum(dim=-1, keepdim=True)" if dim == 1 else f"acc[:{upto}].sum(dim=0)"
        body.append(f"{draw(operand(scope))} = {draw(operand(scope))} + {read} * 0.1")
    if loop == "for" or draw(st.booleans()):
        body += [f"if {draw(predicate(scope))}:", "    break"]
    lines += indent(body)
    extra = ", rows" if second else ""
    if not final:  # the sums keep (batch, 4), also for an acc of no columns
        folds = {1: "sum(dim=-1, keepdim=True)", 0: "sum(dim=0)"}
        lines.append(f"h = h + acc.{folds[dim]} * 0.1")
        return lines + ([f"g = g + rows.{folds[1 - dim]} * 0.1"] if second else [])
    reduce = "acc.sum(dim=-1) + g.sum(dim=-1)" if dim == 1 else "acc.sum(dim=0) + g.sum(dim=0)"
    return lines + [draw(st.sampled_from([f"return acc{extra}", f"return acc, (h + g).sum(dim=-1) + steps{extra}",
                                          f"return {reduce}{extra}"]))]


@st.composite
def grown_list_loop(draw, scope: Scope) -> list[str]:
    """A list appended to in a data-dependent loop, used as a list (issue 26): indexed
    (``parts[-1]``, ``parts[i]``) and measured with ``len()`` inside and after the loop, stacked
    or concatenated (the output's length is the loop's trip count).

    fxport converts indexing after the loop and refuses, in one line, indexing inside the loop
    and ``len()`` (documented): each program has at most one such use, in one of three.
    """
    loop = draw(st.sampled_from(["for", "while"]))
    a = draw(operand(scope))
    upto = "i + 1" if loop == "for" else "k"
    element = draw(st.sampled_from(["same", "same", "prefix"]))  # prefix: a different size each step
    uses = ["none"] * 5 + ["len_after", "len_break", "len_inside"]
    if element == "same":  # a list of prefixes is only concatenated
        uses += ["parts[-1]"] + (["parts[i]"] if loop == "for" else [])
    use = draw(st.sampled_from(uses))
    lines = [f"parts = [{a}]" if element == "same" else f"parts = [{a}[:, :1]]"]
    header, body = _grown_loop_header(draw, loop, scope)
    lines += header
    if use.startswith("parts["):  # the list indexed inside the loop
        body.append(f"{a} = {a} + {use} * 0.5")
    elif use == "len_inside":
        body.append(f"{a} = {a} * 0.5 + len(parts) * 0.1")
    body.append(f"{a} = torch.tanh({a}) * 0.9 + {draw(operand(scope))} * 0.1")
    body.append(f"parts.append({a})" if element == "same" else f"parts.append({a}[:, :{upto}])")
    if use == "len_break":
        body += [f"if len(parts) > {draw(st.integers(1, 3))}:", "    break"]
    elif draw(st.booleans()):
        body += [f"if {draw(predicate(scope))}:", "    break"]
    lines += indent(body)
    if use == "len_after":
        result = ("torch.cat(parts, dim=1).sum(dim=-1) + len(parts)" if element == "prefix"
                  else "torch.stack(parts).sum(dim=0) * len(parts)")
    elif element == "prefix":
        result = "torch.cat(parts, dim=1)"
    else:
        result = draw(st.sampled_from(["torch.stack(parts)", "parts[-1] + parts[0]", "torch.cat(parts, dim=1)",
                                       "torch.stack(parts)[-1] - g"]))
    return lines + [f"return {result}"]


@st.composite
def epilogue(draw, scope: Scope) -> list[str]:
    """Optionally a list-append loop, a buffer write loop, or an early return; then the return."""
    kind = draw(st.sampled_from(["plain", "append", "buffer", "early_return", "append_while", "buffer_while",
                                 "grown", "grown", "grown_list"]))
    if kind == "grown":  # the output is the grown tensor: its length is what the loop decided
        return draw(grown_tensor_loop(scope, final=True))
    if kind == "grown_list":
        return draw(grown_list_loop(scope))
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
