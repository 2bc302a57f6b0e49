"""Small image models whose size arithmetic makes torch.export's dynamic-shape solver stumble
where the stock exporter does not (tests/test_vision_models.py)."""

import torch
from torch import nn


class CeilModePools(nn.Module):
    """squeezenet's stages: ceil-mode max pooling after strided convolutions (torch's solver
    crashes wording a fix for the guards on ``h`` and ``w``)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.stem = nn.Conv2d(3, 8, kernel_size=7, stride=2)
        self.pool1 = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.mid = nn.Conv2d(8, 8, kernel_size=3, padding=1)
        self.pool2 = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.head = nn.Conv2d(8, 4, kernel_size=1)

    def forward(self, x):
        x = self.pool1(torch.relu(self.stem(x)))
        x = self.pool2(torch.relu(self.mid(x)))
        return nn.functional.adaptive_avg_pool2d(self.head(x), 1).flatten(1)


class PatchifyLayerNorm(nn.Module):
    """convnext's stem and downsampling: a patchify convolution, a channels-last LayerNorm and a
    second patchify (guards torch cannot prove over the declared range)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.stem = nn.Conv2d(3, 16, kernel_size=4, stride=4)
        self.norm = nn.LayerNorm(16)
        self.down = nn.Conv2d(16, 32, kernel_size=2, stride=2)
        self.norm2 = nn.LayerNorm(32)

    def forward(self, x):
        x = self.norm(self.stem(x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        x = self.norm2(self.down(x).permute(0, 2, 3, 1))
        return x.mean(dim=(1, 2))
