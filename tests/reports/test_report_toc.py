"""report.html opens with a summary block and a table of contents (issue 43, item 4).

The summary states the verdict, the primary test's estimate and interval (or the reason
it has none) and the n; the contents link every section heading by an ``id`` the page
holds. Both are built from the report model through ``el`` (every string escaped). The
browser test (test_report_browser.py) checks the same in Chromium at 390 and 1280 px.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser

import pytest

from prereg.reports.model import Interval, Report
from prereg.reports.render import html as render_html
from tests.reports.test_report_primary_figure import _analysed


class _Page(HTMLParser):
    """The ids, the h2 ids in order, the contents' links and the summary's text."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.h2: list[str] = []
        self.links: list[str] = []
        self.summary: list[str] = []
        self.order: list[str] = []
        self._in_nav = self._in_summary = False
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(str(a["id"]))
        if tag == "h2":
            self.h2.append(str(a.get("id")))
            self.order.append("h2")
        if tag == "nav" and a.get("class") == "toc":
            self._in_nav = True
            self.order.append("contents")
        if tag == "section" and a.get("class") == "summary":
            self._in_summary = True
            self.order.append("summary")
        if self._in_nav and tag == "a":
            self.links.append(str(a.get("href")))

    def handle_endtag(self, tag: str) -> None:
        if tag == "nav":
            self._in_nav = False
        if tag == "section":
            self._in_summary = False

    def handle_data(self, data: str) -> None:
        if self._in_summary:
            self.summary.append(data)


@pytest.fixture(scope="module")
def pilot(tmp_path_factory: pytest.TempPathFactory) -> Report:
    folder = _analysed(tmp_path_factory.mktemp("toc") / "ws", "music-library-pilot")
    return Report.model_validate(json.loads((folder / "report.json").read_text()))


def _page(report: Report) -> _Page:
    page = _Page()
    page.feed(render_html.render(report, {}))
    return page


def test_the_contents_link_every_section_and_only_existing_ids(pilot: Report) -> None:
    page = _page(pilot)
    assert page.h2 and all(h.startswith("sec-") for h in page.h2)
    assert len(set(page.ids)) == len(page.ids)  # every id unique
    assert page.links == ["#summary", *[f"#{h}" for h in page.h2]]
    assert all(link[1:] in page.ids for link in page.links)
    # the summary and the contents come before the first section
    assert page.order.index("summary") < page.order.index("contents") < page.order.index("h2")


def test_the_summary_states_verdict_estimate_interval_and_n(pilot: Report) -> None:
    assert pilot.primary is not None and pilot.primary.interval is not None
    text = " ".join(_page(pilot).summary)
    label, verdict = render_html.headline(pilot)
    assert label in text and verdict in text
    assert f"estimate {render_html.num(pilot.primary.estimate)}" in text
    assert render_html.interval(pilot.primary.interval) in text
    assert f"{pilot.primary.n} tasks" in text and f"{pilot.runs.used} runs used" in text


def test_a_withheld_interval_shows_its_reason_in_the_summary(pilot: Report) -> None:
    assert pilot.primary is not None
    reason = "too few tasks (5 < 10): no interval"
    withheld = Interval(low=None, high=None, level=0.95, method="bootstrap", reason=reason)
    report = pilot.model_copy(
        update={"primary": pilot.primary.model_copy(update={"interval": withheld})}
    )
    rows = dict(render_html.summary_rows(report))
    assert rows["Interval"] == f"no interval: {reason}"
    assert " to " not in rows["Interval"]


def test_a_report_without_a_primary_test_says_so(pilot: Report) -> None:
    rows = dict(render_html.summary_rows(pilot.model_copy(update={"primary": None})))
    assert rows["Primary test"] == "not computed (no completed run)"


def test_summary_and_headings_escape_what_they_show(pilot: Report) -> None:
    assert pilot.primary is not None
    hostile = ["<script>alert(1)</script>", 'a"b<img src=x>']
    primary = pilot.primary.model_copy(
        update={"compare": hostile, "reason": "<b>x</b>", "interval": None}
    )
    html = render_html.render(pilot.model_copy(update={"primary": primary}), {})
    assert "<script>alert(1)" not in html and "<img src=x>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "no interval: &lt;b&gt;x&lt;/b&gt;" in html


def test_repeated_headings_get_distinct_anchors() -> None:
    body, headings = render_html._anchored(
        [render_html._h2("Runs"), render_html._h2("Runs"), render_html._h2("<x>")]
    )
    assert [h.anchor for h in headings] == ["sec-runs", "sec-runs-2", "sec-x"]
    assert '<h2 id="sec-runs-2">Runs</h2>' in body[1]
    assert body[2] == '<h2 id="sec-x">&lt;x&gt;</h2>'


def test_an_empty_slug_still_gives_an_id() -> None:
    assert render_html._slug("ünïcode ✓") == "sec-n-code"
    assert render_html._slug("✓✓") == "sec-section"
