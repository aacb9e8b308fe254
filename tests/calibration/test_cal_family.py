"""The registered multiplicity family's error rate under the global null (issues 14, 39).

Three disjoint intents of 20 tasks each, no run component: the members' statistics are
independent, so the chance that the registered rule rejects any member has an exact
value computed here from scipy alone (trinomial discordant counts, scipy's binomial
test, the closed-form beta-mixture e-value): Holm rejects something iff some p <= q/m,
Benjamini-Hochberg iff p_(k) <= kq/m for some k, e-BH iff e_(k) >= m/(kq) for some k.
The simulated figure must match within Monte Carlo error (fixed seeds: deterministic).

A family of contrasts (issue 39, item 9) is simulated on K arms of its own. Its exact
reference: three contrasts over disjoint pairs of six arms whose rates are drawn
independently (no shared rate), one repeat, so each contrast's unit values are
independent trinomial -1/0/+1 and the members are independent; the bootstrap member's p is
scipy's one-sample t test, the sign-flip member's scipy's binomial test. With dependent
members (a 2 x 2 factorial's main effects and interaction over the same arms) the rule is
checked data set by data set against the public functions and ``prereg.stats``' Holm and
Benjamini-Hochberg.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import special
from scipy import stats as sps

from prereg.stats import (
    benjamini_hochberg,
    contrast_bootstrap,
    contrast_sign_flip,
    factorial_weights,
    holm,
)
from prereg.stats.calibration import (
    FamilyPlan,
    PlannedTest,
    calibrate,
    contrast_family_rejects,
    family_levels,
)
from prereg.stats.calibration_model import population, simulate_arms
from tests.calibration.helpers import discordance, mcnemar_rejects, run, trinomial

SIMS = 4000
M, SIZE, Q = 3, 20, 0.3


def _level_probabilities(decide, alphas: list[float], p10: float, p01: float) -> np.ndarray:
    """P(the member first rejects at alphas[k]) for each k (rejection regions nested)."""
    grid = trinomial(SIZE, p10, p01)
    rates = []
    for a in alphas:
        total = 0.0
        for b in range(SIZE + 1):
            for c in range(SIZE + 1 - b):
                if grid[b, c] > 0 and decide(b, c, a):
                    total += grid[b, c]
        rates.append(total)
    return np.diff(np.concatenate([[0.0], rates]))


def _any_rejection(first: np.ndarray, needed: list[int]) -> float:
    """P(for some k, at least needed[k] members first reject at a level <= k), members
    independent with P(first level = k) = first[k] (the rest never reject)."""
    outcomes = list(range(len(first))) + [None]
    prob = [*first, 1.0 - first.sum()]
    total = 0.0
    for combo in itertools.product(range(len(outcomes)), repeat=M):
        p = math.prod(prob[i] for i in combo)
        levels = [outcomes[i] for i in combo]
        hit = any(
            sum(x is not None and x <= k for x in levels) >= needed[k] for k in range(len(first))
        )
        total += p * hit
    return total


def _e_rejects(b: int, c: int, alpha: float) -> bool:
    log_e = (b + c) * math.log(2.0) + special.betaln(1 + b, 1 + c) - special.betaln(1, 1)
    return log_e >= -math.log(alpha) - 1e-12


@pytest.mark.parametrize("method", ["holm", "bh", "none", "e-bh"])
def test_family_error_matches_enumeration(method: str) -> None:
    pop = population(M * SIZE, 1, 0.6)
    test = "beta_mixture" if method == "e-bh" else "mcnemar_exact"
    members = tuple(
        PlannedTest(f"intent {i}", test, subset=np.arange(i * SIZE, (i + 1) * SIZE))
        for i in range(M)
    )
    fam = FamilyPlan("multiplicity", method, Q, "per-intent", members)
    result = calibrate(pop, [], effect=0.1, sims=SIMS, seed=9, family=fam)
    row = next(r for r in result.rows if r.label == "multiplicity")
    assert row.nominal == Q and row.scenario == "global null"
    assert row.quantity == ("false discovery rate" if "bh" in method else "family-wise error")
    p10, p01 = discordance(pop, "majority", 0.0)
    if method == "none":
        alphas, needed = [Q], [1]
    elif method == "holm":
        alphas, needed = [Q / M], [1]
    else:
        alphas, needed = [k * Q / M for k in range(1, M + 1)], list(range(1, M + 1))
    decide = _e_rejects if method == "e-bh" else mcnemar_rejects
    exact = _any_rejection(_level_probabilities(decide, alphas, p10, p01), needed)
    se = math.sqrt(exact * (1 - exact) / SIMS)
    assert 0.01 < exact < 0.9
    assert abs(row.estimate - exact) <= 3.5 * se, (method, row.estimate, exact, se)


def _t_test_rejects(b: int, c: int, alpha: float) -> bool:
    """scipy's two-sided one-sample t test of b values +1, c values -1 and the rest 0 (the
    unit contrasts). Where scipy has no p (no spread), the function's documented
    convention: a zero mean never rejects, a non-zero one always does."""
    if b == c:
        return False
    if b + c == SIZE and min(b, c) == 0:
        return True
    values = np.array([1.0] * b + [-1.0] * c + [0.0] * (SIZE - b - c))
    return bool(sps.ttest_1samp(values, 0.0).pvalue <= alpha)


@pytest.mark.parametrize(
    ("method", "test"),
    [
        ("holm", "paired_bootstrap"),
        ("bh", "paired_bootstrap"),
        ("none", "paired_bootstrap"),
        ("holm", "sign_flip_test"),
    ],
)
def test_contrast_family_error_matches_enumeration(method: str, test: str) -> None:
    # six arms, every rate an independent Beta draw (no shared rate), one repeat: the
    # contrast arm 2j+1 - arm 2j is -1, 0 or +1 per task, P(+1) = P(-1) = mu (1 - mu)
    pop = replace(population(SIZE, 1, 0.6), shared=0.0)
    members = tuple(
        PlannedTest(
            f"contrasts[{j}]",
            test,
            aggregate="mean",
            weights=tuple(1.0 if k == 2 * j + 1 else -1.0 if k == 2 * j else 0.0 for k in range(6)),
        )
        for j in range(M)
    )
    fam = FamilyPlan("multiplicity", method, Q, "contrasts", members, arms=6)
    result = calibrate(pop, [], effect=0.1, sims=SIMS, seed=5, family=fam)
    row = next(r for r in result.rows if r.label == "multiplicity")
    assert row.test == f"{method} over contrasts" and row.scenario == "global null"
    assert row.sims == SIMS and row.nominal == Q
    both = pop.base_rate * (1.0 - pop.base_rate)
    needed, alphas = zip(*family_levels(method, Q, M), strict=True)
    decide = _t_test_rejects if test == "paired_bootstrap" else mcnemar_rejects
    exact = _any_rejection(_level_probabilities(decide, list(alphas), both, both), list(needed))
    se = math.sqrt(exact * (1 - exact) / SIMS)
    assert 0.01 < exact < 0.9
    assert abs(row.estimate - exact) <= 3.5 * se, (method, test, row.estimate, exact, se)


@pytest.mark.parametrize("method", ["holm", "bh", "none"])
def test_contrast_family_rejects_as_the_functions_adjust(method: str) -> None:
    """Dependent members (one set of arms): any rejection by the registered rule over the
    p values of contrast_bootstrap and contrast_sign_flip, data set by data set."""
    cells = [{"a": x, "b": y} for x in ("lo", "hi") for y in ("lo", "hi")]
    low_high: dict[str, tuple[object, object]] = {"a": ("lo", "hi"), "b": ("lo", "hi")}
    units = np.repeat(np.arange(8), 2)  # 16 tasks in 8 clusters
    subset = np.arange(12)  # the third member sees the first 12 tasks (6 clusters)
    specs = [("a", "paired_bootstrap", None), (["a", "b"], "paired_bootstrap", None)]
    specs.append(("b", "sign_flip_test", subset))
    members = tuple(
        PlannedTest(
            f"contrasts[{i}]",
            test,
            aggregate="mean",
            units=units if chosen is None else units[chosen],
            subset=chosen,
            sides="greater" if test == "paired_bootstrap" else "two-sided",
            weights=factorial_weights(cells, effect, low_high),
        )
        for i, (effect, test, chosen) in enumerate(specs)
    )
    q = 0.3
    fam = FamilyPlan("multiplicity", method, q, "contrasts", (*members, None), arms=4)
    pop = population(16, 2, 0.35)
    arms = simulate_arms(pop, [(0.0,) * 4], 60, np.random.default_rng(3))[0]
    rejects = contrast_family_rejects(fam, arms)
    for k in range(arms.shape[1]):
        pvals = []
        for member in members:
            seen = arms[:, k] if member.subset is None else arms[:, k][:, member.subset]
            values = seen.mean(axis=-1).T  # tasks x cells, every repeat averaged
            if member.test == "paired_bootstrap":  # the report adjusts its two-sided p
                res = contrast_bootstrap(values, member.weights, units=member.units)
                pvals.append(res.pvalue)
            else:
                flip = contrast_sign_flip(values, member.weights, units=member.units)
                pvals.append(flip.pvalue)
        pvals.append(1.0)  # the member not simulated: counted in m, never rejecting
        if method == "holm":
            expected = bool(holm(pvals, q).reject.any())
        elif method == "bh":
            expected = bool(benjamini_hochberg(pvals, q).reject.any())
        else:
            expected = min(pvals) <= q
        assert rejects[k] == expected, (k, pvals)
    assert 0 < int(rejects.sum()) < rejects.size  # both outcomes occur


def test_contrast_family_plan_is_checked() -> None:
    member = PlannedTest("c", "paired_bootstrap", weights=(1.0, -1.0))
    with pytest.raises(ValueError, match="one weight per arm"):
        FamilyPlan("multiplicity", "holm", 0.05, "contrasts", (member,), arms=3)
    with pytest.raises(ValueError, match="method"):
        FamilyPlan("multiplicity", "sidak", 0.05, "contrasts", (member,), arms=2)
    with pytest.raises(ValueError, match="q must"):
        FamilyPlan("multiplicity", "holm", 1.5, "contrasts", (member,), arms=2)
    fam = FamilyPlan("multiplicity", "holm", 0.05, "contrasts", (member,), arms=2)
    wrong = np.zeros((3, 1, 4, 1), dtype=bool)
    with pytest.raises(ValueError, match="family.s 2 arms"):
        contrast_family_rejects(fam, wrong)


def test_calibrate_prints_the_family_row(ws: Path, capsys) -> None:
    draft = ws / "drafts" / "music-library-pilot.yaml"  # multiplicity: bh, q 0.10, per-intent
    doc = run(capsys, "-w", ws, "calibrate", draft, "--sims", "60", "--draws", "100", "--json")
    assert doc.code == 0, doc.stderr
    row = next(r for r in doc.json()["rows"] if r["label"] == "multiplicity")
    assert row["test"] == "bh over per-intent" and row["quantity"] == "false discovery rate"
    assert row["nominal"] == pytest.approx(0.1) and row["sims"] == 60
    assert row["mc_se"] >= 0.0 and row["verdict"] in ("ok", "conservative", "inflated")


def test_calibrate_simulates_the_family_of_contrasts(ws: Path, capsys) -> None:
    # the factorial draft: holm at q 0.05 over its three contrasts, unit cluster
    factorial = ws / "drafts" / "music-library-factorial.yaml"
    sims = 400
    doc = run(
        capsys, "-w", ws, "calibrate", factorial, "--sims", str(sims), "--draws", "50", "--json"
    )
    assert doc.code == 0, doc.stderr
    assert not any(s["label"] == "multiplicity" for s in doc.json()["skipped"])
    row = next(r for r in doc.json()["rows"] if r["label"] == "multiplicity")
    assert row["test"] == "holm over contrasts" and row["quantity"] == "family-wise error"
    assert row["sims"] == sims and "3 member(s), 3 simulated" in row["note"]
    # Holm keeps the family-wise error at or below q under any dependence (Bonferroni's
    # inequality over the three t tests, each near its level); 3 Monte Carlo SEs of slack
    assert row["estimate"] <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / sims)
