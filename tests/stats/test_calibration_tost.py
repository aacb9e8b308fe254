"""The binary paired TOST keeps alpha at every point of the margin boundary (issue 14, item 2).

Exact type I error by enumeration over the trinomial (b, c, n - b - c) with
``scipy.stats.multinomial``, at discordance rates off the test's own grid; p values
against a brute-force supremum with an independent Tango statistic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize
from scipy import stats as sps

from prereg.stats import equivalence_margin, tost_paired
from prereg.stats.paired import exact_equivalence_region

ALPHA = 0.05
MARGINS = (0.05, 0.1, 0.2)
NS = tuple(range(10, 61, 5))


def _outcomes(n: int) -> np.ndarray:
    """Every (b, c, n - b - c)."""
    return np.array([(b, c, n - b - c) for b in range(n + 1) for c in range(n + 1 - b)])


def _psi_grid(margin: float, points: int = 97) -> np.ndarray:
    # discordance rates on the boundary, off any equally spaced grid of the code
    inner = margin + (1 - margin) * (np.arange(points) + 0.3183) / points
    return np.concatenate([[margin], inner, [1.0]])


def _type_one(region: np.ndarray, n: int, delta: float, psi: np.ndarray) -> np.ndarray:
    """P(declare equivalence) at p10 - p01 = delta for each discordance rate psi."""
    x = _outcomes(n)
    inside = region[x[:, 0], x[:, 1]]
    out = []
    for s in psi:
        p10, p01 = (s + delta) / 2, (s - delta) / 2
        probs = np.clip([p10, p01, 1 - s], 0, 1)
        out.append(float(sps.multinomial.pmf(x[inside], n, probs).sum()) if inside.any() else 0)
    return np.array(out)


def _tango_reference(b: float, c: float, n: int, d0: float) -> float:
    """Tango (1998) score statistic from its closed-form constrained MLE (own code)."""
    bb = -b - c + (2 * n - b + c) * d0
    cc = -c * d0 * (1 - d0)
    q21 = (math.sqrt(max(bb * bb - 8 * n * cc, 0.0)) - bb) / (4 * n)
    var = n * (2 * q21 + d0 * (1 - d0))
    num = b - c - n * d0
    return 0.0 if num == 0 else (num / math.sqrt(var) if var > 0 else math.copysign(math.inf, num))


def _tango_upper_bound(b: float, c: float, n: int) -> float:
    """Tango's upper bound at z_{1 - ALPHA/2}: the root of Z(delta) = -z (own code)."""
    z = sps.norm.ppf(1 - ALPHA / 2)
    top = 1 - 1e-12
    if _tango_reference(b, c, n, top) + z >= 0:
        return 1.0
    return float(
        optimize.brentq(lambda d: _tango_reference(b, c, n, d) + z, (b - c) / n, top, xtol=1e-13)
    )


def test_issue_seed_case_not_equivalent() -> None:
    # no discordant pair on 25 prompts at a margin of 0.1: the boundary probability of
    # that very outcome is 0.9^25 = 0.072 > 0.05, so equivalence must not be declared
    res = tost_paired(np.zeros(25), 0.1)
    assert not res.equivalent and res.b == 0 and res.c == 0
    assert res.pvalue >= 0.9**25 - 1e-12
    assert res.min_margin > 0.1 and "exact" in res.method
    # Tango's asymptotic test declared it
    assert tost_paired(np.zeros(25), 0.1, method="tango").equivalent


@pytest.mark.parametrize("margin", MARGINS)
def test_type_one_error_at_most_alpha_on_the_boundary(margin: float) -> None:
    worst = 0.0
    for n in NS:
        region = exact_equivalence_region(n, margin, ALPHA)
        assert (region == region.T).all()  # the two boundaries mirror each other
        psi = _psi_grid(margin)
        upper = _type_one(region, n, margin, psi)
        lower = _type_one(region, n, -margin, psi)
        worst = max(worst, float(upper.max()), float(lower.max()))
        assert upper.max() <= ALPHA + 1e-12, (n, margin, psi[upper.argmax()], upper.max())
        assert lower.max() <= ALPHA + 1e-12, (n, margin, psi[lower.argmax()], lower.max())
        # inside the null (|delta| beyond the margin) too: the tails are Barnard-convex
        beyond = min(margin + 0.05, 0.95)
        assert _type_one(region, n, beyond, _psi_grid(beyond, 31)).max() <= ALPHA + 1e-12
    assert worst > 0.0 or margin == 0.05  # the check is not vacuous where equivalence is reachable


def test_tango_exceeds_alpha_on_the_same_grid() -> None:
    # the check has teeth: Tango's asymptotic decision region exceeds alpha (issue 14)
    n, margin = 25, 0.1
    z = sps.norm.ppf(1 - ALPHA)
    region = np.zeros((n + 1, n + 1), dtype=bool)
    for b in range(n + 1):
        for c in range(n + 1 - b):
            region[b, c] = (
                _tango_reference(b, c, n, margin) <= -z and _tango_reference(b, c, n, -margin) >= z
            )
    assert _type_one(region, n, margin, _psi_grid(margin)).max() > 0.07


def test_region_agrees_with_tost_paired() -> None:
    n, margin = 40, 0.2
    region = exact_equivalence_region(n, margin, ALPHA)
    assert region.any()
    # every cell of the region's border (inside and just outside) for small c
    cells = []
    for c in range(0, 6):
        inside = np.flatnonzero(region[:, c])
        if inside.size:
            cells += [(int(inside.min()), c), (int(inside.max()), c)]
            cells += [(int(inside.max()) + 1, c), (max(int(inside.min()) - 1, 0), c)]
    for b, c in cells:
        d = np.array([1.0] * b + [-1.0] * c + [0.0] * (n - b - c))
        assert tost_paired(d, margin, ALPHA).equivalent == region[b, c], (b, c)


@pytest.mark.parametrize(
    ("b", "c", "n", "margin"), [(3, 1, 30, 0.2), (0, 0, 25, 0.1), (6, 2, 40, 0.15)]
)
def test_p_value_is_the_supremum_over_the_boundary(b: int, c: int, n: int, margin: float) -> None:
    d = np.array([1.0] * b + [-1.0] * c + [0.0] * (n - b - c))
    res = tost_paired(d, margin, ALPHA)
    x = _outcomes(n)
    # the test orders outcomes by Tango's upper bound at z_{1 - alpha/2}
    u = np.array([_tango_upper_bound(bb, cc, n) for bb, cc, _ in x])
    tail = x[u <= _tango_upper_bound(b, c, n) + 1e-9]
    psi = np.linspace(margin, 1, 2001)
    brute = max(
        float(sps.multinomial.pmf(tail, n, [(s + margin) / 2, (s - margin) / 2, 1 - s]).sum())
        for s in psi
    )
    assert brute - 1e-12 <= res.pvalue_upper <= brute + 1e-6


def test_equivalence_margin_inverts_the_exact_test() -> None:
    rng = np.random.default_rng(5)
    d = rng.choice([-1.0, 0.0, 1.0], size=50, p=[0.1, 0.75, 0.15])
    m = equivalence_margin(d, ALPHA)
    assert tost_paired(d, m + 2e-6, ALPHA).equivalent
    assert not tost_paired(d, m - 2e-6, ALPHA).equivalent
    assert m == pytest.approx(tost_paired(d, 0.5, ALPHA).min_margin, abs=1e-12)
    # the exact margin is wider than Tango's asymptotic one
    assert m >= equivalence_margin(d, ALPHA, method="tango") - 1e-6
