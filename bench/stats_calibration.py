"""Long calibration of prereg.stats: type I error, coverage and FDR by exact computation
and simulation. Prints tables; no assertions (the fast versions live in tests/stats and
tests/calibration).

    python bench/stats_calibration.py [--reps 1000]            # one table, every test
    python bench/stats_calibration.py --detail [--quick]       # the sections below
    python bench/stats_calibration.py --issue14                # section 6 only
    python bench/stats_calibration.py --issue39 [--quick]      # section 7 only

The default is one table: every public test and interval of prereg.stats, the figure it
must keep (size, coverage, FDR, FWER, power), computed exactly where it can be and by
simulation otherwise, with its Monte Carlo standard error and a verdict judged as
``prereg calibrate`` judges (prereg.stats.calibration.verdict: two MC SE at the nominal).
The detailed sections:

1. Exact McNemar: exact type I error over a grid of pairs and discordance rates.
2. Beta-mixture monitor (threshold 20 after 40 prompts): exact type I error under
   continuous monitoring by dynamic programming, and simulated power and expected
   prompts to stop under alternatives.
3. Paired bootstrap coverage on clustered binary data with a between-run component:
   two-level (corrected, default), two-level (raw pigeonhole) and prompt-only.
4. TOST: rejection rate on the equivalence margin (the null boundary), Tango and t.
5. BH and e-BH: false discovery rate under independence.
6. Issue 14, before/after: the small-runs correction of the two-level bootstrap (coverage
   with a between-run SD of 5 points, additive on the rate), the exact TOST against
   Tango's z test (exact type I error on the margin boundary, by enumeration), the exact
   TOST's margin-free ordering against the at-margin one (power, nesting), and the
   exact McNemar sample size against Connor's (exact power).
7. Issue 39, before/after: the cluster bootstrap's coverage at 10, 20 and 40 clusters of
   binary tasks (the percentile interval, ``small_clusters="none"``, against the default
   bootstrap-SE interval with t_(n-1)), the paired difference with 2 runs per arm
   (coverage, and intervals outside [-1, 1]: the percentile's ends before any bound, the
   default's after its truncation to [-1, 1]), and the contrast bootstrap of a 2 x 2
   interaction at 10, 20 and 40 clusters (percentile and centred p against the default
   t interval with the exact bootstrap variance: coverage and size).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import stats as sps
from scipy.special import expit, gammaln, xlogy

import prereg.stats as ps
from prereg.stats.calibration import verdict
from prereg.stats.paired import (
    _exact_upper_p,
    _sup_over_nuisance,
    _tango_z_grid,
    exact_equivalence_region,
    upper_region,
)


def mcnemar_table() -> None:
    print("1. exact McNemar, exact type I error (nominal alpha in brackets)")
    print(f"{'pairs':>6} {'psi':>5} {'[0.05]':>8} {'[0.10]':>8}")
    cache: dict[tuple[int, float], np.ndarray] = {}
    for n in (24, 58, 100, 200, 400):
        for psi in (0.05, 0.2, 0.5):
            row = []
            for alpha in (0.05, 0.10):
                total = 0.0
                for m in range(n + 1):
                    pm = float(sps.binom.pmf(m, n, psi))
                    if pm < 1e-14:
                        continue
                    key = (m, alpha)
                    if key not in cache:
                        ks = np.arange(m + 1)
                        rej = np.array(
                            [ps.mcnemar_exact(int(k), int(m - k)).pvalue <= alpha for k in ks]
                        )
                        cache[key] = sps.binom.pmf(ks, m, 0.5) * rej
                    total += pm * float(cache[key].sum())
                row.append(total)
            print(f"{n:>6} {psi:>5.2f} {row[0]:>8.4f} {row[1]:>8.4f}")
    print()


def monitor_table(quick: bool) -> None:
    print("2. beta-mixture monitor, E >= 20 after >= 40 prompts, uniform prior")
    print("   exact type I error under continuous monitoring (bound 1/20 = 0.05)")
    print(f"{'horizon':>8} {'psi':>5} {'type I':>8} {'E[prompts]':>11}")
    horizons = (200, 500) if quick else (200, 500, 1000)
    for n_max in horizons:
        for psi in (0.05, 0.2, 0.5, 1.0):
            exact = ps.sequential_monitor_exact(psi / 2, psi / 2, n_max, 20.0, 40)
            stop, expected = exact.rejection_rate, exact.expected_prompts
            print(f"{n_max:>8} {psi:>5.2f} {stop:>8.4f} {expected:>11.1f}")
    print("   simulated power and expected prompts to stop (10,000 streams, horizon 500)")
    print(f"{'p01':>6} {'p10':>6} {'stop rate':>10} {'E[prompts]':>11} {'median':>7}")
    for p01, p10 in [(0.10, 0.10), (0.10, 0.15), (0.10, 0.20), (0.05, 0.20), (0.0, 0.10)]:
        sim = ps.simulate_sequential_monitor(p01, p10, 500, sims=10_000, seed=1)
        print(
            f"{p01:>6.2f} {p10:>6.2f} {sim.rejection_rate:>10.4f} "
            f"{sim.expected_prompts:>11.1f} {sim.median_prompts:>7.0f}"
        )
    print()


def _clustered(
    rng: np.random.Generator,
    p: int,
    r: int,
    sigma_run: float,
) -> tuple[np.ndarray, np.ndarray]:
    alpha = -0.3 + 2.5 * rng.standard_normal(p)
    uc = sigma_run * rng.standard_normal(r)
    ut = sigma_run * rng.standard_normal(r)
    yc = rng.random((p, r)) < expit(alpha[:, None] + uc[None, :])
    yt = rng.random((p, r)) < expit(alpha[:, None] + 0.5 + ut[None, :])
    return yc.astype(float).ravel(), yt.astype(float).ravel()


def bootstrap_table(reps: int, quick: bool) -> None:
    print("3. paired bootstrap, nominal 95% coverage; binary outcomes, logit = prompt effect")
    print(
        "   (SD 2.5) + run effect (SD sigma_run) + 0.5 for treatment; "
        f"{reps} data sets, 1000 draws each"
    )
    print(
        f"{'prompts':>7} {'runs':>4} {'sd_run':>6} {'truth':>7} | {'corrected':>9} "
        f"{'width':>6} | {'raw':>6} {'width':>6} | {'prompts':>7} {'width':>6}"
    )
    designs = [
        (60, 2, 0.3),
        (60, 3, 0.3),
        (60, 4, 0.0),
        (60, 4, 0.3),
        (60, 6, 0.5),
        (200, 3, 0.2),
        (100, 8, 0.5),
    ]
    if quick:
        designs = designs[2:5]
    big = np.random.default_rng(99)
    a = -0.3 + 2.5 * big.standard_normal(2_000_000)
    for p, r, sr in designs:
        truth = float(
            np.mean(
                expit(a + 0.5 + sr * big.standard_normal(a.size))
                - expit(a + sr * big.standard_normal(a.size))
            )
        )
        rng = np.random.default_rng(1000 * p + 10 * r + int(100 * sr))
        prompts = np.repeat(np.arange(p), r)
        runs = np.tile(np.arange(r), p)
        cover = np.zeros(3)
        width = np.zeros(3)
        for k in range(reps):
            yc, yt = _clustered(rng, p, r, sr)
            results = [
                ps.paired_bootstrap(yc, yt, prompts, runs, runs, draws=1000, seed=k),
                ps.paired_bootstrap(
                    yc, yt, prompts, runs, runs, draws=1000, seed=k, run_resampling="raw"
                ),
                ps.paired_bootstrap(yc, yt, prompts, draws=1000, seed=k),
            ]
            for j, res in enumerate(results):
                cover[j] += res.low <= truth <= res.high
                width[j] += res.high - res.low
        cover /= reps
        width /= reps
        print(
            f"{p:>7} {r:>4} {sr:>6.2f} {truth:>7.4f} | {cover[0]:>9.3f} {width[0]:>6.3f} | "
            f"{cover[1]:>6.3f} {width[1]:>6.3f} | {cover[2]:>7.3f} {width[2]:>6.3f}"
        )
    print(f"   (Monte Carlo SE of a coverage near 0.95: {math.sqrt(0.95 * 0.05 / reps):.3f})\n")


def tost_table(reps: int) -> None:
    print("4. TOST at alpha = 0.05: rejection rate with the true difference on the margin")
    print(f"{'method':>6} {'n':>5} {'margin':>6} {'rate':>7}")
    rng = np.random.default_rng(4)
    for n, margin, q21 in [(50, 0.1, 0.05), (200, 0.1, 0.1), (200, 0.05, 0.02), (800, 0.05, 0.1)]:
        q12 = q21 + margin
        rej = 0
        for _ in range(reps):
            u = rng.random(n)
            d = np.where(u < q12, 1.0, np.where(u < q12 + q21, -1.0, 0.0))
            rej += ps.tost_paired(d, margin, method="tango").equivalent
        print(f"{'tango':>6} {n:>5} {margin:>6.2f} {rej / reps:>7.4f}")
    for n in (10, 30, 100):
        rej = 0
        for _ in range(reps):
            d = rng.normal(0.2, 1.0, n)
            rej += ps.tost_paired(d, 0.2, method="t").equivalent
        print(f"{'t':>6} {n:>5} {0.2:>6.2f} {rej / reps:>7.4f}")
    print()


def fdr_table(reps: int) -> None:
    print("5. false discovery rate at q = 0.10, 40 hypotheses, 10 non-null (shift 3 SD)")
    rng = np.random.default_rng(5)
    fdp_bh, fdp_ebh, power_bh, power_ebh = [], [], [], []
    for _ in range(reps):
        x = rng.normal(size=40)
        x[:10] += 3.0
        p = sps.norm.sf(x)
        e = np.exp(3.0 * x - 4.5)  # likelihood ratio N(3, 1) : N(0, 1), mean 1 under H0
        for rej, fdp, power in [
            (ps.benjamini_hochberg(p, 0.1).reject, fdp_bh, power_bh),
            (ps.e_bh(e, 0.1).reject, fdp_ebh, power_ebh),
        ]:
            fdp.append(rej[10:].sum() / max(1, rej.sum()))
            power.append(rej[:10].mean())
    print(f"   BH   FDR {np.mean(fdp_bh):.4f}  power {np.mean(power_bh):.3f}")
    print(f"   e-BH FDR {np.mean(fdp_ebh):.4f}  power {np.mean(power_ebh):.3f}\n")


def _additive_runs(
    rng: np.random.Generator, p: int, r: int, sd_run: float, delta: float
) -> tuple[np.ndarray, np.ndarray]:
    base = rng.uniform(0.2, 0.8, p)
    uc = sd_run * rng.standard_normal(r)
    ut = sd_run * rng.standard_normal(r)
    pc = np.clip(base[:, None] + uc[None, :], 0, 1)
    pt = np.clip(base[:, None] + delta + ut[None, :], 0, 1)
    yc = (rng.random((p, r)) < pc).astype(float).ravel()
    yt = (rng.random((p, r)) < pt).astype(float).ravel()
    return yc, yt


def small_runs_table(reps: int) -> None:
    print("6a. two-level bootstrap (corrected scheme), nominal 95% coverage, before/after the")
    print("    small-runs t calibration; rate = U(0.2, 0.8) per prompt + run shift (SD sd_run)")
    print(f"    + 0.05 for treatment; {reps} data sets, 1000 draws each")
    print(
        f"{'prompts':>7} {'runs':>4} {'sd_run':>6} | {'before':>6} {'width':>6} | "
        f"{'after':>6} {'width':>6}"
    )
    for p, r, sd in [
        (100, 3, 0.05),
        (200, 3, 0.05),
        (100, 5, 0.05),
        (200, 5, 0.05),
        (100, 3, 0.0),
        (100, 10, 0.05),
    ]:
        rng = np.random.default_rng(7000 + p + r)
        prompts, runs = np.repeat(np.arange(p), r), np.tile(np.arange(r), p)
        cover, width = np.zeros(2), np.zeros(2)
        for k in range(reps):
            yc, yt = _additive_runs(rng, p, r, sd, 0.05)
            for j, mode in enumerate(("none", "t")):
                res = ps.paired_bootstrap(
                    yc, yt, prompts, runs, runs, draws=1000, seed=k, small_runs=mode
                )
                cover[j] += res.low <= 0.05 <= res.high
                width[j] += res.high - res.low
        cover, width = cover / reps, width / reps
        print(
            f"{p:>7} {r:>4} {sd:>6.2f} | {cover[0]:>6.3f} {width[0]:>6.3f} | "
            f"{cover[1]:>6.3f} {width[1]:>6.3f}"
        )
    print(f"   (Monte Carlo SE of a coverage near 0.95: {math.sqrt(0.95 * 0.05 / reps):.3f})\n")


def _boundary_size(region: np.ndarray, n: int, margin: float, psi: np.ndarray) -> float:
    b, c = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    keep = region & (b + c <= n)
    b, c = b[keep], c[keep]
    if b.size == 0:
        return 0.0
    log_coef = gammaln(n + 1) - gammaln(b + 1) - gammaln(c + 1) - gammaln(n - b - c + 1)
    p10, p01 = (psi[:, None] + margin) / 2, (psi[:, None] - margin) / 2
    terms = log_coef + xlogy(b, p10) + xlogy(c, p01) + xlogy(n - b - c, 1 - psi[:, None])
    return float(np.exp(terms).sum(axis=1).max())


def tost_exact_table() -> None:
    print("6b. binary paired TOST at alpha 0.05: worst exact type I error on the margin")
    print("    boundary (enumeration over the trinomial, 2001 discordance rates), n = 10..60")
    print(f"{'margin':>6} | {'Tango z':>8} {'(n)':>4} {'> alpha':>7} | {'exact':>6}")
    z = sps.norm.ppf(0.95)
    for margin in (0.05, 0.1, 0.2):
        psi = np.linspace(margin, 1, 2001)
        tango, exact = [], []
        for n in range(10, 61):
            zg = _tango_z_grid(n, margin)
            tango.append(_boundary_size((zg <= -z) & (zg.T <= -z), n, margin, psi))
            exact.append(_boundary_size(exact_equivalence_region(n, margin), n, margin, psi))
        worst = int(np.argmax(tango))
        over = sum(t > 0.05 for t in tango)
        print(
            f"{margin:>6.2f} | {max(tango):>8.4f} {worst + 10:>4} {over:>4}/51 | {max(exact):>6.4f}"
        )
    print()


def _at_margin_region(n: int, margin: float, both: bool = True) -> np.ndarray:
    """The exact TOST region of the earlier ordering (Tango's Z at the margin itself)."""
    z = _tango_z_grid(n, margin)
    levels = np.unique(z[np.isfinite(z)])

    def size(level: float) -> float:
        bstar = (z <= level + 1e-9 * max(1.0, abs(level))).sum(axis=0).astype(np.float64)
        return _sup_over_nuisance(bstar - 1.0, n, margin)

    lo, hi = -1, levels.size
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if size(float(levels[mid])) <= 0.05 else (lo, mid)
    if lo < 0:
        return np.zeros((n + 1, n + 1), dtype=bool)
    upper = z <= float(levels[lo]) + 1e-9 * max(1.0, abs(float(levels[lo])))
    return upper & upper.T if both else upper


def tost_ordering_table() -> None:
    print("6d. exact binary TOST, alpha 0.05: the margin-free ordering (Tango's bound at")
    print(
        "    z_0.975, now) against Tango's Z at the margin (before): power at no difference (exact,"
    )
    print("    p10 = p01 = psi / 2) and decisions that are not nested in the margin (margins")
    print("    0.02-0.94 by 0.02: outcomes accepted at a margin and refused at a larger one)")
    print(f"{'n':>4} {'margin':>6} {'psi':>5} | {'power now':>9} {'before':>7}")
    powers: list[tuple[float, float]] = []
    for n in (20, 30, 60, 100):
        for margin in (0.1, 0.15, 0.2, 0.3):
            now, before = exact_equivalence_region(n, margin), _at_margin_region(n, margin)
            for psi in (0.05, 0.1, 0.2, 0.3, 0.5):
                prob = _trinomial(n, psi / 2, psi / 2)
                pair = (float(prob[now].sum()), float(prob[before].sum()))
                powers.append(pair)
                if n in (30, 60) and psi in (0.1, 0.3):
                    print(f"{n:>4} {margin:>6.2f} {psi:>5.2f} | {pair[0]:>9.4f} {pair[1]:>7.4f}")
    arr = np.array(powers)
    print(
        f"   over n 20-100, margins 0.1-0.3, psi 0.05-0.5: mean power now {arr[:, 0].mean():.4f}, "
        f"before {arr[:, 1].mean():.4f}; largest loss {float((arr[:, 1] - arr[:, 0]).max()):.4f}, "
        f"largest gain {float((arr[:, 0] - arr[:, 1]).max()):.4f}"
    )
    n, b, c = 8, 2, 4
    cells = []
    for d0 in (0.28, 0.29, 0.30, 0.31, 0.32, 0.33):
        z = _tango_z_grid(n, d0)
        level = z[b, c] + 1e-9 * max(1.0, abs(float(z[b, c])))
        before_p = _sup_over_nuisance((z <= level).sum(axis=0) - 1.0, n, d0)
        cells.append(f"{d0:.2f}: {before_p:.4f} -> {_exact_upper_p(b, c, n, d0):.4f}")
    print(f"   n {n}, b {b}, c {c}, upper one-sided p (before -> now): " + "; ".join(cells))
    margins = np.round(np.arange(0.02, 0.951, 0.005), 3)
    builders = (
        ("now, one-sided", lambda n, m: upper_region(n, m)),
        ("before, one-sided", lambda n, m: _at_margin_region(n, m, both=False)),
        ("now, TOST", exact_equivalence_region),
        ("before, TOST", _at_margin_region),
    )
    for name, build in builders:
        bad = 0
        for n in (8, 12, 20):
            previous = np.zeros((n + 1, n + 1), dtype=bool)
            for m in margins:
                region = build(n, float(m))
                bad += int((previous & ~region).sum())
                previous = region
        print(f"   not nested ({name}): {bad} (outcome, margin) pairs over n 8, 12, 20")
    print()


def mcnemar_size_table() -> None:
    print("6c. sample size for the exact McNemar test, alpha 0.05 two-sided, power 0.80")
    print(
        f"{'p01':>5} {'p10':>5} | {'Connor n':>8} {'exact power':>11} | {'exact n':>7} {'power':>6}"
    )
    for p01, p10 in [(0.45, 0.05), (0.10, 0.18), (0.05, 0.15), (0.10, 0.20), (0.20, 0.30)]:
        nc = int(ps.mcnemar_sample_size(p01, p10))
        ne = int(ps.mcnemar_exact_sample_size(p01, p10))
        print(
            f"{p01:>5.2f} {p10:>5.2f} | {nc:>8} {ps.mcnemar_exact_power(nc, p01, p10):>11.4f} | "
            f"{ne:>7} {ps.mcnemar_exact_power(ne, p01, p10):>6.4f}"
        )
    print()


# ---------------------------------------------------------------------------
# one table: every public test and interval
# ---------------------------------------------------------------------------

Row = tuple[
    str, str, str, float, float, float | None
]  # function, figure, setting, nominal, value, se
#: simulated sets behind a row (by its setting) when not --reps, for its verdict
ROW_SETS: dict[str, int] = {}


def _trinomial(n: int, p10: float, p01: float) -> np.ndarray:
    b = np.arange(n + 1)[:, None]
    c = np.arange(n + 1)[None, :]
    rest = np.maximum(n - b - c, 0)
    log = (
        gammaln(n + 1)
        - gammaln(b + 1)
        - gammaln(c + 1)
        - gammaln(rest + 1)
        + xlogy(b, p10)
        + xlogy(c, p01)
        + xlogy(rest, 1 - p10 - p01)
    )
    return np.where(b + c <= n, np.exp(log), 0.0)


def _mc(hits: np.ndarray) -> tuple[float, float]:
    est = float(np.mean(hits))
    return est, math.sqrt(est * (1 - est) / hits.size)


def _paired_binary_rows() -> list[Row]:
    rows: list[Row] = []
    worst, where = 0.0, ""
    for n in (24, 58, 100):
        for psi in (0.1, 0.3, 0.6):
            size = 0.0
            for m in range(n + 1):
                pm = float(sps.binom.pmf(m, n, psi))
                if pm < 1e-14:
                    continue
                ks = np.arange(m + 1)
                rej = np.array([ps.mcnemar_exact(int(k), int(m - k)).pvalue <= 0.05 for k in ks])
                size += pm * float(np.sum(sps.binom.pmf(ks, m, 0.5) * rej))
            if size > worst:
                worst, where = size, f"n {n}, psi {psi}"
    rows.append(
        (
            "mcnemar_exact",
            "size (worst)",
            f"exact; n 24-100, psi 0.1-0.6 ({where})",
            0.05,
            worst,
            None,
        )
    )
    low, mean, count, where = 1.0, 0.0, 0, ""
    for n in (20, 60):
        for p10, p01 in ((0.05, 0.05), (0.1, 0.25), (0.3, 0.2), (0.02, 0.12)):
            prob = _trinomial(n, p10, p01)
            truth = p01 - p10
            cover = 0.0
            for b in range(n + 1):
                for c in range(n + 1 - b):
                    if prob[b, c] > 1e-13:
                        ci = ps.tango_interval(c, b, n, 0.95)
                        cover += prob[b, c] * (ci.low <= truth <= ci.high)
            mean, count = mean + cover, count + 1
            if cover < low:
                low, where = cover, f"n {n}, p10 {p10}, p01 {p01}"
    rows.append(
        (
            "tango_interval",
            "coverage (mean)",
            "exact; n 20 and 60, 4 rate pairs",
            0.95,
            mean / count,
            None,
        )
    )
    rows.append(("tango_interval", "coverage (worst)", f"exact ({where})", 0.95, low, None))
    psi = np.linspace(0.1, 1, 401)
    worst = max(
        _boundary_size(exact_equivalence_region(n, 0.1), n, 0.1, psi) for n in range(10, 41, 3)
    )
    rows.append(
        (
            "tost_paired (exact)",
            "size on the margin (worst)",
            "exact; n 10-40, margin 0.1",
            0.05,
            worst,
            None,
        )
    )
    sizes = []
    for n in (10, 30, 60):
        k = np.arange(n + 1)
        e = ps.beta_mixture_evalue(k, n - k).evalue
        sizes.append(float(np.sum(sps.binom.pmf(k, n, 0.5) * (e >= 20.0))))
    rows.append(
        (
            "beta_mixture_evalue",
            "size of E >= 1/alpha (worst)",
            "exact; 10, 30, 60 discordant pairs",
            0.05,
            max(sizes),
            None,
        )
    )
    exact = ps.sequential_monitor_exact(0.1, 0.1, 500, 20.0, 40)
    rows.append(
        (
            "sequential_monitor",
            "size (ever crosses)",
            "exact (dynamic programme); psi 0.2, 500 prompts",
            0.05,
            exact.rejection_rate,
            None,
        )
    )
    return rows


def _resampling_rows(reps: int) -> list[Row]:
    rows: list[Row] = []
    rng = np.random.default_rng(41)
    hits = np.array([ps.sign_flip_test(rng.standard_t(3, 15)).pvalue <= 0.05 for _ in range(reps)])
    rows.append(
        ("sign_flip_test", "size", f"simulated; 15 t(3) differences, {reps} sets", 0.05, *_mc(hits))
    )
    hits = np.array(
        [
            ps.exact_permutation_test(rng.normal(size=8), rng.normal(size=8)).pvalue <= 0.05
            for _ in range(reps)
        ]
    )
    rows.append(
        (
            "exact_permutation_test",
            "size",
            f"simulated; 8 + 8 normal, {reps} sets",
            0.05,
            *_mc(hits),
        )
    )
    hits = np.array(
        [ps.tost_paired(rng.normal(0.2, 1.0, 400), 0.2, method="t").equivalent for _ in range(reps)]
    )
    rows.append(
        (
            "tost_paired (t)",
            "size on the margin",
            f"simulated; 400 normal differences (SD 1), margin 0.2, {reps} sets",
            0.05,
            *_mc(hits),
        )
    )
    hits = np.array([ps.equivalence_margin(rng.normal(0.15, 1.0, 400)) < 0.15 for _ in range(reps)])
    rows.append(
        (
            "equivalence_margin",
            "P(margin below the truth)",
            f"simulated; 400 normal differences, truth 0.15, {reps} sets",
            0.05,
            *_mc(hits),
        )
    )
    hits = []
    for k in range(reps):
        d = (rng.random(60) < 0.3).astype(float) - (rng.random(60) < 0.2).astype(float)
        res = ps.paired_bootstrap(np.zeros(60), d, np.arange(60), draws=1000, seed=k)
        hits.append(res.low <= 0.1 <= res.high)
    rows.append(
        (
            "paired_bootstrap",
            "coverage",
            f"simulated; 60 prompts, one run, {reps} sets",
            0.95,
            *_mc(np.array(hits)),
        )
    )
    hits = []
    prompts, runs = np.repeat(np.arange(100), 3), np.tile(np.arange(3), 100)
    for k in range(reps):
        yc, yt = _additive_runs(rng, 100, 3, 0.05, 0.05)
        res = ps.paired_bootstrap(yc, yt, prompts, runs, runs, draws=1000, seed=k)
        hits.append(res.low <= 0.05 <= res.high)
    rows.append(
        (
            "paired_bootstrap",
            "coverage",
            f"simulated; 100 prompts, 3 runs, run SD 0.05, {reps} sets",
            0.95,
            *_mc(np.array(hits)),
        )
    )
    cells = [{"a": x, "b": y} for x in ("lo", "hi") for y in ("lo", "hi")]
    w = np.array(ps.factorial_weights(cells, ["a", "b"], {"a": ("lo", "hi"), "b": ("lo", "hi")}))
    cluster = np.repeat(np.arange(30), 4)
    boot, flip = [], []
    for k in range(reps):
        base = rng.normal(0, 1, 30)[cluster] + rng.normal(0, 0.7, 120)
        m = base[:, None] + rng.normal(0, 0.5, (120, 4))
        effect = 0.3 + rng.normal(0, 0.5, 30)[cluster]
        boot.append(
            ps.contrast_bootstrap(m + np.outer(effect, w / 4), w, units=cluster, draws=1000, seed=k)
        )
        flip.append(ps.contrast_sign_flip(m, w, units=cluster, seed=k).pvalue <= 0.05)
    rows.append(
        (
            "contrast_bootstrap",
            "coverage",
            f"simulated; 2 x 2 interaction, 30 clusters, {reps} sets",
            0.95,
            *_mc(np.array([r.low <= 0.3 <= r.high for r in boot])),
        )
    )
    rows.append(
        (
            "contrast_sign_flip",
            "size",
            f"simulated; as above, no interaction, {reps} sets",
            0.05,
            *_mc(np.array(flip)),
        )
    )
    return rows


def _interval_and_planning_rows(reps: int) -> list[Row]:
    rows: list[Row] = []
    p = np.linspace(0.05, 0.95, 19)
    n = 30
    k = np.arange(n + 1)
    ci = ps.jeffreys_interval(k, n)
    cover = [float(np.sum(sps.binom.pmf(k, n, q) * ((ci.low <= q) & (q <= ci.high)))) for q in p]
    rows.append(
        (
            "jeffreys_interval",
            "coverage (mean over p)",
            "exact; 30 trials, p 0.05-0.95",
            0.90,
            float(np.mean(cover)),
            None,
        )
    )
    rng = np.random.default_rng(43)
    hits = []
    rho, size, clusters = 0.3, 4, 40
    deff = ps.design_effect(np.full(clusters, size), rho)
    a = 0.4 * (1 / rho - 1)
    b = 0.6 * (1 / rho - 1)
    for _ in range(reps):
        rates = rng.beta(a, b, clusters)
        successes = int(rng.binomial(size, rates).sum())
        res = ps.jeffreys_interval(successes, clusters * size, deff=deff)
        hits.append(res.low <= 0.4 <= res.high)
    rows.append(
        (
            "jeffreys_interval + design_effect",
            "coverage",
            f"simulated; 40 clusters of 4, ICC 0.3, {reps} sets",
            0.90,
            *_mc(np.array(hits)),
        )
    )
    fdr_bh, fdr_ebh, fwer = [], [], []
    for _ in range(reps):
        x = rng.normal(size=40)
        x[:10] += 3.0
        pv = sps.norm.sf(x)
        e = np.exp(3.0 * x - 4.5)
        for rej, out in (
            (ps.benjamini_hochberg(pv, 0.1).reject, fdr_bh),
            (ps.e_bh(e, 0.1).reject, fdr_ebh),
        ):
            out.append(rej[10:].sum() / max(1, rej.sum()))
        fwer.append(bool(ps.holm(sps.norm.sf(rng.normal(size=10)), 0.05).reject.any()))
    for name, values in (("benjamini_hochberg", fdr_bh), ("e_bh", fdr_ebh)):
        arr = np.array(values)
        rows.append(
            (
                name,
                "FDR",
                f"simulated; 40 hypotheses, 10 non-null, {reps} sets",
                0.10,
                float(arr.mean()),
                float(arr.std(ddof=1) / math.sqrt(arr.size)),
            )
        )
    rows.append(
        ("holm", "FWER", f"simulated; 10 true nulls, {reps} sets", 0.05, *_mc(np.array(fwer)))
    )
    for p01, p10 in ((0.45, 0.05), (0.05, 0.15)):
        n_exact = int(ps.mcnemar_exact_sample_size(p01, p10))
        rows.append(
            (
                "mcnemar_exact_sample_size",
                "exact power at n",
                f"exact; p01 {p01}, p10 {p10}: n {n_exact}",
                0.80,
                ps.mcnemar_exact_power(n_exact, p01, p10),
                None,
            )
        )
    mde = ps.mde_paired(0.28, 58)
    hits = []
    for _ in range(reps):
        d = rng.normal(mde, 0.28, 58)
        hits.append(abs(d.mean()) / (0.28 / math.sqrt(58)) > sps.norm.ppf(0.975))
    rows.append(
        (
            "mde_paired",
            "power at the MDE",
            f"simulated; z test, 58 prompts, sigma_d 0.28, {reps} sets",
            0.80,
            *_mc(np.array(hits)),
        )
    )
    n = ps.prompts_for_mde(0.35, 0.10)
    rows.append(
        (
            "prompts_for_mde",
            "MDE at the prompts it gives",
            f"exact; sigma_d 0.35, mde 0.10: {n} prompts",
            0.10,
            ps.mde_paired(0.35, int(n)),
            None,
        )
    )
    return rows


def _issue14_rows() -> list[Row]:
    """The issue 14 fixes, as one row each: the exact TOST's decisions are nested in the
    margin, Connor's asymptotic McNemar n against the exact one (exact power)."""
    rows: list[Row] = []
    checked = violations = 0
    margins = np.round(np.arange(0.02, 0.96, 0.02), 2)
    for n in (8, 12, 20, 30, 40):
        previous = np.zeros((n + 1, n + 1), dtype=bool)
        for m in margins:
            region = exact_equivalence_region(n, float(m))
            violations += int((previous & ~region).sum())
            checked += int(previous.sum())
            previous = region
    rows.append(
        (
            "tost_paired (exact)",
            "nesting violations in margin",
            f"exact; n 8-40, margins 0.02-0.94: {checked} (outcome, margin) rejections",
            0.0,
            violations / max(checked, 1),
            None,
        )
    )
    for p01, p10 in ((0.45, 0.05), (0.05, 0.15)):
        n_connor = int(math.ceil(ps.mcnemar_sample_size(p01, p10)))
        rows.append(
            (
                "mcnemar_sample_size (Connor)",
                "exact power at n",
                f"exact; p01 {p01}, p10 {p10}: n {n_connor} (asymptotic; plan shows both)",
                0.80,
                ps.mcnemar_exact_power(n_connor, p01, p10),
                None,
            )
        )
    return rows


def _judged_rows(reps: int) -> list[Row]:
    """Judged outcomes (issue 18): PPI, kappa, the judge's TPR, and the InvokeRank
    stage intervals that are closed-form (the scores have bench/invokerank_coverage.py)."""
    rows: list[Row] = []
    rng = np.random.default_rng(47)
    theta, n_gold, n_big = 0.6, 100, 1000
    mean_hits, diff_hits = [], []
    for _ in range(reps):
        y = (rng.random(n_gold + n_big) < theta).astype(float)
        f = np.where(rng.random(y.size) < 0.1, 1.0 - y, y)
        res = ps.ppi_mean(y[:n_gold], f[:n_gold], f[n_gold:])
        mean_hits.append(res.low <= theta <= res.high)
        base = rng.random((2, n_gold + n_big))
        yc, yt = (base[0] < 0.5).astype(float), (base[1] < 0.6).astype(float)
        fc = np.where(rng.random(yc.size) < 0.1, 1.0 - yc, yc)
        ft = np.where(rng.random(yt.size) < 0.1, 1.0 - yt, yt)
        res = ps.ppi_difference(
            yc[:n_gold], fc[:n_gold], fc[n_gold:], yt[:n_gold], ft[:n_gold], ft[n_gold:]
        )
        diff_hits.append(res.low <= 0.1 <= res.high)
    setting = f"simulated; 100 gold + 1000 judged, judge error 0.10, {reps} sets"
    rows.append(("ppi_mean", "coverage", setting, 0.95, *_mc(np.array(mean_hits))))
    rows.append(("ppi_difference", "coverage", setting, 0.95, *_mc(np.array(diff_hits))))
    hits = []
    for _ in range(reps):
        a = rng.random(200) < 0.5
        b = np.where(rng.random(200) < 0.8, a, ~a)  # kappa = (0.8 - 0.5) / 0.5 = 0.6
        res = ps.cohens_kappa(a.astype(int), b.astype(int))
        hits.append(res.low <= 0.6 <= res.high)
    rows.append(
        (
            "cohens_kappa",
            "coverage",
            f"simulated; 200 items, kappa 0.6, {reps} sets",
            0.95,
            *_mc(np.array(hits)),
        )
    )
    n_pos, tpr = 40, 0.85
    k = np.arange(n_pos + 1)
    cover = 0.0
    for x in k:
        rates = ps.judge_rates(np.ones(n_pos), (np.arange(n_pos) < x).astype(float))
        cover += float(sps.binom.pmf(x, n_pos, tpr)) * (rates.tpr.low <= tpr <= rates.tpr.high)
    rows.append(
        ("judge_rates", "TPR coverage", "exact; 40 gold positives, TPR 0.85", 0.95, cover, None)
    )
    n, q = 50, 0.3
    x = np.arange(n + 1)
    lo, hi = ps.beta_interval(x + 0.5, n - x + 0.5, 0.9)  # a stage posterior, Jeffreys prior
    cover = float(np.sum(sps.binom.pmf(x, n, q) * ((lo <= q) & (q <= hi))))
    rows.append(
        (
            "beta_interval",
            "coverage",
            "exact; Beta(k + 1/2, n - k + 1/2), n 50, p 0.3",
            0.90,
            cover,
            None,
        )
    )
    hits = []
    rho, size, groups, rate = 0.2, 3, 60, 0.1
    a, b = rate * (1 / rho - 1), (1 - rate) * (1 / rho - 1)
    for _ in range(reps):
        calls = rng.binomial(size, rng.beta(a, b, groups))
        res = ps.false_invoke_rate(calls, np.full(groups, size), rho)
        hits.append(res.low <= rate <= res.high)
    rows.append(
        (
            "false_invoke_rate",
            "coverage",
            f"simulated; 60 negative prompts x 3 runs, rate 0.1, rho 0.2, {reps} sets",
            0.90,
            *_mc(np.array(hits)),
        )
    )
    return rows


# ---------------------------------------------------------------------------
# issue 39: the cluster bootstrap with few clusters, and intervals inside the support
# ---------------------------------------------------------------------------

#: the grid of clustered binary designs: base rate, ICC of the control outcomes within a
#: cluster, relative effect (+e closes e of the gap to 1, -e removes e of the rate)
CLUSTER_GRID = [
    (p0, icc, effect)
    for p0 in (0.2, 0.5, 0.8)
    for icc in (0.1, 0.3, 0.5)
    for effect in (0.0, 0.3, -0.3)
]
TASKS_PER_CLUSTER = 4


def _beta(rng: np.random.Generator, mean: float, icc: float, size: int) -> np.ndarray:
    scale = 1.0 / icc - 1.0
    return rng.beta(mean * scale, (1.0 - mean) * scale, size)


def clustered_binary(
    rng: np.random.Generator, clusters: int, p0: float, icc: float, effect: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Control and treatment rows (TASKS_PER_CLUSTER binary tasks a cluster), cluster
    labels and the true difference. The control rate of a cluster is Beta with mean p0 and
    intraclass correlation icc; the treatment closes a Beta(mean |effect|, ICC 0.2) share
    of the gap to 1 (effect > 0) or removes that share of the rate (effect < 0), so the
    true difference is effect (1 - p0) or effect p0."""
    pc = _beta(rng, p0, icc, clusters)
    if effect == 0.0:
        pt, truth = pc, 0.0
    else:
        u = _beta(rng, abs(effect), 0.2, clusters)
        pt = pc + (1.0 - pc) * u if effect > 0 else pc * (1.0 - u)
        truth = effect * (1.0 - p0) if effect > 0 else effect * p0
    labels = np.repeat(np.arange(clusters), TASKS_PER_CLUSTER)
    yc = (rng.random(labels.size) < pc[labels]).astype(float)
    yt = (rng.random(labels.size) < pt[labels]).astype(float)
    return yc, yt, labels, truth


def _cluster_coverage(
    clusters: int, reps: int, levels: tuple[float, ...], seed: int
) -> dict[tuple[str, float], np.ndarray]:
    """Hits of the before (small_clusters="none") and after (default) intervals; data set
    k is drawn from CLUSTER_GRID[k % 27], so the rate is the grid's mean coverage."""
    rng = np.random.default_rng(seed)
    hits = {(mode, lv): np.zeros(reps, dtype=bool) for mode in ("none", "t") for lv in levels}
    for k in range(reps):
        p0, icc, effect = CLUSTER_GRID[k % len(CLUSTER_GRID)]
        yc, yt, labels, truth = clustered_binary(rng, clusters, p0, icc, effect)
        for lv in levels:
            for mode in ("none", "t"):
                res = ps.paired_bootstrap(
                    yc, yt, labels, draws=1000, level=lv, seed=k, small_clusters=mode
                )
                hits[(mode, lv)][k] = res.low <= truth <= res.high
    return hits


def _two_repeats(
    prompts: int, sd_run: float, reps: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """2 runs per arm, binary (rate U(0.2, 0.8) a prompt + a run shift of SD sd_run, +0.05
    for treatment): before (percentile, ends before any bound) and after (default) hits,
    before's intervals outside [-1, 1], after's truncated and outside ones."""
    rng = np.random.default_rng(seed)
    labels, runs = np.repeat(np.arange(prompts), 2), np.tile(np.arange(2), prompts)
    before, after, outside_before, truncated, outside_after = (
        np.zeros(reps, dtype=bool) for _ in range(5)
    )
    for k in range(reps):
        yc, yt = _additive_runs(rng, prompts, 2, sd_run, 0.05)
        old = ps.paired_bootstrap(
            yc, yt, labels, runs, runs, draws=1000, seed=k, small_clusters="none"
        )
        low, high = np.quantile(old.distribution, [0.025, 0.975])  # unbounded, as printed
        before[k] = low <= 0.05 <= high
        outside_before[k] = low < -1 or high > 1
        new = ps.paired_bootstrap(yc, yt, labels, runs, runs, draws=1000, seed=k)
        after[k] = new.low <= 0.05 <= new.high
        truncated[k] = new.truncated
        outside_after[k] = new.low < -1 or new.high > 1
    return before, after, outside_before, truncated, outside_after


def clustered_interaction(
    rng: np.random.Generator, clusters: int, p0: float, icc: float, effect: float
) -> tuple[np.ndarray, np.ndarray, float]:
    """A 2 x 2 factorial on clustered binary tasks (TASKS_PER_CLUSTER a cluster): cells
    (lo, lo), (lo, hi), (hi, lo) take the cluster's rate (Beta, mean p0, ICC icc), each task
    and cell its own Bernoulli draw; cell (hi, hi) is moved as clustered_binary moves the
    treatment. Returns the (tasks x 4 cells) outcomes, cluster labels and the true
    interaction (weights 1, -1, -1, 1: the difference of differences), the (hi, hi) cell's
    shift: effect (1 - p0) or effect p0."""
    pc = _beta(rng, p0, icc, clusters)
    if effect == 0.0:
        pt, truth = pc, 0.0
    else:
        u = _beta(rng, abs(effect), 0.2, clusters)
        pt = pc + (1.0 - pc) * u if effect > 0 else pc * (1.0 - u)
        truth = effect * (1.0 - p0) if effect > 0 else effect * p0
    labels = np.repeat(np.arange(clusters), TASKS_PER_CLUSTER)
    rates = np.column_stack([pc[labels], pc[labels], pc[labels], pt[labels]])
    return (rng.random(rates.shape) < rates).astype(float), labels, truth


#: the 2 x 2 interaction's weights over the cells (lo, lo), (lo, hi), (hi, lo), (hi, hi)
INTERACTION = np.array([1.0, -1.0, -1.0, 1.0])


def _contrast_coverage(
    clusters: int, reps: int, levels: tuple[float, ...], seed: int
) -> tuple[dict[tuple[str, float], np.ndarray], dict[str, np.ndarray]]:
    """Hits of the percentile (before) and default (after) contrast intervals at each level
    over the 27 designs in turn, and each mode's rejections at 0.05 on the null designs
    (p <= 0.05)."""
    rng = np.random.default_rng(seed)
    hits = {(m, lv): np.zeros(reps, dtype=bool) for m in ("none", "t") for lv in levels}
    nulls = [k for k in range(reps) if CLUSTER_GRID[k % len(CLUSTER_GRID)][2] == 0.0]
    rejects = {m: np.zeros(len(nulls), dtype=bool) for m in ("none", "t")}
    for k in range(reps):
        p0, icc, effect = CLUSTER_GRID[k % len(CLUSTER_GRID)]
        m, labels, truth = clustered_interaction(rng, clusters, p0, icc, effect)
        for lv in levels:
            for mode in ("none", "t"):
                res = ps.contrast_bootstrap(
                    m, INTERACTION, units=labels, draws=1000, level=lv, seed=k, small_clusters=mode
                )
                hits[(mode, lv)][k] = res.low <= truth <= res.high
                if effect == 0.0 and lv == levels[0]:
                    rejects[mode][nulls.index(k)] = res.pvalue <= 0.05
    return hits, rejects


def _rate(hits: np.ndarray) -> str:
    est = float(hits.mean())
    return f"{est:.3f} ({math.sqrt(max(est * (1 - est), 1e-12) / hits.size):.3f})"


def few_clusters_table(reps: int) -> None:
    print("7a. cluster bootstrap with few clusters (issue 39): coverage (MC SE) of the interval,")
    print(
        f"    before (small_clusters='none': percentile) and after (default: bootstrap SE x "
        f"t_(n-1)); {TASKS_PER_CLUSTER} binary tasks a cluster, clusters resampled, {reps} "
        "data sets a row, each from one of 27 designs in turn (base rate 0.2/0.5/0.8, ICC "
        "0.1/0.3/0.5, effect 0/+0.3/-0.3 relative), 1000 draws"
    )
    print(f"{'clusters':>8} {'level':>5} | {'before':>13} | {'after':>13}")
    for clusters in (10, 20, 40):
        hits = _cluster_coverage(clusters, reps, (0.95, 0.90), seed=3900 + clusters)
        for lv in (0.95, 0.90):
            print(
                f"{clusters:>8} {lv:>5.2f} | {_rate(hits[('none', lv)]):>13} | "
                f"{_rate(hits[('t', lv)]):>13}"
            )
    print("    per design, the candidates and 5-8 clusters: bench/cluster_coverage.py --few\n")
    print("7b. paired difference with 2 runs per arm (corrected scheme, small-runs t factor")
    print(
        "    t_(1, 0.975) / z = 6.5 on the run part): coverage of the nominal 95% interval, and "
        f"intervals outside [-1, 1]; rate U(0.2, 0.8) + run shift, +0.05; {reps} data sets"
    )
    print(
        f"{'prompts':>7} {'sd_run':>6} | {'before':>13} {'outside':>7} | {'after':>13} "
        f"{'truncated':>9} {'outside':>7}"
    )
    for prompts, sd_run in ((10, 0.0), (10, 0.05), (20, 0.05), (40, 0.05)):
        before, after, out_b, trunc, out_a = _two_repeats(
            prompts, sd_run, reps, seed=3950 + prompts + int(100 * sd_run)
        )
        print(
            f"{prompts:>7} {sd_run:>6.2f} | {_rate(before):>13} {int(out_b.sum()):>7} | "
            f"{_rate(after):>13} {int(trunc.sum()):>9} {int(out_a.sum()):>7}"
        )
    print()
    print("7c. contrast_bootstrap of a 2 x 2 interaction (issue 39): coverage (MC SE) before")
    print(
        "    (small_clusters='none': percentile; size of its centred p) and after (default: "
        "exact bootstrap SE x sqrt(n/(n-1)) t_(n-1); size of its t-test p); 4 binary tasks "
        f"a cluster and cell, clusters resampled, {reps} data sets a row over the 27 designs "
        "(size: the 9 null designs' share), 1000 draws"
    )
    print(
        f"{'clusters':>8} {'level':>5} | {'before':>13} | {'after':>13} | "
        f"{'size before':>13} | {'size after':>13}"
    )
    for clusters in (10, 20, 40):
        hits, rejects = _contrast_coverage(clusters, reps, (0.95, 0.90), seed=3970 + clusters)
        for lv in (0.95, 0.90):
            sizes = (
                f" | {_rate(rejects['none']):>13} | {_rate(rejects['t']):>13}" if lv == 0.95 else ""
            )
            print(
                f"{clusters:>8} {lv:>5.2f} | {_rate(hits[('none', lv)]):>13} | "
                f"{_rate(hits[('t', lv)]):>13}{sizes}"
            )
    print()


def _issue39_rows(reps: int) -> list[Row]:
    """The default interval at 10, 20, 40 clusters (the grid's mean coverage at 0.95), the
    contrast bootstrap's at 10, 20, 40 clusters (a 2 x 2 interaction on the same designs),
    and the 2-runs-per-arm binary difference: coverage, and no interval outside [-1, 1]."""
    rows: list[Row] = []
    for clusters in (10, 20, 40):
        rng = np.random.default_rng(3990 + clusters)
        hits = np.zeros(reps, dtype=bool)
        for k in range(reps):
            yc, yt, labels, truth = clustered_binary(
                rng, clusters, *CLUSTER_GRID[k % len(CLUSTER_GRID)]
            )
            res = ps.paired_bootstrap(yc, yt, labels, draws=1000, seed=k)
            hits[k] = res.low <= truth <= res.high
        rows.append(
            (
                "paired_bootstrap",
                "coverage",
                f"simulated; {clusters} clusters of 4 binary tasks, 27 designs, {reps} sets",
                0.95,
                *_mc(hits),
            )
        )
    # the contrast's default interval needs no resampling (its bootstrap variance is
    # exact), so these rows afford four times the sets: MC SE 0.0034 rather than 0.0069
    sets = 4 * reps
    for clusters in (10, 20, 40):
        rng = np.random.default_rng(3980 + clusters)
        hits = np.zeros(sets, dtype=bool)
        for k in range(sets):
            m, labels, truth = clustered_interaction(
                rng, clusters, *CLUSTER_GRID[k % len(CLUSTER_GRID)]
            )
            res = ps.contrast_bootstrap(m, INTERACTION, units=labels, draws=1000, seed=k)
            hits[k] = res.low <= truth <= res.high
        setting = (
            f"simulated; 2 x 2 interaction, {clusters} clusters of 4 binary tasks a cell, "
            f"27 designs, {sets} sets"
        )
        ROW_SETS[setting] = sets
        rows.append(("contrast_bootstrap", "coverage", setting, 0.95, *_mc(hits)))
    _, after, _, truncated, outside = _two_repeats(10, 0.05, reps, seed=3999)
    rows.append(
        (
            "paired_bootstrap",
            "coverage",
            f"simulated; 10 prompts, 2 runs per arm, binary, run SD 0.05, {reps} sets",
            0.95,
            *_mc(after),
        )
    )
    rows.append(
        (
            "paired_bootstrap",
            "share outside [-1, 1]",
            f"as above, every interval checked ({int(truncated.sum())} truncated)",
            0.0,
            float(outside.mean()),
            None,
        )
    )
    return rows


def _kappa_rows(reps: int) -> list[Row]:
    """Cohen's kappa's BCa interval at 60 items, kappa 0.8, prevalence 0.3 for both raters
    (p11 0.258, p10 = p01 0.042, p00 0.658: po 0.916, pe 0.58)."""
    rng = np.random.default_rng(3960)
    cells = np.array([0.258, 0.042, 0.042, 0.658])
    hits = np.zeros(reps, dtype=bool)
    for k in range(reps):
        n11, n10, n01, n00 = rng.multinomial(60, cells)
        a = np.repeat([1, 1, 0, 0], [n11, n10, n01, n00])
        b = np.repeat([1, 0, 1, 0], [n11, n10, n01, n00])
        res = ps.cohens_kappa(a, b, seed=k)
        hits[k] = bool(res.low <= 0.8 <= res.high)  # nan bounds (no interval) miss
    setting = f"simulated; 60 items, kappa 0.8, prevalence 0.3, {reps} sets"
    return [("cohens_kappa", "coverage", setting, 0.95, *_mc(hits))]


def _invokerank_rows(reps: int) -> list[Row]:
    """The InvokeRank calibrated interval (nominal 90%) on bench/invokerank_coverage.py's
    designs: 8 and 25 prompts per intent, 3 sessions at a session SD of 2.5 and 5 points;
    roll-up and per-intent coverage."""
    import contextlib
    import io
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import invokerank_coverage as irc  # a bench script beside this one

    rows: list[Row] = []
    designs = [irc.centre(8), irc.centre(25), irc.sessions(2.5), irc.sessions(5.0)]
    n = min(reps, 400)
    for design in designs:
        with contextlib.redirect_stdout(io.StringIO()):
            got = irc.run_design(design, n, draws=4000, resamples=1000)
        _, _, cover, se, per, se_i, _, _ = next(r for r in got if r[1] == irc.AFTER)
        setting = f"simulated; {design.name}, {n} sets"
        ROW_SETS[setting] = n
        rows.append(("invokerank: calibrated, roll-up", "coverage", setting, 0.90, cover, se))
        ROW_SETS[setting + " "] = n * design.mu_d.size
        rows.append(
            ("invokerank: calibrated, per intent", "coverage", setting + " ", 0.90, per, se_i)
        )
    return rows


def summary_table(reps: int) -> None:
    """Every public test and interval of prereg.stats in one table."""
    rows = _paired_binary_rows() + _issue14_rows() + _resampling_rows(reps)
    rows += _issue39_rows(reps) + _kappa_rows(reps) + _invokerank_rows(reps)
    rows += _interval_and_planning_rows(reps) + _judged_rows(reps)
    print(f"prereg.stats calibration: every public test and interval ({reps} simulated sets each)")
    header = (
        f"{'function':<34} {'figure':<28} {'nominal':>7} {'value':>7} {'MC SE':>6} "
        f"{'verdict':<13} setting"
    )
    print(header)
    print("-" * len(header))
    for function, figure, setting, nominal, value, se in rows:
        if figure.startswith(("size", "FDR", "FWER", "P(margin")):
            quantity = "type I error"
        elif figure.startswith("coverage") or figure.endswith("coverage"):
            quantity = "coverage"
        elif figure.startswith(("power", "exact power")):
            quantity = "power"
        else:
            quantity = "-"
        if se is None:  # exact: judged without Monte Carlo error
            if quantity == "type I error":
                judged = "ok" if value <= nominal + 1e-12 else "inflated"
            elif quantity == "coverage":
                judged = "ok" if value >= nominal - 0.02 else "under-covers"
            elif quantity == "power":
                judged = "ok" if value >= nominal - 1e-12 else "below target"
            else:
                judged = "ok" if value <= nominal + 1e-12 else "above"
        else:
            judged = verdict(quantity, value, nominal, ROW_SETS.get(setting, reps))
        shown_se = "exact" if se is None else f"{se:.4f}"
        print(
            f"{function:<34} {figure:<28} {nominal:>7.3f} {value:>7.4f} {shown_se:>6} "
            f"{judged:<13} {setting}"
        )
    print(
        "elsewhere: the InvokeRank scores' intervals (bench/invokerank_coverage.py), PPI over "
        "gold sizes and judge errors (bench/ppi_coverage.py), the registration-level table "
        "(prereg calibrate); estimators without an interval (pass_hat_k, icc_binary, "
        "loss_shares, funnel_lever) are checked against closed forms in tests/stats"
    )
    print()


def issue39_coverage_table(reps: int) -> None:
    """Issue 39's acceptance table: the cluster bootstrap at 10, 20, 40 clusters (paired
    difference and contrast), the InvokeRank calibrated interval (8 and 25 prompts per
    intent; 3 sessions at SD 2.5 and 5 points), kappa at 60 items and the paired difference
    with 2 repeats; each with its distance from nominal (the bar: 2 points)."""
    rows = _issue39_rows(reps) + _kappa_rows(reps) + _invokerank_rows(reps)
    print(f"issue 39: coverage of the intervals the report prints ({reps} sets unless stated)")
    header = f"{'function':<36} {'nominal':>7} {'value':>7} {'MC SE':>6} {'gap':>6}  setting"
    print(header)
    print("-" * len(header))
    for function, figure, setting, nominal, value, se in rows:
        if figure != "coverage":
            print(f"{function:<36} {figure}: {value:g}  {setting}")
            continue
        gap = 100 * (value - nominal)
        shown = "exact" if se is None else f"{se:.4f}"
        print(f"{function:<36} {nominal:>7.3f} {value:>7.4f} {shown:>6} {gap:>+5.1f}p  {setting}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description="prereg.stats calibration")
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="fewer designs and horizons")
    parser.add_argument("--issue14", action="store_true", help="only the issue 14 tables (6)")
    parser.add_argument("--issue39", action="store_true", help="only the issue 39 tables (7)")
    parser.add_argument("--detail", action="store_true", help="the detailed sections 1-7")
    parser.add_argument(
        "--coverage39", action="store_true", help="only issue 39's acceptance coverage table"
    )
    args = parser.parse_args()
    start = time.perf_counter()
    if args.issue39:
        few_clusters_table(250 if args.quick else args.reps)
        print(f"total {time.perf_counter() - start:.1f} s")
        return
    if args.coverage39:
        issue39_coverage_table(args.reps)
        print(f"total {time.perf_counter() - start:.1f} s")
        return
    if not (args.detail or args.issue14):
        summary_table(args.reps)
        print(f"total {time.perf_counter() - start:.1f} s")
        return
    if args.issue14:
        small_runs_table(args.reps)
        tost_exact_table()
        tost_ordering_table()
        mcnemar_size_table()
        print(f"total {time.perf_counter() - start:.1f} s")
        return
    mcnemar_table()
    monitor_table(args.quick)
    bootstrap_table(args.reps, args.quick)
    tost_table(args.reps)
    fdr_table(args.reps)
    small_runs_table(args.reps)
    tost_exact_table()
    tost_ordering_table()
    mcnemar_size_table()
    few_clusters_table(250 if args.quick else args.reps)
    print(f"total {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
