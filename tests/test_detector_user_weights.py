"""Detectors built as a user builds them verify, or are refused with the decision and its margin
(issue 50, item 7; tests/models/detection.py ``User*``: torchvision's builders, random weights,
batch norms calibrated on image-like pictures, the score threshold tuned on the example).

What they exposed, one class each (the small, fast tests of each class are in
tests/test_decisions.py and tests/test_detector_resize.py):

- after decisions replayed on tied keys, the outputs that follow are float arithmetic like any
  other, with float32's own noise: the replay judges them against the program replayed in
  float64 (user-built RetinaNet, ``size[width1=512]``: 4 decisions replayed, then boxes 0.0065 px
  from the float64 replay where float32 itself is 0.0045 px off; refused before);
- a decision's keys may carry float32 noise beyond the fixed tolerances: the decision is
  admissible within 8× that noise (measured: float32 vs the float64 replay), not beyond;
- the resize scale's float arithmetic in float32 (a real difference, not a decision: the
  replay refuses it, naming the threshold decision and how far beyond the keys' noise it is).
"""

from __future__ import annotations

import pytest

from tests.test_vision_detection import convert_detector_from_the_cli

pytest.importorskip("torchvision")


@pytest.mark.slow
def test_a_user_built_retinanet_converts_and_verifies_from_the_cli(tmp_path):
    """All 11 of the verify stage's sets pass; a set passed by replaying decisions names each
    decision with its margin (``keys … apart``)."""
    report, _ = convert_detector_from_the_cli("UserRetinaNet", tmp_path, verify=True)
    rows = report["verification"]
    assert report["ok"] and len(rows) == 11 and all(row["passed"] for row in rows), rows
    for row in rows:
        if "took otherwise" in (row.get("note") or ""):
            assert "apart" in row["note"], row["note"]
