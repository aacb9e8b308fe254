"""The registered multiplicity family's error rate under the global null (issue 14).

Three disjoint intents of 20 tasks each, no run component: the members' statistics are
independent, so the chance that the registered rule rejects any member has an exact
value computed here from scipy alone (trinomial discordant counts, scipy's binomial
test, the closed-form beta-mixture e-value): Holm rejects something iff some p <= q/m,
Benjamini-Hochberg iff p_(k) <= kq/m for some k, e-BH iff e_(k) >= m/(kq) for some k.
The simulated figure must match within Monte Carlo error (fixed seeds: deterministic).
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import special

from prereg.stats.calibration import FamilyPlan, PlannedTest, calibrate
from prereg.stats.calibration_model import population
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


def test_calibrate_prints_the_family_row(ws: Path, capsys) -> None:
    draft = ws / "drafts" / "music-library-pilot.yaml"  # multiplicity: bh, q 0.10, per-intent
    doc = run(capsys, "-w", ws, "calibrate", draft, "--sims", "60", "--draws", "100", "--json")
    assert doc.code == 0, doc.stderr
    row = next(r for r in doc.json()["rows"] if r["label"] == "multiplicity")
    assert row["test"] == "bh over per-intent" and row["quantity"] == "false discovery rate"
    assert row["nominal"] == pytest.approx(0.1) and row["sims"] == 60
    assert row["mc_se"] >= 0.0 and row["verdict"] in ("ok", "conservative", "inflated")
    # a family of contrasts (the factorial draft: holm over its contrasts) is listed as
    # not simulated, with the reason
    factorial = ws / "drafts" / "music-library-factorial.yaml"
    doc = run(capsys, "-w", ws, "calibrate", factorial, "--sims", "20", "--draws", "50", "--json")
    assert doc.code == 0, doc.stderr
    skipped = [s for s in doc.json()["skipped"] if s["label"] == "multiplicity"]
    assert skipped and "contrasts" in skipped[0]["reason"]
    assert not any(r["label"] == "multiplicity" for r in doc.json()["rows"])
