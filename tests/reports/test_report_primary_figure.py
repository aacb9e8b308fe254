"""Every report plots its registered primary effect (issue 43, item 4).

Each bundled draft that runs offline is registered in a fresh workspace, run on the local
host and analysed; its report must name the ``primary_effect`` figure in report.json, write
its PNG, show it in report.html and list it in report.md, and the figure must plot exactly
the primary test's estimate and interval as report.json holds them (read from
:func:`prereg.reports.render.figures.primary_effect`, the data the PNG is drawn from), or,
where the report withholds the interval (too few tasks, no discordant task), the point
alone with the reason written in the figure, never an invented interval.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from prereg.cli import main
from prereg.commands.demo_cmds import DEMO_COMPANIONS, DEMO_STUDIES
from prereg.reports.model import Interval, Report
from prereg.reports.render import figures
from prereg.reports.render.figures import primary_effect, primary_effect_figure
from tests.providers.fakes import FakeProviders, provider_env
from tests.reports.test_report_invariants_drafts import DRAFTS, PROVIDER_ONLY

pytest.importorskip("matplotlib")

#: the drafts ``prereg demo --study toolbottleneck`` runs (the capacity draft and its
#: companions): their reports are the session's demo, checked with
#: :func:`_assert_plots_its_primary_effect` in tests/toolbottleneck/test_tb_demo_every_figure.py
BY_THE_STUDY_DEMO = (
    Path(DEMO_STUDIES["toolbottleneck"]).stem,
    *DEMO_COMPANIONS["toolbottleneck"],
)
OFFLINE = sorted(
    p.stem
    for p in DRAFTS.glob("*.yaml")
    if p.stem not in PROVIDER_ONLY and p.stem not in BY_THE_STUDY_DEMO
)


def _cli(*args: str | Path) -> tuple[int, str]:
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            main([str(a) for a in args])
        return 0, out.getvalue()
    except SystemExit as exc:
        return (exc.code if isinstance(exc.code, int) else 1), out.getvalue()


def _analysed(ws: Path, name: str) -> Path:
    assert _cli("init", ws)[0] == 0
    code, out = _cli("-w", ws, "register", ws / "drafts" / f"{name}.yaml", "--json")
    assert code == 0, out
    code, out = _cli("-w", ws, "run", name, "--no-progress", "--json")
    assert code == 0, out
    code, out = _cli("-w", ws, "analyse", name, "--allow-incomplete", "--json")
    assert code == 0, out
    (folder,) = {p.parent for p in (ws / "reports").rglob("report.json")}
    return folder


def _texts(report: Report) -> list[str]:
    from matplotlib.text import Text

    fig = primary_effect_figure(report)
    assert fig is not None
    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


@pytest.mark.parametrize("name", OFFLINE)
def test_every_bundled_draft_plots_its_primary_effect(name: str, tmp_path: Path) -> None:
    _assert_plots_its_primary_effect(_analysed(tmp_path / "ws", name))


@pytest.mark.parametrize("name", PROVIDER_ONLY)
def test_the_provider_drafts_plot_their_primary_effect(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drafts that need a model host, run against the local fake provider (the real
    SDK clients, no network): their episodes mostly fail, but the report is the one a
    real run gets, and it plots the primary effect the same way."""
    with FakeProviders(rate_limit_every=0) as server:
        provider_env(monkeypatch, server)
        _assert_plots_its_primary_effect(_analysed(tmp_path / "ws", name))


def _assert_plots_its_primary_effect(folder: Path) -> None:
    data: dict[str, Any] = json.loads((folder / "report.json").read_text())
    assert "primary_effect" in data["figures"]
    assert (folder / "figures" / "primary_effect.png").read_bytes().startswith(b"\x89PNG")
    html = (folder / "report.html").read_text()
    assert html.count('data-figure="primary_effect"') == 1
    markdown = (folder / "report.md").read_text()
    assert "figures/primary_effect.png" in markdown
    # report.html and report.md carry the same figures: every one drawn, each once
    in_html = re.findall(r'data-figure="([a-z0-9_]+)"', html)
    in_md = re.findall(r"\]\(figures/([a-z0-9_]+)\.png\)", markdown)
    assert sorted(in_html) == sorted(in_md) == sorted(data["figures"])

    report = Report.model_validate(data)
    effect = primary_effect(report)
    primary = data["primary"]
    assert effect is not None and primary is not None
    assert effect.estimate == primary["estimate"]
    interval = primary["interval"]
    assert (effect.low, effect.high) == (interval["low"], interval["high"])
    assert effect.level == interval["level"]
    expected = "contrast" if primary["contrast"] else "paired difference"
    assert effect.kind == expected
    if interval["low"] is None:  # withheld: the point and the reason, no bounds
        assert effect.withheld and effect.reason == (interval["reason"] or primary["reason"])
        drawn = " ".join(_texts(report)).replace("\n", " ")
        assert effect.reason is not None and effect.reason in drawn and "no interval" in drawn
    margins = [
        t["margin"]
        for t in [primary, *data["secondary"]]
        if t["test"] == "tost_paired" and t["compare"] == primary["compare"]
    ]
    drawn_refs = [r.values for r in effect.references if "margin" in r.label]
    assert drawn_refs == ([(-margins[0], margins[0])] if margins else [])


@pytest.fixture(scope="module")
def confirmatory(tmp_path_factory: pytest.TempPathFactory) -> Report:
    folder = _analysed(tmp_path_factory.mktemp("primary") / "ws", "music-library-confirmatory")
    return Report.model_validate(json.loads((folder / "report.json").read_text()))


def test_a_withheld_interval_is_never_drawn(confirmatory: Report) -> None:
    assert confirmatory.primary is not None and confirmatory.primary.interval is not None
    reason = "too few discordant tasks (0): no interval"
    withheld = Interval(low=None, high=None, level=0.95, method="Tango", reason=reason)
    primary = confirmatory.primary.model_copy(update={"interval": withheld})
    report = confirmatory.model_copy(update={"primary": primary})
    effect = primary_effect(report)
    assert effect is not None and effect.withheld and effect.reason == reason
    assert (effect.low, effect.high) == (None, None)
    fig = primary_effect_figure(report)
    assert fig is not None
    (ax,) = fig.axes
    assert not ax.containers  # no error bar: the point is a plain marker
    drawn = " ".join(_texts(report)).replace("\n", " ")
    assert reason in drawn and "no interval" in drawn
    assert reason in figures.caption("primary_effect", report)


def test_the_registered_plan_mde_is_drawn_on_the_tested_side(confirmatory: Report) -> None:
    document = {**confirmatory.registration_document, "plan": {"mde": 0.15, "sigma_d": 0.3}}
    report = confirmatory.model_copy(update={"registration_document": document})
    effect = primary_effect(report)
    assert effect is not None
    assert [r.values for r in effect.references] == [(-0.1, 0.1), (-0.15, 0.15)]
    assert confirmatory.primary is not None
    one_sided = confirmatory.primary.model_copy(update={"sides": "greater"})
    effect = primary_effect(report.model_copy(update={"primary": one_sided}))
    assert effect is not None and effect.references[-1].values == (0.15,)
    fig = primary_effect_figure(report)
    assert fig is not None
    (ax,) = fig.axes
    legend = ax.get_legend()
    assert legend is not None
    labels = [t.get_text() for t in legend.get_texts()]
    assert any("MDE 0.15" in label for label in labels)
    assert any("margin ±0.1" in label for label in labels)


def test_a_single_arm_without_a_test_plots_its_rate(confirmatory: Report) -> None:
    arm = confirmatory.arms[0]
    report = confirmatory.model_copy(update={"primary": None, "arms": [arm]})
    effect = primary_effect(report)
    assert effect is not None and effect.kind == "rate"
    assert (effect.estimate, effect.low, effect.high) == (
        arm.rate,
        arm.interval.low,
        arm.interval.high,
    )
    assert effect.support == (0.0, 1.0)
    # with two arms and no primary test (no completed run) there is nothing to plot
    none = confirmatory.model_copy(update={"primary": None})
    assert primary_effect(none) is None and figures.primary_effect_png(none) is None
