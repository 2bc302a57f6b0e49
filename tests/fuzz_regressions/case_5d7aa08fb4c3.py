"""Fuzz regression (crash in torch): torch.export failed: InternalTorchDynamoError: TypeError: '<' not supported between instances of 'NoneType' and 'int' at the while line

The select after the loop (return flag set inside the loop) is a torch.cond whose predicate was
the flag as the while_loop returned it, a view; dynamo could not lift that view. The predicate
is now a dense copy. 40 of the long profile's 1000 programs failed this way.
"""
# expect: equal

import torch
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
        self.lin = nn.Linear(4, 4)
        self.gate = Gate()
        self.register_buffer("threshold", torch.tensor(0.25))

    def forward(self, x, n):
        h = x
        g = torch.tanh(x)
        steps = 0
        g = g.clone()
        g[:, 0] = (torch.sqrt(h) * -1.0)[:, 0]
        k0 = torch.zeros((), dtype=torch.int64)
        while k0 < n:
            k0 = k0 + 1
            g = self.gate(g)
            for i in range(2):
                if (g.shape[0] > 3) or ((g < 2.0).all()):
                    return (h * 2.0).sum(dim=-1) + steps
        if h.mean() < -0.1:
            return (g * 2.0).sum(dim=-1)
        return (h + g).sum(dim=-1)

