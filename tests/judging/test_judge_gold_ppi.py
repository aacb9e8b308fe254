"""Gold labels end to end: 100+ gold tasks per arm give the prediction-powered rate and
paired difference, checked against prereg.stats computed here from the exported records,
the stored verdicts and the gold file; agreement against statsmodels."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from statsmodels.stats.inter_rater import cohens_kappa as sm_kappa

from prereg import stats
from prereg.stats import cohens_kappa_table
from tests.judging.gold_helpers import big_experiment, big_registration, stored_verdicts

FLIP = 0.10  # annotator 1 disagrees with the judge on this share of runs (known)


def _sm(a: list[int], b: list[int]) -> tuple[float, float, float]:
    table = np.zeros((2, 2))
    for x, y in zip(a, b, strict=True):
        table[x, y] += 1
    # kappa from statsmodels; its interval is prereg's BCa one (checked against simulation
    # and statsmodels' SE in tests/stats/test_kappa_interval.py), reached here as the report
    # must reach it
    ours = cohens_kappa_table(table)
    return sm_kappa(table).kappa, ours.low, ours.high


def test_gold_set_gives_prediction_powered_rate_and_difference(cli, ws: Path) -> None:
    big_experiment(ws, 150)
    assert cli("-w", ws, "register", big_registration(ws)).code == 0
    assert cli("-w", ws, "run", "big", "--no-progress").code == 0
    assert cli("-w", ws, "judge", "big", "--json").json()["remaining"] == 0
    out = ws.parent / "runs.jsonl"
    assert cli("-w", ws, "export", "big", "--out", out).code == 0
    records = {r["record_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    met = {v["record_id"]: bool(v["met"]) for v in stored_verdicts(ws)}
    by_arm_task = {(r["arm"], r["task_id"]): rid for rid, r in records.items() if rid in met}
    tasks = sorted(
        {t for a, t in by_arm_task if (("a", t) in by_arm_task and ("b", t) in by_arm_task)}
    )
    rng = random.Random(18)
    gold_tasks = set(rng.sample(tasks, 110))
    # every run gets a "true" label (the judge's verdict flipped with probability FLIP);
    # only the gold tasks' labels are revealed, so the truth of each arm is known here
    truth = {rid: met[rid] != (rng.random() < FLIP) for rid in by_arm_task.values()}
    labels: dict[str, list[int]] = {}
    lines = ["run_id,label,annotator"]
    for (_, task), rid in sorted(by_arm_task.items()):
        if task in gold_tasks:
            labels[rid] = [int(truth[rid])]
            lines.append(f"{rid},{int(truth[rid])},ann1")
    second = sorted(
        rid for (arm, task), rid in by_arm_task.items() if arm == "a" and task in gold_tasks
    )[:40]
    for rid in second:
        other = int(truth[rid] != (rng.random() < 0.2))
        labels[rid].append(other)
        lines.append(f"{rid},{'true' if other else 'false'},ann2")
    gold = ws.parent / "gold.csv"
    gold.write_text("\n".join(lines) + "\n")
    loaded = cli("-w", ws, "judge", "big", "--gold", gold, "--json")
    assert loaded.code == 0, loaded.stderr
    assert loaded.json()["added"] == len(lines) - 1
    assert loaded.json()["annotators"] == ["ann1", "ann2"]

    text = cli("-w", ws, "analyse", "big")
    assert text.code == 0, text.stderr
    assert "prediction-powered rate" in text.stdout and "uncalibrated judge" in text.stdout
    report = json.loads((ws / "reports" / "big" / "report.json").read_text())
    rates = {r["arm"]: r for r in report["judged"]["rates"]}

    def units(arm: str) -> tuple[list[float], list[float], list[float], list[str], list[str]]:
        ids = {t: rid for (a, t), rid in by_arm_task.items() if a == arm}
        g = sorted(t for t in ids if t in gold_tasks)
        u = sorted(t for t in ids if t not in gold_tasks)
        y = [float(np.mean(labels[ids[t]])) for t in g]
        f = [float(met[ids[t]]) for t in g]
        return y, f, [float(met[ids[t]]) for t in u], g, u

    for arm in ("a", "b"):
        y, f, ft, g, u = units(arm)
        assert len(g) >= stats.PPI_MIN_GOLD and len(u) >= 2
        expected = stats.ppi_mean(y, f, ft, level=0.95, method="ppi++")
        c = rates[arm]["corrected"]
        assert (c["n_gold"], c["n_unlabelled"]) == (len(g), len(u))
        assert c["estimate"] == pytest.approx(expected.estimate, abs=1e-12)
        assert c["low"] == pytest.approx(expected.low, abs=1e-12)
        assert c["high"] == pytest.approx(expected.high, abs=1e-12)
        assert rates[arm]["label"].startswith("uncalibrated judge")
        assert rates[arm]["rate"] == pytest.approx(np.mean(f + ft))  # raw rate beside it
        arm_truth = np.mean([truth[rid] for (a, t), rid in by_arm_task.items() if a == arm])
        assert c["low"] <= arm_truth <= c["high"]  # seeded: the known truth is covered

    ya, fa, fta, ga, ua = units("a")
    yb, fb, ftb, gb, ub = units("b")
    assert (ga, ua) == (gb, ub)  # gold chosen by task: every gold task is paired
    diff = stats.ppi_difference(ya, fa, fta, yb, fb, ftb, paired=True, level=0.95, method="ppi++")
    d = rates["b"]["corrected"]["difference"]
    assert d["control"] == "a" and d["left_out"] == 0
    assert (d["estimate"], d["low"], d["high"]) == pytest.approx(
        (diff.estimate, diff.low, diff.high), abs=1e-12
    )

    # agreement on arm a: judge vs unanimous gold, and annotator 1 vs annotator 2
    ids_a = [rid for (arm, _), rid in sorted(by_arm_task.items()) if arm == "a" and rid in labels]
    unanimous = [rid for rid in ids_a if len(set(labels[rid])) == 1]
    g_lab = [labels[rid][0] for rid in unanimous]
    j_lab = [int(met[rid]) for rid in unanimous]
    block = rates["a"]["corrected"]["gold"]
    assert block["disputed"] == len(ids_a) - len(unanimous) > 0
    judge_vs = block["judge_vs_gold"]
    assert (judge_vs["kappa"], judge_vs["kappa_low"], judge_vs["kappa_high"]) == pytest.approx(
        _sm(g_lab, j_lab), abs=1e-9
    )
    tp = sum(1 for g, j in zip(g_lab, j_lab, strict=True) if g == 1 and j == 1)
    fp = sum(1 for g, j in zip(g_lab, j_lab, strict=True) if g == 0 and j == 1)
    assert judge_vs["tpr"] == pytest.approx(tp / sum(g_lab))
    assert judge_vs["fpr"] == pytest.approx(fp / (len(g_lab) - sum(g_lab)))
    pair = block["annotator_agreement"][0]
    assert (pair["a"], pair["b"], pair["runs"]) == ("ann1", "ann2", 40)
    a1 = [labels[rid][0] for rid in second]
    a2 = [labels[rid][1] for rid in second]
    assert (pair["kappa"], pair["kappa_low"], pair["kappa_high"]) == pytest.approx(
        _sm(a1, a2), abs=1e-9
    )
