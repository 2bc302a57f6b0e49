"""Detection post-processing rules (rewrites/detection.py), each against eager torchvision:
batched NMS as ONNX NonMaxSuppression, multi-level RoIAlign on a data-dependent box count."""

from __future__ import annotations

import pytest
import torch

import fxport.testing
from tests.conftest import op_counts

torchvision = pytest.importorskip("torchvision")


class BatchedNMS(torch.nn.Module):
    def forward(self, boxes, scores, idxs):
        return torchvision.ops.batched_nms(boxes, scores, idxs, 0.5)


class BoxesBatchedNMS(torch.nn.Module):
    """The module-level name torchvision's detection models call."""

    def forward(self, boxes, scores, idxs):
        return torchvision.ops.boxes.batched_nms(boxes, scores, idxs, 0.7)


def nms_case(n: int, classes: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    corner = torch.rand(n, 2, generator=g) * 60
    size = torch.rand(n, 2, generator=g) * 25 + 1
    boxes = torch.cat([corner, corner + size], dim=1)
    scores = torch.randperm(max(n, 1), generator=g)[:n].float() / max(n, 1)  # distinct
    idxs = torch.randint(0, classes, (n,), generator=g)
    return boxes, scores, idxs


NMS_DIMS = {"boxes": {0: "n"}, "scores": {0: "n"}, "idxs": {0: "n"}}


@pytest.mark.parametrize("module", [pytest.param(BatchedNMS(), marks=pytest.mark.slow), BoxesBatchedNMS()],
                         ids=["ops", "ops.boxes"])
def test_batched_nms_equals_eager_for_every_box_count_and_both_of_torchvisions_strategies(module):
    # 0, 1, 2 boxes; 300 (torchvision offsets boxes per class); 1200 (it runs NMS per class)
    cases = [nms_case(n, classes, seed) for seed, (n, classes) in
             enumerate([(0, 3), (1, 3), (2, 1), (300, 5), (1200, 4), (40, 1)])]
    check = fxport.testing.assert_rule_converts(
        module, nms_case(30, 3, 99), dynamic_shapes=NMS_DIMS, inputs=cases, atol=0, rtol=0,
        expect_fired=["fxport_vision::batched_nms"])
    assert op_counts(check.result.model).get("NonMaxSuppression") == 1
    kept = [len(module(*case)) for case in cases]
    assert kept[0] == 0 and kept[1] == 1 and 1 < kept[3] < 300 and 1 < kept[4] < 1200  # NMS removed boxes


class Pool(torch.nn.Module):
    """Two feature levels (strides 4 and 8), RoIs of a dynamic count."""

    def __init__(self):
        super().__init__()
        self.pool = torchvision.ops.MultiScaleRoIAlign(["a", "b"], 3, 2, canonical_scale=16)

    def forward(self, a, b, boxes):
        return self.pool({"a": a, "b": b}, [boxes], [(64, 64)])


def test_multiscale_roi_align_equals_eager_on_any_number_of_boxes_across_levels():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(1, 4, 16, 16, generator=g), torch.randn(1, 4, 8, 8, generator=g)

    def boxes(n):
        corner = torch.rand(n, 2, generator=g) * 30
        return torch.cat([corner, corner + torch.rand(n, 2, generator=g) * 30 + 1], dim=1)

    module = Pool()
    example = (a, b, boxes(6))
    module(*example)  # torchvision sets the pooler's scales on its first call
    levels = module.pool.map_levels([example[2]])
    assert set(levels.tolist()) == {0, 1}  # the example's boxes use both levels
    check = fxport.testing.assert_rule_converts(
        module, example, dynamic_shapes={"a": None, "b": None, "boxes": {0: "n"}},
        inputs=[(a, b, boxes(n)) for n in (0, 1, 2, 11)], expect_fired=["multiscale-roi-align-symbolic"])
    assert op_counts(check.result.model).get("RoiAlign") == 2


class PasteMasks(torch.nn.Module):
    """Mask R-CNN's last step: (N, 1, M, M) mask probabilities pasted into the image's size."""

    def forward(self, masks, boxes, image):
        from torchvision.models.detection import transform
        return transform.paste_masks_in_image(masks, boxes, image.shape[-2:])


def mask_case(n: int, height: int, width: int, seed: int):
    """Boxes as Mask R-CNN hands them over: clipped to the image, some touching its borders,
    one thinner than a pixel."""
    g = torch.Generator().manual_seed(seed)
    corner = torch.rand(n, 2, generator=g) * torch.tensor([width, height]) * 1.1 - 5
    size = torch.rand(n, 2, generator=g) * torch.tensor([width, height]) * 0.6
    boxes = torch.cat([corner, corner + size], dim=1)
    if n > 2:
        boxes[0] = torch.tensor([2.0, 3.0, 2.3, 3.1])
        boxes[1] = torch.tensor([0.0, 0.0, width + 9.0, height + 9.0])
    boxes = torchvision.ops.clip_boxes_to_image(boxes, (height, width))
    return torch.rand(n, 1, 28, 28, generator=g), boxes, torch.zeros(3, height, width)


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_mask_pasting_equals_eager_for_any_box_count_and_image_size():
    module = PasteMasks()
    cases = [mask_case(n, h, w, seed) for seed, (n, h, w) in
             enumerate([(0, 40, 50), (1, 17, 9), (2, 64, 64), (12, 70, 45), (30, 120, 160)])]
    check = fxport.testing.assert_rule_converts(
        module, mask_case(5, 48, 56, 99),
        dynamic_shapes={"masks": {0: "n"}, "boxes": {0: "n"}, "image": {1: "height", 2: "width"}},
        inputs=cases, atol=1e-5, expect_fired=["paste-masks-vectorised"])
    assert op_counts(check.result.model).get("MatMul") == 2
    assert "Loop" not in op_counts(check.result.model)


class Keypoints(torch.nn.Module):
    """Keypoint R-CNN's decoding of (N, K, S, S) heatmaps inside (N, 4) boxes."""

    def forward(self, maps, rois):
        from torchvision.models.detection import roi_heads
        return roi_heads.heatmaps_to_keypoints(maps, rois)


def keypoint_case(n: int, seed: int, keypoints: int = 5, size: int = 28):
    """Boxes from under a pixel (clamped to 1) to larger than the heatmap, both ways."""
    g = torch.Generator().manual_seed(seed)
    corner = torch.rand(n, 2, generator=g) * 80
    extent = torch.rand(n, 2, generator=g) * torch.tensor([90.0, 50.0])
    rois = torch.cat([corner, corner + extent], dim=1)
    if n > 2:
        rois[0] = torch.tensor([3.0, 4.0, 3.5, 4.2])
        rois[1] = torch.tensor([1.0, 2.0, 61.0, 2.5])
    return torch.randn(n, keypoints, size, size, generator=g), rois


@pytest.mark.slow  # 5 s or more in the fast set (2026-12-02): it runs with the slow set in CI
def test_keypoint_decoding_equals_eager_for_any_box_count_and_box_size():
    module = Keypoints()
    cases = [keypoint_case(n, seed) for seed, n in enumerate([0, 1, 2, 9, 25])]
    check = fxport.testing.assert_rule_converts(
        module, keypoint_case(6, 99), dynamic_shapes={"maps": {0: "n"}, "rois": {0: "n"}},
        inputs=cases, atol=1e-4, expect_fired=["heatmaps-to-keypoints-vectorised"])
    assert "Loop" not in op_counts(check.result.model)
    for case in cases[1:]:  # the arg-max landed on the same heatmap pixel: coordinates exact
        eager_keypoints, _ = module(*case)
        onnx_keypoints = torch.from_numpy(fxport.testing.run_onnx(check.result.model, case)[0])
        assert torch.equal(eager_keypoints, onnx_keypoints)


class KeyedNMS(torch.nn.Module):
    """NMS on keys the model computes (the file's keys can be perturbed in front of the NMS)."""

    def forward(self, boxes, scores, idxs):
        keys = scores * 2.0
        keep = torchvision.ops.boxes.batched_nms(boxes, keys, idxs, 0.5)
        return boxes[keep], keys[keep]


OVERLAPPING = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 0.0, 11.0, 10.0], [20.0, 20.0, 30.0, 30.0]])


def _nms_file(scores):
    result = fxport.convert(KeyedNMS(), (OVERLAPPING, scores, torch.zeros(3, dtype=torch.int64)),
                            verify=False, keep_artifacts=True)
    return result.model, result.artifacts["translated_program"]


def _verify_nms(model, program, scores):
    from fxport.eager.inputs import InputSet
    from fxport.verify.verification import verify_model

    inputs = InputSet((OVERLAPPING, scores, torch.zeros(3, dtype=torch.int64)))
    return verify_model(KeyedNMS(), model, [inputs], generate=False, program=program)


def test_nms_keeping_the_other_of_two_tied_overlapping_boxes_is_replayed_and_verifies():
    from tests.conftest import perturbed

    scores = torch.tensor([0.45, 0.45000002, 0.25])              # boxes 0 and 1 overlap (IoU 0.82): a tie
    model, program = _nms_file(scores)
    noisy = perturbed(model, "mul", [1e-6, 0, 0])                  # the file keeps box 0, eager box 1
    with pytest.raises(fxport.VerificationError):                  # compared as they come, box 0 != box 1
        _verify_nms(noisy, None, scores)
    rows = _verify_nms(noisy, program, scores)
    assert rows[0].passed and "NMS at" in rows[0].note


def test_nms_keeping_a_box_a_better_one_suppresses_is_refused():
    from fxport.errors import VerificationError
    from tests.conftest import perturbed

    scores = torch.tensor([0.45, 0.3, 0.25])
    model, program = _nms_file(scores)
    wrong = perturbed(model, "mul", [0, 0.5, 0])                   # a wrong file keeps box 1
    with pytest.raises(VerificationError) as failure:
        _verify_nms(wrong, program, scores)
    assert "box 0 was dropped but no kept box of its class overlaps it" in failure.value.report[0].note
