"""The study's figures (issue 42, item 4; seed Figures 2a, 3c, 6 and 7), read back from
their matplotlib artists and recomputed with numpy from the exported records: the
bundled study (16 families since issue 42, item 5: Figure 2a draws the printed intervals),
a study with infrastructure failures, and Discovery arms.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from prereg.reports.model import Report
from prereg.reports.render import figures
from prereg.reports.render import study_figures as tb
from prereg.reports.render.figures import MIN_TEXT_CSS_PX
from tests.reports.test_report_browser import _measure
from tests.toolbottleneck.test_tb_configuration_effects import (
    _by_hand_menu,
    _scored,
    discovery,
    study_ws,
)
from tests.toolbottleneck.test_tb_infra_counting import ITT, RETRY

__all__ = ["discovery", "study_ws"]  # fixtures, used here (demo, reports: conftest.py)


def _report(data: dict[str, Any]) -> Report:
    fields = set(Report.model_fields)
    return Report.model_validate({k: v for k, v in data.items() if k in fields})


def _points(fig: Any) -> list[tuple[float, float]]:
    ax = fig.axes[0]
    return [
        (float(line.get_xdata()[0]), float(line.get_ydata()[0]))
        for line in ax.get_lines()
        if line.get_marker() == "o"
    ]


def _check_v_truncation(data: dict[str, Any], records: list[dict[str, Any]]) -> None:
    report = _report(data)
    fig = tb.tb_v_truncation_figure(report, figures._canvas)
    assert fig is not None
    want = _by_hand_menu(data, records)
    key = tb.tb_v_truncation_key(report)
    assert key == sorted(want)
    got = _points(fig)
    for name, (x, y) in zip(key, got, strict=True):
        effect, cut, _ = want[name]
        assert (x, y) == pytest.approx((100 * cut, 100 * effect), abs=1e-9)
    caption = figures.caption("tb_v_truncation", report)
    assert all(f"{i} {name}" in caption for i, name in enumerate(key, start=1))
    assert figures.FIGURES["tb_v_truncation"][0](report) is not None  # the PNG


def test_bundled_study_v_against_truncation(demo: dict[str, Any]) -> None:
    _check_v_truncation(demo, [r for r in demo["records"] if r["status"] == "ok"])
    assert "tb_v_truncation" in demo["figures"]


def test_bundled_study_contrasts_figure_follows_the_printed_intervals(
    demo: dict[str, Any],
) -> None:
    """Figure 2a draws what the contrasts print: below 10 families every family-cluster
    interval is withheld and the figure is not drawn (the numbers say why); from 10 (the
    bundled study has 16 since issue 42, item 5) each contrast's interval is the one its
    registered contrast prints."""
    report = _report(demo)
    data = tb.study_figure(report, "tb_contrasts")
    assert data is not None and data.points
    n_families = demo["contrasts"][0]["units"]
    if n_families < 10:
        assert tb.tb_contrasts_figure(report, figures._canvas) is None
        assert "tb_contrasts" not in demo["figures"]
        reason = f"too few familys ({n_families} < 10)"
        assert all(p.low is None and reason in str(p.reason) for p in data.points)
        return
    assert "tb_contrasts" in demo["figures"]
    assert tb.tb_contrasts_figure(report, figures._canvas) is not None
    printed = {c["id"]: c["interval"] for c in demo["contrasts"]}
    assert all(p.low is not None and "too few" not in str(p.reason) for p in data.points)
    assert len(data.points) == len(printed)


@pytest.mark.parametrize("reg_id", [ITT, RETRY])
def test_v_against_truncation_with_infrastructure_failures(
    reports: dict[str, dict[str, Any]], reg_id: str
) -> None:
    data = reports[reg_id]
    _check_v_truncation(data, _scored(data["records"], counting=reg_id == ITT))


def test_contrasts_figure_draws_an_interval_the_table_prints() -> None:
    """A hand-built section: a contrast with an interval is a bar, one without an open
    marker (the figure's rule, independent of the study's size)."""
    from prereg.reports.toolbottleneck.model import (
        StudyFigure,
        StudyPoint,
        StudyReport,
    )

    points = [
        StudyPoint(label="v", value=-0.12, low=-0.2, high=-0.05),
        StudyPoint(label="w", value=0.01, reason="too few familys (4 < 10): no interval"),
    ]
    study = StudyReport(
        label="SIMULATED", tables=[], figures=[StudyFigure(name="tb_contrasts", points=points)]
    )
    report = Report.model_construct(toolbottleneck=study)
    fig = tb.tb_contrasts_figure(report, figures._canvas)
    assert fig is not None
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["v", "w (no interval)"]
    bars = list(ax.containers)
    assert len(bars) == 1
    (segments,) = bars[0].lines[2]
    xs = np.array(segments.get_segments()[0])[:, 0]
    assert xs == pytest.approx([-20.0, -5.0])
    open_marker = [
        ln for ln in ax.get_lines() if ln.get_marker() == "o" and ln.get_mfc() == "white"
    ]
    assert len(open_marker) == 1 and float(open_marker[0].get_xdata()[0]) == pytest.approx(1.0)
    assert "open markers: too few familys" in figures.caption("tb_contrasts", report)


def test_discovery_availability_figure(discovery: dict[str, Any]) -> None:
    report = _report(discovery)
    fig = tb.tb_availability_figure(report, figures._canvas)
    assert fig is not None
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    widths = [p.get_width() for p in ax.patches]
    cells = {a["id"]: a["toolbottleneck"] for a in discovery["registration_document"]["arms"]}
    want = {}
    for arm, cell in cells.items():
        ok = [r for r in discovery["records"] if r["arm"] == arm and r["status"] == "ok"]
        verdicts = np.array([bool(r["obligations"]["availability"]) for r in ok])
        want[f"{cell['retriever']}, R={cell['catalog']}"] = 100 * verdicts.mean()
    assert dict(zip(labels, widths, strict=True)) == pytest.approx(want)
    assert "tb_availability" in discovery["figures"]


def test_the_study_figures_read_well_on_a_phone(
    demo: dict[str, Any], discovery: dict[str, Any], tmp_path: Path
) -> None:
    """docs/reports.md's figure rules in Chromium (as tests/reports/test_report_browser.py
    checks the example reports): at 390 px the page never scrolls sideways and every
    figure's smallest text is at least 9 CSS px, for the bundled study's report (with
    tb_v_truncation) and a Discovery study's (tb_availability)."""
    pages = [
        Path(demo["report_dir"]) / "report.html",
        Path(discovery["report_dir"]) / "report.html",
    ]
    for html, name in zip(pages, ("tb_v_truncation", "tb_availability"), strict=True):
        assert f'data-figure="{name}"' in html.read_text()
        for width in (390, 1280):
            seen = _measure(html, width, tmp_path)
            where = (html.parent.name, width)
            assert seen["scroll"] <= seen["client"], where
            assert seen["images"] and all(i["loaded"] for i in seen["images"]), where
            assert min(i["text"] for i in seen["images"]) >= MIN_TEXT_CSS_PX - 0.05, where


def test_bundled_study_decoder_gains_are_the_tables(demo: dict[str, Any]) -> None:
    """Figure 11's numbers are the comparison table's rows (which
    tests/toolbottleneck/test_tb_decoder.py recomputes); below 10 intents every interval
    is withheld and the figure is not drawn; from 10 (the bundled study has 12 intents
    since issue 42, item 5) a row prints its interval unless it says why not."""
    report = _report(demo)
    data = tb.study_figure(report, "tb_decoder_gains")
    assert data is not None and data.level == pytest.approx(0.99)
    table = next(
        t for t in demo["toolbottleneck"]["tables"] if t["title"].startswith("Decoder comparisons")
    )
    assert [r[0] for r in table["rows"]] == [p.label for p in data.points]
    intents = len({r["intent"] for r in demo["records"]})
    for row, p in zip(table["rows"], data.points, strict=True):
        if p.low is None:
            assert row[1] == f"{100 * p.value:+.1f} pp ({p.reason})"
        else:
            assert p.high is not None
            assert row[1] == f"{100 * p.value:+.1f} pp [{100 * p.low:+.1f}, {100 * p.high:+.1f}]"
        assert ("too few intents" in str(p.reason)) == (intents < 10)
    drawn = any(p.low is not None for p in data.points)
    assert (tb.tb_decoder_gains_figure(report, figures._canvas) is not None) == drawn
    assert ("tb_decoder_gains" in demo["figures"]) == drawn


def test_decoder_gains_figure_draws_the_interval_at_its_level() -> None:
    from prereg.reports.toolbottleneck.model import StudyFigure, StudyPoint, StudyReport

    points = [
        StudyPoint(label="calls - obligation", value=0.03, low=-0.05, high=0.12),
        StudyPoint(label="record - flag", value=-0.01, reason="too few intents (4 < 10)"),
    ]
    figure = StudyFigure(name="tb_decoder_gains", points=points, level=0.99)
    report = Report.model_construct(
        toolbottleneck=StudyReport(label="SIMULATED", tables=[], figures=[figure])
    )
    fig = tb.tb_decoder_gains_figure(report, figures._canvas)
    assert fig is not None
    ax = fig.axes[0]
    assert "99% intent-cluster" in ax.get_xlabel()
    (segments,) = ax.containers[0].lines[2]
    assert np.array(segments.get_segments()[0])[:, 0] == pytest.approx([-5.0, 12.0])
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["calls - obligation", "record - flag (no interval)"]
