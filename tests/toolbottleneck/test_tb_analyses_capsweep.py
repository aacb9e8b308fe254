"""The completion-cap sweep in full (issue 42, item 4; seed appendix E.1, Tables 7 and 9).

Every figure is recomputed here with an independent numpy implementation: family means
from the raw episodes, the paired menu contrast over the endpoint W x D cells, the
interaction, truncation, the strata, the repeats' disagreement and the 95% percentile
family-cluster bootstrap interval, by exact enumeration of every multiset of the families
(itertools, not prereg's enumeration) with its multinomial probability.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from prereg.reports.toolbottleneck.capsweep import (
    Estimate,
    SweepArm,
    cap_sweeps,
    stratum_of,
    sweep_figure,
    sweep_tables,
)
from prereg.runners.store.choose import open_store
from tests.toolbottleneck.helpers import as_yaml, family_doc

CELLS = [(w, d) for w in ("low", "high") for d in ("raw", "linked")]


@dataclass(frozen=True)
class Ep:
    arm: str
    task_id: str
    repeat: int
    status: str
    success: bool | None
    terminal_flag: str | None
    first_unmet_obligation: str | None
    calls: int
    counted_failure: bool = False


def family(task: str) -> str:
    return task.rpartition("-s")[0]


def _arms(configs: dict[str, tuple[int, ...]]) -> dict[str, SweepArm]:
    out = {}
    for config, caps in configs.items():
        for cap in caps:
            for menu in (8, 128):
                for w, d in CELLS:
                    out[f"{config}-c{cap}-v{menu}-{w}-{d}"] = SweepArm(
                        f"{config} / routed", cap, menu, w, d
                    )
    return out


def _records(
    arms: dict[str, SweepArm],
    families: int,
    repeats: int,
    cut: dict[tuple[str, int], float],
    seed: int = 3,
) -> list[Ep]:
    """Two tasks per family; the large menu at (configuration, cap) truncates with
    probability ``cut``; otherwise success at 0.8 (a null configuration: success fixed
    per task, so the menu has no effect)."""
    rng = np.random.default_rng(seed)
    out = []
    for arm, a in sorted(arms.items()):
        name = a.configuration.split(" / ")[0]
        for f in range(families):
            for s in range(2):
                task = f"fam{f}-s{s}"
                for rep in range(repeats):
                    if name == "null":
                        ok = (f + s) % 3 != 0
                        out.append(
                            Ep(
                                arm,
                                task,
                                rep,
                                "ok",
                                ok,
                                None if ok else "wrong_conclusion",
                                None,
                                3,
                            )
                        )
                        continue
                    p_cut = cut.get((name, a.cap), 0.0) if a.menu == 128 else 0.0
                    if rng.random() < p_cut:
                        out.append(
                            Ep(arm, task, rep, "ok", False, "completion_cap", "selection", 0)
                        )
                    else:
                        ok = bool(rng.random() < 0.8)
                        out.append(
                            Ep(
                                arm,
                                task,
                                rep,
                                "ok",
                                ok,
                                None if ok else "call_limit",
                                "dependencies",
                                4,
                            )
                        )
    return out


# --- the independent reference --------------------------------------------------------------


def ref_family_matrix(records: list[Ep], arms: list[str]) -> tuple[list[str], np.ndarray]:
    runs: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in records:
        if r.arm in arms and (r.status == "ok" or r.counted_failure):
            runs[(r.task_id, r.arm)].append(1.0 if r.success else 0.0)
    tasks = sorted({t for t, a in runs if all((t, b) in runs for b in arms)})
    fams = sorted({family(t) for t in tasks})
    m = np.zeros((len(fams), len(arms)))
    for i, f in enumerate(fams):
        ts = [t for t in tasks if family(t) == f]
        for j, a in enumerate(arms):
            m[i, j] = np.mean([np.mean(runs[(t, a)]) for t in ts])
    return fams, m


def ref_multisets(n: int) -> tuple[np.ndarray, np.ndarray]:
    rows, probs = [], []
    for combo in itertools.combinations_with_replacement(range(n), n):
        k = np.bincount(combo, minlength=n)
        rows.append(k)
        probs.append(math.factorial(n) / np.prod([math.factorial(x) for x in k]) / n**n)
    return np.array(rows, dtype=float), np.array(probs)


def ref_interval(values: np.ndarray, prob: np.ndarray) -> tuple[float, float]:
    order = np.argsort(values, kind="stable")
    v, cdf = values[order], np.cumsum(prob[order])
    lo = v[min(int(np.searchsorted(cdf, 0.025 - 1e-12)), v.size - 1)]
    hi = v[min(int(np.searchsorted(cdf, 0.975 - 1e-12)), v.size - 1)]
    return float(lo), float(hi)


def contrast_weights(
    arms: dict[str, SweepArm], columns: list[str], config: str, cap: int
) -> np.ndarray:
    w = np.zeros(len(columns))
    for j, a in enumerate(columns):
        x = arms[a]
        if x.configuration == config and x.cap == cap:
            w[j] = (1 if x.menu == 128 else -1) / 4
    return w


def ref_truncation(records: list[Ep], arms: dict[str, SweepArm], config: str, cap: int) -> float:
    rs = [
        r
        for r in records
        if arms[r.arm].configuration == config
        and arms[r.arm].cap == cap
        and arms[r.arm].menu == 128
    ]
    return sum(r.terminal_flag == "completion_cap" for r in rs) / len(rs)


def ref_disagreement(records: list[Ep], arm_ids: set[str]) -> float:
    runs: dict[tuple[str, str], list[bool]] = defaultdict(list)
    for r in records:
        if r.arm in arm_ids:
            runs[(r.arm, r.task_id)].append(bool(r.success))
    kept = [v for v in runs.values() if len(v) >= 2]
    return float(np.mean([len(set(v)) > 1 for v in kept]))


def _close(e: Estimate, value: float, bounds: tuple[float, float] | None) -> None:
    assert e.value == pytest.approx(value, abs=1e-12)
    if bounds is None:
        assert e.low is None and e.high is None and e.reason
    else:
        assert (e.low, e.high) == pytest.approx(bounds, abs=1e-12)


# --- tests ----------------------------------------------------------------------------------


def test_every_figure_of_the_sweep_against_numpy_with_ten_families() -> None:
    configs = {"heavy": (1024, 16384), "mild": (1024, 16384), "null": (1024, 16384)}
    arms = _arms(configs)
    cut = {("heavy", 1024): 0.5, ("mild", 1024): 0.12}
    records = _records(arms, families=10, repeats=2, cut=cut)
    sweeps = cap_sweeps(records, arms, family)
    assert [s.kind for s in sweeps] == ["sweep"]
    s = sweeps[0]
    columns = list(arms)
    fams, m = ref_family_matrix(records, columns)
    assert s.families == len(fams) == 10 and s.exact
    counts, prob = ref_multisets(10)
    means = counts @ m / 10
    point = m.mean(axis=0)

    def check(e: Estimate, w: np.ndarray) -> None:
        bounds: tuple[float, float] | None = ref_interval(means @ w, prob)
        if bounds is not None and bounds[1] - bounds[0] <= 1e-12:
            bounds = None  # no spread: withheld, with its reason
        _close(e, float(point @ w), bounds)

    by_name = {r.name: r for r in s.rows}
    vectors = {}
    for config in configs:
        name = f"{config} / routed"
        lo = contrast_weights(arms, columns, name, 1024)
        hi = contrast_weights(arms, columns, name, 16384)
        vectors[config] = (lo, hi)
        row = by_name[name]
        check(row.low, lo)
        check(row.high, hi)
        check(row.interaction, hi - lo)
        t_lo = ref_truncation(records, arms, name, 1024)
        t_hi = ref_truncation(records, arms, name, 16384)
        assert row.truncation == pytest.approx((t_lo, t_hi))
        assert row.check is (t_hi <= 0.05)
        ids = {a for a, x in arms.items() if x.configuration == name}
        assert row.disagreement == pytest.approx(ref_disagreement(records, ids))
        assert row.cells == 4
    # the strata, by the seed's rule, from the low cap
    assert by_name["heavy / routed"].stratum == "B"
    assert by_name["mild / routed"].stratum == "M"
    assert by_name["null / routed"].stratum == "N"
    # pooled rows: each the mean of its configurations' weights (B: those passing the check)
    pooled = {r.stratum: r for r in s.pooled}
    for label, members in (
        ("B", ["heavy"]),
        ("M", ["mild"]),
        ("N", ["null"]),
        ("all", list(configs)),
    ):
        lo = np.mean([vectors[c][0] for c in members], axis=0)
        hi = np.mean([vectors[c][1] for c in members], axis=0)
        check(pooled[label].low, lo)
        check(pooled[label].high, hi)
        check(pooled[label].interaction, hi - lo)
        assert pooled[label].pooled == len(members)
    # the margin decision reads the interval
    heavy = by_name["heavy / routed"].interaction
    assert heavy.low is not None and heavy.low > 0.05
    assert by_name["heavy / routed"].decision == "clears the 5-point margin"
    # the per-cap disagreement in the note
    for cap, share in s.disagreement_by_cap:
        ids = {a for a, x in arms.items() if x.cap == cap}
        assert share == pytest.approx(ref_disagreement(records, ids))
    # the table prints the same numbers; Figure 2b repeats them
    table = sweep_tables(sweeps)[0]
    first = next(r for r in table.rows if r[0] == "heavy / routed")
    assert first[5].startswith(f"{100 * float(point @ vectors['heavy'][0]) + 0.0:+.1f} pp [")
    fig = sweep_figure(sweeps)[0]
    assert fig.name == "tb_cap_sweep"
    assert len(fig.points) == 2 * (len(s.rows) + len(s.pooled))
    assert fig.points[0].value == pytest.approx(s.rows[0].low.value)


def test_a_stratum_b_configuration_failing_the_check_is_left_out_of_the_primary_row() -> None:
    configs = {"heavy": (1024, 16384), "stubborn": (1024, 16384)}
    arms = _arms(configs)
    cut = {("heavy", 1024): 0.5, ("stubborn", 1024): 0.6, ("stubborn", 16384): 0.4}
    records = _records(arms, families=3, repeats=2, cut=cut)
    s = cap_sweeps(records, arms, family)[0]
    rows = {r.name: r for r in s.rows}
    assert rows["stubborn / routed"].stratum == "B" and rows["stubborn / routed"].check is False
    assert {r.name: r.pooled for r in s.pooled} == {"Stratum B (1 cfg.)": 1, "All (2 cfg.)": 2}


def test_a_third_cap_gives_the_crossover_with_strata_b_s_n() -> None:
    arms = _arms({"heavy": (1024, 4096, 16384)})
    records = _records(
        arms, families=2, repeats=1, cut={("heavy", 1024): 0.6, ("heavy", 4096): 0.3}
    )
    sweeps = cap_sweeps(records, arms, family)
    assert [s.kind for s in sweeps] == ["sweep", "crossover"]
    assert sweeps[0].rows[0].caps == (1024, 16384)
    assert sweeps[1].rows[0].caps == (1024, 4096)
    titles = [t.title for t in sweep_tables(sweeps)]
    assert "Table 9" in titles[0] and "Crossover at cap 4096" in titles[1]


def test_strata_rules_by_hand() -> None:
    assert stratum_of("sweep", 0.20, -0.5) == "B"
    assert stratum_of("sweep", 0.05, 0.0) == "M"
    assert stratum_of("sweep", 0.0, -0.03) == "N"
    assert stratum_of("sweep", 0.0, -0.031) == "-"
    assert stratum_of("sweep", 0.04, 0.0) == "-"
    assert stratum_of("crossover", 0.15, -0.08) == "S"
    assert stratum_of("crossover", 0.10, -0.02) == "-"
    assert stratum_of("crossover", 0.0, 0.01) == "N"


def test_tiny_design_withholds_every_interval_and_decision() -> None:
    """Two families, one repeat: point estimates only, each with its reason."""
    arms = _arms({"heavy": (1024, 16384)})
    records = _records(arms, families=2, repeats=1, cut={("heavy", 1024): 0.5})
    s = cap_sweeps(records, arms, family)[0]
    for r in (*s.rows, *s.pooled):
        for e in (r.low, r.high, r.interaction):
            assert e.low is None and e.reason == "too few families (2 < 10)"
        assert r.decision == "not decided: too few families (2 < 10)"
    assert s.rows[0].disagreement is None
    table = sweep_tables([s])[0]
    assert "no interval" in table.rows[0][5] and "[" not in table.rows[0][5]
    assert table.rows[0][-1] == "-"
    assert table.note is not None and "Dis. needs two repeats" in table.note


def test_infrastructure_failures_count_as_failures_never_as_truncated() -> None:
    arms = _arms({"heavy": (1024, 16384)})
    records = _records(arms, families=2, repeats=1, cut={})
    large = next(a for a, x in arms.items() if x.menu == 128 and x.cap == 1024)
    replaced = [r for r in records if not (r.arm == large and r.task_id == "fam0-s0")]
    replaced.append(
        Ep(large, "fam0-s0", 0, "infra_error", False, "infrastructure", "infrastructure", 0, True)
    )
    s = cap_sweeps(replaced, arms, family)[0]
    columns = list(arms)
    _, m = ref_family_matrix(replaced, columns)
    w = contrast_weights(arms, columns, "heavy / routed", 1024)
    assert s.rows[0].low.value == pytest.approx(float(m.mean(axis=0) @ w))
    assert s.rows[0].truncation[0] == 0.0


def test_the_released_v_effect_is_the_given_panel_value() -> None:
    arms = _arms({"heavy": (1024, 16384)})
    records = _records(arms, families=2, repeats=1, cut={})
    sweeps = cap_sweeps(records, arms, family, released={("heavy / routed", 1024): -0.25})
    assert sweeps[0].rows[0].released == -0.25
    assert sweep_tables(sweeps)[0].rows[0][11] == "-25.0 pp"
    assert cap_sweeps(records, arms, family)[0].rows[0].released is None


def test_excluded_units_either_way_bound_the_interaction() -> None:
    """Two infra_error units left out (retry): each takes the outcome that lowers, then
    raises, the interaction; recomputed by filling them by hand."""
    arms = _arms({"heavy": (1024, 16384)})
    records = _records(arms, families=3, repeats=1, cut={("heavy", 1024): 0.5})
    gone = [
        next(a for a, x in arms.items() if x.cap == 1024 and x.menu == 128),
        next(a for a, x in arms.items() if x.cap == 16384 and x.menu == 8),
    ]
    kept = [r for r in records if not (r.arm in gone and r.task_id == "fam1-s0")]
    excluded = [Ep(a, "fam1-s0", 0, "infra_error", None, None, None, 0) for a in gone]
    s = cap_sweeps(kept, arms, family, excluded=excluded)[0]
    columns = list(arms)
    w = contrast_weights(arms, columns, "heavy / routed", 16384) - contrast_weights(
        arms, columns, "heavy / routed", 1024
    )
    sign = {a: w[columns.index(a)] for a in gone}
    values = []
    for direction in (1, -1):
        filled = [Ep(a, "fam1-s0", 0, "ok", direction * sign[a] > 0, None, None, 0) for a in gone]
        _, m = ref_family_matrix(kept + filled, columns)
        values.append(float(m.mean(axis=0) @ w))
    assert s.rows[0].either_way == pytest.approx((min(values), max(values)))
    assert s.excluded == 2
    _, m = ref_family_matrix(kept, columns)
    assert s.rows[0].interaction.value == pytest.approx(float(m.mean(axis=0) @ w))
    table = sweep_tables([s])[0]
    assert table.note is not None and "2 unit(s) of the sweep's arms were left out" in table.note
    low, high = s.rows[0].either_way or (0.0, 0.0)
    assert (
        table.rows[0][8] == f"{round(100 * low, 1) + 0.0:+.1f} to {round(100 * high, 1) + 0.0:+.1f}"
    )


def test_no_sweep_without_two_caps() -> None:
    arms = _arms({"heavy": (1024,)})
    assert cap_sweeps(_records(arms, 2, 1, {}), arms, family) == []


# --- the registered report ------------------------------------------------------------------

STUDY = "cap-study"
CAPS = (64, 16384)


@pytest.fixture
def study_ws(ws: Path) -> Path:
    folder = ws / "experiments" / STUDY
    (folder / "families").mkdir(parents=True)
    first = family_doc(action=True)
    second = family_doc(action=False)
    second["id"], second["intent"] = "test-review", "review"
    names = []
    for doc in (first, second):
        (folder / "families" / f"{doc['id']}.yaml").write_text(as_yaml(doc))
        names.append(f"families/{doc['id']}.yaml")
    entry = {"name": STUDY, "kind": "toolbottleneck", "families": names, "seeds": [0, 1]}
    (folder / "experiment.yaml").write_text(yaml.safe_dump(entry))
    return ws


def _arm(menu: int, cap: int, workflow: str) -> dict[str, Any]:
    return {
        "id": f"v{menu}-{workflow}-cap{cap}",
        "surface": "variants",
        "toolbottleneck": {"menu": menu, "workflow": workflow, "policy": "sim-truncating"},
        "budgets": {"completion_cap": cap},
    }


def test_the_registered_report_shows_the_full_sweep(study_ws: Path, cli: Any) -> None:
    arms = [_arm(menu, cap, w) for cap in CAPS for w in ("low", "high") for menu in (8, 12)]
    doc = {
        "id": "caps",
        "title": "t",
        "hypothesis": "h",
        "falsification": "f",
        "experiment": STUDY,
        "kind": "exploratory",
        "split": "dev",
        "arms": arms,
        "host": {"driver": "local"},
        "budgets": {"call_limit_over_certified": 2, "turn_limit_over_calls": 2},
        "design": {"repeats": 2, "seed": 2},
        "primary": {"test": "mcnemar_exact", "compare": ["v8-low-cap64", "v12-low-cap64"]},
    }
    path = study_ws / "reg.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert cli("-w", study_ws, "register", path, "--json").code == 0
    assert cli("-w", study_ws, "run", "caps", "--json").code == 0
    out = cli("-w", study_ws, "analyse", "caps", "--json")
    assert out.code == 0, out.stderr
    report = out.json()["toolbottleneck"]
    table = next(t for t in report["tables"] if "Table 9" in t["title"])
    store = open_store(study_ws / "runs")
    try:
        records = [r for r in store.records() if r.registration_id == "caps"]
    finally:
        store.close()
    ids = [a["id"] for a in arms]
    fams, m = ref_family_matrix(records, ids)  # type: ignore[arg-type]
    assert len(fams) == 2
    point = m.mean(axis=0)

    def w(cap: int) -> np.ndarray:
        return np.array(
            [(1 if a.startswith("v12") else -1) / 2 if a.endswith(f"cap{cap}") else 0 for a in ids]
        )

    row = table["rows"][0]
    lo, hi = float(point @ w(CAPS[0])), float(point @ w(CAPS[1]))
    assert row[2] == f"{CAPS[0]} to {CAPS[1]}"
    assert row[5] == f"{round(100 * lo, 1) + 0.0:+.1f} pp; too few families (2 < 10): no interval"
    assert row[6] == f"{round(100 * hi, 1) + 0.0:+.1f} pp; too few families (2 < 10): no interval"
    assert (
        row[7] == f"{round(100 * (hi - lo), 1) + 0.0:+.1f}; too few families (2 < 10): no interval"
    )
    large = [r for r in records if r.arm.startswith("v12") and r.arm.endswith(f"cap{CAPS[0]}")]
    cut = sum(r.terminal_flag == "completion_cap" for r in large) / len(large)
    assert row[3] == f"{100 * cut:.1f}%"
    assert row[8] == "-"  # no unit left out
    assert row[10] == "not decided: too few families (2 < 10)"
    # Rel.: the low-cap configuration's V effect over the same W x D cells (seed Table 9)
    assert row[11] == f"{round(100 * lo, 1) + 0.0:+.1f} pp"
    fig = next(f for f in report["figures"] if f["name"] == "tb_cap_sweep")
    assert fig["points"][0]["value"] == pytest.approx(lo)
    assert fig["points"][0]["low"] is None and "too few families" in fig["points"][0]["reason"]
    # Table 8: the simulated policy keeps no truncated response, so it is withheld, saying why
    table8 = next(t for t in report["tables"] if "seed Table 8" in t["title"])
    assert any(r.terminal_flag == "completion_cap" and r.calls == 0 for r in records)
    assert table8["columns"] == ["configuration", "reason"]
    assert table8["rows"][0][1].startswith("withheld: the records keep no truncated response")
    # the interaction decomposition: V x W over (family, configuration, encoding) units
    dec = next(t for t in report["tables"] if t["title"].startswith("Interaction decomposition"))
    assert [r[0] for r in dec["rows"]] == ["V x W"]
    assert dec["rows"][0][1] == str(2 * 2)  # 2 families x 2 caps (configurations) x raw
    # every rendering carries the table
    folder = study_ws / "reports" / "caps"
    assert "Table 9" in (folder / "report.md").read_text()
    assert "Table 9" in (folder / "report.html").read_text()
    terminal = cli("-w", study_ws, "analyse", "caps")
    assert terminal.code == 0 and "Table 9" in terminal.stdout
    for title in ("Interaction decomposition", "Truncated first responses"):
        for text in ((folder / "report.md").read_text(), (folder / "report.html").read_text()):
            assert title in text
        assert title in terminal.stdout


def test_figure_2b_draws_the_table_numbers() -> None:
    from types import SimpleNamespace
    from typing import cast

    from prereg.reports.model import Report
    from prereg.reports.render import figures
    from prereg.reports.render import study_figures as tb
    from prereg.reports.toolbottleneck.model import StudyReport

    configs = {"heavy": (1024, 16384), "null": (1024, 16384)}
    arms = _arms(configs)
    records = _records(arms, families=10, repeats=2, cut={("heavy", 1024): 0.5})
    sweeps = cap_sweeps(records, arms, family)
    study = StudyReport(label="x", tables=sweep_tables(sweeps), figures=sweep_figure(sweeps))
    report = cast(Report, SimpleNamespace(toolbottleneck=study))
    fig = tb.tb_cap_sweep_figure(report, figures._canvas)
    assert fig is not None
    drawn = sorted(
        (float(line.get_xdata()[0]), round(float(line.get_ydata()[0]), 9))
        for line in fig.axes[0].get_lines()
        if line.get_marker() == "o"
    )
    s = sweeps[0]
    want = sorted(
        (float(cap), round(100 * e.value, 9))
        for r in (*s.rows, *s.pooled)
        for cap, e in zip(r.caps, (r.low, r.high), strict=True)
    )
    assert drawn == want
    key = tb.tb_cap_sweep_key(report)
    assert key == [r.name for r in (*s.rows, *s.pooled)]
    caption = figures.caption("tb_cap_sweep", report)
    assert all(f"{i} {name}" in caption for i, name in enumerate(key, start=1))
    assert "no spread" in caption  # the null configuration's withheld intervals say why
    # two families: every interval withheld, so the figure is not drawn
    few = _records(arms, families=2, repeats=1, cut={})
    sweeps = cap_sweeps(few, arms, family)
    study = StudyReport(label="x", tables=[], figures=sweep_figure(sweeps))
    assert (
        tb.tb_cap_sweep_figure(cast(Report, SimpleNamespace(toolbottleneck=study)), figures._canvas)
        is None
    )


def test_figure_8_draws_the_crossover() -> None:
    from types import SimpleNamespace
    from typing import cast

    from prereg.reports.model import Report
    from prereg.reports.render import figures
    from prereg.reports.render import study_figures as tb
    from prereg.reports.toolbottleneck.model import StudyReport

    arms = _arms({"heavy": (1024, 4096, 16384)})
    cut = {("heavy", 1024): 0.6, ("heavy", 4096): 0.3}
    sweeps = cap_sweeps(_records(arms, families=10, repeats=2, cut=cut), arms, family)
    figs = {f.name: f for f in sweep_figure(sweeps)}
    assert set(figs) == {"tb_cap_sweep", "tb_crossover"}
    cross = sweeps[1]
    want = sorted(
        (float(cap), round(100 * e.value, 9))
        for r in (*cross.rows, *cross.pooled)
        for cap, e in zip(r.caps, (r.low, r.high), strict=True)
    )
    study = StudyReport(label="x", tables=[], figures=list(figs.values()))
    report = cast(Report, SimpleNamespace(toolbottleneck=study))
    fig = tb.tb_crossover_figure(report, figures._canvas)
    assert fig is not None
    drawn = sorted(
        (float(line.get_xdata()[0]), round(float(line.get_ydata()[0]), 9))
        for line in fig.axes[0].get_lines()
        if line.get_marker() == "o"
    )
    assert drawn == want
    assert "(1024 vs 4096)" in figures.caption("tb_crossover", report)
