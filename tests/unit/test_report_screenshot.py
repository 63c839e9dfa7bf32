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
from test_report import fleet, fleet500, report  # noqa: F401  (fixtures)

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
def screenshot(tmp_path, page_html, fragment=""):
    """A WIDTHxHEIGHT screenshot of the page (with a #fragment: the filter it sets) -> rows of RGB pixels."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    page = tmp_path / "gdrcopy-report.html"
    page.write_text(page_html)
    shot = tmp_path / "report.png"
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--no-first-run", "--disable-sync", "--hide-scrollbars",
           "--user-data-dir=%s" % (tmp_path / "profile"), "--window-size=%d,%d" % (WIDTH, HEIGHT),
           "--screenshot=%s" % shot, page.as_uri() + fragment]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert shot.exists(), r.stdout + r.stderr
    width, height, rows = png_pixels(shot.read_bytes())
    assert (width, height) == (WIDTH, HEIGHT)
    pixels = [p for row in rows for p in row]
    background = max(set(pixels[:: 97]), key=pixels[:: 97].count)
    assert sum(p != background for p in pixels) > 0.05 * len(pixels), "the screenshot is (nearly) blank"
    return rows


def test_the_html_report_renders_in_headless_chromium(tmp_path, report):  # noqa: F811
    need(CHROMIUM, "headless Chromium is not installed (Debian package chromium; make setup-vm installs it)")
    pixels = [p for row in screenshot(tmp_path, R.render_html(report)) for p in row]
    for health, color in PILLS.items():
        assert sum(p == color for p in pixels) > 100, "no %s health pill drawn" % health


def test_the_first_screen_of_500_hosts_is_the_causes_and_a_filtered_one_its_hosts(tmp_path, fleet500):  # noqa: F811
    """The first screen of a 500-host page: the causes (blocker pills, then concern pills) fill its top; filtered to
    one cause (#q=), the red rows of that cause follow."""
    need(CHROMIUM, "headless Chromium is not installed (Debian package chromium; make setup-vm installs it)")
    page = R.render_html(R.build_report(fleet500, "500 nodes", "2026-12-07T16:00:00Z"))
    rows = screenshot(tmp_path / "first", page)
    top = [p for row in rows[:HEIGHT // 2] for p in row]
    assert sum(p == PILLS["red"] for p in top) > 500, "no blocker pills in the top half: the causes are not first"
    assert sum(p == PILLS["amber"] for p in [p for row in rows for p in row]) > 200, "no concern pills"
    filtered = screenshot(tmp_path / "filtered", page, "#q=modules_disabled")
    bottom = [p for row in filtered[HEIGHT * 9 // 10:] for p in row]
    assert sum(p == (0xd9, 0x30, 0x25) for p in bottom) > 50, "no red host row under the filtered causes"


# --- the page at work: 500 hosts in headless Chromium ----------------------------------------------------------------

# A test-only page that opens the report in a frame, reads its layout, types into its filter box, clicks its green
# toggle, and writes what it saw into itself; Chromium prints that DOM (--dump-dom).
PROBE = """<!DOCTYPE html><html><body style="margin:0"><iframe id="f" src="%s" style="width:%dpx;height:%dpx;border:0">
</iframe><pre id="out"></pre><script>
var f=document.getElementById('f');
f.onload=function(){var d=f.contentDocument,w=f.contentWindow,out={};
var nav=w.performance.getEntriesByType('navigation')[0];out.load_ms=nav.domContentLoadedEventEnd-nav.startTime;
out.loaded_ms=w.performance.now();
out.viewport=w.innerHeight;
out.causes=[].map.call(d.querySelectorAll('#causes tbody tr'),function(r){return {bottom:r.getBoundingClientRect().bottom,
text:r.textContent};});
function visible(){return [].filter.call(d.querySelectorAll('#hosts tbody tr'),function(r){
return !r.classList.contains('hidden');}).length;}
out.rows=d.querySelectorAll('#hosts tbody tr').length;out.visible=visible();
var q=d.getElementById('filter');q.value='%s';q.dispatchEvent(new Event('input'));out.filtered=visible();
q.value='';q.dispatchEvent(new Event('input'));
d.querySelector('.bar input[value=green]').click();out.without_green=visible();
out.shown=d.getElementById('shown').textContent;
document.getElementById('out').textContent=JSON.stringify(out);};
</script></body></html>"""


def probe(tmp_path, report_html, words, virtual_time=True):
    """What the page showed (PROBE's out). virtual_time: let Chromium run the page on virtual time (a steady test);
    the benchmark (benchmarks/report.py) measures real time."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    page = tmp_path / "gdrcopy-report.html"
    page.write_text(report_html)
    wrapper = tmp_path / "probe.html"
    wrapper.write_text(PROBE % (page.name, WIDTH, HEIGHT, words))
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--no-first-run", "--disable-sync", "--allow-file-access-from-files",
           "--user-data-dir=%s" % (tmp_path / "profile-probe"), "--window-size=%d,%d" % (WIDTH, HEIGHT + 200),
           "--dump-dom", wrapper.as_uri()]
    if virtual_time:
        cmd[-2:-2] = ["--virtual-time-budget=10000"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    import html as H
    import json
    import re
    m = re.search(r'<pre id="out">(.*?)</pre>', r.stdout, re.S)
    assert m and m.group(1), r.stdout[-2000:] + r.stderr[-2000:]
    return json.loads(H.unescape(m.group(1)))


def test_500_hosts_first_screen_names_every_cause_and_the_filter_works(tmp_path, fleet500):  # noqa: F811
    need(CHROMIUM, "headless Chromium is not installed (Debian package chromium; make setup-vm installs it)")
    report = R.build_report(fleet500, "500 nodes", "2026-12-07T16:00:00Z")
    seen = probe(tmp_path, R.render_html(report), "gpu-00")
    assert seen["rows"] == seen["visible"] == 500
    # every distinct cause is within the first screen, with its host count
    assert len(seen["causes"]) == len(report["causes"])
    assert all(c["bottom"] <= seen["viewport"] for c in seen["causes"]), (seen["viewport"], seen["causes"][-1])
    for cause, row in zip(report["causes"], seen["causes"]):
        assert "%d host" % cause["count"] in row["text"] and cause["code"] in row["text"]
    assert seen["filtered"] == 9  # gpu-001 .. gpu-009
    green = report["summary"]["green"]
    assert seen["without_green"] == 500 - green and seen["shown"] == "%d of 500 hosts shown" % (500 - green)
