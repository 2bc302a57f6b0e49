"""Loops ported from public code, judged the way a new user would meet fxport.

Each case is a module written as its origin wrote it (the origin is cited in the model's
docstring), an example input set, dynamic shapes, and *held-out* input sets chosen so that every
exit of every loop is taken (its test false after 0, 1, 2 and N trips, each ``break``, the trip
bound, a carried tensor emptied). The harness converts with the public API only
(:func:`fxport.convert`), then compares ONNX Runtime with eager on every held-out set with
fxport's one comparer (:func:`fxport.testing.compare_with_eager`).

A case's verdict is one of:

- ``"converted"``: fxport verified the file and it equals eager on every held-out set;
- ``"refused"``: fxport refused it (``fxport.ConversionError``); the message is kept;
- ``"wrong"``: fxport wrote a file that differs from eager, or fails in ONNX Runtime, on a
  held-out set (the worst outcome: a shipped bug).
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from typing import Any, Callable

import pytest
import torch

import fxport
import fxport.testing

logging.getLogger("torch.onnx").setLevel(logging.ERROR)
logging.getLogger("onnxscript").setLevel(logging.ERROR)


def generator(seed: int) -> torch.Generator:
    """A torch generator seeded with ``seed`` (input sets drawn the same on every run)."""
    return torch.Generator().manual_seed(seed)


def randn(seed: int, *shape, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=generator(seed)) * scale


def ints(seed: int, high: int, *shape, low: int = 0) -> torch.Tensor:
    return torch.randint(low, high, shape, generator=generator(seed))


def tensor_of(rows, dtype=torch.float32) -> torch.Tensor:
    return torch.tensor(rows, dtype=dtype)


def seeded(cls, seed: int = 0):
    """``make()`` for a case: ``cls()`` built after seeding torch with ``seed``."""
    def make():
        torch.manual_seed(seed)
        return cls()
    make.__name__ = f"make_{cls.__name__}"
    return make


@dataclasses.dataclass
class LoopCase:
    """One ported loop: ``make()`` builds the module (seeded inside), ``example`` is the capture
    input set, ``held_out`` the sets the export never saw (each tuple of args), ``exits`` says in
    words which exit each held-out set takes (same length as ``held_out``)."""

    name: str
    origin: str
    make: Callable[[], torch.nn.Module]
    example: tuple
    dynamic_shapes: Any
    held_out: list[tuple]
    exits: list[str]
    atol: float = 1e-4
    rtol: float = 1e-3
    options: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Verdict:
    outcome: str  # "converted" | "refused" | "wrong"
    message: str = ""
    ops: dict = dataclasses.field(default_factory=dict)


def _copy(args: tuple) -> tuple:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def judge(case: LoopCase) -> Verdict:
    """Convert ``case`` with fxport's public API and compare the file with eager on the held-out sets."""
    assert len(case.held_out) == len(case.exits), f"{case.name}: one exit description per held-out set"
    model = case.make().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = fxport.convert(model, _copy(case.example), dynamic_shapes=case.dynamic_shapes,
                                    verify_inputs=[_copy(a) for a in case.held_out[:1]], **case.options)
        except fxport.ConversionError as err:
            return Verdict("refused", str(err).splitlines()[0])
    ops = result.op_counts()
    for args, exit_taken in zip(case.held_out, case.exits):
        try:
            fxport.testing.compare_with_eager(model, result.model, _copy(args), case.atol, case.rtol)
        except AssertionError as err:
            return Verdict("wrong", f"{exit_taken}: {str(err).splitlines()[0]}", ops)
    return Verdict("converted", "", ops)


def check(case: LoopCase, expect_ops: tuple[str, ...] = ("Loop",)) -> None:
    """The test body: the case converts, equals eager on every held-out set, and its graph holds
    the control-flow ops it was converted to."""
    verdict = judge(case)
    assert verdict.outcome == "converted", f"{case.name} [{case.origin}]: {verdict.outcome}: {verdict.message}"
    for op in expect_ops:
        assert _count(verdict.ops, op) > 0, f"{case.name}: no {op} in the file: {sorted(verdict.ops)}"


def cases_with_xfails(cases: list[LoopCase], xfail: dict[str, str]) -> list:
    """``pytest.param`` per case; those in ``xfail`` (name → class and fxport's message) strict xfails."""
    return [pytest.param(case, id=case.name,
                         marks=[pytest.mark.xfail(strict=True, reason=xfail[case.name])] if case.name in xfail else [])
            for case in cases]


def _count(ops: dict, name: str) -> int:
    return sum(n for op, n in ops.items() if op == name or op.endswith("::" + name) or op.endswith("." + name))
