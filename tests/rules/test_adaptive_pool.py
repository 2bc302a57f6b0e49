"""``aten::_adaptive_avg_pool2d`` (rewrites/adaptive_pool.py): adaptive average pooling to a
fixed grid converts for inputs of any height and width, where torch's decomposition bakes in
the example's kernel (alexnet's and vgg's pooling before their classifier)."""

import numpy as np
import pytest
import torch

import fxport
from fxport.testing import run_onnx


class Pooled(torch.nn.Module):
    def __init__(self, grid):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.pool = torch.nn.AdaptiveAvgPool2d(grid)

    def forward(self, x):
        return self.pool(torch.relu(self.conv(x)))


SIZES = [(1, 1), (3, 2), (6, 7), (7, 7), (13, 9), (14, 21), (29, 5), (64, 48)]


@pytest.mark.parametrize("grid", [(7, 7), (3, 5), (2, 1)])
def test_adaptive_pool_converts_for_every_input_size(grid):
    """Verified by fxport, then ONNX Runtime against eager at sizes the export never saw:
    smaller than the grid (windows overlap), dividing it, not dividing it, much larger."""
    torch.manual_seed(0)
    model = Pooled(grid).eval()
    example = torch.randn(2, 3, 20, 24)
    result = fxport.convert(model, (example,), dynamic_shapes={"x": {0: "batch", 2: "height", 3: "width"}})
    assert result.verified
    assert "aten::_adaptive_avg_pool2d" in {rewrite.rule for rewrite in result.rewrites}
    for seed, (height, width) in enumerate(SIZES):
        x = torch.randn(1 + seed % 3, 3, height, width, generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            expected = model(x).numpy()
        (produced,) = run_onnx(result.model, (x,))
        np.testing.assert_allclose(produced, expected, rtol=1e-5, atol=1e-6, err_msg=f"{height}x{width}")


def test_global_pooling_is_a_mean_over_height_and_width():
    torch.manual_seed(0)
    model = Pooled(1).eval()
    result = fxport.convert(model, (torch.randn(1, 3, 8, 8),), dynamic_shapes={"x": {2: "height", 3: "width"}})
    assert result.verified and "ReduceMean" in result.op_counts()
    x = torch.randn(1, 3, 5, 11)
    np.testing.assert_allclose(run_onnx(result.model, (x,))[0], model(x).detach().numpy(), rtol=1e-5, atol=1e-6)
