"""The workflow frontier (issue 42, item 4; seed Figure 3b and appendix E "Frontier"),
recomputed with numpy from hand-built episodes: each level's success (families equally),
calls, quartiles, episode-budget endings and median tokens; the contrasts h - 0 averaged
over groups with their 95% percentile family-cluster interval by exact enumeration of the
families' multisets (itertools); and Figure 3b's drawn points."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest

from prereg.reports.model import Report
from prereg.reports.render import figures
from prereg.reports.render import study_figures as tb
from prereg.reports.toolbottleneck.frontier import (
    FrontierArm,
    frontier_contrasts,
    frontier_figure,
    frontier_groups,
    frontier_levels,
    frontier_tables,
)
from prereg.reports.toolbottleneck.model import StudyReport
from tests.toolbottleneck.test_tb_analyses_capsweep import Ep, family

LEVELS = (0, 2, 6)


def _arms() -> dict[str, FrontierArm]:
    out = {}
    for config in ("a", "b"):
        for h in LEVELS:
            out[f"{config}-h{h}"] = FrontierArm(config, 8, "low", "raw", h)
        out[f"{config}-high"] = FrontierArm(config, 8, "high", "raw", 0)  # not a frontier level
    out["c-h2"] = FrontierArm("c", 8, "low", "raw", 2)  # no level 0: not a group
    return out


def _records(arms: dict[str, FrontierArm], families: int, seed: int = 2) -> list[Ep]:
    rng = np.random.default_rng(seed)
    out = []
    for arm, a in sorted(arms.items()):
        p = 0.9 - 0.1 * a.handoffs
        for f in range(families):
            for s in range(2):
                ok = bool(rng.random() < max(p, 0.05))
                flag = None if ok else ("episode_budget" if a.handoffs == 6 else "call_limit")
                calls = int(3 + 2 * a.handoffs + rng.integers(0, 3))
                out.append(Ep(arm, f"fam{f}-s{s}", 0, "ok", ok, flag, "x", calls))
    return out


def ref_family_rate(records: list[Ep], arm: str) -> dict[str, float]:
    by: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if r.arm == arm:
            by[family(r.task_id)].append(float(r.success))
    return {f: float(np.mean(v)) for f, v in by.items()}


def ref_interval(per_family: np.ndarray) -> tuple[float, float]:
    n = per_family.size
    vals, probs = [], []
    for combo in itertools.combinations_with_replacement(range(n), n):
        k = np.bincount(combo, minlength=n)
        vals.append(float(k @ per_family) / n)
        probs.append(math.factorial(n) / np.prod([math.factorial(x) for x in k]) / n**n)
    v, p = np.array(vals), np.array(probs)
    order = np.argsort(v, kind="stable")
    v, cdf = v[order], np.cumsum(p[order])
    return (
        float(v[min(int(np.searchsorted(cdf, 0.025 - 1e-12)), v.size - 1)]),
        float(v[min(int(np.searchsorted(cdf, 0.975 - 1e-12)), v.size - 1)]),
    )


def test_groups_read_the_handoffs_from_the_cells() -> None:
    groups = frontier_groups(_arms())
    assert groups == {
        ("a", 8, "raw"): {0: "a-h0", 2: "a-h2", 6: "a-h6"},
        ("b", 8, "raw"): {0: "b-h0", 2: "b-h2", 6: "b-h6"},
    }


def test_levels_and_contrasts_against_numpy() -> None:
    arms = _arms()
    records = _records(arms, families=10)
    tokens = {(r.arm, r.task_id, r.repeat): float(1000 * r.calls) for r in records}
    levels = frontier_levels(records, arms, family, tokens)
    assert [(lv.group[0], lv.handoffs) for lv in levels] == [
        (c, h) for c in ("a", "b") for h in LEVELS
    ]
    for lv in levels:
        rows = [r for r in records if r.arm == lv.arm]
        rate = ref_family_rate(records, lv.arm)
        assert lv.success == pytest.approx(np.mean(list(rate.values())))
        calls = np.array([r.calls for r in rows], dtype=float)
        assert lv.mean_calls == pytest.approx(calls.mean())
        assert lv.calls_quartiles == pytest.approx(tuple(np.percentile(calls, [25, 50, 75])))
        assert lv.over_budget == sum(r.terminal_flag == "episode_budget" for r in rows)
        assert lv.median_tokens == pytest.approx(np.median(1000 * calls))
    contrasts = frontier_contrasts(records, arms, family)
    assert [c.handoffs for c in contrasts] == [2, 6]
    fams = [f"fam{i}" for i in range(10)]
    for c in contrasts:
        per_family = np.zeros(10)
        for config in ("a", "b"):
            hi = ref_family_rate(records, f"{config}-h{c.handoffs}")
            lo = ref_family_rate(records, f"{config}-h0")
            per_family += np.array([hi[f] - lo[f] for f in fams]) / 2
        assert c.groups == 2 and c.families == 10
        assert c.estimate is not None
        assert c.estimate.value == pytest.approx(per_family.mean())
        assert (c.estimate.low, c.estimate.high) == pytest.approx(ref_interval(per_family))
    tables = frontier_tables(levels, contrasts)
    assert [r[0] for r in tables[1].rows] == ["2 handoffs - 0", "6 handoffs - 0"]


def test_tiny_design_withholds_and_null_tokens_read_not_measured() -> None:
    arms = _arms()
    records = _records(arms, families=2)
    levels = frontier_levels(records, arms, family, {})
    assert all(lv.median_tokens is None for lv in levels)
    contrasts = frontier_contrasts(records, arms, family)
    assert all(
        c.estimate is not None and c.estimate.reason == "too few families (2 < 10)"
        for c in contrasts
    )
    tables = frontier_tables(levels, contrasts)
    assert tables[0].rows[0][-1] == "not measured"
    assert tables[1].rows[0][3].endswith("too few families (2 < 10): no interval")


def test_figure_3b_draws_each_level() -> None:
    arms = _arms()
    records = _records(arms, families=3)
    levels = frontier_levels(records, arms, family, {})
    study = StudyReport(label="x", tables=[], figures=frontier_figure(levels))
    report = cast(Report, SimpleNamespace(toolbottleneck=study))
    fig = tb.tb_frontier_figure(report, figures._canvas)
    assert fig is not None
    drawn = [
        [
            (float(x), round(float(y), 9))
            for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)
        ]
        for line in fig.axes[0].get_lines()
    ]
    want = [
        [
            (float(lv.handoffs), round(100 * lv.success, 9))
            for lv in levels
            if lv.group[0] == c and lv.success is not None
        ]
        for c in ("a", "b")
    ]
    assert drawn == want
    caption = figures.caption("tb_frontier", report)
    assert "1 a / " not in caption and "1 a V=8 D=raw" in caption and "2 b V=8 D=raw" in caption


def test_figure_9_draws_every_frontier_episode() -> None:
    from prereg.reports.toolbottleneck.frontier import frontier_episodes_figure

    arms = _arms()
    records = _records(arms, families=3)
    tokens = {(r.arm, r.task_id, r.repeat): float(900 * r.calls + 7) for r in records}
    figs = frontier_episodes_figure(records, arms, tokens)
    assert len(figs) == 1
    study = StudyReport(label="x", tables=[], figures=figs)
    report = cast(Report, SimpleNamespace(toolbottleneck=study))
    fig = tb.tb_frontier_episodes_figure(report, figures._canvas)
    assert fig is not None
    drawn = sorted(
        (float(x), float(y), line.get_markerfacecolor() != "white")
        for line in fig.axes[0].get_lines()
        for x, y in zip(line.get_xdata(), line.get_ydata(), strict=True)
    )
    frontier = {f"{c}-h{h}" for c in ("a", "b") for h in LEVELS}
    want = sorted(
        (float(r.calls), 900.0 * r.calls + 7, r.terminal_flag == "episode_budget")
        for r in records
        if r.arm in frontier
    )
    assert drawn == want
    # a token count not measured: no figure (never read as zero)
    unit = next(k for k in tokens if k[0] == "a-h6")
    missing: dict[tuple[str, str, int], float | None] = {**tokens, unit: None}
    assert frontier_episodes_figure(records, arms, missing) == []


def test_a_study_runs_report_has_the_frontier_and_the_lanes() -> None:
    """``prereg study run``'s report.md (study_markdown) on hand-made study records: two
    families, the low cell routed and fixed and a 2-handoff frontier arm; success by hand."""
    from prereg.reports.toolbottleneck.study import study_markdown
    from tests.toolbottleneck.test_tb_decoder import _rec

    low = {"V": 8, "W": "low", "D": "raw"}
    records = []
    for f in ("fa", "fb"):
        for s in range(2):
            task = f"{f}@{s}"
            records.append(_rec("base", low, True, task=task))
            records.append(
                _rec("base-fixed", low, s == 0, task=task).model_copy(update={"menu_mode": "fixed"})
            )
            records.append(
                _rec("h2", {**low, "handoffs": 2}, f == "fa" and s == 0, task=task, calls=6)
            )
    text = study_markdown(records, "base", digest="sha256:" + "0" * 64, draws=200)
    assert "## Workflow frontier" in text and "## Routed- versus fixed-menu lanes" in text
    frontier = text[text.index("## Frontier contrasts") :]
    # h2 - base: family fa (1/2 - 1), family fb (0 - 1): mean -75 pp
    assert (
        "| 2 handoffs - 0 | 1 | 2 | -75.0 pp; too few families (2 &lt; 10): no interval |"
        in frontier
    )
    lanes = text[text.index("## Routed- versus fixed-menu lanes") :]
    # routed - fixed: each family 1 - 1/2
    assert "+50.0 pp; too few families (2 &lt; 10): no interval" in lanes
