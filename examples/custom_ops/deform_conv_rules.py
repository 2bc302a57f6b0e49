"""Route 2 of the seed: a custom op exported as a custom-domain ONNX node.

The node ``custom::deform_conv2d`` is for a runtime that implements it (a TensorRT plugin, an
ONNX Runtime custom-op library); stock ONNX Runtime cannot run it, and fxport's verification
says so instead of failing obscurely (convert with ``--no-verify`` to skip verification).
"""

import fxport
from deform_conv import deform_conv2d  # noqa: F401  (defines fxport_examples::deform_conv2d)


@fxport.onnx_op("fxport_examples::deform_conv2d")
def deform_conv2d_to_custom_node(input, weight, offset, bias, stride: int, padding: int,
                                 dilation: int):
    """fxport_examples::deform_conv2d → one custom::deform_conv2d node (attributes kept)."""
    return fxport.rules.custom_node("custom", "deform_conv2d", input, weight, offset, bias,
                                    stride=stride, padding=padding, dilation=dilation)
