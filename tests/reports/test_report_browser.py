"""Issue 16, item 6: the HTML report in a real headless browser (Debian's Chromium).

A user opening report.html on a phone saw tables push the page to 941 px at 420 px
wide and the host row as one raw JSON string. Here Chromium lays the demo's reports
out at phone (390 px) and desktop (1280 px) widths, and a script in the page measures
what a reader would see: the page never scrolls sideways (tables and figures scroll
inside their own box), no token in a table cell is broken across lines (issue 43), every
figure's smallest text is shown at least ``MIN_TEXT_CSS_PX`` CSS px high (issue 43: at
390 px the figures had shrunk to 0.42x, their 10-point text to 6.4 px), the table of
contents links only ids that exist, the summary block is at the top, and the host is a
table, not JSON.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from prereg.reports.model import Report
from prereg.reports.render.figures import MIN_TEXT_CSS_PX, _pooled_rows
from tests.conftest import skip_unless_ci

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# The flags the machine notes give for a closed network, as root, no profile left behind.
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    # a phone's scrollbars overlay the page and take no width
    "--hide-scrollbars",
    # the wrapper page reads the measurement out of the report's frame (both file:// pages)
    "--allow-file-access-from-files",
]
# Headless Chromium will not make its window narrower than 500 px, so the report is laid
# out in a frame of the width measured, and the wrapper takes the frame's measurement.
WRAPPER = """<!DOCTYPE html><html><head><title>wrapper</title></head><body style="margin:0">
<iframe src="{src}" style="width:{width}px;height:900px;border:0"></iframe>
<script>window.addEventListener('load', () => {{ document.title = frames[0].document.title; }});
</script></body></html>"""
# Measured in the page after layout: the page's own width against the window's, and any
# element sticking out of the window that is not inside a sideways-scrolling box.
PROBE = """<script>
const root = document.documentElement;
const inScrollBox = (e) => e.closest('.scroll') !== null;
const out = [...document.querySelectorAll('body *')]
  .filter((e) => !inScrollBox(e) && e.getBoundingClientRect().right > root.clientWidth + 1)
  .map((e) => e.tagName + '.' + (e.className || ''));
// each figure: loaded, where it ends, whether it is inside its own scrolling box, and
// its smallest text as shown (that text's height in the PNG's pixels, data-text-px,
// times the scale the page shows the PNG at)
const images = [...document.images].map((i) => ({loaded: i.naturalWidth > 0,
  right: i.getBoundingClientRect().right, boxed: inScrollBox(i),
  text: Number(i.dataset.textPx) * i.getBoundingClientRect().width / i.naturalWidth}));
// the table of contents: every link's target, and those with no element of that id
const toc = [...document.querySelectorAll('nav.toc a')].map((a) => a.getAttribute('href'));
const dangling = toc.filter((h) => !h.startsWith('#') || !document.getElementById(h.slice(1)));
const headings = [...document.querySelectorAll('h2')].map((h) => h.id);
const summary = document.querySelector('section.summary#summary');
const first = [...document.body.children]
  .map((e) => (e.tagName === 'H2' ? 'H2' : e.id || e.tagName));
// a token (a run without white space, e.g. "0.6527" or "47.6%") laid out on two lines
const broken = [];
const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  if (!node.parentElement.closest('td')) continue;
  for (const m of node.data.matchAll(/[^\\s\\-\\/]+/g)) {
    const range = document.createRange();
    range.setStart(node, m.index);
    range.setEnd(node, m.index + m[0].length);
    const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
    if (tops.size > 1) broken.push(m[0]);
  }
}
document.title = JSON.stringify({scroll: root.scrollWidth, client: root.clientWidth,
  out: out.slice(0, 10), images: images, broken: broken.slice(0, 10), toc: toc,
  dangling: dangling, headings: headings, first: first.slice(0, 8),
  summary: summary ? summary.innerText : null});
</script>"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The demo's pilot and factorial workspaces, analysed (reports written). One test
    uses both, so one xdist worker builds them."""
    root = tmp_path_factory.mktemp("browser")
    reports: dict[str, Path] = {}
    for example in ("pilot", "factorial"):
        folder = root / example
        done = subprocess.run(
            [sys.executable, "-m", "prereg", "demo", "--example", example, "--dir", str(folder)]
            + ["--json"],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        (reports[example],) = sorted((folder / "reports").glob("*/report.html"))[:1]
    return reports


def _measure(html: Path, width: int, tmp: Path) -> dict[str, Any]:
    if CHROMIUM is None:
        skip_unless_ci("needs Debian's chromium (bash .ci/run installs it)")
    page = tmp / f"{html.parent.name}-{width}.html"
    page.write_text(html.read_text().replace("</body>", PROBE + "</body>"))
    wrapper = tmp / f"{html.parent.name}-{width}-wrapper.html"
    wrapper.write_text(WRAPPER.format(src=page.name, width=width))
    window = f"--window-size={max(width, 800) + 20},1000"
    done = subprocess.run(
        [str(CHROMIUM), *FLAGS, window, "--dump-dom", wrapper.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = re.search(r"<title>(.*?)</title>", done.stdout, re.S)
    assert found, done.stderr[-2000:]
    measured: dict[str, Any] = json.loads(found.group(1))
    return measured


def test_the_demo_reports_read_well_on_a_phone_and_a_desktop(
    demo: dict[str, Path], tmp_path: Path
) -> None:
    """One test, so one worker builds the demo reports (two demos take a while)."""
    _host_is_a_table(demo)
    _forest_shows_both_effects(demo)
    for example in ("pilot", "factorial"):
        for width in (390, 1280):
            seen = _measure(demo[example], width, tmp_path)
            where = (example, width, seen)
            # the page never scrolls sideways: a wide table or figure scrolls in its box
            assert seen["scroll"] <= seen["client"], where
            assert seen["out"] == [], where
            assert seen["images"] and all(i["loaded"] for i in seen["images"]), where
            assert all(i["boxed"] or i["right"] <= seen["client"] + 1 for i in seen["images"]), (
                where
            )
            # no number or word broken inside a table cell (issue 43: "0.6|527", "47.6|%")
            assert seen["broken"] == [], where
            # every figure's smallest text legible (issue 43: 6.4 px at 390 px before)
            smallest = min(i["text"] for i in seen["images"])
            assert smallest >= MIN_TEXT_CSS_PX - 0.05, where
            # the table of contents links every section, and only ids that exist
            assert seen["dangling"] == [], where
            assert seen["toc"] == ["#summary", *[f"#{h}" for h in seen["headings"]]], where
            assert all(seen["headings"]), where
            # the summary block at the top: after the title and verdict, before any section
            assert seen["summary"] and "Primary test" in seen["summary"], where
            assert "\nn\n" in seen["summary"], where
            top = seen["first"]
            assert top.index("summary") < top.index("contents") < top.index("H2"), where


def _host_is_a_table(demo: dict[str, Path]) -> None:
    text = demo["pilot"].read_text()
    host = json.loads((demo["pilot"].parent / "report.json").read_text())["host"]
    assert host["driver"] == "local"
    assert json.dumps(host, sort_keys=True) not in text  # the old raw-JSON row
    assert '<table class="nested">' in text and "<th>driver</th><td>local</td>" in text
    markdown = (demo["pilot"].parent / "report.md").read_text()
    assert "- host: allow\\_sampling = false" in markdown and "driver = local" in markdown


def _forest_shows_both_effects(demo: dict[str, Path]) -> None:
    """Both whole-design effects are plotted, each labelled with its test and unit."""
    data = json.loads((demo["pilot"].parent / "report.json").read_text())
    rows = _pooled_rows(Report.model_validate(data))
    labels = [label for label, _, _ in rows]
    assert labels == [
        f"primary: {data['primary']['test']}, per {data['primary']['unit']}",
        f"all runs: {data['difference']['test']}, per {data['difference']['unit']}",
    ]
    assert [estimate for _, estimate, _ in rows] == [
        data["primary"]["estimate"],
        data["difference"]["estimate"],
    ]
    assert data["primary"]["estimate"] != data["difference"]["estimate"]  # why both matter
    html = demo["pilot"].read_text()
    assert "so the two can differ" in html
