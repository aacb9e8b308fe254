"""The registered McNemar analysis reproduces seed 002's table, and each verdict branch.

Seed 002: "The primary test is McNemar's exact test, two-sided, alpha 0.05. On a
24-task corpus it needs at least six discordant pairs all favouring the same arm.
Fewer is pre-committed as inconclusive whatever the raw difference."
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reports import append, make_lab, paired_records, register, registration, seed002_outcomes

SEED_002 = [
    # registration, tasks, baseline successes, semantic successes, discordant pairs
    ("spotify-002", 24, 13, 14, 1),
    ("spotify-003", 24, 17, 16, 1),
    ("spotify-004", 24, 20, 21, 1),
    ("tmdb-002", 34, 28, 28, 0),
]


def _analyse(
    cli,
    ws: Path,
    reg_id: str,
    n: int,
    ctl: int,
    trt: int,
    disc: int,  # type: ignore[no-untyped-def]
    **extra,
):
    name = f"lab{n}"
    tasks = make_lab(ws, name=name, n_tasks=n)
    digest = register(cli, ws, registration(reg_id, experiment=name, **extra))
    control, treatment = seed002_outcomes(n, ctl, trt, disc)
    append(ws, paired_records(reg_id, digest, tasks, control, treatment, experiment=name))
    result = cli("-w", ws, "analyse", reg_id, "--json")
    assert result.code == 0, result.stdout + result.stderr
    return result.json()


@pytest.mark.parametrize(("reg_id", "n", "ctl", "trt", "disc"), SEED_002)
def test_seed_002_results_are_reproduced(
    cli, ws: Path, reg_id: str, n: int, ctl: int, trt: int, disc: int
) -> None:
    data = _analyse(cli, ws, reg_id, n, ctl, trt, disc)

    arms = {a["id"]: a for a in data["arms"]}
    assert (arms["baseline"]["successes"], arms["baseline"]["measured"]) == (ctl, n)
    assert (arms["semantic"]["successes"], arms["semantic"]["measured"]) == (trt, n)
    primary = data["primary"]
    assert primary["test"] == "mcnemar_exact"
    assert primary["discordant"]["n"] == disc
    assert primary["min_discordant"] == 6
    assert primary["pvalue"] == pytest.approx(1.0)
    assert primary["estimate"] == pytest.approx((trt - ctl) / n)
    assert data["verdict"] == "inconclusive"
    assert data["verdict_detail"]["decided_by"] == "primary test"
    assert "fewer than the 6" in data["verdict_detail"]["reason"]
    assert data["mode"] == "confirmatory" and data["complete"] is True


@pytest.mark.parametrize(
    ("ctl", "trt", "disc", "verdict", "pvalue"),
    [
        (10, 16, 6, "supported", 0.03125),  # six discordant, all favouring semantic
        (16, 10, 6, "not_supported", 0.03125),  # six, all against the registered direction
        (12, 14, 10, "not_supported", 0.75390625),  # enough pairs to reject; it did not
        (12, 16, 4, "inconclusive", 0.125),  # four all one way can never reach 0.05
    ],
)
def test_every_reading_of_the_registered_mcnemar(
    cli, ws: Path, ctl: int, trt: int, disc: int, verdict: str, pvalue: float
) -> None:
    data = _analyse(cli, ws, "lab-branch", 24, ctl, trt, disc)

    assert data["verdict"] == verdict
    assert data["primary"]["pvalue"] == pytest.approx(pvalue)
    assert data["primary"]["discordant"]["n"] == disc


def test_two_sided_without_favours_supports_either_direction(cli, ws: Path) -> None:
    primary = {"test": "mcnemar_exact", "alpha": 0.05, "sides": "two-sided"}
    data = _analyse(cli, ws, "lab-nofav", 24, 16, 10, 6, primary=primary)
    assert data["verdict"] == "supported"


def test_one_sided_mcnemar_needs_five_pairs(cli, ws: Path) -> None:
    primary = {"test": "mcnemar_exact", "alpha": 0.05, "sides": "greater", "favours": "semantic"}
    data = _analyse(cli, ws, "lab-onesided", 24, 10, 15, 5, primary=primary)
    assert data["primary"]["min_discordant"] == 5
    assert data["primary"]["pvalue"] == pytest.approx(0.03125)
    assert data["verdict"] == "supported"
