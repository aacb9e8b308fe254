"""`prereg plan` against closed forms and published planning figures.

Published figures checked:

- InvokeRank (seed 000), section 7.8: sigma_d 0.35 needs "about 96" prompts for 10
  points (96.15 before rounding up) and 58 prompts detect 12.9 points; the observed
  sigma_d (0.28 Claude API, 0.23 ChatGPT API; back-solved to four digits, 0.281 and
  0.2268, from the quoted 248 / 689 and 162 / 449 prompts) give 10.3 and 8.3 points at
  58 prompts; the between-run SD of about 2.5 points (0.0252, from "cannot detect less
  than 10.0 points") sets a 10.0-point floor, and three runs per arm bring 10 points
  within reach of 61 prompts; and all 16 rows of Figure 9.
- Connor (1987), p. 209, as reproduced by powerandsamplesize.com: p01 = 0.45,
  p10 = 0.05, alpha 0.05 two-sided, power 0.8 -> 23 pairs.
- Seed 002: at alpha 0.05 the exact two-sided McNemar test needs at least six
  discordant pairs all favouring the same arm.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from scipy import stats as sps

from prereg.reports.planning.from_runs import PlanOptions, build_plan

CLAUDE_SD = 0.281
CHATGPT_SD = 0.2268
CHATGPT_RUN_SD = 0.0252

# Figure 9 of the InvokeRank seed: (host sigma_d, sigma_run) -> rows of
# (prompts, alpha, MDE points, MDE with run component points).
FIGURE_9: dict[tuple[float, float], list[tuple[int, float, float, float]]] = {
    (CLAUDE_SD, 0.0): [
        (58, 0.05, 10.3, 10.3),
        (100, 0.05, 7.9, 7.9),
        (200, 0.05, 5.6, 5.6),
        (400, 0.05, 3.9, 3.9),
        (58, 0.10, 9.2, 9.2),
        (100, 0.10, 7.0, 7.0),
        (200, 0.10, 4.9, 4.9),
        (400, 0.10, 3.5, 3.5),
    ],
    (CHATGPT_SD, CHATGPT_RUN_SD): [
        (58, 0.05, 8.3, 13.1),
        (100, 0.05, 6.4, 11.9),
        (200, 0.05, 4.5, 11.0),
        (400, 0.05, 3.2, 10.5),
        (58, 0.10, 7.4, 11.6),
        (100, 0.10, 5.6, 10.5),
        (200, 0.10, 4.0, 9.8),
        (400, 0.10, 2.8, 9.3),
    ],
}


def plan(**kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("sims", 0)
    return build_plan(PlanOptions(**kwargs))


def closed_form_mde(
    sigma_d: float,
    n: int,
    alpha: float = 0.05,
    power: float = 0.8,
    sigma_run: float = 0.0,
    runs: int = 1,
) -> float:
    z = sps.norm.ppf(1 - alpha / 2) + sps.norm.ppf(power)
    return float(z * math.sqrt(sigma_d**2 / n + 2 * sigma_run**2 / runs))


def test_prd_rule_sigma_035() -> None:
    # "about 96 prompts detect a 10-point paired change": 96.15 rounded up is 97
    z = sps.norm.ppf(0.975) + sps.norm.ppf(0.8)
    assert (z * 0.35 / 0.10) ** 2 == pytest.approx(96.15, abs=0.01)
    assert plan(sigma_d=0.35, mde=0.10)["prompts"] == 97
    assert round(100 * plan(sigma_d=0.35, prompts=58)["mde"], 1) == 12.9


@pytest.mark.parametrize(
    ("sigma_d", "points"), [(0.28, 10.3), (CLAUDE_SD, 10.3), (CHATGPT_SD, 8.3)]
)
def test_observed_sigma_at_58_prompts(sigma_d: float, points: float) -> None:
    out = plan(sigma_d=sigma_d, prompts=58)
    assert round(100 * out["mde"], 1) == points
    assert out["mde"] == pytest.approx(closed_form_mde(sigma_d, 58), rel=1e-12)


@pytest.mark.parametrize(
    ("sigma_d", "mde", "prompts"),
    [
        (CLAUDE_SD, 0.05, 248),
        (CLAUDE_SD, 0.03, 689),
        (CHATGPT_SD, 0.05, 162),
        (CHATGPT_SD, 0.03, 449),
    ],
)
def test_prompts_for_small_effects(sigma_d: float, mde: float, prompts: int) -> None:
    out = plan(sigma_d=sigma_d, mde=mde)
    assert out["prompts"] == prompts
    assert out["solved_for"] == "prompts" and out["mde"] == mde
    # the smallest such count: one prompt fewer misses the MDE
    assert closed_form_mde(sigma_d, prompts) <= mde < closed_form_mde(sigma_d, prompts - 1)


@pytest.mark.parametrize("key", list(FIGURE_9))
def test_figure_9(key: tuple[float, float]) -> None:
    sigma_d, sigma_run = key
    out = plan(sigma_d=sigma_d, prompts=58, sigma_run=sigma_run, runs_per_arm=1)
    table = {(row["prompts"], row["alpha"]): row for row in out["table"]}
    for prompts, alpha, mde, with_runs in FIGURE_9[key]:
        row = table[(prompts, alpha)]
        # published to one decimal from unrounded inputs: agree within 0.1 point
        assert 100 * row["mde"] == pytest.approx(mde, abs=0.1), (prompts, alpha)
        assert 100 * row["mde_with_runs"] == pytest.approx(with_runs, abs=0.1), (prompts, alpha)
        assert row["mde_with_runs"] == pytest.approx(
            closed_form_mde(sigma_d, prompts, alpha, 0.8, sigma_run, 1), rel=1e-12
        )
    assert sum(row["planned"] for row in out["table"]) == 1


def test_run_floor_and_three_runs_per_arm() -> None:
    # "a single-run paired comparison cannot detect less than 10.0 points however many
    # prompts it uses; three runs per arm bring 10 points within reach of 61 prompts"
    near = plan(sigma_d=CHATGPT_SD, mde=0.10, sigma_run=CHATGPT_RUN_SD)
    assert round(100 * near["floor_mde"], 1) == 10.0
    assert near["prompts"] > 10_000  # just above the floor: reachable only in principle
    single = plan(sigma_d=CHATGPT_SD, mde=0.095, sigma_run=CHATGPT_RUN_SD)
    assert single["prompts"] is None and single["reachable"] is False
    assert "floor" in single["message"] and "no number of prompts" in single["message"]
    assert single["paired"]["runs_per_arm_needed"]["runs_per_arm"] == 2
    three = plan(sigma_d=CHATGPT_SD, mde=0.10, sigma_run=CHATGPT_RUN_SD, runs_per_arm=3)
    assert three["prompts"] == 61 and three["reachable"] is True and three["message"] is None
    z = sps.norm.ppf(0.975) + sps.norm.ppf(0.8)
    assert three["floor_mde"] == pytest.approx(z * math.sqrt(2 * CHATGPT_RUN_SD**2 / 3))


def test_no_run_component_means_no_floor() -> None:
    out = plan(sigma_d=CLAUDE_SD, prompts=58)
    assert out["floor_mde"] == 0.0
    assert all(row["mde"] == row["mde_with_runs"] for row in out["table"])


def connor(p01: float, p10: float, alpha: float = 0.05, power: float = 0.8) -> int:
    psi, delta = p01 + p10, p10 - p01
    za, zb = sps.norm.ppf(1 - alpha / 2), sps.norm.ppf(power)
    return math.ceil((za * math.sqrt(psi) + zb * math.sqrt(psi - delta**2)) ** 2 / delta**2)


def test_connor_worked_example() -> None:
    # the plan sizes the registered (exact) test; Connor's asymptotic n is shown beside it
    out = plan(p01=0.45, p10=0.05)
    assert out["mcnemar"]["prompts_asymptotic"] == 23 and "Connor" in out["mcnemar"]["method"]
    assert out["prompts"] == out["mcnemar"]["prompts"] == 25  # exact power 0.820, 24: 0.799
    assert out["mcnemar"]["power_exact"] >= 0.80 > out["mcnemar"]["power_exact_at_asymptotic"]
    assert out["mde"] == pytest.approx(0.40)
    # direction does not matter for a two-sided test
    assert plan(p01=0.05, p10=0.45)["prompts"] == 25


@pytest.mark.parametrize(
    ("p01", "p10", "alpha", "power"),
    [
        (0.20, 0.10, 0.05, 0.8),
        (0.15, 0.05, 0.05, 0.9),
        (0.30, 0.25, 0.10, 0.8),
        (0.02, 0.08, 0.01, 0.95),
    ],
)
def test_connor_closed_form(p01: float, p10: float, alpha: float, power: float) -> None:
    out = plan(p01=p01, p10=p10, alpha=alpha, power=power)
    assert out["mcnemar"]["prompts_asymptotic"] == connor(p01, p10, alpha, power)
    assert out["mcnemar"]["power_exact"] >= power


def test_connor_without_a_difference() -> None:
    out = plan(p01=0.1, p10=0.1)
    assert out["prompts"] is None and out["reachable"] is False
    assert "no difference" in out["message"]


@pytest.mark.parametrize(("alpha", "expected"), [(0.05, 6), (0.10, 5), (0.01, 8), (0.001, 11)])
def test_min_discordant(alpha: float, expected: int) -> None:
    out = plan(sigma_d=0.3, prompts=24, alpha=alpha)
    assert out["min_discordant"] == expected
    # independent reference: the exact binomial (sign) test on m pairs all one way
    assert sps.binomtest(expected, expected, 0.5).pvalue <= alpha
    assert sps.binomtest(expected - 1, expected - 1, 0.5).pvalue > alpha


def test_seed_002_six_discordant_pairs() -> None:
    # "On a 24-task corpus it needs at least six discordant pairs all favouring the
    # same arm" (alpha 0.05, two-sided)
    assert plan(p01=0.25, p10=0.0)["min_discordant"] == 6
