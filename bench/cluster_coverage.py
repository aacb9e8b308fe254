"""Coverage of the 95% paired bootstrap interval resampling tasks vs paraphrase clusters.

    python bench/cluster_coverage.py [--reps 1000] [--draws 2000] [--quick]

30 clusters x 4 paraphrases; the paired difference carries a shared cluster effect.
Resampling tasks treats 120 correlated paraphrases as independent and under-covers by
the design effect 1 + 3 ICC; resampling clusters (``prompts`` = cluster labels) stays
near nominal, short by the small-sample factor of 30 units (about 0.936 expected, see
tests/stats/test_cluster_resampling.py). Prints tables; no assertions.

1. Gaussian outcomes, one row per task and arm, ICC of the task differences 0 to 0.8.
2. Binary outcomes, 2 repeats per task and arm, cluster effects on the logit of the
   baseline and of the treatment effect; the true difference by a 4 x 10^6 draw
   simulation of the superpopulation.
3. A 2 x 2 interaction contrast (contrast_bootstrap, units = task vs cluster), with a
   cluster-level interaction effect.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="200 replications, 1000 draws")
    args = parser.parse_args()
    reps, draws = (200, 1000) if args.quick else (args.reps, args.draws)
    print(f"{CLUSTERS} clusters x {PARAPHRASES} paraphrases, {reps} replications, {draws} draws")
    print(f"Monte Carlo SE of a coverage near 0.95: {np.sqrt(0.95 * 0.05 / reps):.3f}\n")
    start = time.perf_counter()
    gaussian(reps, draws)
    binary(reps, draws)
    interaction(reps, draws)
    print(f"{time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
