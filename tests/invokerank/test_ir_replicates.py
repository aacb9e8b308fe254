"""Replicate registrations as runs (issue 17, item 8; InvokeRank 7.3, Figure 7): the
between-run estimator against reports.pilot's at one repeat and against realised run
effects, and `plan --from-runs A B C` end to end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from prereg.reports.planning.pilot import between_run
from prereg.stats.invokerank import replicate_variance
from tests.conftest import tree_digest
from tests.plan import store_pilot


def test_one_repeat_reduces_to_the_pilot_estimator() -> None:
    rng = np.random.default_rng(2)
    p = rng.uniform(0.1, 0.9, 50)
    runs = (rng.random((50, 5)) < p[:, None]).astype(float)
    got = replicate_variance(runs[:, :, None], permutations=4999, seed=1)
    ref = between_run({"a": runs}, permutations=4999, seed=1).by_arm[0]
    assert got.sigma_run == pytest.approx(ref.sigma_run, abs=1e-12)
    assert got.observed_sd == pytest.approx(ref.observed_sd)
    assert got.within_sd == pytest.approx(ref.within_sd)
    assert got.pvalue == pytest.approx(ref.pvalue, abs=0.03)  # two Monte Carlo tests


def test_run_effects_are_detected_and_estimated() -> None:
    rng = np.random.default_rng(5)
    p = rng.uniform(0.2, 0.8, 400)
    shift = np.array([-0.06, 0.05, 0.0, 0.07, -0.04, -0.02])
    prob = np.clip(p[:, None] + shift[None, :], 0, 1)
    cube = (rng.random((400, 6, 2)) < prob[:, :, None]).astype(float)
    got = replicate_variance(cube, permutations=999, seed=0)
    assert got.pvalue < 0.01 and got.variance_ratio > 3
    assert got.sigma_run == pytest.approx(np.std(shift, ddof=1), abs=0.012)
    # under exchangeable runs the variance ratio is about 1 and the test rejects rarely
    ratios, rejections = [], 0
    for seed in range(20):
        null = (rng.random((200, 6, 2)) < p[:200, None, None]).astype(float)
        v = replicate_variance(null, permutations=99, seed=seed)
        ratios.append(v.variance_ratio)
        rejections += v.pvalue < 0.05
    assert 0.8 < np.mean(ratios) < 1.2 and rejections <= 4


PILOT = "drafts/music-library-pilot.yaml"


def _register(ws: Path, cli: Any, reg_id: str, change: tuple[str, str] | None = None) -> Any:
    text = (ws / PILOT).read_text().replace("id: music-library-pilot", f"id: {reg_id}", 1)
    if change:
        text = text.replace(*change, 1)
    path = ws / "drafts" / f"{reg_id}.yaml"
    path.write_text(text)
    result = cli("-w", ws, "register", path, "--json")
    assert result.code == 0, result.stderr
    return result.json()


def test_plan_from_replicate_registrations(ws: Path, cli: Any) -> None:
    rng = np.random.default_rng(3)
    p = rng.uniform(0.2, 0.8, 40)
    cubes: dict[str, list[np.ndarray]] = {"baseline": [], "semantic": []}
    for k, (reg_id, shift) in enumerate((("rep-a", -0.08), ("rep-b", 0.0), ("rep-c", 0.08))):
        entry = _register(ws, cli, reg_id)
        outcomes = {}
        for arm, lift in (("baseline", 0.0), ("semantic", 0.1)):
            prob = np.clip(p + lift + shift, 0, 1)
            outcomes[arm] = (rng.random((40, 3)) < prob[:, None]).astype(float)
            cubes[arm].append(outcomes[arm])
        store_pilot(ws, entry, outcomes)
        assert k == len(cubes["baseline"]) - 1
    result = cli(
        "-w",
        ws,
        "plan",
        "--from-runs",
        "rep-a",
        "rep-b",
        "rep-c",
        "--mde",
        "0.1",
        "--sims",
        "0",
        "--json",
    )
    assert result.code == 0, result.stderr
    plan = result.json()
    rep = plan["pilot"]["replicates"]
    assert rep["registrations"] == ["rep-a", "rep-b", "rep-c"]
    assert plan["sources"]["sigma_run"] == "replicate registrations"
    by = {a["arm"]: a for a in rep["by_arm"]}
    for arm in ("baseline", "semantic"):
        cube = np.stack(cubes[arm], axis=1)  # prompts x runs x repeats
        assert by[arm]["run_rates"] == pytest.approx(cube.mean(axis=(0, 2)).tolist())
        assert by[arm]["sigma_run"] == pytest.approx(replicate_variance(cube, 999).sigma_run)
    assert plan["sigma_run"] == pytest.approx(
        np.sqrt(np.mean([by[a]["sigma_run"] ** 2 for a in by]))
    )
    human = cli("-w", ws, "plan", "--from-runs", "rep-a", "rep-b", "--sims", "0")
    assert human.code == 0 and "Replicate registrations rep-a, rep-b" in human.stdout


def test_replicates_refused_unless_one_design(ws: Path, cli: Any) -> None:
    _register(ws, cli, "rep-a")
    _register(ws, cli, "rep-d", ("repeats: 3", "repeats: 2"))
    before = tree_digest(ws / "registry")
    bad = cli("-w", ws, "plan", "--from-runs", "rep-a", "rep-d", "--json")
    assert bad.code == 2 and "--from-runs" in bad.stderr and "repeats" in bad.stderr
    alone = cli("-w", ws, "plan", "rep-a", "--sigma-d", "0.3", "--prompts", "50", "--json")
    assert alone.code == 2 and "--from-runs" in alone.stderr
    assert tree_digest(ws / "registry") == before
