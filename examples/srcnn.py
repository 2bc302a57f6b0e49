"""An SRCNN-like super-resolution network with dynamic batch, height and width.

From the seed article on dynamic axes: upsample, then three convolutions. Convert with::

    fxport convert examples/srcnn.py:SuperResolutionNet -o srcnn.onnx
"""

import torch
from torch import nn


class SuperResolutionNet(nn.Module):
    """Upsample ×3 then refine with 9-1-5 convolutions (SRCNN)."""

    #: fxport's convention: example inputs and dynamic axes carried by the model.
    example_dynamic_shapes = {"x": {0: "batch", 2: "height", 3: "width"}}

    def __init__(self, upscale_factor: int = 3):
        super().__init__()
        self.upscale_factor = upscale_factor
        self.conv1 = nn.Conv2d(3, 64, kernel_size=9, padding=4)
        self.conv2 = nn.Conv2d(64, 32, kernel_size=1, padding=0)
        self.conv3 = nn.Conv2d(32, 3, kernel_size=5, padding=2)
        self.relu = nn.ReLU()

    def forward(self, x):
        x = nn.functional.interpolate(x, scale_factor=self.upscale_factor, mode="bicubic", align_corners=False)
        out = self.relu(self.conv1(x))
        out = self.relu(self.conv2(out))
        return self.conv3(out)

    def example_inputs(self):
        return (torch.rand(2, 3, 16, 20),)
