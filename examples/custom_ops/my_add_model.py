"""A model using the opaque ``my_add``: torch.export refuses it without a rule.

    fxport convert examples/custom_ops/my_add_model.py:MyAdd -i a=1x3x10x10 -i b=1x3x10x10 \
        --rules examples/custom_ops/my_add_rules.py
"""

import torch

from my_lib import my_add


class MyAdd(torch.nn.Module):
    def forward(self, a, b):
        return my_add(a, b) * torch.sigmoid(b)
