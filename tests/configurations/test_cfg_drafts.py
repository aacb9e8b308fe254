"""Acceptance (issue 13): the bundled host comparison and 2 x 2 factorial run and analyse
offline on the local host; their numbers are recomputed here from the stored records."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from prereg import stats
from prereg.runners.store.sqlite import RunStore
from tests.statsmodels_holm import multipletests_holm


def run_and_analyse(cli: Any, ws: Path, draft: str, reg_id: str) -> dict[str, Any]:
    assert cli("-w", ws, "register", ws / "drafts" / draft).code == 0
    ran = cli("-w", ws, "run", reg_id, "--json")
    assert ran.code == 0, ran.stderr
    assert ran.json()["remaining"] == 0
    analysed = cli("-w", ws, "analyse", reg_id, "--json")
    assert analysed.code == 0, analysed.stderr
    report: dict[str, Any] = json.loads((ws / "reports" / reg_id / "report.json").read_text())
    return report


def cell_means(ws: Path, reg_id: str) -> dict[tuple[str, str], float]:
    """(task, arm) -> mean success over the repeats, straight from the store."""
    values: dict[tuple[str, str], list[float]] = defaultdict(list)
    for record in RunStore(ws / "runs").records(registration_id=reg_id):
        if record.status == "ok":
            values[(record.task_id, record.arm)].append(float(bool(record.success)))
    return {key: float(np.mean(v)) for key, v in values.items()}


def clusters(ws: Path, reg_id: str) -> dict[str, str]:
    return {r.task_id: r.cluster for r in RunStore(ws / "runs").records(registration_id=reg_id)}


def test_two_local_profiles_as_two_arms(ws: Path, cli: Any) -> None:
    report = run_and_analyse(cli, ws, "music-library-hosts.yaml", "music-library-hosts")
    arms = {a["id"]: a for a in report["arms"]}
    assert arms["careful"]["configuration"]["model"] == "local-careful"
    assert arms["hasty"]["configuration"]["model"] == "local-hasty"
    assert arms["careful"]["models_requested"] == ["local-careful"]
    primary = report["primary"]
    assert primary["unit"] == "task" and primary["units"] == primary["n"]
    markdown = (ws / "reports" / "music-library-hosts" / "report.md").read_text()
    assert "### Configurations" in markdown and "local-hasty" in markdown

    # the secondary bootstrap resamples paraphrase clusters: recompute it from the store
    boot = report["secondary"][0]
    by_task = clusters(ws, "music-library-hosts")
    records = [
        r
        for r in RunStore(ws / "runs").records(registration_id="music-library-hosts")
        if r.status == "ok"
    ]
    rows: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    for r in records:
        rows[(r.task_id, r.repeat)][r.arm] = float(bool(r.success))
    order = [t["id"] for t in report["tasks"]]
    keys = sorted(rows, key=lambda k: (order.index(k[0]), k[1]))
    labels = [by_task[task] for task, _ in keys]
    assert boot["unit"] == "cluster" and boot["units"] == len(set(labels)) < len(order)
    expected = stats.paired_bootstrap(
        [rows[k]["careful"] for k in keys],
        [rows[k]["hasty"] for k in keys],
        labels,
        runs_control=[k[1] for k in keys],
        runs_treatment=[k[1] for k in keys],
        draws=10_000,
        level=0.95,
        seed=7,
    )
    assert boot["estimate"] == pytest.approx(expected.estimate)
    assert boot["interval"]["low"] == pytest.approx(expected.low)
    assert boot["interval"]["high"] == pytest.approx(expected.high)


def test_a_two_by_two_factorial_with_an_interaction_and_holm(ws: Path, cli: Any) -> None:
    report = run_and_analyse(cli, ws, "music-library-factorial.yaml", "music-library-factorial")
    cells = [a["id"] for a in report["arms"]]
    assert cells == [
        "profile-local-hasty--cap-48",
        "profile-local-hasty--cap-1024",
        "profile-local-careful--cap-48",
        "profile-local-careful--cap-1024",
    ]
    caps = {a["id"]: a["configuration"]["budgets"]["completion_cap"] for a in report["arms"]}
    assert caps["profile-local-careful--cap-48"] == 48

    # the interaction, recomputed: per task (m11 - m10) - (m01 - m00), clusters averaged
    means = cell_means(ws, "music-library-factorial")
    by_task = clusters(ws, "music-library-factorial")
    hl, hh, cl, ch = cells
    per_cluster: dict[str, list[float]] = defaultdict(list)
    for task in {t for t, _ in means}:
        per_cluster[by_task[task]].append(
            (means[(task, ch)] - means[(task, cl)]) - (means[(task, hh)] - means[(task, hl)])
        )
    expected = float(np.mean([np.mean(v) for v in per_cluster.values()]))
    contrasts = {c["id"]: c for c in report["contrasts"]}
    interaction = contrasts["profile-by-cap"]
    assert interaction["estimate"] == pytest.approx(expected)
    assert interaction["units"] == len(per_cluster)
    assert interaction["weights"] == {hl: 1.0, hh: -1.0, cl: -1.0, ch: 1.0}
    assert contrasts["profile"]["weights"] == {hl: -0.5, hh: -0.5, cl: 0.5, ch: 0.5}
    assert report["primary"]["contrast"] == "profile-by-cap"
    assert report["primary"]["estimate"] == pytest.approx(expected)

    # Holm over the family, as statsmodels computes it from the reported raw p values
    family = report["multiplicity"]
    assert family["family"] == "contrasts" and family["method"] == "holm"
    raw = [c["pvalue"] for c in report["contrasts"]]
    reject, adjusted, _, _ = multipletests_holm(raw, 0.05)
    assert [c["adjusted"] for c in report["contrasts"]] == pytest.approx(list(adjusted))
    assert [m["adjusted"] for m in family["members"]] == pytest.approx(list(adjusted))
    assert [c["reject"] for c in report["contrasts"]] == list(reject)
    markdown = (ws / "reports" / "music-library-factorial" / "report.md").read_text()
    assert "## Registered contrasts" in markdown and "profile-by-cap" in markdown

    # every two cells, paired by task (descriptive), each change recomputed by hand
    pairwise = {(x["control"], x["treatment"]): x for x in report["pairwise"]}
    assert len(pairwise) == 6 and not any(x["same_configuration"] for x in pairwise.values())
    tasks = sorted({t for t, _ in means})
    for (a, b), change in pairwise.items():
        by_hand = np.mean([means[(t, b)] - means[(t, a)] for t in tasks])
        assert change["estimate"] == pytest.approx(by_hand)
        assert change["tasks"] == len(tasks)
    assert "## Paired changes between the arms" in markdown
