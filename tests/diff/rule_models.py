"""Models and rules for the patch and graph tiers (the rules use only fxport's public API)."""

import torch
from torch import nn

import fxport


def opaque_double(x):
    """2x through NumPy: torch.export cannot capture it, the TorchScript trace bakes in its value."""
    return torch.from_numpy(x.detach().numpy() * 2)


@fxport.patch("tests.diff.rule_models.opaque_double")
def traceable_double(x):
    return x * 2


def naive_softplus(x):
    return torch.log(torch.exp(x) + 1)


@fxport.graph_rule(pattern=naive_softplus, example_inputs=(torch.randn(2, 3),))
def stable_softplus(x):
    return torch.nn.functional.softplus(x)


class PatchedAndRewritten(nn.Module):
    """Needs the patch to be captured; the graph rule then replaces the softplus pattern."""

    example_args = (torch.randn(3, 4),)

    def forward(self, x):
        return torch.log(torch.exp(opaque_double(x)) + 1) * 2


RULES = [traceable_double, stable_softplus]
