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
