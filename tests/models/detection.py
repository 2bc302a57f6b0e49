"""torchvision detection, video and optical-flow models as fxport targets (weights=None, seeded).

Each detection wrapper takes a fixed number of images (two), each with its own dynamic height
and width, and returns torchvision's list of per-image dicts (boxes, scores, labels, + masks /
keypoints). Images are resized to a small ``min_size`` and the score threshold is 0 so that
random weights still give detections to compare (a threshold of 0.05 keeps none of them).

    python3 -m fxport convert tests/models/detection.py:FasterRCNN -o frcnn.onnx
"""

import torch
from torch import nn
from torch.export import Dim

#: Images of 32 to 512 pixels a side: smaller ones (a picture 2 pixels tall) are no input for a
#: detector, and on them many boxes tie exactly (zero padding everywhere).
IMAGE_DIMS = {f"image{i}": {1: Dim(f"height{i}", min=32, max=512), 2: Dim(f"width{i}", min=32, max=512)}
              for i in range(2)}


def seeded(build, calibrate_backbone: bool = False, condition: str | None = None, **kwargs):
    """The model with seeded random weights; the heads' layers (initialised with std 0.01, so
    every score of an untrained model ties with every other) re-drawn with a wider spread, so
    that scores, and with them NMS and the order of detections, are well defined.

    ``calibrate_backbone``: a deep backbone's untrained batch norms (mean 0, variance 1) let
    activations grow to 1e8 over ResNet-50's blocks, and every proposal is then dropped; its
    statistics are set from a few random images first, and only layers outside the backbone
    are re-drawn.

    ``condition``, after the re-draw: ``"batch_norms"`` sets every batch norm's statistics
    (heads' too: SSDlite's head reached 1e4 with default ones) from random images through the
    whole detector; ``"activations"`` scales each backbone convolution so that its output has
    unit spread on random images (VGG16 has no batch norm: SSD300's untrained activations
    saturated every softmax, all scores 1.0, and float32 and float64 runs of one model then
    kept other boxes). Either way eager float32 is within 0.01 px of float64 on the example."""
    torch.manual_seed(0)
    model = build(weights=None, weights_backbone=None, **kwargs).eval()
    spread = 0.5 if calibrate_backbone else 2.0
    if calibrate_backbone:
        _calibrate_batch_norms(model.backbone)
    with torch.no_grad():
        for name, layer in model.named_modules():
            if calibrate_backbone and name.startswith("backbone"):
                continue
            if calibrate_backbone and name.endswith("bbox_pred"):
                # box deltas of a trained net are O(1); drawn like the scores over ResNet's
                # large features they reach 100, and exp(delta) makes the boxes ill-conditioned
                layer.weight.mul_(0.05)
            elif isinstance(layer, (nn.Conv2d, nn.Linear)) and float(layer.weight.std()) < 0.05:
                layer.weight.normal_(0.0, spread / layer.weight[0].numel() ** 0.5)
                if layer.bias is not None:
                    layer.bias.normal_(0.0, 0.5)
    if condition == "batch_norms":
        _calibrate_batch_norms(model, detector=True)
    elif condition == "activations":
        _unit_activations(model, [layer for layer in model.backbone.modules() if isinstance(layer, nn.Conv2d)])
    return model


def _calibration_images(generator: torch.Generator) -> list:
    return [torch.rand(3, 96, 128, generator=generator), torch.rand(3, 128, 112, generator=generator)]


def _unit_activations(model: nn.Module, convolutions: list) -> None:
    """Each of ``convolutions`` rescaled, in the order the model runs them, so that its output
    has standard deviation 1 on random images (one pass: each rescaled output feeds the next)."""
    def rescale(layer, _inputs, output):
        spread = float(output.std())
        if spread > 0:
            layer.weight.div_(spread)
            if layer.bias is not None:
                layer.bias.div_(spread)
            return output / spread
        return output

    hooks = [layer.register_forward_hook(rescale) for layer in convolutions]
    with torch.no_grad():
        model(_calibration_images(torch.Generator().manual_seed(2)))
    for hook in hooks:
        hook.remove()


def _calibrate_batch_norms(module: nn.Module, batches: int = 3, detector: bool = False) -> None:
    """Batch-norm running statistics from random images (cumulative average): normalised
    images through a backbone, or images through the whole ``detector`` (its batch norms alone
    in training mode)."""
    generator = torch.Generator().manual_seed(2)
    norms = [layer for layer in module.modules() if isinstance(layer, nn.BatchNorm2d)]
    for layer in norms:
        layer.reset_running_stats()
        layer.momentum = None
        layer.train()
    if not detector:
        module.train()
    with torch.no_grad():
        for _ in range(batches):
            module(_calibration_images(generator) if detector else torch.randn(2, 3, 128, 160, generator=generator))
    module.eval()


class _Detector(nn.Module):
    """Two images in, torchvision's list of per-image result dicts out."""

    example_dynamic_shapes = IMAGE_DIMS
    builder = ""
    options: dict = {}
    calibrate_backbone = False
    condition = None

    def __init__(self):
        super().__init__()
        from torchvision.models import detection

        self.model = seeded(getattr(detection, self.builder), self.calibrate_backbone, self.condition, **self.options)
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



class SSDlite(_Detector):
    builder = "ssdlite320_mobilenet_v3_large"
    options = dict(score_thresh=0.0, detections_per_img=20, topk_candidates=50)
    condition = "batch_norms"


class SSD(_Detector):
    builder = "ssd300_vgg16"
    options = dict(score_thresh=0.0, detections_per_img=20, topk_candidates=50)
    condition = "activations"


_ONE_STAGE = dict(min_size=128, max_size=160, score_thresh=0.0, detections_per_img=20,
                  topk_candidates=50)


class RetinaNet(_Detector):
    builder = "retinanet_resnet50_fpn"
    options = _ONE_STAGE
    calibrate_backbone = True


class FCOS(_Detector):
    builder = "fcos_resnet50_fpn"
    options = _ONE_STAGE
    calibrate_backbone = True


class MaskRCNN(_Detector):
    builder = "maskrcnn_resnet50_fpn"
    options = _SMALL
    calibrate_backbone = True


class KeypointRCNN(_Detector):
    builder = "keypointrcnn_resnet50_fpn"
    options = _SMALL
    calibrate_backbone = True


class VideoR3D(nn.Module):
    """r3d_18 on a short clip (batch, 3, frames, 112, 112) with a dynamic number of frames."""

    example_dynamic_shapes = {"clip": {0: "batch", 2: "frames"}}

    def __init__(self):
        super().__init__()
        from torchvision.models.video import r3d_18

        torch.manual_seed(0)
        self.model = r3d_18(weights=None).eval()

    def forward(self, clip):
        return self.model(clip)

    def example_inputs(self):
        return (torch.rand(1, 3, 8, 64, 64, generator=torch.Generator().manual_seed(1)),)


class FlowRAFT(nn.Module):
    """raft_small: two frames (batch, 3, H, W), H and W multiples of 8, batch dynamic."""

    _batch, _h8, _w8 = Dim("batch"), Dim("h8", min=16, max=64), Dim("w8", min=16, max=64)
    #: height and width: multiples of 8 from 128 (RAFT's minimum) to 512
    example_dynamic_shapes = {"image1": {0: _batch, 2: 8 * _h8, 3: 8 * _w8},
                              "image2": {0: _batch, 2: 8 * _h8, 3: 8 * _w8}}

    def __init__(self, num_flow_updates: int = 3):
        super().__init__()
        from torchvision.models.optical_flow import raft_small

        torch.manual_seed(0)
        self.model = raft_small(weights=None).eval()
        self.num_flow_updates = num_flow_updates

    def forward(self, image1, image2):
        return self.model(image1, image2, num_flow_updates=self.num_flow_updates)[-1]

    def example_inputs(self):
        generator = torch.Generator().manual_seed(1)
        return (torch.rand(2, 3, 128, 160, generator=generator) * 2 - 1,
                torch.rand(2, 3, 128, 160, generator=generator) * 2 - 1)


# --- detectors as a user builds them (issue 50, item 7) ---------------------------------------
# torchvision's builders with random weights, nothing re-drawn or conditioned until it verifies:
# batch norms calibrated on image-like inputs through the whole detector, the score threshold
# tuned on the example (the median of its detections' scores). Their own knife edges, not the
# ones the targets above were conditioned around.

def image_like(generator: torch.Generator, height: int, width: int) -> torch.Tensor:
    """A smooth random picture in [0, 1] (coarse colour patches upsampled, a little noise)."""
    coarse = torch.rand(1, 3, max(height // 16, 2), max(width // 16, 2), generator=generator)
    smooth = torch.nn.functional.interpolate(coarse, size=(height, width), mode="bilinear", align_corners=False)[0]
    return (smooth + 0.05 * torch.randn(3, height, width, generator=generator)).clamp(0, 1)


def user_built(builder: str, seed: int, **options) -> nn.Module:
    """torchvision's ``builder`` with random weights (``seed``), its batch norms' statistics taken
    from three pairs of image-like pictures through the whole detector."""
    from torchvision.models import detection

    torch.manual_seed(seed)
    model = getattr(detection, builder)(weights=None, weights_backbone=None, **options).eval()
    generator = torch.Generator().manual_seed(seed + 100)
    for norm in (m for m in model.modules() if isinstance(m, nn.BatchNorm2d)):
        norm.reset_running_stats()
        norm.momentum = None
        norm.train()
    with torch.no_grad():
        for _ in range(3):
            model([image_like(generator, 120, 144), image_like(generator, 136, 112)])
    return model.eval()


class _UserDetector(nn.Module):
    """Two image-like pictures in, torchvision's per-image dicts out; threshold tuned on them."""

    example_dynamic_shapes = IMAGE_DIMS
    builder, threshold, options, seed = "", "score_thresh", {}, 11

    def __init__(self):
        super().__init__()
        self.model = user_built(self.builder, self.seed, **{**self.options, self.threshold: 0.0})
        with torch.no_grad():
            scores = torch.cat([d["scores"] for d in self.model(list(self.example_inputs()))])
        owner = getattr(self.model, "roi_heads", self.model)
        owner.score_thresh = float(scores.quantile(0.5)) if scores.numel() else 0.0
        self.eval()

    def forward(self, image0, image1):
        return self.model([image0, image1])

    def example_inputs(self):
        generator = torch.Generator().manual_seed(1)
        return image_like(generator, 96, 128), image_like(generator, 128, 112)


class UserRetinaNet(_UserDetector):
    builder, options = "retinanet_resnet50_fpn", _ONE_STAGE


class UserFCOS(_UserDetector):
    builder, options = "fcos_resnet50_fpn", _ONE_STAGE


class UserSSDlite(_UserDetector):
    builder, options = "ssdlite320_mobilenet_v3_large", dict(detections_per_img=20, topk_candidates=50)


class UserMaskRCNN(_UserDetector):
    builder, threshold, options = "maskrcnn_resnet50_fpn", "box_score_thresh", _SMALL


class UserKeypointRCNN(_UserDetector):
    builder, threshold, options = "keypointrcnn_resnet50_fpn", "box_score_thresh", _SMALL
