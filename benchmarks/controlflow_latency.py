"""Control-flow latency: fxport's automatic conversion vs hand-written torch.cond / while_loop.

Each case is one model written twice: naturally, with Python control flow on tensor values
(what users write and what fxport converts), and by hand with ``torch.cond`` /
``torch._higher_order_ops.while_loop`` (what an expert writes for the stock exporter). fxport
converts the natural one; the stock exporter converts the hand-written one; both ONNX models
run in ONNX Runtime on the same inputs, alternately. Eager PyTorch on the natural model is the
second baseline. Targets: fxport/hand-written ≤ 1.10×; vs eager reported.

Until fxport converts tensor-conditioned control flow, the fxport columns say "pending".
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

import fxport
from benchmarks.common import Section, adaptive_rounds, eager_runner, ms, ort_runner, ort_session, paired_medians, ratio
from fxport.common.quiet import quiet_torch


def while_loop(cond_fn, body_fn, carried):
    from torch._higher_order_ops.while_loop import while_loop as hop

    return hop(cond_fn, body_fn, carried)


class BranchNatural(nn.Module):
    """``if`` on a tensor value."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 64)

    def forward(self, x):
        if x.sum() > 0:
            y = torch.relu(self.fc(x))
        else:
            y = torch.tanh(self.fc(x)) * 2
        return y


class BranchByHand(BranchNatural):
    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda v: torch.relu(self.fc(v)), lambda v: torch.tanh(self.fc(v)) * 2, (x,))


class WhileNatural(nn.Module):
    """``while`` until a tensor condition holds (data-dependent trip count)."""

    def forward(self, x):
        while x.abs().max() > 1.0:
            x = x * 0.5
        return x


class WhileByHand(nn.Module):
    def forward(self, x):
        (out,) = while_loop(lambda v: v.abs().max() > 1.0, lambda v: (v * 0.5,), (x,))
        return out


class ForNatural(nn.Module):
    """``for`` over a trip count read from a tensor input."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 64)

    def forward(self, x, steps):
        for _ in range(int(steps)):
            x = torch.tanh(self.fc(x))
        return x


class ForByHand(ForNatural):
    def forward(self, x, steps):
        start = torch.zeros((), dtype=torch.int64)
        _, _, out = while_loop(lambda i, n, v: i < n,
                               lambda i, n, v: (i + 1, n.clone(), torch.tanh(self.fc(v))),
                               (start, steps, x))
        return out


def cases() -> list[tuple[str, nn.Module, nn.Module, tuple]]:
    """(name, natural module, hand-written module with the same weights, example args)."""
    torch.manual_seed(0)
    branch, branch_hand = BranchNatural().eval(), BranchByHand().eval()
    branch_hand.load_state_dict(branch.state_dict())
    loop, loop_hand = ForNatural().eval(), ForByHand().eval()
    loop_hand.load_state_dict(loop.state_dict())
    return [
        ("if (tensor condition)", branch, branch_hand, (torch.randn(8, 64),)),
        ("while (data-dependent trips)", WhileNatural().eval(), WhileByHand().eval(), (torch.randn(8, 64) * 40,)),
        ("for range(int(tensor))", loop, loop_hand, (torch.randn(8, 64), torch.tensor(6))),
    ]


def check_same(onnx_outputs, eager_output, name: str) -> None:
    """The hand-written baseline must compute what the natural model computes."""
    expected = eager_output.detach().numpy()
    if not np.allclose(onnx_outputs[0], expected, atol=1e-4, rtol=1e-3):
        raise AssertionError(f"benchmark case {name!r}: hand-written ONNX differs from the eager model")


def convert_naturally(module, args):
    """fxport's ONNX for the natural model, or the one-line reason it cannot convert it yet."""
    try:
        return fxport.convert(module, args, verify=True).model, None
    except fxport.ConversionError as exc:
        return None, exc


def run(repeats: int = 3) -> Section:
    rows = []
    reasons: list[str] = []
    for name, natural, by_hand, args in cases():
        with quiet_torch():
            hand_model = torch.onnx.export(by_hand, args, dynamo=True, verbose=False).model_proto
        run_hand = ort_runner(ort_session(hand_model), args)
        run_eager = eager_runner(natural, args)
        check_same(run_hand(), run_eager(), name)
        rounds = adaptive_rounds(run_hand, minimum=10 * repeats)
        ours_model, failure = convert_naturally(natural, args)
        if ours_model is None:
            hand_s, eager_s = paired_medians(run_hand, run_eager, rounds)
            reasons.append(f"{name}: {failure}")
            rows.append([name, ms(hand_s), "pending", "pending", ms(eager_s), "pending", str(rounds)])
            continue
        run_ours = ort_runner(ort_session(ours_model), args)
        ours_s, hand_s = paired_medians(run_ours, run_hand, rounds)
        _, eager_s = paired_medians(run_ours, run_eager, rounds)
        rows.append([name, ms(hand_s), ms(ours_s), ratio(ours_s, hand_s), ms(eager_s),
                     ratio(ours_s, eager_s), str(rounds)])
    note = ("Median latency per call (ms), onnxruntime CPU, 1 intra-op thread. fxport converts the "
            "model written with plain Python control flow; the stock exporter converts the same model "
            "written by hand with torch.cond / while_loop; eager runs the plain model. "
            "Targets: fxport / hand-written ≤ 1.10×; fxport / eager reported.")
    footer = []
    if reasons:
        note += " Rows marked pending: fxport.convert does not convert that control flow on this build yet."
        footer = ["Why pending (fxport's one-line error):", ""] + [f"- {reason}" for reason in reasons]
    return Section(
        "Control-flow latency: fxport vs hand-written torch.cond / while_loop, and vs eager",
        note,
        ["case", "hand-written ms", "fxport ms", "fxport / hand", "eager ms", "fxport / eager", "calls each"],
        rows,
        footer,
    )
