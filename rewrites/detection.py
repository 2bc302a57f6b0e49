"""torchvision detection models: post-processing captured whole, NMS lowered to ONNX NMS.

Faster R-CNN, Mask R-CNN, Keypoint R-CNN, RetinaNet, FCOS, SSD and SSDlite end in
data-dependent library code: score thresholds and ``remove_small_boxes`` keep a data-dependent
number of boxes, batched NMS keeps fewer, and the RoI heads pool features of those boxes.
torch.export traces that code with data-dependent (unbacked) sizes except where it asks a Python
question about such a size or about image sizes; these patch rules answer them without
changing what is computed (each equals torchvision's function on every input):

- ``torchvision.ops.boxes.batched_nms`` asks ``boxes.numel() > 4000`` to pick between a
  per-class loop and the coordinate-offset trick, and the trick asks ``numel() == 0``. The
  patch calls ``fxport_vision::batched_nms``, a custom op that runs torchvision's function in
  eager mode and is translated (op rule below) to one ONNX ``NonMaxSuppression`` over a
  class × box score matrix, i.e. NMS per class like the loop; below torchvision's size
  threshold the boxes are first offset per class exactly as the trick offsets them, so the IoU
  arithmetic is the one eager does either way. Kept indices are ordered by decreasing score
  (``TopK``); boxes with equal scores may come out in another order than eager's.
- ``torchvision.ops.poolers._multiscale_roi_align`` takes ``len(rois)`` as a Python int; the
  patch reads ``rois.shape[0]`` (a symbolic size) and scatters each level's ``roi_align``
  result with ``index_put`` as torchvision does. ``roi_align`` itself is translated by
  torch.onnx (ONNX ``RoiAlign``).
- ``BoxCoder.decode`` reshapes with ``if box_sum > 0``; the patch reshapes the decoded boxes
  along their static dimension (``unflatten``), which is what the branch does whenever it
  runs; with no boxes it gives (0, K, 4) where torchvision gives (0, 4K), and every
  torchvision caller reshapes both to the same (0, 4).
- ``_topk_min`` takes ``min(k, size)`` in Python; the patch uses ``torch.sym_min``.
- ``paste_masks_in_image`` (Mask R-CNN) loops over the detected boxes in Python, resizing each
  mask to its box with ``interpolate`` and writing it into a blank image. The patch pastes all
  masks at once: each box's resize is a row and a column matrix of bilinear weights (torch's
  ``align_corners=False`` source index, clamped as torch clamps it, zero outside the box), so
  the pasted masks are ``rows @ mask @ columns.T`` — two batched ``MatMul``s, equal to the loop
  up to float32 rounding.
- ``heatmaps_to_keypoints`` (Keypoint R-CNN) loops over the detected boxes in Python, resizing
  each box's heatmaps to the box's size (``bicubic``, a size read with ``.item()``) and taking
  each keypoint's arg-max. The patch resizes all boxes' heatmaps at once with bicubic weight
  matrices (torch's coefficients, ``A = -0.75``, clamped source indices), to the largest box's
  size, with the pixels outside each box at ``-inf``; arg-max, keypoint coordinates and scores
  then follow torchvision's arithmetic. Cost: ``boxes × keypoints × max height × max width``
  floats at once, where the loop holds one box's maps.
- ``GeneralizedRCNNTransform`` compares image sizes in Python (``min(h, w)`` in
  ``_resize_image_and_masks``, ``max`` over the images in ``batch_images``), which bakes the
  example's aspect ratio and the larger image into the file; the patches compute the scale and
  the padded size with ``torch.sym_min`` / ``torch.sym_max`` (padding rounded up with
  ``(s + d - 1) // d``: the exporter lowers ``//`` of a negative size with ONNX ``Div``, which
  truncates).

The rules exist once torchvision is imported in the process (fxport collects its built-ins
again when it appears, ``OPTIONAL_OP_LIBRARIES``). docs/vision-models.md shows the models.
"""

from __future__ import annotations

import sys

import torch
from onnxscript import ir
from onnxscript import opset18 as op

import fxport
from fxport.rewrites._helpers import const_like, ints

_INT64_MAX = 0x7FFFFFFFFFFFFFFF


def _source_position(offset, lengths, source_size: int):
    """torch's ``align_corners=False`` source coordinate of output pixels ``offset`` when a
    side of ``source_size`` pixels is resized to ``lengths`` (one per row):
    ``(offset + 0.5) · source_size / length − 0.5`` (torch: (float) input size / output size)."""
    scale = source_size / lengths.to(torch.float32)
    return (offset.to(torch.float32) + 0.5) * scale[:, None] - 0.5


def _tap_matrix(taps, source_size: int, device):
    """``Σ weight · one_hot(index)`` over ``(index, weight)`` taps: each output pixel's row of
    weights over the ``source_size`` source pixels."""
    index = torch.arange(source_size, device=device).to(torch.float32)
    return sum((index == tap[..., None]) * weight[..., None] for tap, weight in taps)


def bilinear_paste_weights(start, end, image_size, mask_size: int):
    """Per box, the (image_size, mask_size) matrix that resizes a mask_size-long side to the
    box's pixels ``start..end`` (inclusive, int64) the way ``F.interpolate(mode="bilinear",
    align_corners=False)`` does, with zero rows for the image's pixels outside the box.

        >>> w = bilinear_paste_weights(torch.tensor([1]), torch.tensor([2]), 4, 2)
        >>> w[0].tolist()
        [[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]
    """
    length = (end - start + 1).clamp(min=1)
    pixel = torch.arange(image_size, device=start.device)[None, :]
    inside = (pixel >= start[:, None]) & (pixel <= end[:, None])
    source = _source_position(pixel - start[:, None], length, mask_size).clamp(min=0)
    low = source.floor().clamp(max=mask_size - 1)
    weight_high = (source - low).clamp(0, 1)
    high = (low + 1).clamp(max=mask_size - 1)
    weights = _tap_matrix(((low, 1 - weight_high), (high, weight_high)), mask_size, start.device)
    return weights * inside[..., None]


def _cubic_near(x, a: float = -0.75):
    """torch's ``cubic_convolution1``: the weight of a source pixel within 1 of the point."""
    return ((a + 2) * x - (a + 3)) * x * x + 1


def _cubic_far(x, a: float = -0.75):
    """torch's ``cubic_convolution2``: the weight of a source pixel 1 to 2 from the point."""
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a


def bicubic_resize_weights(lengths, max_length, source_size: int):
    """Per row of ``lengths`` (int64), the (max_length, source_size) matrix that resizes a
    source_size-long side to ``length`` pixels like ``F.interpolate(mode="bicubic",
    align_corners=False)``; rows past the length are zero.

        >>> w = bicubic_resize_weights(torch.tensor([4]), 4, 4)
        >>> torch.allclose(w[0], torch.eye(4))
        True
    """
    pixel = torch.arange(max_length, device=lengths.device)[None, :]
    source = _source_position(pixel, lengths, source_size)
    base = source.floor()
    fraction = source - base
    coefficients = (_cubic_far(fraction + 1), _cubic_near(fraction), _cubic_near(1 - fraction),
                    _cubic_far(2 - fraction))
    taps = [((base + (tap - 1)).clamp(0, source_size - 1), weight) for tap, weight in enumerate(coefficients)]
    return _tap_matrix(taps, source_size, lengths.device) * (pixel < lengths[:, None])[..., None]


def heatmaps_to_keypoints_vectorised(maps, rois):
    """torchvision's ``heatmaps_to_keypoints`` for all boxes at once: (N, K, S, S) heatmaps and
    (N, 4) boxes to (N, K, 3) keypoints (x, y, 1) and (N, K) scores."""
    offset_x, offset_y = rois[:, 0], rois[:, 1]
    widths = (rois[:, 2] - rois[:, 0]).clamp(min=1)
    heights = (rois[:, 3] - rois[:, 1]).clamp(min=1)
    map_widths = widths.ceil().to(torch.int64)
    map_heights = heights.ceil().to(torch.int64)
    one = torch.ones(1, dtype=torch.int64, device=rois.device)
    width_tensor = torch.cat([map_widths, one]).max()  # arithmetic on it: torch.onnx cannot
    max_width = width_tensor.item()                    # take % of a symbolic scalar
    max_height = torch.cat([map_heights, one]).max().item()
    torch._check(max_width >= 1)
    torch._check(max_height >= 1)
    rows = bicubic_resize_weights(map_heights, max_height, maps.shape[2])
    columns = bicubic_resize_weights(map_widths, max_width, maps.shape[3])
    resized = rows[:, None] @ maps @ columns[:, None].transpose(2, 3)
    inside = ((torch.arange(max_height, device=rois.device)[None, :, None] < map_heights[:, None, None])
              & (torch.arange(max_width, device=rois.device)[None, None, :] < map_widths[:, None, None]))
    resized = torch.where(inside[:, None], resized, float("-inf")).flatten(2)
    scores, position = resized.max(dim=2)
    x_int = position % width_tensor
    y_int = torch.div(position - x_int, width_tensor, rounding_mode="floor")
    x = (x_int.to(torch.float32) + 0.5) * (widths / map_widths)[:, None]
    y = (y_int.to(torch.float32) + 0.5) * (heights / map_heights)[:, None]
    keypoints = torch.stack([x + offset_x[:, None], y + offset_y[:, None], torch.ones_like(x)], dim=2)
    return keypoints, scores


def paste_masks_vectorised(masks, boxes, img_shape, padding: int = 1):
    """torchvision's ``paste_masks_in_image`` for all boxes at once: (N, 1, M, M) masks and
    (N, 4) boxes to (N, 1, H, W) image masks."""
    from torchvision.models.detection import roi_heads

    masks, scale = roi_heads.expand_masks(masks, padding=padding)
    boxes = roi_heads.expand_boxes(boxes, scale).to(dtype=torch.int64)
    image_height, image_width = img_shape
    size = masks.shape[-1]
    rows = bilinear_paste_weights(boxes[:, 1], boxes[:, 3], image_height, size)
    columns = bilinear_paste_weights(boxes[:, 0], boxes[:, 2], image_width, size)
    return (rows @ masks[:, 0] @ columns.transpose(1, 2))[:, None]


#: torchvision's batched_nms offsets boxes per class (the "coordinate trick") up to this many
#: coordinates on CPU and runs NMS per class above it (torchvision/ops/boxes.py).
_TRICK_MAX_NUMEL = 4000


def batched_nms_onnx(boxes, scores, idxs, iou_threshold: float):
    """Per-class NMS with ONNX NonMaxSuppression; indices by decreasing score."""
    count = op.Shape(boxes, start=0, end=1)
    # torchvision's coordinate trick: boxes + idx * (max coordinate + 1), when numel <= 4000
    max_coordinate = op.ReduceMax(op.Concat(op.Reshape(boxes, ints(-1)),  # -inf: no boxes
                                            op.CastLike(op.Constant(value_floats=[float("-inf")]),
                                                        boxes), axis=0), keepdims=0)
    offsets = op.Mul(op.CastLike(idxs, boxes), op.Add(max_coordinate, const_like(1.0, boxes)))
    shifted = op.Add(boxes, op.Unsqueeze(offsets, ints(1)))
    small = op.LessOrEqual(op.Mul(count, ints(4)), ints(_TRICK_MAX_NUMEL))
    nms_boxes = op.Where(small, shifted, boxes)
    # one row of scores per class; boxes of other classes get -inf, below the score threshold
    classes = op.Add(op.ReduceMax(op.Concat(op.Cast(idxs, to=ir.DataType.INT64), ints(-1),
                                            axis=0), keepdims=0), op.Constant(value_int=1))
    class_ids = op.Range(op.Constant(value_int=0), classes, op.Constant(value_int=1))
    member = op.Equal(op.Unsqueeze(class_ids, ints(1)),
                      op.Unsqueeze(op.Cast(idxs, to=ir.DataType.INT64), ints(0)))
    float_scores = op.Cast(scores, to=ir.DataType.FLOAT)
    class_scores = op.Where(member, op.Unsqueeze(float_scores, ints(0)),
                            op.Constant(value_float=float("-inf")))
    selected = op.NonMaxSuppression(
        op.Unsqueeze(op.Cast(nms_boxes, to=ir.DataType.FLOAT), ints(0)),
        op.Unsqueeze(class_scores, ints(0)),
        op.Constant(value_ints=[_INT64_MAX]),
        op.Constant(value_floats=[iou_threshold]),
        op.Constant(value_floats=[-3.4028234663852886e38]),
    )
    keep = op.Reshape(op.Slice(selected, ints(2), ints(3), ints(1)), ints(-1))
    _, order = op.TopK(op.Gather(float_scores, keep), op.Shape(keep), largest=1, sorted=1)
    return op.Gather(keep, order)


def nms_problem(boxes, scores, idxs, iou_threshold: float, keep, limits) -> str | None:
    """Why ``keep`` is not what greedy per-class NMS keeps on keys within tolerance (None when
    it is): kept boxes in decreasing score order, no kept box overlapping a higher-scored kept
    one of its class by more than the threshold, and every dropped box overlapped by more than
    it by a kept one of its class scoring at least as high. These three hold exactly for the
    greedy result alone; the tolerance is the comparison's (scores) and atol + rtol (IoU).

    >>> boxes = torch.tensor([[0., 0., 10., 10.], [1., 0., 11., 10.], [20., 20., 30., 30.]])
    >>> scores, classes = torch.tensor([0.9, 0.9000001, 0.5]), torch.zeros(3, dtype=torch.int64)
    >>> tolerance = lambda dtype: (1e-4, 1e-3)
    >>> nms_problem(boxes, scores, classes, 0.5, torch.tensor([0, 2]), tolerance) is None   # the tie, either way
    True
    >>> nms_problem(boxes, scores, classes, 0.5, torch.tensor([1, 2]), tolerance) is None
    True
    >>> nms_problem(boxes, scores, classes, 0.5, torch.tensor([0]), tolerance)
    'box 2 was dropped but no kept box of its class overlaps it by more than 0.5'
    """
    from torchvision.ops import box_iou

    atol, rtol = limits(scores.dtype)
    slack = atol + rtol
    count = boxes.shape[0]
    if keep.numel() and (int(keep.min()) < 0 or int(keep.max()) >= count or keep.unique().numel() != keep.numel()):
        return "kept indices out of range or repeated"
    kept_scores = scores[keep].double()
    if kept_scores.numel() > 1 and bool((kept_scores[1:] - kept_scores[:-1] > atol + rtol * kept_scores[:-1].abs()).any()):
        return "kept boxes are not in decreasing score order"
    overlap = box_iou(boxes.double(), boxes.double()) * (idxs[:, None] == idxs[None, :])
    ranked = overlap[keep][:, keep].triu(diagonal=1)
    if bool((ranked > iou_threshold + slack).any()):
        return f"two kept boxes of one class overlap by more than {iou_threshold:g}"
    dropped = torch.ones(count, dtype=torch.bool)
    dropped[keep] = False
    dropped_scores = scores[dropped].double()
    suppressed = ((overlap[keep][:, dropped] > iou_threshold - slack)  # kept × dropped
                  & (kept_scores[:, None] >= dropped_scores - (atol + rtol * dropped_scores.abs()))).any(dim=0)
    if not bool(suppressed.all()):
        box = int(dropped.nonzero().flatten()[~suppressed][0])
        return f"box {box} was dropped but no kept box of its class overlaps it by more than {iou_threshold:g}"
    return None


if "torchvision" in sys.modules:
    from fxport.rewrites._vision_ops import batched_nms_op

    _BATCHED_NMS = batched_nms_op()

    @fxport.onnx_op(_BATCHED_NMS, opset=18, priority=fxport.BUILTIN_PRIORITY)
    def batched_nms(boxes, scores, idxs, iou_threshold: float):
        """Batched NMS (torchvision) as ONNX NonMaxSuppression per class, kept by score."""
        return batched_nms_onnx(boxes, scores, idxs, iou_threshold)

    @fxport.decision("fxport_vision::batched_nms", label="NMS", priority=fxport.BUILTIN_PRIORITY)
    def take_batched_nms(args, kwargs, own, taken, limits):
        """ONNX Runtime's kept boxes: admissible when they follow greedy per-class NMS on the
        program's boxes and scores within tolerance (:func:`nms_problem`)."""
        boxes, scores, idxs, iou_threshold = args[:4]
        keep = taken[None].to(torch.int64)
        return keep, nms_problem(boxes, scores, idxs, float(iou_threshold), keep, limits)

    @fxport.patch("torchvision.ops.boxes.batched_nms", name="batched-nms-to-onnx-nms",
                  priority=fxport.BUILTIN_PRIORITY)
    def batched_nms_call(boxes, scores, idxs, iou_threshold):
        """torchvision's batched_nms as one op (no Python questions on the box count)."""
        return _BATCHED_NMS(boxes, scores, idxs, float(iou_threshold))

    @fxport.patch("torchvision.ops.batched_nms", name="batched-nms-to-onnx-nms-public",
                  priority=fxport.BUILTIN_PRIORITY)
    def public_batched_nms_call(boxes, scores, idxs, iou_threshold):
        """torchvision.ops.batched_nms (the package's name for it) as one op."""
        return _BATCHED_NMS(boxes, scores, idxs, float(iou_threshold))

    @fxport.patch("torchvision.ops.poolers._multiscale_roi_align",
                  name="multiscale-roi-align-symbolic", priority=fxport.BUILTIN_PRIORITY)
    def multiscale_roi_align(x_filtered, boxes, output_size, sampling_ratio, scales, mapper):
        """torchvision's multi-level RoIAlign with the RoI count kept symbolic."""
        from torchvision.ops import poolers
        from torchvision.ops.roi_align import roi_align

        if scales is None or mapper is None:
            raise ValueError("scales and mapper should not be None")
        rois = poolers._convert_to_roi_format(boxes)
        if len(x_filtered) == 1:
            return roi_align(x_filtered[0], rois, output_size=output_size,
                             spatial_scale=scales[0], sampling_ratio=sampling_ratio)
        levels = mapper(boxes)
        first = x_filtered[0]
        result = torch.zeros((rois.shape[0], first.shape[1]) + tuple(output_size),
                             dtype=first.dtype, device=first.device)
        for level, (feature, scale) in enumerate(zip(x_filtered, scales)):
            in_level = torch.where(levels == level)[0]
            pooled = roi_align(feature, rois[in_level], output_size=output_size,
                               spatial_scale=scale, sampling_ratio=sampling_ratio)
            result = result.index_put((in_level,), pooled.to(result.dtype))
        return result

    @fxport.patch("torchvision.models.detection._utils.BoxCoder.decode",
                  name="box-decode-symbolic", priority=fxport.BUILTIN_PRIORITY)
    def box_decode(self, rel_codes, boxes):
        """BoxCoder.decode without the Python branch on the (data-dependent) box count."""
        concat_boxes = torch.cat(boxes, dim=0)
        if rel_codes.dim() != 2:
            rel_codes = rel_codes.reshape(concat_boxes.shape[0], -1)
        return self.decode_single(rel_codes, concat_boxes).unflatten(1, (-1, 4))

    @fxport.patch("torchvision.models.detection.transform._resize_image_and_masks",
                  name="detection-resize-symbolic", priority=fxport.BUILTIN_PRIORITY)
    def resize_image_and_masks(image, self_min_size, self_max_size, target=None, fixed_size=None):
        """GeneralizedRCNNTransform's resize with the scale kept symbolic in the image size."""
        if target is not None or fixed_size is not None:
            return resize_image_and_masks.original(image, self_min_size, self_max_size, target,
                                                   fixed_size)
        height, width = image.shape[-2:]
        scale_factor = torch.sym_min(self_min_size / torch.sym_min(height, width),
                                     self_max_size / torch.sym_max(height, width))
        image = torch.nn.functional.interpolate(
            image[None], scale_factor=scale_factor, mode="bilinear", recompute_scale_factor=True,
            align_corners=False)[0]
        return image, target

    @fxport.patch("torchvision.models.detection.transform.GeneralizedRCNNTransform.batch_images",
                  name="detection-batch-symbolic", priority=fxport.BUILTIN_PRIORITY)
    def batch_images(self, images, size_divisible=32):
        """Images zero-padded to the largest size (rounded up to size_divisible) and stacked,
        with the largest size a symbolic max instead of a Python comparison of sizes."""
        padded_shape = list(images[0].shape)
        for image in images[1:]:
            padded_shape = [torch.sym_max(a, b) for a, b in zip(padded_shape, image.shape)]
        # ceil(size / d) * d; (size + d - 1) // d, not -(-size // d): the exporter lowers // of a
        # negative size with ONNX Div, which truncates
        height, width = ((size + size_divisible - 1) // size_divisible * size_divisible
                         for size in padded_shape[-2:])
        return torch.stack([
            torch.nn.functional.pad(image, (0, width - image.shape[-1], 0, height - image.shape[-2]))
            for image in images])

    @fxport.patch("torchvision.models.detection.transform.paste_masks_in_image",
                  name="paste-masks-vectorised", priority=fxport.BUILTIN_PRIORITY)
    def paste_masks_in_image(masks, boxes, img_shape, padding=1):
        """Mask R-CNN's mask pasting without the Python loop over the detected boxes."""
        return paste_masks_vectorised(masks, boxes, img_shape, padding)

    @fxport.patch("torchvision.models.detection.roi_heads.heatmaps_to_keypoints",
                  name="heatmaps-to-keypoints-vectorised", priority=fxport.BUILTIN_PRIORITY)
    def heatmaps_to_keypoints(maps, rois):
        """Keypoint R-CNN's keypoint decoding without the Python loop over the detected boxes."""
        return heatmaps_to_keypoints_vectorised(maps, rois)

    @fxport.patch("torchvision.models.detection._utils._topk_min", name="detection-topk-min-symbolic",
                  priority=fxport.BUILTIN_PRIORITY)
    def topk_min(input, orig_kval, axis):
        """min(k, size) as a symbolic min: the size may be data-dependent (scores kept by a
        threshold), where Python's min asks a question torch.export cannot answer."""
        return torch.sym_min(orig_kval, input.size(axis))
