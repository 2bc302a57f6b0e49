"""Headless Chromium for the HTML report tests: rendered DOM and a screenshot's pixels.

Chromium missing fails the test under CI (``CI`` set) and skips it locally.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
import zlib

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium() -> str:
    """The chromium binary; under CI its absence is a failure, locally a skip."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail("chromium is not installed; `bash scripts/setup --tests` as root installs it (apt-get install chromium)")
    pytest.skip("chromium is not installed (CI requires it; run `bash scripts/setup --tests` as root)")


def _run(path: str, *flags: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", *flags,
                               "file://" + os.path.abspath(path)],
                              capture_output=True, text=True, timeout=120)


def dump_dom(path: str) -> str:
    """The page's DOM after Chromium loaded and rendered it."""
    result = _run(path, "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def screenshot_pixels(path: str, width: int = 1300, height: int = 2000) -> tuple[int, int, list[bytes]]:
    """Screenshot of the page: (width, height, rows of RGB(A) bytes)."""
    with tempfile.TemporaryDirectory() as folder:
        png = os.path.join(folder, "shot.png")
        result = _run(path, f"--screenshot={png}", f"--window-size={width},{height}")
        assert result.returncode == 0 and os.path.isfile(png), result.stderr[-2000:]
        with open(png, "rb") as handle:
            return decode_png(handle.read())


def count_color(image, rgb: tuple[int, int, int], tolerance: int = 3) -> int:
    """How many pixels of ``image`` have colour ``rgb`` (± tolerance per channel)."""
    width, _, rows = image
    stride = len(rows[0]) // width
    count = 0
    for row in rows:
        for x in range(0, len(row), stride):
            if all(abs(row[x + c] - rgb[c]) <= tolerance for c in range(3)):
                count += 1
    return count


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """Decode an 8-bit RGB/RGBA non-interlaced PNG (what Chromium writes) without PIL."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    offset, idat, header = 8, b"", None
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        chunk = data[offset + 8:offset + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        offset += 12 + length
    width, height, depth, color_type, _, _, interlace = header
    assert depth == 8 and color_type in (2, 6) and not interlace, header
    channels = 3 if color_type == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            up_left = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                predictor = left if pa <= pb and pa <= pc else up if pb <= pc else up_left
                line[i] = (line[i] + predictor) & 0xFF
        rows.append(bytes(line))
        previous = line
    return width, height, rows
