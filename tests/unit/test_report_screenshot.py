"""The HTML fleet report rendered by headless Chromium: a screenshot of a page made from the fixtures must be a
real picture of the report (right size, mostly not blank, with the red, amber and green health pills drawn)."""

import shutil
import struct
import subprocess
import zlib

import pytest

from ansible_collections.gpufleet.gdrcopy.plugins.module_utils import gdrcopy_report as R
from conftest import need
from test_gdrcopy_info import working_root  # noqa: F401  (fixture used by fleet)
from test_report import fleet, report  # noqa: F401  (fixtures)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WIDTH, HEIGHT = 1400, 1000
PILLS = {"red": (0xff, 0xd5, 0xd2), "amber": (0xff, 0xe8, 0xb0), "green": (0xd8, 0xf3, 0xdc)}  # the CSS backgrounds


def png_pixels(data):
    """(width, height, rows of RGB tuples) of an 8-bit RGB or RGBA PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    width, height, depth, color = header[:4]
    assert depth == 8 and color in (2, 6), header
    bpp = 3 if color == 2 else 4
    raw, stride, rows, prev = zlib.decompress(idat), width * bpp, [], bytearray(width * bpp)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - bpp] if i >= bpp else 0
            up, up_left = prev[i], prev[i - bpp] if i >= bpp else 0
            line[i] = (line[i] + (0, left, up, (left + up) // 2, paeth(left, up, up_left))[kind]) & 0xff
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        prev = line
    return width, height, rows


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else (b if pb <= pc else c)


# `make lint` and `make unit` need no browser; `make test` installs Chromium (make setup-vm), and there a missing
# browser fails this test (conftest.need).
def test_the_html_report_renders_in_headless_chromium(tmp_path, report):  # noqa: F811
    need(CHROMIUM, "headless Chromium is not installed (Debian package chromium; make setup-vm installs it)")
    page = tmp_path / "gdrcopy-report.html"
    page.write_text(R.render_html(report))
    shot = tmp_path / "report.png"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--no-first-run", "--disable-sync", "--hide-scrollbars",
           "--user-data-dir=%s" % (tmp_path / "profile"), "--window-size=%d,%d" % (WIDTH, HEIGHT),
           "--screenshot=%s" % shot, page.as_uri()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert shot.exists(), r.stdout + r.stderr
    width, height, rows = png_pixels(shot.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    pixels = [p for row in rows for p in row]
    background = max(set(pixels[:: 97]), key=pixels[:: 97].count)
    assert sum(p != background for p in pixels) > 0.05 * len(pixels), "the screenshot is (nearly) blank"
    for health, color in PILLS.items():
        assert sum(p == color for p in pixels) > 100, "no %s health pill drawn" % health
