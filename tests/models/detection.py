"""torchvision detection, video and optical-flow models as fxport targets (weights=None, seeded).

Each detection wrapper takes a fixed number of images (two), each with its own dynamic height
and width, and returns torchvision's list of per-image dicts (boxes, scores, labels, + masks /
keypoints). Images are resized to a small ``min_size`` and the score threshold is 0 so that
random weights still give detections to compare (a threshold of 0.05 keeps none of them).

    python3 -m fxport convert tests/models/detection.py:FasterRCNN -o frcnn.onnx
"""

import torch
from torch import nn

IMAGE_DIMS = {"image0": {1: "height0", 2: "width0"}, "image1": {1: "height1", 2: "width1"}}


def seeded(build, **kwargs):
    torch.manual_seed(0)
    return build(weights=None, weights_backbone=None, **kwargs).eval()


class _Detector(nn.Module):
    """Two images in, torchvision's list of per-image result dicts out."""

    example_dynamic_shapes = IMAGE_DIMS
    builder = ""
    options: dict = {}

    def __init__(self):
        super().__init__()
        from torchvision.models import detection

        self.model = seeded(getattr(detection, self.builder), **self.options)
        self.eval()

    def forward(self, image0, image1):
        return self.model([image0, image1])

    def example_inputs(self):
        generator = torch.Generator().manual_seed(1)
        return (torch.rand(3, 96, 128, generator=generator), torch.rand(3, 128, 112, generator=generator))


_SMALL = dict(min_size=128, max_size=160, box_score_thresh=0.0, box_detections_per_img=20,
              rpn_pre_nms_top_n_test=100, rpn_post_nms_top_n_test=50)


class FasterRCNN(_Detector):
    builder = "fasterrcnn_mobilenet_v3_large_320_fpn"
    options = _SMALL

