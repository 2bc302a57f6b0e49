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
