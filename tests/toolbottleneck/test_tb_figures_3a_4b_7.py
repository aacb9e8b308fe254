"""The seed's Figure 3a (the failure census: how failed episodes end), Figure 4b (each
repair against every configuration switch, the decision matrix) and Figure 7 (the
per-configuration effects with the organisation-equal reweighting, Table 4's numbers)
drawn from the records (issue 42, item 4): each plotted value recomputed with numpy from
the exported records of the bundled study and of a two-family study with infrastructure
failures under both registered policies; the PNGs exist after `prereg demo --study
toolbottleneck`; what has no interval says why, and a study without a failure withholds
the census figure with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from prereg.reports.model import Report
from prereg.reports.render import figures
from prereg.reports.render import study_figures as tb
from prereg.reports.toolbottleneck.configurations import CONFIGURATION_NO_INTERVAL
from prereg.reports.toolbottleneck.model import StudyReport
from prereg.reports.toolbottleneck.registered import CENSUS_NO_INTERVAL, census_figure
from tests.toolbottleneck.test_tb_configuration_effects import (
    _by_hand_menu,
    _configurations,
    _family_means,
)
from tests.toolbottleneck.test_tb_infra_counting import ITT, RETRY, _scored

#: The seed's terminal flags (5.3), in the census's order, written out here.
FLAGS = [
    "completion_cap",
    "episode_budget",
    "call_limit",
    "turn_limit",
    "infeasible",
    "wrong_conclusion",
    "contract_break",
]


def _report(data: dict[str, Any]) -> Report:
    fields = set(Report.model_fields)
    return Report.model_validate({k: v for k, v in data.items() if k in fields})


def _by_hand(scored: list[dict[str, Any]], counting: bool) -> dict[str, tuple[int, int, float]]:
    """Each failure class's (count, failures, share) with numpy: the failed scored
    episodes by terminal flag (none given: a contract break), and under count_as_failure
    the counted infrastructure failures as their own class."""
    failed = [r for r in scored if r["success"] is False]
    classes = np.array(
        [
            "infrastructure" if r.get("counted") else (r.get("terminal_flag") or "contract_break")
            for r in failed
        ]
    )
    n = len(classes)
    names = FLAGS + (["infrastructure"] if counting else [])
    out = {}
    for name in names:
        k = int(np.sum(classes == name))
        out[name] = (k, n, k / n)
    return out


def _bars(fig: Any) -> tuple[list[str], list[float]]:
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    return labels, [float(p.get_width()) for p in ax.patches]


def _check(data: dict[str, Any], scored: list[dict[str, Any]], counting: bool) -> None:
    report = _report(data)
    want = _by_hand(scored, counting)
    assert sum(k for k, _, _ in want.values()) > 0
    fig = tb.tb_census_figure(report, figures._canvas)
    assert fig is not None
    labels, widths = _bars(fig)
    assert labels == [f"{name} ({k} of {n})" for name, (k, n, _) in want.items()]
    assert widths == pytest.approx([100 * s for _, _, s in want.values()], abs=1e-9)
    # the same numbers as the census table's "(all)" row
    table = next(
        t
        for t in data["toolbottleneck"]["tables"]
        if t["title"].startswith("Failure census: how failed episodes ended")
    )
    pooled = next(row for row in table["rows"] if row[0] == "(all)")
    assert int(pooled[2]) == next(iter(want.values()))[1]
    for name, (k, _, _) in want.items():
        cell = pooled[table["columns"].index(name)]
        assert cell.startswith(f"{k} (")
    # no interval, and the reason given on every point and in the caption
    points = tb.study_figure(report, "tb_census")
    assert points is not None
    assert all(p.low is None and p.high is None for p in points.points)
    assert all(p.reason == CENSUS_NO_INTERVAL for p in points.points)
    assert "no interval" in figures.caption("tb_census", report)
    assert "tb_census" in data["figures"]
    assert figures.FIGURES["tb_census"][0](report) is not None  # the PNG


def test_bundled_study_census_figure(demo: dict[str, Any]) -> None:
    scored = [r for r in demo["records"] if r["status"] == "ok"]
    _check(demo, scored, counting=False)
    pngs = list(demo["root"].rglob("figures/tb_census.png"))
    assert pngs and all(p.stat().st_size > 0 for p in pngs)


@pytest.mark.parametrize("reg_id", [ITT, RETRY])
def test_two_family_census_figure_with_infrastructure_failures(
    reports: dict[str, dict[str, Any]], reg_id: str
) -> None:
    """Two families: under count_as_failure the counted infrastructure failures are the
    failures, drawn as their own class; under retry no scored episode fails, so the
    figure is withheld, the reason in report.json, and not listed or drawn."""
    data = reports[reg_id]
    counting = reg_id == ITT
    scored = _scored(data["records"], counting=counting)
    if not any(r["success"] is False for r in scored):
        assert not counting
        report = _report(data)
        assert tb.tb_census_figure(report, figures._canvas) is None
        assert "tb_census" not in data["figures"]
        withheld = [f for f in data["toolbottleneck"]["figures"] if f["name"] == "tb_census"]
        assert withheld == [
            {
                "name": "tb_census",
                "points": [],
                "level": None,
                "withheld": "no failed episode to classify",
            }
        ]
        return
    _check(data, scored, counting)
    fig = tb.tb_census_figure(_report(data), figures._canvas)
    labels, _ = _bars(fig)
    assert any(label.startswith("infrastructure (") for label in labels) == counting


@dataclass(frozen=True)
class Row:
    arm: str
    task_id: str
    success: bool | None
    terminal_flag: str | None = None
    first_unmet_obligation: str | None = None
    calls: int = 1
    repeat: int = 0
    status: str = "ok"


def test_no_failure_withholds_the_census_figure_with_its_reason() -> None:
    rows = [Row("a", "t-0", True), Row("b", "t-1", True)]
    (figure,) = census_figure(rows, None)
    assert figure.points == [] and figure.withheld == "no failed episode to classify"
    report = Report.model_construct(
        toolbottleneck=StudyReport(label="SIMULATED", tables=[], figures=[figure])
    )
    assert tb.tb_census_figure(report, figures._canvas) is None
    assert figures.FIGURES["tb_census"][0](report) is None


def test_hand_counted_census_figure() -> None:
    """Three failures by hand: two at the cap, one with no flag (a contract break), and
    an infra_error record left out; shares 2/3 and 1/3."""
    rows = [
        Row("a", "t-0", False, "completion_cap"),
        Row("a", "t-1", False, "completion_cap"),
        Row("b", "t-2", False, None),
        Row("b", "t-3", True),
        Row("b", "t-4", None, status="infra_error"),
    ]
    (figure,) = census_figure(rows, "retry")
    shares = {p.label: p.value for p in figure.points}
    assert shares["completion_cap (2 of 3)"] == pytest.approx(2 / 3)
    assert shares["contract_break (1 of 3)"] == pytest.approx(1 / 3)
    assert sum(shares.values()) == pytest.approx(1.0)
    assert len(shares) == len(FLAGS)


def _by_hand_figure7(
    data: dict[str, Any], scored: list[dict[str, Any]]
) -> list[tuple[str, float, float | None]]:
    """Figure 7's points with numpy: per contrast, each configuration's effect (its own
    arms' weights, times the number of configurations, over family-equal cell means) with
    its largest-menu truncation, then the organisation-equal reweighting (one
    organisation here, the simulated policy: the plain mean over configurations)."""
    config = _configurations(data)
    cut = {name: t for name, (_, t, _) in _by_hand_menu(data, scored).items()}
    out: list[tuple[str, float, float | None]] = []
    for contrast in data["contrasts"]:
        weights: dict[str, float] = contrast["weights"]
        arms = list(weights)
        means = _family_means(scored, arms)
        assert means is not None
        groups = sorted({config[a] for a in arms})
        values = []
        for g in groups:
            w = np.array([weights[a] if config[a] == g else 0.0 for a in arms])
            values.append(len(groups) * float(w @ means))
            out.append((f"{contrast['id']}: {g}", values[-1], cut.get(g)))
        out.append(
            (f"{contrast['id']}: organisation-equal reweighting", float(np.mean(values)), None)
        )
    return out


def _check_figure7(data: dict[str, Any], scored: list[dict[str, Any]]) -> None:
    report = _report(data)
    want = _by_hand_figure7(data, scored)
    points = tb.study_figure(report, "tb_configurations")
    assert points is not None
    assert [p.label for p in points.points] == [label for label, _, _ in want]
    assert [p.value for p in points.points] == pytest.approx([v for _, v, _ in want], abs=1e-12)
    for p, (_, _, x) in zip(points.points, want, strict=True):
        assert (p.x is None) == (x is None)
        if x is not None:
            assert p.x == pytest.approx(x, abs=1e-12)
    assert all(p.low is None and p.reason == CONFIGURATION_NO_INTERVAL for p in points.points)
    fig = tb.tb_configurations_figure(report, figures._canvas)
    assert fig is not None
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [label for label, _, _ in want]
    drawn = [ln for ln in ax.get_lines() if ln.get_marker() in ("o", "D")]
    assert all(ln.get_mfc() == "white" for ln in drawn)  # no interval: open markers
    assert [float(ln.get_xdata()[0]) for ln in drawn] == pytest.approx(
        [100 * v for _, v, _ in want], abs=1e-9
    )
    assert [ln.get_marker() for ln in drawn] == [
        "D" if label.endswith("reweighting") else "o" for label, _, _ in want
    ]
    # the same numbers as Table 4's rows, to the printed rounding
    table = next(
        t
        for t in data["toolbottleneck"]["tables"]
        if t["title"].startswith("Per-configuration effects with organisation-equal")
    )
    rows = {row[0]: row for row in table["rows"]}
    for label, value, _ in want:
        contrast, row = label.split(": ", 1)
        assert rows[row][table["columns"].index(contrast)] == f"{100 * value:+.1f}"
    assert "open markers: no interval" in figures.caption("tb_configurations", report)
    assert "tb_configurations" in data["figures"]


def test_bundled_study_figure7(demo: dict[str, Any]) -> None:
    _check_figure7(demo, [r for r in demo["records"] if r["status"] == "ok"])
    pngs = list(demo["root"].rglob("figures/tb_configurations.png"))
    assert pngs and all(p.stat().st_size > 0 for p in pngs)


@pytest.mark.parametrize("reg_id", [ITT, RETRY])
def test_two_family_figure7_with_infrastructure_failures(
    reports: dict[str, dict[str, Any]], reg_id: str
) -> None:
    data = reports[reg_id]
    _check_figure7(data, _scored(data["records"], counting=reg_id == ITT))


# --- Figure 4b: the decision matrix ------------------------------------------------------


def _decision_rows(families: int, seed: int = 5) -> list[Any]:
    """One task per family, two repeats; the repaired lane, its control and two switches
    (``k``, ``m``) at the stressed cell, success drawn per arm."""
    from prereg.reports.toolbottleneck.repairs import RepairRow

    rng = np.random.default_rng(seed)
    p = {"rep-s": 0.8, "rep-u": 0.85, "ctl-s": 0.3, "ctl-u": 0.9, "k1": 0.6, "m1": 0.2}
    return [
        RepairRow(arm, f"fam{f}-s0", f"fam{f}", bool(rng.random() < q), 100.0 + 10 * len(arm))
        for arm, q in p.items()
        for f in range(families)
        for _ in range(2)
    ]


def _decision_repair() -> Any:
    from prereg.experiments.toolbottleneck.study import StudyRepair

    return StudyRepair.model_validate(
        {
            "id": "routed-menu",
            "pressure": "V",
            "repaired": {"stressed": "rep-s", "unstressed": "rep-u"},
            "control": {"stressed": "ctl-s", "unstressed": "ctl-u"},
            "switches": [
                {"id": "k", "stressed": "k1", "unstressed": "ctl-u"},
                {"id": "m", "stressed": "m1", "unstressed": "ctl-u"},
            ],
        }
    )


def _family_difference(rows: list[Any], a: str, b: str) -> float:
    """Mean over families of (family mean in a) - (family mean in b), with numpy."""
    fams = sorted({r.family for r in rows})

    def mean(arm: str, fam: str) -> float:
        return float(np.mean([float(r.success) for r in rows if r.arm == arm and r.family == fam]))

    return float(np.mean([mean(a, f) - mean(b, f) for f in fams]))


def _decision_report(rows: list[Any]) -> tuple[Report, list[Any], Any]:
    from prereg.reports.toolbottleneck.registered import decision_figure
    from prereg.reports.toolbottleneck.repairs import analyse_repairs, repair_tables

    results, failed = analyse_repairs(rows, [_decision_repair()], seed=0)
    figs = decision_figure(results)
    report = Report.model_construct(
        toolbottleneck=StudyReport(label="SIMULATED", tables=[], figures=figs)
    )
    matrix = next(
        t for t in repair_tables(results, failed) if t[0].startswith("Decision matrix at")
    )
    return report, figs, matrix


def test_figure_4b_draws_every_switch_with_the_matrix_interval() -> None:
    rows = _decision_rows(12)
    report, figs, matrix = _decision_report(rows)
    (fig_data,) = figs
    labels = [p.label for p in fig_data.points]
    # the repaired lane against the control's incumbent lane and both switches
    assert all(label.startswith("routed-menu vs ") for label in labels)
    by_switch = {p.label.split(" vs ", 1)[1].split(" (", 1)[0]: p for p in fig_data.points}
    assert {"k", "m"} <= set(by_switch)
    for switch, arm in (("k", "k1"), ("m", "m1")):
        assert by_switch[switch].value == pytest.approx(_family_difference(rows, "rep-s", arm))
    # each point is the matrix row it repeats: the printed value and interval
    _, header, body, _ = matrix
    assert len(body) == len(fig_data.points)
    for point, row in zip(fig_data.points, body, strict=True):
        cell = row[header.index("success")]
        assert cell.startswith(f"{100 * point.value + 0.0:+.1f} pp")
        assert point.low is not None and point.high is not None
        assert point.low <= point.value <= point.high
        assert f"{100 * point.low + 0.0:+.1f}" in cell and f"{100 * point.high + 0.0:+.1f}" in cell
    fig = tb.tb_decision_figure(report, figures._canvas)
    assert fig is not None
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == labels
    assert figures.FIGURES["tb_decision"][0](report) is not None


def test_figure_4b_two_families_withholds_every_interval_with_the_reason() -> None:
    rows = _decision_rows(2)
    report, figs, _ = _decision_report(rows)
    (fig_data,) = figs
    assert fig_data.points
    assert all(p.low is None and p.high is None for p in fig_data.points)
    assert all("too few families (2 < 10)" in str(p.reason) for p in fig_data.points)
    for p in fig_data.points:
        switch = p.label.split(" vs ", 1)[1].split(" (", 1)[0]
        arm = {"k": "k1", "m": "m1"}.get(switch)
        if arm is not None:
            assert p.value == pytest.approx(_family_difference(rows, "rep-s", arm))
    # no interval anywhere: the figure is not drawn (as Figure 2a), never drawn as certain
    assert tb.tb_decision_figure(report, figures._canvas) is None
    assert figures.FIGURES["tb_decision"][0](report) is None


def test_bundled_study_figure4b_repeats_the_decision_matrix(demo: dict[str, Any]) -> None:
    report = _report(demo)
    data = tb.study_figure(report, "tb_decision")
    matrix = next(
        (
            t
            for t in demo["toolbottleneck"]["tables"]
            if t["title"].startswith("Decision matrix at")
        ),
        None,
    )
    if matrix is None:
        assert data is None and "tb_decision" not in demo["figures"]
        return
    assert data is not None and len(data.points) == len(matrix["rows"])
    cols = matrix["columns"]
    for point, row in zip(data.points, matrix["rows"], strict=True):
        assert point.label == (
            f"{row[cols.index('repair')]} vs {row[cols.index('switch')]} "
            f"(incumbent {row[cols.index('incumbent')]})"
        )
        assert row[cols.index("success")].startswith(f"{100 * point.value + 0.0:+.1f} pp")
    drawn = tb.tb_decision_figure(report, figures._canvas) is not None
    assert drawn == ("tb_decision" in demo["figures"])
    assert drawn == any(p.low is not None for p in data.points)
    if drawn:
        assert list(demo["root"].rglob("figures/tb_decision.png"))
