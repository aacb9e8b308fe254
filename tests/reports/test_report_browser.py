"""Issue 16, item 6: the HTML report in a real headless browser (Debian's Chromium).

A user opening report.html on a phone saw tables push the page to 941 px at 420 px
wide and the host row as one raw JSON string. Here Chromium lays the demo's reports
out at phone and desktop widths, and a script in the page measures what a reader
would see: the page never scrolls sideways (tables scroll inside their own box), no
figure is wider than the screen, no token in a table cell is broken across lines (issue
43), and the host is a table, not JSON.
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
from prereg.reports.render.figures import _pooled_rows
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
]
# Measured in the page after layout: the page's own width against the window's, and any
# element sticking out of the window that is not inside a sideways-scrolling box.
PROBE = """<script>
const root = document.documentElement;
const inScrollBox = (e) => e.closest('.scroll') !== null;
const out = [...document.querySelectorAll('body *')]
  .filter((e) => !inScrollBox(e) && e.getBoundingClientRect().right > root.clientWidth + 1)
  .map((e) => e.tagName + '.' + (e.className || ''));
const images = [...document.images].map((i) => ({loaded: i.naturalWidth > 0,
  right: i.getBoundingClientRect().right}));
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
  out: out.slice(0, 10), images: images, broken: broken.slice(0, 10)});
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
    done = subprocess.run(
        [str(CHROMIUM), *FLAGS, f"--window-size={width},900", "--dump-dom", page.as_uri()],
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
        for width in (420, 1280):
            seen = _measure(demo[example], width, tmp_path)
            where = (example, width, seen)
            assert seen["scroll"] <= seen["client"], where
            assert seen["out"] == [], where
            assert seen["images"] and all(i["loaded"] for i in seen["images"]), where
            assert all(i["right"] <= seen["client"] + 1 for i in seen["images"]), where
            # no number or word broken inside a table cell (issue 43: "0.6|527", "47.6|%")
            assert seen["broken"] == [], where


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
