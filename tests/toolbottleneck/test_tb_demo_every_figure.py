"""Issue 42's acceptance: ``prereg demo --study toolbottleneck`` runs offline with the
bundled families and draws every figure of the seed (Figures 2a-11).

Reads the session's bundled demo (the ``demo`` fixture of tests/toolbottleneck/conftest.py,
run once per worker and shared with the other demo modules): the capacity report and
each companion's (the structural holdout, the completion-cap sweep, the workflow
frontier and Discovery), each its own registration. The seed's figures are listed here
by hand, each with the report figure that draws it. Every one of the five reports also
plots its primary effect as tests/reports/test_report_primary_figure.py requires of every
bundled draft (that module leaves these five to this one, so they run once).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.reports.test_report_primary_figure import _assert_plots_its_primary_effect

#: seed figure -> the report figure that draws it (docs/toolbottleneck.md, the figures list)
SEED_FIGURES = {
    "2a": "tb_contrasts",
    "2b": "tb_cap_sweep",
    "3a": "tb_census",
    "3b": "tb_frontier",
    "3c": "tb_availability",
    "4a": "tb_repairs",
    "4b": "tb_decision",
    "5": "tb_family",
    "6": "tb_v_truncation",
    "7": "tb_configurations",
    "8": "tb_crossover",
    "9": "tb_frontier_episodes",
    "10": "tb_holdout",
    "11": "tb_decoder_gains",
}
#: the bundled companions' registrations, in the order the demo runs them
COMPANIONS = [
    "toolbottleneck-holdout",
    "toolbottleneck-capsweep",
    "toolbottleneck-frontier",
    "toolbottleneck-discovery",
]
PNG = b"\x89PNG\r\n\x1a\n"


def test_the_demo_draws_every_seed_figure(demo: dict[str, Any]) -> None:
    companions = demo["demo"]["companions"]
    assert demo["registration"] == "toolbottleneck-capacity"
    assert [c["registration"] for c in companions] == COMPANIONS
    reports = [demo, *companions]
    # every report is its own registration, run to the end offline, in its own folder
    assert len({r["digest"] for r in reports}) == len({r["report_dir"] for r in reports}) == 5
    for c in companions:
        assert c["run"]["remaining"] == 0 and c["run"]["completed"] == c["run"]["planned"] > 0
    drawn: dict[str, list[Path]] = {}
    for r in reports:
        for name in r["figures"]:
            drawn.setdefault(name, []).append(Path(r["report_dir"]) / "figures" / f"{name}.png")
    missing = {n: f for n, f in SEED_FIGURES.items() if f not in drawn}
    assert not missing, f"seed figures not drawn: {missing}"
    for name in SEED_FIGURES.values():
        for png in drawn[name]:
            assert png.is_file() and png.read_bytes()[:8] == PNG, png
            assert f"figures/{name}.png" in (png.parents[1] / "report.md").read_text()


def test_the_separate_experiments_draw_with_intervals(demo: dict[str, Any]) -> None:
    """Sized so the sweep and the crossover draw intervals (16 families, at least the 10
    below which none is printed): each figure has a point with a 95% interval holding its
    estimate, and any point without one carries its reason."""
    by = {c["registration"]: c for c in demo["demo"]["companions"]}
    figures = by["toolbottleneck-capsweep"]["toolbottleneck"]["figures"]
    for name in ("tb_cap_sweep", "tb_crossover"):
        points = next(f for f in figures if f["name"] == name)["points"]
        shown = [p for p in points if p["low"] is not None]
        assert shown, name
        assert all(p["low"] - 1e-9 <= p["value"] <= p["high"] + 1e-9 for p in shown)
        assert all(p["reason"] for p in points if p["low"] is None)
        # both caps of each line: the sweep's 1,024 and 16,384, the crossover's 1,024 and 4,096
        caps = {p["x"] for p in points}
        assert caps == ({1024.0, 16384.0} if name == "tb_cap_sweep" else {1024.0, 4096.0})
    frontier = by["toolbottleneck-frontier"]["toolbottleneck"]["figures"]
    levels = next(f for f in frontier if f["name"] == "tb_frontier")["points"]
    assert sorted(p["x"] for p in levels) == [0.0, 2.0, 6.0, 14.0]
    shares = next(
        f
        for f in by["toolbottleneck-discovery"]["toolbottleneck"]["figures"]
        if f["name"] == "tb_availability"
    )["points"]
    assert len(shares) == 4 and all(0.0 <= p["value"] <= 1.0 for p in shares)


def test_every_report_of_the_demo_plots_its_primary_effect(demo: dict[str, Any]) -> None:
    for r in (demo, *demo["demo"]["companions"]):
        _assert_plots_its_primary_effect(Path(r["report_dir"]))
