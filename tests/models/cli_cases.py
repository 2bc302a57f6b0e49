"""Models for the command-line behaviour tests (tests/test_cli_experience.py)."""

import torch
from torch import nn


class Chatty(nn.Module):
    """Prints from forward, as models under debugging do: must not corrupt --json output."""

    example_args = (torch.randn(2, 3),)

    def forward(self, x):
        print("forward says hello")
        return torch.tanh(x) * 2


class Noisy(nn.Module):
    """Adds fresh random noise: eager and ONNX Runtime draw different numbers, so verification
    fails by about the noise's size (at most 1) — a real mismatch, for the failure paths."""

    example_args = (torch.randn(2, 3),)

    def forward(self, x):
        return x + torch.rand_like(x)


class BranchyMissingOp(nn.Module):
    """A tensor-conditioned branch around erfinv, an op the stock exporter cannot translate (a
    built-in rule does): `fxport ops` must get past the branch to list the model's ops."""

    example_args = (torch.rand(4, 3) * 0.5,)

    def forward(self, x):
        if x.mean() > 0:
            y = torch.special.erfinv(x)
        else:
            y = x * 2
        return y
