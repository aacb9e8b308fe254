"""Per-configuration effects with organisation-equal reweighting (seed Table 4, Figure 7)
and the V effect against truncation (seed Figure 6), recomputed with numpy from the
exported records of the bundled study (4 families) and of a study with infrastructure
failures under both registered policies; the correlations checked against scipy.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from prereg.reports.toolbottleneck.configurations import (
    MenuEffect,
    effect_truncation_correlation,
)
from prereg.runners.scoring import infra_record
from prereg.runners.toolbottleneck.study import StudyUnits
from tests.toolbottleneck.test_tb_infra_counting import ITT, RETRY, _scored
from tests.toolbottleneck.test_tb_registered import _registration as _tiny_registration
from tests.toolbottleneck.test_tb_registered import _write, study_ws

__all__ = ["study_ws"]  # the module's fixture, used here (demo, reports: conftest.py)

TABLE4 = "Per-configuration effects with organisation-equal reweighting"
FIG6 = "The V effect against truncation"


def _table(report: dict[str, Any], prefix: str) -> dict[str, Any]:
    found: dict[str, Any] = next(
        t for t in report["toolbottleneck"]["tables"] if t["title"].startswith(prefix)
    )
    return found


def _family(task: str) -> str:
    return task.rsplit("-s", 1)[0]


def _configurations(report: dict[str, Any]) -> dict[str, str]:
    cells = {a["id"]: a["toolbottleneck"] for a in report["registration_document"]["arms"]}
    caps = {a["id"]: a["configuration"]["budgets"]["completion_cap"] for a in report["arms"]}
    return {
        arm: f"{cell['policy']} / {cell['menu_mode']} / cap {caps[arm]}"
        for arm, cell in cells.items()
        if cell is not None
    }


def _family_means(records: list[dict[str, Any]], arms: list[str]) -> np.ndarray | None:
    """Per arm: task mean over repeats, family mean over the tasks measured in every arm,
    mean over families."""
    runs: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in records:
        if r["arm"] in arms:
            runs[(r["task_id"], r["arm"])].append(float(r["success"]))
    tasks = sorted({t for t, _ in runs if all((t, a) in runs for a in arms)})
    if not tasks:
        return None
    fams = sorted({_family(t) for t in tasks})
    table = np.array(
        [
            [np.mean([np.mean(runs[(t, a)]) for t in tasks if _family(t) == f]) for a in arms]
            for f in fams
        ]
    )
    out: np.ndarray = table.mean(axis=0)
    return out


def _pp(x: float) -> str:
    return f"{100 * x:+.1f}"


def _by_hand_table4(
    report: dict[str, Any], records: list[dict[str, Any]]
) -> dict[str, dict[str, str]]:
    config = _configurations(report)
    names = sorted(set(config.values()))
    out: dict[str, dict[str, str]] = {n: {} for n in names}
    out["mean over configurations"] = {}
    out["organisation-equal reweighting"] = {}
    for contrast in report["contrasts"]:
        weights: dict[str, float] = contrast["weights"]
        arms = list(weights)
        means = _family_means(records, arms)
        assert means is not None
        groups = sorted({config[a] for a in arms})
        values = {}
        for g in groups:
            w = np.array([weights[a] if config[a] == g else 0.0 for a in arms])
            assert abs(w[[config[a] == g for a in arms]].sum()) < 1e-9
            values[g] = len(groups) * float(w @ means)
        for g, v in values.items():
            out[g][contrast["id"]] = _pp(v)
        mean = float(np.mean(list(values.values())))
        out["mean over configurations"][contrast["id"]] = _pp(mean)
        # one organisation (the simulated policy, or the local host): the plain mean
        out["organisation-equal reweighting"][contrast["id"]] = _pp(mean)
    return out


def _by_hand_menu(
    report: dict[str, Any], records: list[dict[str, Any]]
) -> dict[str, tuple[float, float, int]]:
    config = _configurations(report)
    cells = {a["id"]: a["toolbottleneck"] for a in report["registration_document"]["arms"]}
    out = {}
    for name in sorted(set(config.values())):
        arms = {
            (c["workflow"], c["encoding"], c["menu"]): a
            for a, c in cells.items()
            if c and config[a] == name and c["menu"] and not c["catalog"] and not c["handoffs"]
        }
        if not arms:
            continue
        lo, hi = min(k[2] for k in arms), max(k[2] for k in arms)
        diffs, large = [], []
        for (w, d, m), small_arm in sorted(arms.items()):
            if m == lo and (w, d, hi) in arms and hi != lo:
                means = _family_means(records, [small_arm, arms[(w, d, hi)]])
                if means is not None:
                    diffs.append(means[1] - means[0])
                    large.append(arms[(w, d, hi)])
        big = [r for r in records if r["arm"] in large]
        cut = sum(r.get("terminal_flag") == "completion_cap" and not r.get("counted") for r in big)
        out[name] = (float(np.mean(diffs)), cut / len(big), len(diffs))
    return out


def _check(report: dict[str, Any], records: list[dict[str, Any]]) -> None:
    table = _table(report, TABLE4)
    want = _by_hand_table4(report, records)
    cols = table["columns"]
    got = {row[0]: dict(zip(cols, row, strict=True)) for row in table["rows"]}
    assert set(got) == set(want)
    for name, contrasts in want.items():
        for contrast, value in contrasts.items():
            assert got[name][contrast] == value, (name, contrast)
    menu = _by_hand_menu(report, records)
    fig6 = _table(report, FIG6)
    rows = {r[0]: r for r in fig6["rows"]}
    for name, (effect, cut, n) in menu.items():
        assert rows[name][1:] == [_pp(effect), f"{100 * cut:.1f}%", str(n)]
        assert got[name]["largest-menu truncation"] == f"{100 * cut:.1f}%"
    full = max(n for _, _, n in menu.values())
    points = [(e, c) for e, c, n in menu.values() if n == full]
    if len(points) < 3:
        assert "Correlations withheld: too few configurations" in fig6["note"]
        assert not any(r[0].startswith(("Pearson", "Spearman")) for r in fig6["rows"])
    else:
        x, y = np.array(points).T
        assert rows[f"Pearson r ({len(points)} configurations)"][1] == (
            f"{sps.pearsonr(x, y).statistic:+.2f}"
        )


def test_bundled_study_per_configuration_effects_and_truncation(demo: dict[str, Any]) -> None:
    _check(demo, [r for r in demo["records"] if r["status"] == "ok"])
    table = _table(demo, TABLE4)
    assert "one organisation, so the reweighting equals the plain mean" in table["note"]
    assert "Point estimates only" in table["note"]
    # 2 routed configurations hold all four W x D cells: no correlation over two points
    assert "Correlations withheld" in _table(demo, FIG6)["note"]


@pytest.mark.parametrize("reg_id", [ITT, RETRY])
def test_with_infrastructure_failures(reports: dict[str, dict[str, Any]], reg_id: str) -> None:
    report = reports[reg_id]
    _check(report, _scored(report["records"], counting=reg_id == ITT))
    # every table says how infrastructure failures were counted
    assert "infrastructure" in _table(report, TABLE4)["note"]


def _effects(v: list[float], t: list[float]) -> list[MenuEffect]:
    return [MenuEffect(f"c{i}", "o", a, b, 4) for i, (a, b) in enumerate(zip(v, t, strict=True))]


@pytest.mark.parametrize(
    ("v", "t"),
    [
        ([-0.12, -0.3, 0.01, -0.05, -0.44], [0.1, 0.3, 0.0, 0.0, 0.6]),  # ties in t
        ([0.0, -0.2, -0.2, 0.1], [0.05, 0.2, 0.1, 0.0]),  # ties in v
        (list(np.linspace(-0.5, 0.1, 21)), list(np.random.default_rng(3).random(21))),
    ],
)
def test_correlations_agree_with_scipy(v: list[float], t: list[float]) -> None:
    got = effect_truncation_correlation(_effects(v, t))
    assert got.reason is None and got.configurations == len(v)
    assert got.pearson == pytest.approx(sps.pearsonr(v, t).statistic, abs=1e-12)
    assert got.spearman == pytest.approx(sps.spearmanr(v, t).statistic, abs=1e-12)


def test_correlations_withheld_with_the_reason() -> None:
    two = effect_truncation_correlation(_effects([-0.1, -0.3], [0.1, 0.4]))
    assert two.pearson is None and "too few configurations (2 < 3)" in str(two.reason)
    flat = effect_truncation_correlation(_effects([-0.1, -0.3, 0.0], [0.0, 0.0, 0.0]))
    assert flat.pearson is None and "truncation rate is the same" in str(flat.reason)
    # a configuration with fewer W x D cells (a fixed-menu lane) is another estimand
    mixed = _effects([-0.1, -0.3, 0.0], [0.1, 0.4, 0.0])
    mixed[2] = MenuEffect("fixed", "o", 0.0, 0.0, 1)
    assert effect_truncation_correlation(mixed).configurations == 2


# --- Discovery availability by retriever (seed Figure 3c) ---------------------------------

DISCOVERY = "Discovery availability by retriever"


@pytest.fixture
def discovery(study_ws: Path, cli: Any) -> dict[str, Any]:
    """Discovery arms under two retrievers and two catalogs, with the unit (first arm,
    first task, repeat 0) failing on infrastructure and counted as a failure."""
    arms = [
        {"id": f"{r}-{n}", "surface": "variants", "toolbottleneck": {"catalog": n, "retriever": r}}
        for r in ("flat-lexical", "connector-first")
        for n in (16, 48)
    ]
    doc = _tiny_registration(arms=arms, primary={"test": "mcnemar_exact"}, design={"repeats": 2})
    doc.pop("factorial")
    doc.pop("contrasts")
    doc["harness"] = {"infrastructure": "count_as_failure", "attempts": 1}
    assert cli("-w", study_ws, "register", _write(study_ws, doc)).code == 0
    original = StudyUnits.arun

    async def arun(self: StudyUnits, unit: Any, driver: Any) -> Any:
        if (unit.arm, unit.repeat) == ("flat-lexical-16", 0) and unit.task.id.startswith("test-r"):
            now = datetime.now(UTC)
            return infra_record(self.plan, unit, driver, "injected: host down", now, now)
        return await original(self, unit, driver)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(StudyUnits, "arun", arun)
        assert cli("-w", study_ws, "run", "tiny", "--json").code == 0
    got = cli("-w", study_ws, "analyse", "tiny", "--json", "--allow-incomplete")
    assert got.code == 0, got.stderr
    report: dict[str, Any] = json.loads(got.stdout)
    out = study_ws / "tiny.jsonl"
    assert cli("-w", study_ws, "export", "tiny", "--out", out).code == 0
    report["records"] = [json.loads(line) for line in out.read_text().splitlines()]
    assert any(r["status"] == "infra_error" for r in report["records"])
    return report


def _share(k: int, n: int) -> str:
    return "-" if not n else f"{100 * k / n:.1f}% ({k}/{n})"


def test_discovery_availability_by_retriever(discovery: dict[str, Any]) -> None:
    table = _table(discovery, DISCOVERY)
    rows = {r[0]: r for r in table["rows"]}
    scored = _scored(discovery["records"], counting=True)
    cells = {a["id"]: a["toolbottleneck"] for a in discovery["registration_document"]["arms"]}
    total = before_total = 0
    for arm, cell in cells.items():
        ok = [r for r in discovery["records"] if r["arm"] == arm and r["status"] == "ok"]
        verdicts = [r["obligations"]["availability"] for r in ok]
        mine = [r for r in scored if r["arm"] == arm]
        before = sum(not r["success"] and r["calls"] == 0 and not r.get("counted") for r in mine)
        want = [
            cell["retriever"],
            str(cell["catalog"]),
            _share(sum(v is True for v in verdicts), sum(v is not None for v in verdicts)),
            _share(sum(bool(r["success"]) for r in mine), len(mine)),
            _share(before, len(mine)),
        ]
        assert rows[arm][2:] == want, arm
        total, before_total = total + len(mine), before_total + before
    assert rows["all Discovery arms"][-1] == _share(before_total, total)
    # the infrastructure failure: out of availability, in success (4 units, 1 counted)
    flat = rows["flat-lexical-16"]
    assert flat[4].endswith("/3)") and flat[5].endswith("/4)")
    assert "no availability verdict" in table["note"] and "No interval" in table["note"]
