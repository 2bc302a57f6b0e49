"""A custom op the ONNX standard lacks, defined with torch.library: a deformable convolution.

``fxport_examples::deform_conv2d`` (groups = offset groups = 1, no mask) has an eager reference
implementation (bilinear sampling at offset positions, then a matmul), so the model runs in
PyTorch; ONNX has no matching standard op at the opsets fxport targets by default.

    fxport convert examples/custom_ops/deform_conv.py:DeformNet -i x=1x3x10x10 \
        --rules examples/custom_ops/deform_conv_rules.py --no-verify
"""

import torch
import torch.nn.functional as F


@torch.library.custom_op("fxport_examples::deform_conv2d", mutates_args=())
def deform_conv2d(input: torch.Tensor, weight: torch.Tensor, offset: torch.Tensor,
                  bias: torch.Tensor, stride: int, padding: int, dilation: int) -> torch.Tensor:
    n, c, h, w = input.shape
    out_channels, _, kh, kw = weight.shape
    out_h, out_w = offset.shape[-2:]
    rows = torch.arange(out_h, dtype=input.dtype) * stride - padding
    cols = torch.arange(out_w, dtype=input.dtype) * stride - padding
    samples = []
    for i in range(kh):
        for j in range(kw):
            k = i * kw + j
            y = rows.view(1, -1, 1) + i * dilation + offset[:, 2 * k]
            x = cols.view(1, 1, -1) + j * dilation + offset[:, 2 * k + 1]
            grid = torch.stack([2 * x / max(w - 1, 1) - 1, 2 * y / max(h - 1, 1) - 1], dim=-1)
            samples.append(F.grid_sample(input, grid, align_corners=True))
    columns = torch.stack(samples, dim=2)                     # [n, c, kh*kw, out_h, out_w]
    out = torch.einsum("nckhw,ock->nohw", columns, weight.reshape(out_channels, c, kh * kw))
    return out + bias.view(1, -1, 1, 1)


@deform_conv2d.register_fake
def _(input, weight, offset, bias, stride, padding, dilation):
    n = input.shape[0]
    return input.new_empty(n, weight.shape[0], offset.shape[-2], offset.shape[-1])


class DeformNet(torch.nn.Module):
    """The seed's model: a conv predicts offsets for a deformable conv."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.offsets = torch.nn.Conv2d(3, 18, 3)
        self.weight = torch.nn.Parameter(torch.randn(4, 3, 3, 3) * 0.1)
        self.bias = torch.nn.Parameter(torch.zeros(4))

    def forward(self, x):
        offset = self.offsets(x)
        return torch.ops.fxport_examples.deform_conv2d(x, self.weight, offset, self.bias, 1, 0, 1)
