"""torchvision detection, video and optical-flow models convert and verify end to end
(tests/models/detection.py; docs/vision-models.md, "Detection, video, optical flow").

Each run compares eager PyTorch with ONNX Runtime on the example, fresh values and other image
sizes per image (the verify stage); these tests check that it ran on detections that exist,
at other sizes than the example, through the rules that make it possible.
"""

from __future__ import annotations

import json

import onnx
import pytest
import torch

from fxport.report.result import count_ops
from tests.conftest import run_cli

pytest.importorskip("torchvision")


def convert_detector_from_the_cli(name: str, tmp_path, verify: bool = False) -> tuple[dict, onnx.ModelProto]:
    """``fxport convert tests/models/detection.py:NAME --json`` (``--no-verify`` unless ``verify``):
    the report and file."""
    out = tmp_path / f"{name}.onnx"
    done = run_cli("convert", f"tests/models/detection.py:{name}", "-o", str(out), "--json",
                   *([] if verify else ["--no-verify"]), timeout=1800)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(done.stdout), onnx.load(str(out))


@pytest.mark.slow
def test_faster_rcnn_converts_from_the_cli_with_its_own_size_per_image(tmp_path):
    """Converted by the CLI, then compared with eager on image pairs the export never saw:
    portrait and landscape, one image much larger than the other, sides from 40 to 300 px.
    (The verify stage's generated sets include a 32-px-wide image on a 160-px canvas, where
    boxes in the zero padding tie exactly and float noise picks which one NMS keeps:
    docs/vision-models.md.)"""
    from fxport.verify.compare import Acceptance, compare
    from fxport.testing import run_onnx
    from tests.models.detection import FasterRCNN

    report, model_proto = convert_detector_from_the_cli("FasterRCNN", tmp_path)
    assert {"batched-nms-to-onnx-nms", "multiscale-roi-align-symbolic", "detection-resize-symbolic",
            "detection-batch-symbolic", "fxport_vision::batched_nms"} <= {rewrite["rule"] for rewrite in report["rewrites"]}
    ops = count_ops(model_proto.graph)
    assert ops.get("NonMaxSuppression", 0) >= 2 and ops.get("RoiAlign", 0) >= 1
    model = FasterRCNN()
    generator = torch.Generator().manual_seed(7)
    pairs = [(3, 96, 128, 3, 128, 112), (3, 200, 150, 3, 64, 256), (3, 300, 64, 3, 40, 90),
             (3, 128, 112, 3, 96, 128)]
    # boxes in pixels: 0.01 px absolute; the dtype default (1e-4 + 1e-3·|x|) refuses float32's
    # own noise on coordinates near 0 (eager float32 vs float64: 2e-3 px on these weights)
    acceptance = Acceptance(atol=0.01, sort_keys=frozenset({2, 5}))
    for c0, h0, w0, c1, h1, w1 in pairs:
        images = (torch.rand(c0, h0, w0, generator=generator), torch.rand(c1, h1, w1, generator=generator))
        with torch.no_grad():
            detections = model(*images)
        assert all(len(d["boxes"]) == 20 for d in detections)  # compared detections, not empty lists
        result = compare(detections, run_onnx(model_proto, images), acceptance)
        assert result.passed, (images[0].shape, images[1].shape, result.failure())


@pytest.mark.slow
@pytest.mark.parametrize("name, rules", [
    ("MaskRCNN", {"paste-masks-vectorised", "batched-nms-to-onnx-nms", "multiscale-roi-align-symbolic"}),
    # Mask R-CNN's family; its own rule has a differential test (tests/rules/test_detection_rules.py);
    # 298 s of CI's 90 minutes: by hand (-m sweep)
    pytest.param("KeypointRCNN", {"heatmaps-to-keypoints-vectorised", "batched-nms-to-onnx-nms",
                                  "multiscale-roi-align-symbolic"}, marks=pytest.mark.sweep),
    ("RetinaNet", {"batched-nms-to-onnx-nms", "detection-resize-symbolic"}),
    ("SSDlite", {"batched-nms-to-onnx-nms", "detection-resize-symbolic", "detection-topk-min-symbolic"}),
    # SSD300 has SSDlite's rules and post-processing; 250 s of CI's 90 minutes: by hand (-m sweep)
    pytest.param("SSD", {"batched-nms-to-onnx-nms", "detection-resize-symbolic", "detection-topk-min-symbolic"},
                 marks=pytest.mark.sweep),
])
def test_detectors_convert_and_verify_from_the_cli(name, rules, tmp_path):
    """Mask R-CNN, Keypoint R-CNN, RetinaNet, SSDlite and SSD300 verified end to end on the
    verify stage's own 11 sets (other sizes, portrait and landscape, one image up to 512 px),
    with their post-processing rules and no Loop. The R-CNNs' region-proposal top-k and NMS,
    and Keypoint R-CNN's box widths rounded up into heatmap sizes, sit on keys tied within
    float32 noise on some sets: those pass by replaying the file's decisions
    (fxport/verify/decisions.py), never by loosening a tolerance."""
    report, model_proto = convert_detector_from_the_cli(name, tmp_path, verify=True)
    rows = report["verification"]
    assert report["ok"] and len(rows) == 11 and all(row["passed"] for row in rows), rows
    assert not any("skipped" in (row.get("note") or "") for row in rows)
    assert rules <= {rewrite["rule"] for rewrite in report["rewrites"]}
    ops = count_ops(model_proto.graph)
    assert ops.get("NonMaxSuppression", 0) >= 1 and "Loop" not in ops, ops


def convert_target(name: str, tmp_path):
    """fxport.convert on a target of tests/models/detection.py, as the API user calls it."""
    import fxport
    from tests.models import detection

    model = getattr(detection, name)()
    return fxport.convert(model, model.example_inputs(), dynamic_shapes=model.example_dynamic_shapes,
                          output=str(tmp_path / f"{name}.onnx"))


@pytest.mark.slow
def test_r3d_18_converts_with_a_dynamic_clip_length(tmp_path):
    result = convert_target("VideoR3D", tmp_path)
    rows = [row for row in result.verification if not row.note.startswith("skipped")]
    assert all(row.passed for row in rows)
    frames = {row.input_shapes[0][2] for row in rows}
    assert {1, 2, 8} <= frames and max(frames) > 8  # clips shorter and longer than the example
    assert {row.input_shapes[0][0] for row in rows} >= {0, 1, 2}  # and other batch sizes


@pytest.mark.slow
def test_raft_small_converts_with_a_dynamic_batch_and_sizes_in_multiples_of_8(tmp_path):
    result = convert_target("FlowRAFT", tmp_path)
    rows = [row for row in result.verification if not row.note.startswith("skipped")]
    assert all(row.passed for row in rows)
    shapes = [row.input_shapes[0] for row in rows]
    # height and width are 8 * Dim: generated sizes stay multiples of 8, both frames together,
    # so the larger set (batch 3, one step of 8 up) runs instead of being skipped by eager
    skipped = [row.name for row in result.verification if row.note.startswith("skipped")]
    assert skipped == ["size[batch=0]"], skipped  # eager refuses an empty batch; no size is skipped
    assert {shape[0] for shape in shapes} >= {1, 2, 3}
    assert all(shape[2] % 8 == 0 and shape[3] % 8 == 0 for shape in shapes)
    assert all(row.input_shapes[0] == row.input_shapes[1] for row in rows)  # the frames vary together
    assert len({(shape[2], shape[3]) for shape in shapes}) >= 3
    assert "raft-split-frames" in {rewrite.rule for rewrite in result.rewrites}
