"""Decision rules (tier ``decision``): how verification replays an op's decision.

A top-k, a sort, an arg-max, a threshold or an NMS decides *which* values go on; on keys tied
within float32 noise the file may decide otherwise than eager. Verification replays such a
decision (:mod:`fxport.verify.decisions`) for the ops a decision rule covers: the rule says
which outputs hold the decision and how to judge ONNX Runtime's (``take``). They are rules like
the others: resolved into the :class:`~fxport.rules.registry.RuleSet` (one winner per op by
priority), listed by ``fxport rules`` as ``decision:<op>``, left out with ``--disable``. The
built-in ones live in ``rewrites/decisions.py`` and ``rewrites/detection.py``.

Example::

    >>> import fxport, torch
    >>> @fxport.decision("aten::topk", label="top-k", outputs=(1,))
    ... def take_topk(args, kwargs, own, taken, limits):
    ...     '''ONNX Runtime's top-k indices, judged by their keys.'''
    ...     return own, None
    >>> rule = fxport.rules.rules_of(take_topk)[0]
    >>> rule.name, rule.tier, rule.label, rule.outputs
    ('decision:aten::topk', 'decision', 'top-k', (1,))
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Callable, Sequence

import torch

from fxport.rules.base import Rule, Scope, attach, definition_site, first_doc_line, make_scope

#: ``take(args, kwargs, own, taken, limits) -> (result, problem)``: the node's result with the
#: decision ``taken`` (ONNX Runtime's values, by output index; None: the node's only output)
#: put in place of ``own`` (the program's), and why it is not admissible (None when it is).
Take = Callable[[tuple, dict, Any, dict, Callable], "tuple[Any, str | None]"]


@dataclasses.dataclass
class DecisionRule(Rule):
    """How one op's decision is taken from ONNX Runtime: which outputs hold it, how to judge it.

    Attributes:
        label: for people (``top-k``); the row's note names the replayed decision by it.
        outputs: the output indices (None: the op's only output) that hold the decision.
        take: the judge of ONNX Runtime's decision (:data:`Take`).
        floats_only: a decision only where an argument is a float tensor (comparisons).
    """

    tier: typing.ClassVar[str] = "decision"

    label: str = ""
    outputs: tuple = (None,)
    take: Take | None = None
    floats_only: bool = False

    @property
    def op(self) -> str:
        """The op's schema name (``aten::topk``): the rule's target."""
        return self.target


def decision(
    op: str,
    *,
    label: str,
    outputs: tuple = (None,),
    floats_only: bool = False,
    name: str | None = None,
    priority: int = 0,
    scope: Scope | None = None,
    opset: int | tuple[int | None, int | None] | None = None,
    devices: Sequence[str] | str | None = None,
    torch_version: str | None = None,
) -> Callable[[Take], Take]:
    """Decorator: verification replays ``op``'s decision with the decorated ``take``
    (module docstring; docs/rules.md, "Decisions verification may replay", has an example).

    ``name`` defaults to ``decision:<op>``; a rule of yours for an op a built-in covers wins
    (built-ins sit at ``BUILTIN_PRIORITY``).
    """
    def register(take: Take) -> Take:
        rule = DecisionRule(
            name=name or f"decision:{op}", target=op, doc=first_doc_line(take),
            scope=make_scope(scope, opset=opset, devices=devices, torch=torch_version),
            priority=priority, defined_at=definition_site(take),
            label=label, outputs=tuple(outputs), take=take, floats_only=floats_only)
        return attach(take, rule)
    return register


# --- helpers for rules that judge a decision --------------------------------------------------

def keys_within(picked: torch.Tensor, own: torch.Tensor, limits: Callable, what: str) -> str | None:
    """Why ``picked`` keys are not ``own`` within the comparison's tolerance (None when they are).

    >>> keys_within(torch.tensor([2.0, 1.0]), torch.tensor([2.0, 1.00001]), lambda d: (1e-4, 1e-3), "top-k keys")
    >>> keys_within(torch.tensor([2.0, 0.5]), torch.tensor([2.0, 1.0]), lambda d: (1e-4, 1e-3), "top-k keys")
    'top-k keys 0.5 where eager has 1 (beyond tolerance)'
    """
    if picked.shape != own.shape:
        return f"{what} have shape {list(picked.shape)} where eager has {list(own.shape)}"
    atol, rtol = limits(own.dtype) if own.dtype.is_floating_point else (0.0, 0.0)
    a, b = picked.double(), own.double()
    outside = (a - b).abs() > atol + rtol * b.abs()
    outside &= ~(torch.isinf(a) & (a == b))
    if not bool(outside.any()):
        return None
    at = outside.nonzero()[0].tolist()
    return f"{what} {a[tuple(at)].item():.6g} where eager has {b[tuple(at)].item():.6g} (beyond tolerance)"


def valid_indices(indices: torch.Tensor, size: int, dim: int) -> str | None:
    """Why ``indices`` are not distinct positions along ``dim`` of a ``size``-long axis.

    >>> valid_indices(torch.tensor([0, 2]), 3, 0), valid_indices(torch.tensor([1, 1]), 3, 0)
    (None, 'an index picked twice')
    """
    if indices.numel() and (int(indices.min()) < 0 or int(indices.max()) >= size):
        return f"index out of range 0..{size - 1}"
    ordered = indices.sort(dim=dim).values
    if ordered.shape[dim] > 1 and bool((ordered.diff(dim=dim) == 0).any()):
        return "an index picked twice"
    return None
