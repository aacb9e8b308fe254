"""Coverage of the 95% paired bootstrap interval resampling tasks vs paraphrase clusters.

    python bench/cluster_coverage.py [--reps 1000] [--draws 2000] [--quick]
    python bench/cluster_coverage.py --few [--small] [--few-reps 400]

30 clusters x 4 paraphrases; the paired difference carries a shared cluster effect.
Resampling tasks treats 120 correlated paraphrases as independent and under-covers by
the design effect 1 + 3 ICC; resampling clusters (``prompts`` = cluster labels) stays
at nominal with the default interval (bootstrap SE x sqrt(n/(n-1)) t_(n-1): the t
interval of the cluster means), where the percentile interval (``small_clusters="none"``)
falls short by the small-sample factor of 30 units (about 0.936 expected; see
tests/stats/test_cluster_resampling.py). Prints tables; no assertions.

1. Gaussian outcomes, one row per task and arm, ICC of the task differences 0 to 0.8.
2. Binary outcomes, 2 repeats per task and arm, cluster effects on the logit of the
   baseline and of the treatment effect; the true difference by a 4 x 10^6 draw
   simulation of the superpopulation.
3. A 2 x 2 interaction contrast (contrast_bootstrap's default interval, its bootstrap
   variance exact; units = task vs cluster), with a cluster-level interaction effect.
4. Few clusters (issue 39; ``--few`` alone, ``--small`` adds 5, 6 and 8 clusters): the
   coverage at 10, 20 and 40 clusters of 4 binary tasks, per design (base rate 0.2, 0.5,
   0.8; ICC 0.1, 0.3, 0.5; no effect, +0.3 and -0.3 relative) and summarised, at the
   nominal 0.95 and 0.90, of the candidate intervals: the percentile (before), the
   percentile with its deviations scaled by sqrt(n/(n-1)) t_(n-1)/z, Hesterberg's (2015)
   expanded percentile, and the default bootstrap-SE interval with t_(n-1) critical
   values (chosen: see paired_bootstrap's docstring).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy import stats as sps
from scipy.special import expit

import prereg.stats as ps

CLUSTERS, PARAPHRASES = 30, 4
N_TASKS = CLUSTERS * PARAPHRASES
CLUSTER_OF_TASK = np.repeat(np.arange(CLUSTERS), PARAPHRASES)


def _row(name: str, hits: dict[str, list[float]], widths: dict[str, list[float]]) -> None:
    cells = [f"{np.mean(hits[k]):>8.3f} {np.mean(widths[k]):>7.3f}" for k in ("task", "cluster")]
    print(f"{name:<28} {cells[0]}   {cells[1]}")


def _header(title: str) -> None:
    print(title)
    print(f"{'':<28} {'task':>8} {'width':>7}   {'cluster':>8} {'width':>7}")


def gaussian(reps: int, draws: int) -> None:
    _header("1. Gaussian paired differences, coverage of the 95% interval (delta = 0.3)")
    delta = 0.3
    for icc in (0.0, 0.3, 0.6, 0.8):
        rng = np.random.default_rng(1)
        hits: dict[str, list[float]] = {"task": [], "cluster": []}
        widths: dict[str, list[float]] = {"task": [], "cluster": []}
        sd = np.sqrt((1.0 - icc) / 2.0)
        for rep in range(reps):
            base = rng.normal(0, 1, CLUSTERS)[CLUSTER_OF_TASK] + rng.normal(0, 0.7, N_TASKS)
            b = rng.normal(0, np.sqrt(icc), CLUSTERS)[CLUSTER_OF_TASK]
            yc = base + rng.normal(0, sd, N_TASKS)
            yt = base + delta + b + rng.normal(0, sd, N_TASKS)
            for unit, labels in (("task", np.arange(N_TASKS)), ("cluster", CLUSTER_OF_TASK)):
                r = ps.paired_bootstrap(yc, yt, labels, draws=draws, seed=rep)
                hits[unit].append(r.low <= delta <= r.high)
                widths[unit].append(r.high - r.low)
        deff = 1 + (PARAPHRASES - 1) * icc
        _row(f"ICC {icc:.1f} (deff {deff:.1f})", hits, widths)
    print()


def binary(reps: int, draws: int) -> None:
    _header("2. binary outcomes, 2 repeats, cluster effects on the logit scale")
    repeats = 2
    mu, tau_a, tau_t, delta, tau_g = -0.2, 1.2, 0.6, 0.5, 1.0
    truth_rng = np.random.default_rng(99)
    n = 4_000_000
    eta = mu + tau_a * truth_rng.standard_normal(n) + tau_t * truth_rng.standard_normal(n)
    gamma = tau_g * truth_rng.standard_normal(n)
    truth = float(np.mean(expit(eta + delta + gamma) - expit(eta)))
    rng = np.random.default_rng(2)
    hits: dict[str, list[float]] = {"task": [], "cluster": []}
    widths: dict[str, list[float]] = {"task": [], "cluster": []}
    task = np.repeat(np.arange(N_TASKS), repeats)
    for rep in range(reps):
        a = tau_a * rng.standard_normal(CLUSTERS)[CLUSTER_OF_TASK]
        logit = mu + a + tau_t * rng.standard_normal(N_TASKS)
        g = tau_g * rng.standard_normal(CLUSTERS)[CLUSTER_OF_TASK]
        yc = (rng.random(task.size) < expit(logit[task])).astype(float)
        yt = (rng.random(task.size) < expit(logit[task] + delta + g[task])).astype(float)
        for unit, labels in (("task", task), ("cluster", CLUSTER_OF_TASK[task])):
            r = ps.paired_bootstrap(yc, yt, labels, draws=draws, seed=rep)
            hits[unit].append(r.low <= truth <= r.high)
            widths[unit].append(r.high - r.low)
    _row(f"true difference {truth:.3f}", hits, widths)
    print()


def interaction(reps: int, draws: int) -> None:
    _header("3. 2 x 2 interaction contrast, cluster interaction effect (ICC 0.6)")
    cells = [{"a": x, "b": y} for x in ("lo", "hi") for y in ("lo", "hi")]
    low_high: dict[str, tuple[object, object]] = {"a": ("lo", "hi"), "b": ("lo", "hi")}
    w = np.array(ps.factorial_weights(cells, ["a", "b"], low_high))
    effect = 0.4  # the true difference of differences
    rng = np.random.default_rng(3)
    hits: dict[str, list[float]] = {"task": [], "cluster": []}
    widths: dict[str, list[float]] = {"task": [], "cluster": []}
    for rep in range(reps):
        base = rng.normal(0, 1, CLUSTERS)[CLUSTER_OF_TASK] + rng.normal(0, 0.7, N_TASKS)
        b = rng.normal(0, np.sqrt(0.6), CLUSTERS)[CLUSTER_OF_TASK]
        m = base[:, None] + rng.normal(0, np.sqrt(0.4 / 4), (N_TASKS, 4))
        m += np.outer(effect + b, w / 4)  # w @ w = 4: adds effect + b to the contrast
        for unit, labels in (("task", None), ("cluster", CLUSTER_OF_TASK)):
            r = ps.contrast_bootstrap(m, w, units=labels, draws=draws, seed=rep)
            hits[unit].append(r.low <= effect <= r.high)
            widths[unit].append(r.high - r.low)
    _row("interaction 0.4", hits, widths)
    print()


# the grid of section 4: base rate, ICC of the control outcomes within a cluster, relative
# effect (+e closes e of the gap to 1, -e removes e of the rate)
FEW_GRID = [
    (p0, icc, e) for p0 in (0.2, 0.5, 0.8) for icc in (0.1, 0.3, 0.5) for e in (0, 0.3, -0.3)
]
CANDIDATES = ("percentile", "scaled pct", "expanded", "t (default)")


def _beta(rng: np.random.Generator, mean: float, icc: float, size: int) -> np.ndarray:
    scale = 1.0 / icc - 1.0
    return rng.beta(mean * scale, (1.0 - mean) * scale, size)


def _few_data(
    rng: np.random.Generator, clusters: int, p0: float, icc: float, effect: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """4 binary tasks a cluster; cluster control rate Beta(mean p0, ICC icc); the treatment
    closes a Beta(mean |effect|, ICC 0.2) share of the gap to 1 (effect > 0) or removes
    that share of the rate (effect < 0). Returns rows, cluster labels and the truth."""
    pc = _beta(rng, p0, icc, clusters)
    if effect == 0:
        pt, truth = pc, 0.0
    else:
        u = _beta(rng, abs(effect), 0.2, clusters)
        pt = pc + (1.0 - pc) * u if effect > 0 else pc * (1.0 - u)
        truth = effect * (1.0 - p0) if effect > 0 else effect * p0
    labels = np.repeat(np.arange(clusters), 4)
    yc = (rng.random(labels.size) < pc[labels]).astype(float)
    yt = (rng.random(labels.size) < pt[labels]).astype(float)
    return yc, yt, labels, truth


def _candidates(res: ps.BootstrapResult, level: float) -> list[tuple[float, float]]:
    """The candidate intervals from one result's draws (no run labels: the draws are the
    resampled cluster means, whatever the level): the percentile, its deviations from the
    estimate scaled by sqrt(n/(n-1)) t_(n-1,q)/z_q, Hesterberg's expanded percentile
    (quantiles at 2 Phi(-sqrt(n/(n-1)) t_(n-1,q)) / 2) and the default's own ends."""
    n, est, d = res.n, res.estimate, res.distribution
    q = 0.5 + level / 2
    stretch = math.sqrt(n / (n - 1)) * float(sps.t.ppf(q, n - 1))
    lo, hi = np.quantile(d, [1 - q, q])
    k = stretch / float(sps.norm.ppf(q))
    tail = float(sps.norm.sf(stretch))
    ex_lo, ex_hi = np.quantile(d, [tail, 1 - tail])
    return [
        (float(lo), float(hi)),
        (est + k * min(lo - est, 0.0), est + k * max(hi - est, 0.0)),
        (float(ex_lo), float(ex_hi)),
        (res.low, res.high),
    ]


def few_clusters(reps: int, draws: int, sizes: tuple[int, ...]) -> None:
    print("4. few clusters: coverage of the candidate intervals, 4 binary tasks a cluster,")
    print(
        f"   clusters resampled; {reps} data sets a design, {draws} draws; candidates: "
        + ", ".join(CANDIDATES)
    )
    levels = (0.95, 0.90)
    head = " ".join(f"{c[:11]:>11}" for c in CANDIDATES)
    print(f"{'n':>3} {'p0':>4} {'icc':>4} {'eff':>5} | 0.95: {head} | 0.90: {head}")
    summary: dict[int, np.ndarray] = {}
    for n in sizes:
        table = np.zeros((len(FEW_GRID), len(levels), len(CANDIDATES)))
        for g, (p0, icc, effect) in enumerate(FEW_GRID):
            rng = np.random.default_rng([n, g])
            for rep in range(reps):
                yc, yt, labels, truth = _few_data(rng, n, p0, icc, effect)
                for j, lv in enumerate(levels):
                    res = ps.paired_bootstrap(yc, yt, labels, draws=draws, level=lv, seed=rep)
                    for c, (lo, hi) in enumerate(_candidates(res, lv)):
                        table[g, j, c] += max(lo, -1.0) <= truth <= min(hi, 1.0)
            table[g] /= reps
            cells = [" ".join(f"{v:>11.3f}" for v in table[g, j]) for j in range(len(levels))]
            design = f"{n:>3} {p0:>4.1f} {icc:>4.1f} {effect:>+5.1f}"
            print(f"{design} | 0.95: {cells[0]} | 0.90: {cells[1]}")
        summary[n] = table
    print(f"   summary over the {len(FEW_GRID)} designs (Monte Carlo SE of one design's")
    print(
        f"   coverage near 0.95: {math.sqrt(0.95 * 0.05 / reps):.3f}; of the mean: "
        f"{math.sqrt(0.95 * 0.05 / reps / len(FEW_GRID)):.4f})"
    )
    for n, table in summary.items():
        for j, lv in enumerate(levels):
            means = " ".join(f"{v:>11.3f}" for v in table[:, j].mean(axis=0))
            worst = " ".join(f"{v:>11.3f}" for v in table[:, j].min(axis=0))
            print(f"{n:>3} {lv:.2f} mean  {means}")
            print(f"{'':>3} {'':>4} worst {worst}")
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="200 replications, 1000 draws")
    parser.add_argument("--few", action="store_true", help="section 4 (few clusters) only")
    parser.add_argument("--few-reps", type=int, default=400, help="data sets a design (4)")
    parser.add_argument("--small", action="store_true", help="section 4 at 5, 6, 8 clusters too")
    args = parser.parse_args()
    reps, draws = (200, 1000) if args.quick else (args.reps, args.draws)
    sizes = ((5, 6, 8) if args.small else ()) + (10, 20, 40)
    few_reps = 100 if args.quick else args.few_reps
    if args.few:
        start = time.perf_counter()
        few_clusters(few_reps, 1000, sizes)
        print(f"{time.perf_counter() - start:.1f} s")
        return
    print(f"{CLUSTERS} clusters x {PARAPHRASES} paraphrases, {reps} replications, {draws} draws")
    print(f"Monte Carlo SE of a coverage near 0.95: {np.sqrt(0.95 * 0.05 / reps):.3f}\n")
    start = time.perf_counter()
    gaussian(reps, draws)
    binary(reps, draws)
    interaction(reps, draws)
    few_clusters(few_reps, 1000, sizes)
    print(f"{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
