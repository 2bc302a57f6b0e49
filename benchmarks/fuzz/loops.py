"""A differential fuzzer for decoding and search loops (issue 47, Deliver item 4).

Beside the general fuzzer (``benchmarks/fuzz/generator.py``), this one draws programs from a
grammar of the loops people write around language models and in search code:

- **decode** programs, ``forward(self, tokens, n)`` with ``tokens`` int64 ``(batch, length)`` (both
  dynamic) and ``n`` an int64 scalar (the most new tokens), built from one choice per axis:

  - *cache*: ``none`` (attention over the prompt only), ``cat`` (keys and values grown by
    ``torch.cat``), ``layers`` (a list of per-layer ``(k, v)`` pairs, each grown by ``cat``),
    ``slice`` (a static buffer written at a traced position, ``kc[:, pos:pos + 1] = k``),
    ``index`` (a static buffer written ``kb[pos] = k``);
  - *stop*: ``break_first`` (``if finished.all(): break`` first in the body), ``break_last`` (the
    same last in the body), ``while_test`` (``while step < n and not finished.all():``), ``mask``
    (a finished mask, no break), ``bound`` (the counter bound only);
  - *counter*: ``int`` (``for step in range(int(n))`` or a Python int ``step += 1``) or ``tensor``
    (a 0-d int64 tensor ``step = step + 1``), in a ``for`` or a ``while`` header;
  - *output*: ``list`` (appended, then ``torch.stack`` / ``torch.cat``), ``cat`` (the token
    sequence grown by ``torch.cat``), ``buffer`` (a preallocated buffer written at the counter,
    plus a length);
  - *nested*: an inner loop over the prompt's (dynamic) length in the body.

  The next token is ``argmax(0.1 · proj(attention) + 10 · one_hot(last - 1))``: the ids count
  down to 0 (EOS) from each row's last prompt token whatever the attention gives (no argmax
  ties), while the float outputs carry the attention through the cache. So the input sets below
  choose the exits: 0, 1, 2, N trips, a break when every row finished, the bound, both at once.

- **search** programs, ``forward(self, tokens, n)`` with ``tokens`` int64 ``(length,)``: NMS-style
  state that SHRINKS (``order = order[1:][sim[i, order[1:]] <= 0.5]``) down to empty, with a
  ``while order.numel() > 0`` test, a counter bound, ``if order.numel() == 0: break`` first or
  ``if order.numel() == 1: break`` in the body, outputs in a list, grown by ``cat`` or written to
  a buffer, and optionally an inner loop over the shrinking state's length.

Each program is written to a file (fxport converts the model's own source), converted with
``fxport.convert(..., dynamic_shapes=...)`` from one example, and then compared eager vs ONNX
Runtime (:func:`fxport.testing.compare_with_eager`) on held-out input sets that take each exit.
Verdicts:

============  ==========================================================================
``equal``     converted, and ONNX Runtime equals eager on every held-out set
``refused``   a ConversionError with a user location (grouped by message class); a
              ``VerificationError`` is a refusal too, but counted apart ("caught by
              verification": the conversion was wrong and fxport saw it)
``wrong``     fxport said verified, and the file differs from eager, or fails in ONNX
              Runtime, on a held-out set — a BUG
``internal``  an exception that is not a ConversionError, a ConversionError that says
              "torch.export failed:" or names an internal exception type, or one with no
              user location — a BUG class too
``invalid``   the program fails eagerly by itself (a generator defect)
============  ==========================================================================

Usage::

    python3 -m benchmarks.fuzz.loops --programs 40 --seed 0       # the CI profile
    python3 -m benchmarks.fuzz --loops 300 --seed 1               # the same, from the main entry

Programs are drawn with ``random.Random`` from (seed, index), so a program is named by those
two numbers (``--only SEED:INDEX`` reruns one). A program that found a bug is kept under
``tests/fuzz_regressions/loops/`` (``--keep``), which ``tests/test_fuzz_loops.py`` re-checks.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import json
import os
import random
import re
import sys
import tempfile
import time
import traceback

import torch

#: Vocabulary, width, and the most steps a program runs (``n`` is clamped to it).
VOCAB, WIDTH, MAX_NEW = 6, 4, 6

CACHES = ("none", "cat", "layers", "slice", "index")
STOPS = ("break_first", "break_last", "while_test", "mask", "bound")
COUNTERS = ("int", "tensor")
HEADERS = ("for", "while")
OUTPUTS = ("list", "cat", "buffer")

SEARCH_STOPS = ("while_numel", "counter_and_numel", "break_empty_first", "break_one_last")
SEARCH_OUTPUTS = ("list", "cat", "buffer")

REGRESSIONS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           "tests", "fuzz_regressions", "loops")

HEADER = '''import torch
import torch.nn.functional as F
from torch import nn

FAMILY = "{family}"
# choices: {choices}


class Fuzzed(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding({vocab}, {width})
        self.wq = nn.Linear({width}, {width})
        self.wk = nn.ModuleList([nn.Linear({width}, {width}) for _ in range(2)])
        self.wv = nn.ModuleList([nn.Linear({width}, {width}) for _ in range(2)])
        self.proj = nn.Linear({width}, {vocab})
        self.score = nn.Linear({width}, 1)

    def forward(self, tokens, n):
'''


@dataclasses.dataclass
class LoopProgram:
    """A generated program: its family, the grammar choices it was drawn with, and its source."""

    family: str
    choices: dict
    source: str

    @property
    def digest(self) -> str:
        return hashlib.sha1(self.source.encode()).hexdigest()[:12]


class Lines:
    """Source lines at an indentation level (``with lines.block(): ...``)."""

    def __init__(self, indent: int = 2):
        self.lines: list[str] = []
        self.indent = indent

    def __call__(self, *texts: str) -> None:
        for text in texts:
            self.lines.append("    " * self.indent + text)

    def block(self):
        lines = self

        class _Block:
            def __enter__(self):
                lines.indent += 1

            def __exit__(self, *exc):
                lines.indent -= 1

        return _Block()


def draw(seed: int, index: int) -> LoopProgram:
    """The program number ``index`` of campaign ``seed`` (3 of 4 decode, 1 of 4 search)."""
    rng = random.Random(seed * 1_000_003 + index)
    if rng.random() < 0.25:
        return search_program({
            "stop": rng.choice(SEARCH_STOPS), "counter": rng.choice(COUNTERS),
            "output": rng.choice(SEARCH_OUTPUTS), "nested": rng.random() < 0.3,
        })
    stop = rng.choice(STOPS)
    return decode_program({
        "cache": rng.choice(CACHES), "stop": stop, "counter": rng.choice(COUNTERS),
        "header": "while" if stop == "while_test" else rng.choice(HEADERS),
        "output": rng.choice(OUTPUTS), "stack": rng.choice(("stack", "cat")),
        "nested": rng.random() < 0.25, "score_out": rng.random() < 0.5,
    })


def _render(family: str, choices: dict, lines: Lines) -> LoopProgram:
    source = HEADER.format(family=family, choices=json.dumps(choices, sort_keys=True), vocab=VOCAB,
                           width=WIDTH) + "\n".join(lines.lines) + "\n"
    return LoopProgram(family, dict(choices), source)


def decode_program(c: dict) -> LoopProgram:
    """A greedy decoding loop built from the grammar choices ``c`` (see the module docstring)."""
    cache, stop, counter, header, output = c["cache"], c["stop"], c["counter"], c["header"], c["output"]
    finished_used = stop != "bound"
    s = Lines()
    s(f"n = n.clamp(0, {MAX_NEW})",
      "batch, length = tokens.shape",
      "h = self.emb(tokens)",
      "last = tokens[:, -1]",
      "ctx = h.mean(1)")
    if cache in ("none", "cat"):
        s("kc = self.wk[0](h)", "vc = self.wv[0](h)")
    elif cache == "layers":
        s("caches = [(self.wk[0](h), self.wv[0](h)), (self.wk[1](h), self.wv[1](h))]")
    elif cache == "slice":
        s(f"kc = torch.zeros(batch, length + {MAX_NEW}, {WIDTH})",
          f"vc = torch.zeros(batch, length + {MAX_NEW}, {WIDTH})",
          "kc[:, :length] = self.wk[0](h)",
          "vc[:, :length] = self.wv[0](h)")
    else:  # index
        s(f"kb = torch.zeros(length + {MAX_NEW}, batch, {WIDTH})",
          f"vb = torch.zeros(length + {MAX_NEW}, batch, {WIDTH})",
          "kb[:length] = self.wk[0](h).transpose(0, 1)",
          "vb[:length] = self.wv[0](h).transpose(0, 1)")
    if finished_used:
        s("finished = torch.zeros(batch, dtype=torch.bool)")
    if output == "list":
        if c["stack"] == "stack":
            s("toks = [last]", "scores = [torch.zeros(batch)]")
        else:
            s("toks = [last[:, None]]", "scores = [torch.zeros(batch, 1)]")
    elif output == "cat":
        s("seq = tokens.clone()", "total = torch.zeros(batch)")
    else:
        s(f"out = torch.zeros(batch, {MAX_NEW}, dtype=torch.int64)", "count = torch.zeros((), dtype=torch.int64)",
          "total = torch.zeros(batch)")
    # the loop header; ``step`` counts the steps taken so far in every variant
    if header == "for" and counter == "int":
        s("for step in range(int(n)):")
    else:
        s("step = 0" if counter == "int" else "step = torch.zeros((), dtype=torch.int64)")
        if header == "for":
            s("for _ in range(int(n)):")
        elif stop == "while_test":
            s("while step < n and not finished.all():")
        else:
            s("while step < n:")
    with s.block():
        if stop == "break_first":
            s("if finished.all():")
            with s.block():
                s("break")
        s("x = self.emb(last)", "q = self.wq(x)")
        if c["nested"]:
            s("acc = torch.zeros_like(q)", "for j in range(h.shape[1]):")
            with s.block():
                s("acc = acc + torch.tanh(h[:, j] * q)")
            s("q = q + 0.1 * acc")
        if cache in ("slice", "index"):
            s("pos = length + step")
        masked = False
        if cache == "none":
            s("keys, values = kc, vc")
        elif cache == "cat":
            s("kc = torch.cat([kc, self.wk[0](x)[:, None]], 1)",
              "vc = torch.cat([vc, self.wv[0](x)[:, None]], 1)",
              "keys, values = kc, vc")
        elif cache == "layers":
            s("new = []", "for i in range(2):")
            with s.block():
                s("k, v = caches[i]",
                  "new.append((torch.cat([k, self.wk[i](x)[:, None]], 1), torch.cat([v, self.wv[i](x)[:, None]], 1)))")
            s("caches = new", "keys = caches[0][0] + caches[1][0]", "values = caches[0][1] + caches[1][1]")
        elif cache == "slice":
            s("kc[:, pos:pos + 1] = self.wk[0](x)[:, None]",
              "vc[:, pos:pos + 1] = self.wv[0](x)[:, None]",
              "keys, values = kc, vc")
            masked = True
        else:
            s("kb[pos] = self.wk[0](x)", "vb[pos] = self.wv[0](x)",
              "keys, values = kb.transpose(0, 1), vb.transpose(0, 1)")
            masked = True
        s("att = (keys * q[:, None]).sum(-1) * 0.5")
        if masked:
            s("att = att.masked_fill(torch.arange(keys.shape[1]) > pos, float('-inf'))")
        s("att = torch.softmax(att, -1)",
          "ctx = (att[..., None] * values).sum(1)",
          f"logits = self.proj(ctx) * 0.1 + 10.0 * F.one_hot((last - 1).clamp(min=0), {VOCAB})",
          "nxt = logits.argmax(-1)")
        if finished_used:
            s("nxt = torch.where(finished, torch.zeros_like(nxt), nxt)", "finished = finished | (nxt == 0)")
        s("score = torch.log_softmax(logits, -1).max(-1).values")
        if output == "list":
            if c["stack"] == "stack":
                s("toks.append(nxt)", "scores.append(score)")
            else:
                s("toks.append(nxt[:, None])", "scores.append(score[:, None])")
        elif output == "cat":
            s("seq = torch.cat([seq, nxt[:, None]], 1)", "total = total + score")
        else:
            s("out[:, count] = nxt", "count = count + 1", "total = total + score")
        s("last = nxt")
        if not (header == "for" and counter == "int"):
            s("step += 1" if counter == "int" else "step = step + 1")
        if stop == "break_last":
            s("if finished.all():")
            with s.block():
                s("break")
    if output == "list":
        results = (["torch.stack(toks, 1)", "torch.stack(scores, 1)"] if c["stack"] == "stack"
                   else ["torch.cat(toks, 1)", "torch.cat(scores, 1)"])
    elif output == "cat":
        results = ["seq", "total"]
    else:
        results = ["out", "count", "total"]
    if not c["score_out"]:
        results = [r for r in results if "scores" not in r and r != "total"]
    s("return " + ", ".join(results + ["ctx"]))
    return _render("decode", c, s)


def search_program(c: dict) -> LoopProgram:
    """An NMS-style search whose state shrinks (``order = order[1:][mask]``), possibly to empty."""
    stop, counter, output = c["stop"], c["counter"], c["output"]
    s = Lines()
    s(f"n = n.clamp(0, {MAX_NEW})",
      "x = self.emb(tokens)",
      "s = self.score(x).squeeze(-1) + torch.arange(tokens.shape[0]) * 0.01",
      "sim = torch.sigmoid(x @ x.T)",
      "order = s.argsort(descending=True)",
      "total = torch.zeros(())")
    bounded = stop in ("counter_and_numel", "break_empty_first")
    if output == "list":  # a bound of 0 runs no step: a sentinel keeps torch.stack's list non-empty
        s("keep = [torch.tensor(-1)]" if bounded else "keep = []")
    elif output == "cat":
        s("kept = order[:0]")
    else:
        s("buf = torch.full((tokens.shape[0],), -1, dtype=torch.int64)", "count = torch.zeros((), dtype=torch.int64)")
    if stop == "break_empty_first" and counter == "int":
        s("for step in range(int(n)):")
    else:
        if bounded:
            s("step = 0" if counter == "int" else "step = torch.zeros((), dtype=torch.int64)")
        if stop == "counter_and_numel":
            s("while step < n and order.numel() > 0:")
        elif stop == "break_empty_first":
            s("for _ in range(int(n)):")
        else:
            s("while order.numel() > 0:")
    with s.block():
        if stop == "break_empty_first":
            s("if order.numel() == 0:")
            with s.block():
                s("break")
        s("i = order[0]")
        if output == "list":
            s("keep.append(i)")
        elif output == "cat":
            s("kept = torch.cat([kept, order[:1]])")
        else:
            s("buf[count] = i", "count = count + 1")
        s("total = total + s[i]")
        if bounded and not (stop == "break_empty_first" and counter == "int"):
            s("step += 1" if counter == "int" else "step = step + 1")
        if stop == "break_one_last":
            s("if order.numel() == 1:")
            with s.block():
                s("break")
        s("rest = order[1:]", "order = rest[sim[i, rest] <= 0.5]")
        if c["nested"]:
            s("for j in range(order.shape[0]):")
            with s.block():
                s("total = total + 0.1 * s[order[j]]")
    result = {"list": "torch.stack(keep)", "cat": "kept", "buffer": "buf, count"}[output]
    s(f"return {result}, total, order")
    return _render("search", c, s)


def _decode_set(lasts: list[int], length: int, n: int, seed: int) -> tuple:
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(1, VOCAB, (len(lasts), length), generator=generator)
    tokens[:, -1] = torch.tensor(lasts)
    return tokens, torch.tensor(n)


#: The example the conversion sees: rows stop after 2 and 3 steps, bound 4 (leaves by a break).
DECODE_EXAMPLE = ([2, 3], 3, 4)
#: Held-out (last tokens, prompt length, n): each exit of a decode loop. A row whose last token
#: is k emits k-1, ..., 0 = EOS, so it finishes after k steps.
DECODE_HELD_OUT = [
    ([2, 3], 3, 0),          # 0 trips (bound 0)
    ([4], 1, 1),             # 1 trip, by the bound; batch 1, prompt 1
    ([5, 4, 5], 2, 2),       # 2 trips, by the bound; batch 3
    ([1, 1], 4, 5),          # every row finished after 1 step: the break (or test false) at 1
    ([2, 1], 5, 6),          # finished after 2 steps
    ([3], 2, 3),             # finished exactly at the bound
    ([5, 2, 3, 4], 3, 6),    # N = 5 steps, then finished; batch 4
    ([5, 5], 1, 6),          # 5 steps, prompt 1
    ([5, 5], 6, 6),          # the bound after 6 steps, prompt 6 (the longest cache)
]

#: Search sets are token sequences: equal tokens suppress each other (their similarity is
#: sigmoid(|e|²) > 0.5), so all-equal sequences empty the state after one step.
SEARCH_EXAMPLE = ([1, 2, 3, 4], 4)
SEARCH_HELD_OUT = [
    ([1, 2, 3, 4], 0),            # bound 0
    ([3], 6),                     # one item: state empty after 1 step (or the numel()==1 break)
    ([2, 2, 2], 6),               # all suppressed by the first: emptied after 1 step
    ([1, 5, 1, 5, 3], 6),         # a few survive each step
    ([4, 1, 0, 2, 3, 5], 2),      # the bound before the state empties
    ([1, 2, 3, 4, 0, 2], 6),      # longer
    ([0, 0], 1),                  # bound 1 and emptied at once
]


def input_sets(family: str) -> tuple[tuple, list[tuple]]:
    """(example, held-out sets) of ``family``."""
    if family == "decode":
        example = _decode_set(*DECODE_EXAMPLE, seed=0)
        held = [_decode_set(lasts, length, n, seed=i + 1) for i, (lasts, length, n) in enumerate(DECODE_HELD_OUT)]
        return example, held
    example = (torch.tensor(SEARCH_EXAMPLE[0]), torch.tensor(SEARCH_EXAMPLE[1]))
    return example, [(torch.tensor(t), torch.tensor(n)) for t, n in SEARCH_HELD_OUT]


def dynamic_shapes(family: str) -> dict:
    return {"tokens": {0: "batch", 1: "length"}} if family == "decode" else {"tokens": {0: "length"}}


@dataclasses.dataclass
class LoopOutcome:
    verdict: str          # equal | refused | wrong | internal | invalid
    kind: str = ""        # the message class (refused, internal) or what differed (wrong)
    message: str = ""
    source: str = ""
    seconds: float = 0.0
    name: str = ""        # "seed:index" or the file


#: Names of exception types whose appearance in a ConversionError's message means an internal
#: failure leaked through (not a one-line refusal at the user's code).
INTERNAL_NAMES = re.compile(
    r"torch\.export failed:|the ONNX exporter failed:|Internal\w*Error|\b(TypeError|AttributeError|KeyError|"
    r"IndexError|NameError|AssertionError|ValueError|RuntimeError|NotImplementedError|UnboundLocalError|"
    r"Unsupported|UserError|TorchRuntimeError|GuardOnDataDependentSymNode|PendingUnbackedSymbolNotFound|"
    r"UncapturedHigherOrderOpError|DataDependentOutputException|ConstraintViolationError|"
    r"FunctionalTensor)\b")


def classify_error(exc: BaseException, path: str) -> tuple[str, str, str]:
    """(verdict, kind, first line) of an exception ``fxport.convert`` raised on the file ``path``."""
    import fxport
    from benchmarks.fuzz.runner import error_kind

    if isinstance(exc, fxport.ConversionError):
        first = exc.message.splitlines()[0]
        name = type(exc).__name__
        if isinstance(exc, fxport.VerificationError):  # no user location: it judges the whole file
            return "refused", f"VerificationError (caught by verification): {error_kind(exc.what)}", first
        internal = INTERNAL_NAMES.search(exc.what)
        if internal:
            return "internal", f"{name}: {internal.group(0)} {error_kind(exc.what.split(internal.group(0), 1)[-1].strip())}"[:140], first
        if exc.where is None or os.path.basename(exc.where.filename) != os.path.basename(path):
            return "internal", f"{name} without the user's location: {error_kind(exc.what)}", first
        return "refused", f"{name}: {error_kind(exc.what)}", first
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[0]
    return "internal", f"{type(exc).__name__} (not a ConversionError)", text


def run_loop_file(path: str, timeout_s: int = 300) -> LoopOutcome:
    """Convert the program in ``path`` from its family's example, then compare eager and ONNX
    Runtime on the held-out sets."""
    import fxport
    from benchmarks.fuzz.runner import load_module, time_limit
    from fxport.testing import compare_with_eager
    from fxport.verify.compare import TOLERANCES

    with open(path) as handle:
        source = handle.read()
    start = time.perf_counter()

    def done(verdict, kind="", message=""):
        return LoopOutcome(verdict, kind, message, source, time.perf_counter() - start, os.path.basename(path))

    try:
        module = load_module(path)
        family = sys.modules[type(module).__module__].FAMILY
        example, held = input_sets(family)
        with torch.no_grad(), time_limit(timeout_s):
            for args in (example, *held):
                module(*[a.clone() for a in args])
    except Exception as exc:  # the program fails by itself: a generator defect
        return done("invalid", type(exc).__name__, f"{type(exc).__name__}: {exc}".splitlines()[0])
    try:
        with time_limit(timeout_s):
            result = fxport.convert(module, example, dynamic_shapes=dynamic_shapes(family), device="cpu")
    except TimeoutError as exc:
        return done("internal", "hang", str(exc))
    except Exception as exc:
        verdict, kind, message = classify_error(exc, path)
        return done(verdict, kind, message)
    atol, rtol = TOLERANCES[torch.float32]
    for index, args in enumerate(held):
        try:
            with time_limit(timeout_s):
                compare_with_eager(module, result.model, [a.clone() for a in args], atol=atol, rtol=rtol)
        except AssertionError as exc:
            line = str(exc).splitlines()[0] if str(exc) else "differs"
            ort_failed = "ONNX Runtime failed" in line
            kind = "fails in ONNX Runtime" if ort_failed else "differs from eager"
            shapes = " ".join("x".join(map(str, a.shape)) or f"n={int(a)}" for a in args)
            return done("wrong", kind, f"held-out set {index} ({shapes}): {line[:300]}")
        except TimeoutError as exc:
            return done("internal", "hang", str(exc))
    return done("equal")


def run_program(program: LoopProgram, directory: str, timeout_s: int = 300) -> LoopOutcome:
    path = os.path.join(directory, f"loopfuzz_{program.digest}.py")
    with open(path, "w") as handle:
        handle.write(program.source)
    return run_loop_file(path, timeout_s)


@dataclasses.dataclass
class LoopSummary:
    counts: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    kinds: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    #: the shortest program per (verdict, kind) — bugs and refusals both
    examples: dict = dataclasses.field(default_factory=dict)
    bugs: list = dataclasses.field(default_factory=list)
    #: per grammar choice ("cache=cat"), verdict counts
    by_choice: dict = dataclasses.field(default_factory=lambda: collections.defaultdict(collections.Counter))
    seconds: float = 0.0

    @property
    def tried(self) -> int:
        return sum(self.counts.values())

    def add(self, outcome: LoopOutcome, program: LoopProgram | None = None) -> None:
        self.counts[outcome.verdict] += 1
        self.seconds += outcome.seconds
        if outcome.verdict != "equal":
            key = f"{outcome.verdict}: {outcome.kind}"
            self.kinds[key] += 1
            known = self.examples.get(key)
            if known is None or len(outcome.source) < len(known.source):
                self.examples[key] = outcome
        if outcome.verdict in ("wrong", "internal"):
            self.bugs.append(outcome)
        if program is not None:
            self.by_choice[f"family={program.family}"][outcome.verdict] += 1
            for axis, value in program.choices.items():
                self.by_choice[f"{program.family}.{axis}={value}"][outcome.verdict] += 1


def campaign(programs: int, seed: int, keep: bool = False, progress=None, only: list[int] | None = None,
             timeout_s: int = 300, log: str | None = None) -> LoopSummary:
    """Run programs ``0 .. programs-1`` of campaign ``seed`` one at a time (or the indices ``only``)."""
    summary = LoopSummary()
    directory = tempfile.mkdtemp(prefix="fxport-loopfuzz-")
    for index in (only if only is not None else range(programs)):
        program = draw(seed, index)
        outcome = run_program(program, directory, timeout_s)
        outcome.name = f"{seed}:{index}"
        summary.add(outcome, program)
        if keep and outcome.verdict in ("wrong", "internal"):
            save_regression(outcome)
        if log:
            with open(log, "a") as handle:
                handle.write(json.dumps({"name": outcome.name, "verdict": outcome.verdict, "kind": outcome.kind,
                                         "message": outcome.message, "seconds": round(outcome.seconds, 1),
                                         "choices": program.choices, "family": program.family}) + "\n")
        if progress is not None:
            progress(f"{summary.tried} programs ({outcome.name} {outcome.verdict} {outcome.seconds:.0f}s"
                     f"{': ' + outcome.kind if outcome.kind else ''}): {summary.counts['equal']} equal, "
                     f"{summary.counts['refused']} refused, {summary.counts['wrong']} wrong, "
                     f"{summary.counts['internal']} internal")
    return summary


def save_regression(outcome: LoopOutcome) -> str:
    """Keep a program that found a bug as ``tests/fuzz_regressions/loops/case_<hash>.py``."""
    os.makedirs(REGRESSIONS, exist_ok=True)
    digest = hashlib.sha1(outcome.source.encode()).hexdigest()[:12]
    path = os.path.join(REGRESSIONS, f"case_{digest}.py")
    header = (f'"""Loop-fuzz regression ({outcome.verdict}: {outcome.kind}), program {outcome.name}:\n'
              f'{outcome.message[:300]}\n"""\n# status: open\n\n')
    with open(path, "w") as handle:
        handle.write(header + outcome.source)
    return path


def report(summary: LoopSummary, wall: float, show: bool = True) -> str:
    minutes = wall / 60 if wall else 0
    lines = [f"programs tried:        {summary.tried}"
             + (f"  ({summary.tried / minutes:.1f} programs/minute)" if minutes else ""),
             f"converted and equal:   {summary.counts['equal']}",
             f"refused:               {summary.counts['refused']}"]
    for verdict in ("refused", "wrong", "internal", "invalid"):
        if verdict != "refused":
            lines.append(f"{verdict + ':':22} {summary.counts[verdict]}")
        for kind, count in summary.kinds.most_common():
            if kind.startswith(verdict + ": "):
                lines.append(f"    {count:5d}  {kind[len(verdict) + 2:]}")
    if show:
        for key, example in sorted(summary.examples.items()):
            if not key.startswith(("wrong", "internal")):
                continue
            lines += [f"  shortest program with {key} ({example.name}): {example.message}"]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Differential fuzzing of fxport on decoding and search loops.")
    parser.add_argument("--programs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="first program index")
    parser.add_argument("--only", help="SEED:INDEX[,INDEX...]: run these programs only")
    parser.add_argument("--print", dest="print_only", action="store_true", help="print the programs, run nothing")
    parser.add_argument("--keep", action="store_true", help="save bug programs under tests/fuzz_regressions/loops/")
    parser.add_argument("--log", help="append one JSON line per program to this file")
    parser.add_argument("--timeout", type=int, default=300)
    options = parser.parse_args(argv)
    seed, only = options.seed, None
    if options.only:
        seed_text, _, indices = options.only.partition(":")
        seed, only = int(seed_text), [int(i) for i in indices.split(",")]
    elif options.start:
        only = list(range(options.start, options.start + options.programs))
    if options.print_only:
        for index in only if only is not None else range(options.programs):
            print(f"# program {seed}:{index}\n{draw(seed, index).source}")
        return 0
    start = time.perf_counter()
    summary = campaign(options.programs, seed, keep=options.keep, only=only, timeout_s=options.timeout,
                       log=options.log,
                       progress=lambda line: print(f"[{time.perf_counter() - start:5.0f}s] {line}", file=sys.stderr,
                                                   flush=True))
    print(report(summary, time.perf_counter() - start))
    return 1 if summary.counts["wrong"] or summary.counts["internal"] else 0


if __name__ == "__main__":
    sys.exit(main())
