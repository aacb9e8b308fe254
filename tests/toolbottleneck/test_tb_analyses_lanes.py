"""Routed- versus fixed-menu lanes and the repairs' sentinel gains (issue 42, item 4;
seed appendix D and H), recomputed with numpy from hand-built episodes: family means, the
pair-averaged difference, its 95% percentile family-cluster interval by exact enumeration
of the families' multisets (itertools), tokens and the fixed lane's schema exposures."""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

import numpy as np
import pytest

from prereg.reports.toolbottleneck.lanes import (
    LaneArm,
    lane_pairs,
    lane_tables,
    routed_versus_fixed,
    sentinel_gains,
)
from tests.toolbottleneck.test_tb_analyses_capsweep import Ep, family


def _arms() -> dict[str, LaneArm]:
    out = {}
    for menu in (8, 128):
        for mode in ("routed", "fixed"):
            out[f"v{menu}-{mode}"] = LaneArm("sim", 1024, (menu, "low", "raw"), menu, mode)
    out["v128-fixed-other-cap"] = LaneArm("sim", 4096, (128, "low", "raw"), 128, "fixed")
    return out


def _records(arms: dict[str, LaneArm], families: int, repeats: int, seed: int = 1) -> list[Ep]:
    rng = np.random.default_rng(seed)
    out = []
    for arm, a in sorted(arms.items()):
        p = 0.85 if a.menu_mode == "routed" else 0.6
        for f in range(families):
            for s in range(2):
                for rep in range(repeats):
                    ok = bool(rng.random() < p)
                    out.append(
                        Ep(arm, f"fam{f}-s{s}", rep, "ok", ok, None if ok else "call_limit", "x", 3)
                    )
    return out


def ref_family_means(
    records: list[Ep], arm: str, tasks: set[str] | None = None
) -> dict[str, float]:
    runs: dict[str, list[float]] = defaultdict(list)
    for r in records:
        if r.arm == arm and (tasks is None or r.task_id in tasks):
            runs[r.task_id].append(float(r.success))
    fam: dict[str, list[float]] = defaultdict(list)
    for t, v in runs.items():
        fam[family(t)].append(float(np.mean(v)))
    return {f: float(np.mean(v)) for f, v in fam.items()}


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


def test_pairs_need_the_same_host_cap_and_cell() -> None:
    assert lane_pairs(_arms()) == [("v128-routed", "v128-fixed"), ("v8-routed", "v8-fixed")]


def test_routed_minus_fixed_against_numpy() -> None:
    arms = _arms()
    records = _records(arms, families=10, repeats=2)
    tokens = {
        (r.arm, r.task_id, r.repeat): 100.0 * (3 + (r.arm.endswith("fixed"))) for r in records
    }
    requests = {(r.arm, r.task_id, r.repeat): 2 + r.repeat for r in records}
    lanes = routed_versus_fixed(records, arms, family, tokens, requests)
    assert lanes is not None
    fams = [f"fam{i}" for i in range(10)]
    per_family = np.zeros(10)
    for plus, minus in (("v128-routed", "v128-fixed"), ("v8-routed", "v8-fixed")):
        a, b = ref_family_means(records, plus), ref_family_means(records, minus)
        per_family += np.array([a[f] - b[f] for f in fams]) / 2
    assert lanes.success.value == pytest.approx(per_family.mean())
    assert (lanes.success.low, lanes.success.high) == pytest.approx(ref_interval(per_family))
    assert lanes.episodes == 2 * 10 * 2 * 2
    assert lanes.tokens == pytest.approx((300.0, 400.0))
    fixed = [(a, k) for (a, _, _), k in requests.items() if a in ("v8-fixed", "v128-fixed")]
    want = np.mean([(8 if a == "v8-fixed" else 128) * k for a, k in fixed])
    assert lanes.fixed_exposures == pytest.approx(want)
    table = lane_tables(lanes, [])[0]
    assert table.rows[0][5] == "100.0"
    assert table.rows[0][7].startswith("withheld:")


def test_tiny_design_withholds_the_interval_and_null_tokens_read_not_measured() -> None:
    arms = _arms()
    records = _records(arms, families=2, repeats=1)
    tokens = {(r.arm, r.task_id, r.repeat): None for r in records}
    lanes = routed_versus_fixed(records, arms, family, tokens, {})
    assert lanes is not None
    assert lanes.success.low is None and lanes.success.reason == "too few families (2 < 10)"
    assert lanes.tokens == (None, None) and lanes.fixed_exposures is None
    row = lane_tables(lanes, [])[0].rows[0]
    assert row[2].endswith("too few families (2 < 10): no interval")
    assert row[3] == row[4] == row[5] == row[6] == "not measured"


def test_sentinel_gain_reads_only_the_tasks_run_twice_in_both_arms() -> None:
    arms = _arms()
    records = _records(arms, families=10, repeats=2)
    # fam0 and fam1 tasks ran once in the repaired arm: not sentinels
    records = [
        r
        for r in records
        if not (
            r.arm == "v128-routed" and r.repeat == 1 and r.task_id.startswith(("fam0-", "fam1-"))
        )
    ]
    gains = sentinel_gains(
        records,
        [("routed-menu", "V", "v128-routed", "v128-fixed"), ("none", "W", "v8-routed", "absent")],
        family,
    )
    g = gains[0]
    kept = {f"fam{f}-s{s}" for f in range(2, 10) for s in range(2)}
    a = ref_family_means(records, "v128-routed", kept)
    b = ref_family_means(records, "v128-fixed", kept)
    per_family = np.array([a[f] - b[f] for f in sorted(a)])
    assert (g.tasks, g.families, g.runs) == (16, 8, 2)
    assert g.gain is not None and g.gain.value == pytest.approx(per_family.mean())
    assert g.gain.reason == "too few families (8 < 10)"
    assert gains[1].gain is None and gains[1].tasks == 0
    table = lane_tables(None, gains)[0]
    assert table.rows[1][5] == "-; no task run twice in both arms"


def test_figure_4a_draws_each_repairs_l_gamma_and_sigma() -> None:
    from types import SimpleNamespace
    from typing import cast

    from prereg.experiments.toolbottleneck.study import StudyRepair
    from prereg.reports.model import Report
    from prereg.reports.render import figures
    from prereg.reports.render import study_figures as tb
    from prereg.reports.toolbottleneck.lanes import repair_figure
    from prereg.reports.toolbottleneck.model import StudyReport
    from prereg.reports.toolbottleneck.repairs import RepairRow, analyse_repairs

    rng = np.random.default_rng(4)
    p = {"rep-s": 0.8, "rep-u": 0.85, "ctl-s": 0.4, "ctl-u": 0.9}
    rows = [
        RepairRow(arm, f"fam{f}-s{s}", f"fam{f}", bool(rng.random() < q), 100.0)
        for arm, q in p.items()
        for f in range(10)
        for s in range(2)
    ]
    repair = StudyRepair.model_validate(
        {
            "id": "routed-menu",
            "pressure": "V",
            "repaired": {"stressed": "rep-s", "unstressed": "rep-u"},
            "control": {"stressed": "ctl-s", "unstressed": "ctl-u"},
        }
    )
    results, _ = analyse_repairs(rows, [repair], seed=0)
    figs = repair_figure(results)
    points = figs[0].points

    def mean(arm: str) -> float:
        fam: dict[str, list[float]] = defaultdict(list)
        for r in rows:
            if r.arm == arm:
                fam[r.family].append(float(r.success))
        return float(np.mean([np.mean(v) for v in fam.values()]))

    loss = mean("ctl-u") - mean("ctl-s")
    gain = mean("rep-s") - mean("ctl-s")
    sigma = gain - (mean("rep-u") - mean("ctl-u"))
    assert [pt.label for pt in points] == [
        "routed-menu (V): L",
        "routed-menu (V): Gamma",
        "routed-menu (V): Sigma",
    ]
    assert [pt.value for pt in points] == pytest.approx([loss, gain, sigma])
    study = StudyReport(label="x", tables=[], figures=figs)
    report = cast(Report, SimpleNamespace(toolbottleneck=study))
    fig = tb.tb_repairs_figure(report, figures._canvas)
    assert fig is not None
    drawn = [
        float(line.get_xdata()[0]) for line in fig.axes[0].get_lines() if line.get_marker() == "o"
    ]
    assert drawn == pytest.approx([100 * loss, 100 * gain, 100 * sigma])
