"""The custom op the detection rules capture batched NMS as (not a rule module itself).

``fxport_vision::batched_nms`` runs torchvision's own ``batched_nms`` in eager mode, so a
program holding it computes what the model computes; its fake implementation returns an
index vector of data-dependent length, which torch.export keeps symbolic. Defined once per
process (rule modules may be imported again; an op cannot be defined twice).
"""

from __future__ import annotations

import torch

NAMESPACE = "fxport_vision"


def _define_batched_nms():
    from torchvision.ops import boxes as box_ops

    torchvision_batched_nms = box_ops.batched_nms  # taken now: capture patches the name

    @torch.library.custom_op(f"{NAMESPACE}::batched_nms", mutates_args=())
    def batched_nms(boxes: torch.Tensor, scores: torch.Tensor, idxs: torch.Tensor,
                    iou_threshold: float) -> torch.Tensor:
        """torchvision.ops.batched_nms: indices of the kept boxes, by decreasing score."""
        return torchvision_batched_nms(boxes, scores, idxs, iou_threshold)

    @batched_nms.register_fake
    def _(boxes, scores, idxs, iou_threshold):
        kept = torch.library.get_ctx().new_dynamic_size()
        return boxes.new_empty((kept,), dtype=torch.int64)

    return batched_nms


def batched_nms_op():
    """The op (``torch.ops.fxport_vision.batched_nms.default``), defined on first use (call it
    outside capture: it remembers torchvision's function, which capture replaces)."""
    namespace = getattr(torch.ops, NAMESPACE)
    if not hasattr(namespace, "batched_nms"):
        _define_batched_nms()
    return namespace.batched_nms.default
