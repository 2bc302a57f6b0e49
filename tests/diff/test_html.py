"""The --html report opens and renders in a real browser (headless Chromium), with the content asserted."""

import re

import pytest

from tests.conftest import run_cli
from tests.diff.browser import count_color, dump_dom, screenshot_pixels
from tests.diff.test_onnx_diff import files  # noqa: F401  (fixture)

ADDED_FILL = (0xDA, 0xFB, 0xE1)
CHANGED_FILL = (0xFF, 0xF8, 0xC5)


@pytest.fixture(scope="module")
def onnx_report(files, tmp_path_factory):  # noqa: F811
    page = tmp_path_factory.mktemp("html") / "report.html"
    result = run_cli("diff", *files, "--html", str(page))
    assert result.returncode == 0, result.stderr
    return str(page)


def test_report_is_self_contained(onnx_report):
    text = open(onnx_report, encoding="utf-8").read()
    assert not re.search(r"(src|href)=\"(https?:)?//", text), "no network references"
    assert "<script" not in text


def test_browser_renders_onnx_diff(onnx_report):
    dom = dump_dom(onnx_report)
    assert '<table class="op-counts">' in dom
    assert re.search(r'data-op="Tanh"><td>Tanh</td><td>0</td><td>1</td><td class="pos">\+1</td>', dom)
    assert re.search(r'<tr class="changed"><td class="code before">s = Softmax\(m\) \{axis=-1\}</td>', dom)
    assert "axis: -1 → 0" in dom
    assert dom.count('<g class="node added"') == 1, "the changed-region picture marks the added Tanh"
    assert "then_branch" in dom, "the changed If body gets its own picture"


@pytest.mark.slow
def test_browser_paints_the_changed_region(onnx_report):
    image = screenshot_pixels(onnx_report)
    assert count_color(image, ADDED_FILL) > 200, "green added-node boxes are painted"
    assert count_color(image, CHANGED_FILL) > 200, "yellow changed rows and boxes are painted"


@pytest.mark.parametrize("ci, outcome", [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_missing_chromium_fails_under_ci_and_skips_locally(monkeypatch, ci, outcome):
    from tests.diff import browser

    monkeypatch.setattr(browser.shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome):
        browser.chromium()
