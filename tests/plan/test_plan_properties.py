"""Monotonicity and consistency of the plan, property-tested with hypothesis."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from prereg.reports.planning.from_runs import PlanOptions, build_plan

SETTINGS = settings(max_examples=40, deadline=None, database=None)

sigmas = st.floats(0.02, 0.7)
counts = st.integers(2, 5000)
alphas = st.floats(0.001, 0.3)
powers = st.floats(0.5, 0.99)
run_sds = st.floats(0.0, 0.05)
runs = st.integers(1, 10)
mdes = st.floats(0.01, 0.5)


def plan(**kwargs: Any) -> dict[str, Any]:
    return build_plan(PlanOptions(sims=0, **kwargs))


def mde(**kwargs: Any) -> float:
    return float(plan(**kwargs)["mde"])


@SETTINGS
@given(sigmas, counts, counts, alphas, powers, run_sds, runs)
def test_mde_shrinks_with_prompts(
    s: float, n1: int, n2: int, a: float, p: float, r: float, k: int
) -> None:
    assume(n1 < n2)
    kw = dict(sigma_d=s, alpha=a, power=p, sigma_run=r, runs_per_arm=k)
    small, large = plan(prompts=n1, **kw), plan(prompts=n2, **kw)
    assert small["mde"] > large["mde"] >= large["floor_mde"] * (1 - 1e-12)
    # the floor does not depend on prompts
    assert large["floor_mde"] == pytest.approx(small["floor_mde"], rel=1e-9, abs=1e-12)


@SETTINGS
@given(sigmas, sigmas, counts, alphas, powers)
def test_mde_grows_with_sigma_d(s1: float, s2: float, n: int, a: float, p: float) -> None:
    s1, s2 = sorted((s1, s2))
    assume(s1 * 1.001 < s2)
    assert mde(sigma_d=s1, prompts=n, alpha=a, power=p) < mde(
        sigma_d=s2, prompts=n, alpha=a, power=p
    )


@SETTINGS
@given(sigmas, counts, alphas, alphas, powers, powers)
def test_mde_shrinks_with_alpha_and_grows_with_power(
    s: float, n: int, a1: float, a2: float, p1: float, p2: float
) -> None:
    a1, a2 = sorted((a1, a2))  # order the draws instead of filtering (health check)
    p1, p2 = sorted((p1, p2))
    assume(a1 * 1.001 < a2 and p1 + 0.001 < p2)
    assert mde(sigma_d=s, prompts=n, alpha=a1) > mde(sigma_d=s, prompts=n, alpha=a2)
    assert mde(sigma_d=s, prompts=n, power=p1) < mde(sigma_d=s, prompts=n, power=p2)


@SETTINGS
@given(sigmas, counts, run_sds, st.floats(1e-3, 0.05), runs, st.integers(1, 5))
def test_run_component_raises_mde_and_runs_lower_it(
    s: float, n: int, r1: float, dr: float, k1: int, dk: int
) -> None:
    r2, k2 = r1 + dr, k1 + dk
    assert mde(sigma_d=s, prompts=n, sigma_run=r1) < mde(sigma_d=s, prompts=n, sigma_run=r2)
    assert mde(sigma_d=s, prompts=n, sigma_run=r2, runs_per_arm=k1) > mde(
        sigma_d=s, prompts=n, sigma_run=r2, runs_per_arm=k2
    )
    for row in plan(sigma_d=s, prompts=n, sigma_run=r2, runs_per_arm=k1)["table"]:
        assert row["mde_with_runs"] >= row["mde"]


@SETTINGS
@given(sigmas, mdes, alphas, powers, run_sds, runs)
def test_prompts_is_the_smallest_count_reaching_the_mde(
    s: float, d: float, a: float, p: float, r: float, k: int
) -> None:
    kw = dict(sigma_d=s, alpha=a, power=p, sigma_run=r, runs_per_arm=k)
    out = plan(mde=d, **kw)
    assert (
        out["reachable"] == (d > out["floor_mde"] * (1 + 1e-9)) or abs(d - out["floor_mde"]) < 1e-9
    )
    if not out["reachable"]:
        assert out["prompts"] is None and "floor" in out["message"]
        return
    n = out["prompts"]
    assume(n < 10**7)
    assert mde(prompts=n, **kw) <= d * (1 + 1e-9)
    if n > 1:
        assert mde(prompts=n - 1, **kw) > d


@SETTINGS
@given(sigmas, mdes, mdes, alphas)
def test_prompts_fall_as_the_mde_grows(s: float, d1: float, d2: float, a: float) -> None:
    assume(d1 < d2)  # weakly: prompts are whole numbers
    assert (
        plan(sigma_d=s, mde=d1, alpha=a)["prompts"] >= plan(sigma_d=s, mde=d2, alpha=a)["prompts"]
    )


@SETTINGS
@given(st.floats(0.02, 0.9), st.floats(0.0, 1.0), st.floats(0.0, 1.0), alphas, powers)
def test_mcnemar_size_falls_as_the_split_widens(
    psi: float, f1: float, f2: float, a: float, p: float
) -> None:
    # psi = p01 + p10 fixed; a more lopsided split (larger |p01 - p10|) needs fewer pairs
    lo, hi = sorted((f1, f2))
    assume(0.01 < lo < hi)

    def size(f: float) -> int:
        p01, p10 = psi * (1 + f) / 2, psi * (1 - f) / 2
        return int(plan(p01=p01, p10=p10, alpha=a, power=p)["prompts"])

    assert size(lo) >= size(hi)
    p01, p10 = psi * (1 + lo) / 2, psi * (1 - lo) / 2
    assert size(lo) == plan(p01=p10, p10=p01, alpha=a, power=p)["prompts"]  # two-sided


@SETTINGS
@given(alphas, alphas)
def test_min_discordant_falls_as_alpha_grows(a1: float, a2: float) -> None:
    assume(a1 < a2)
    low = plan(sigma_d=0.3, prompts=10, alpha=a1)["min_discordant"]
    high = plan(sigma_d=0.3, prompts=10, alpha=a2)["min_discordant"]
    assert low >= high
    assert 2 * 0.5**high <= a2 < 2 * 0.5 ** (high - 1)  # the exact two-sided bound
