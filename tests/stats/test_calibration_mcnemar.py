"""Sample size for the exact McNemar test by exact power (issue 14, item 3).

Power is recomputed here by enumeration: over the trinomial (b, c, n - b - c) with
``scipy.stats.binomtest`` deciding each outcome for small n, and over the discordant
count m with the conditional binomial test's rejection region read off
``scipy.stats.binom`` for larger n.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from prereg.stats import mcnemar_exact_power, mcnemar_exact_sample_size, mcnemar_sample_size

CASES = [(0.45, 0.05), (0.10, 0.18), (0.05, 0.15), (0.10, 0.20), (0.20, 0.30)]


def _power_by_outcomes(n: int, p01: float, p10: float, alpha: float, sides: int) -> float:
    """Sum of trinomial probabilities of the outcomes binomtest rejects."""
    total = 0.0
    big = max(p01, p10)
    for b in range(n + 1):  # b counts the arm with the larger discordant probability
        for c in range(n + 1 - b):
            m = b + c
            if m == 0:
                continue
            alt = "two-sided" if sides == 2 else "greater"
            if sps.binomtest(b, m, 0.5, alternative=alt).pvalue <= alpha:
                total += sps.multinomial.pmf(
                    [b, c, n - m], n, [big, p01 + p10 - big, 1 - p01 - p10]
                )
    return total


def _power_by_discordant(n: int, p01: float, p10: float, alpha: float = 0.05) -> float:
    psi, share = p01 + p10, max(p01, p10) / (p01 + p10)
    power = 0.0
    for m in range(1, n + 1):
        b = np.arange(m + 1)
        p = np.minimum(1.0, 2 * sps.binom.cdf(np.minimum(b, m - b), m, 0.5))
        power += sps.binom.pmf(m, n, psi) * sps.binom.pmf(b, m, share)[p <= alpha].sum()
    return power


@pytest.mark.parametrize(
    ("p01", "p10", "alpha", "sides"),
    [(0.45, 0.05, 0.05, 2), (0.0, 0.3, 0.05, 2), (0.05, 0.4, 0.10, 1), (0.15, 0.45, 0.05, 2)],
)
def test_exact_power_matches_enumeration_over_outcomes(
    p01: float, p10: float, alpha: float, sides: int
) -> None:
    for n in (7, 18, 26):
        expected = _power_by_outcomes(n, p01, p10, alpha, sides)
        assert mcnemar_exact_power(n, p01, p10, alpha, sides) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(("p01", "p10"), CASES)
def test_exact_n_reaches_the_power_and_n_minus_one_does_not(p01: float, p10: float) -> None:
    n = int(mcnemar_exact_sample_size(p01, p10))
    assert _power_by_discordant(n, p01, p10) >= 0.80
    assert _power_by_discordant(n - 1, p01, p10) < 0.80
    # Connor's asymptotic n gives the exact test only 0.76-0.78 (issue 14)
    connor = int(mcnemar_sample_size(p01, p10))
    assert 0.75 < _power_by_discordant(connor, p01, p10) < 0.79
    assert connor < n


def test_exact_n_for_the_connor_example_and_edge_cases() -> None:
    assert mcnemar_exact_sample_size(0.45, 0.05) == 25  # Connor: 23 (exact power 0.777)
    assert mcnemar_exact_sample_size(0.05, 0.45) == 25  # two-sided: either direction
    assert mcnemar_exact_sample_size(0.2, 0.2) == float("inf")
    n = mcnemar_exact_sample_size(0.10, 0.125)  # a small difference: bisection
    assert (
        mcnemar_exact_power(int(n), 0.10, 0.125)
        >= 0.8
        > mcnemar_exact_power(int(n) - 1, 0.10, 0.125)
    )


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n": 0},
        {"n": 2.5},
        {"n": "10"},
        {"p01": -0.1},
        {"p01": 0.7, "p10": 0.5},
        {"alpha": 0.0},
        {"sides": 3},
    ],
)
def test_exact_power_refuses_bad_input(kwargs: dict[str, object]) -> None:
    args: dict[str, object] = {"n": 10, "p01": 0.1, "p10": 0.3, "alpha": 0.05, "sides": 2}
    args.update(kwargs)
    name = next(iter(kwargs))
    with pytest.raises(ValueError, match=name):
        mcnemar_exact_power(**args)  # type: ignore[arg-type]
