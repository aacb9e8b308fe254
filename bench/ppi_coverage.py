"""Coverage of the prediction-powered intervals (``prereg.stats.ppi``) by simulation.

    python bench/ppi_coverage.py [--reps 4000] [--level 0.95] [--seed 1] [--min-gold 20]

True labels Y ~ Bernoulli(theta) on n gold and N = 1000 unlabelled runs; the judge's
verdict is Y with errors at a known rate: "symmetric" flips either way with probability
e, "biased" turns completions into failures with probability 2e and never the reverse
(a judge that under-counts, so its raw rate is biased by -2 e theta). For each gold-set
size and error rate the table prints the coverage of the true theta by PPI, PPI++ and
the gold-only interval, the mean widths, and the raw judge rate's bias; then the same for
a paired difference of two arms. Coverage is judged as ``prereg calibrate`` judges it
(2 MC SE at the nominal). Gold sets below ``prereg.stats.PPI_MIN_GOLD`` (100) are refused
by default; the bench passes ``min_gold`` (default 20) to show why. Prints tables; no
assertions.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

import prereg.stats as ps

GOLD_SIZES = (10, 20, 30, 50, 100, 300)
ERRORS = (0.02, 0.05, 0.10, 0.20)
BIG_N = 1000


def _judge(y: np.ndarray, e: float, kind: str, rng: np.random.Generator) -> np.ndarray:
    u = rng.random(y.shape)
    if kind == "symmetric":
        return np.where(u < e, 1.0 - y, y)
    return np.where((y == 1.0) & (u < 2 * e), 0.0, y)


def _verdict(cov: float, level: float, reps: int) -> str:
    mc = math.sqrt(level * (1 - level) / reps)
    if cov < level - 2 * mc:
        return "under"
    if cov > level + 2 * mc:
        return "over"
    return "ok"


def mean_table(reps: int, level: float, seed: int, min_gold: int) -> None:
    print(f"\nrate theta = 0.6, N = {BIG_N} unlabelled, level {level}, {reps} reps")
    head = "kind       n    e     PPI cov  wid    PPI++ cov wid    gold cov  wid    judge bias"
    print(head)
    rng = np.random.default_rng(seed)
    theta = 0.6
    for kind in ("symmetric", "biased"):
        for n in GOLD_SIZES:
            if n < min_gold:
                continue
            for e in ERRORS:
                y = (rng.random((reps, n + BIG_N)) < theta).astype(float)
                f = _judge(y, e, kind, rng)
                hits = {"ppi": 0, "ppi++": 0, "gold": 0}
                width = {"ppi": 0.0, "ppi++": 0.0, "gold": 0.0}
                bias = 0.0
                for r in range(reps):
                    for m in ("ppi", "ppi++"):
                        res = ps.ppi_mean(
                            y[r, :n], f[r, :n], f[r, n:], level=level, method=m, min_gold=min_gold
                        )
                        hits[m] += res.low <= theta <= res.high
                        width[m] += res.high - res.low
                    hits["gold"] += res.gold_low <= theta <= res.gold_high
                    width["gold"] += res.gold_high - res.gold_low
                    bias += res.judge_rate - theta
                cells = "   ".join(
                    f"{hits[k] / reps:.3f} {_verdict(hits[k] / reps, level, reps):<5} "
                    f"{width[k] / reps:.3f}"
                    for k in ("ppi", "ppi++", "gold")
                )
                print(f"{kind:<10} {n:<4} {e:<5} {cells}   {bias / reps:+.3f}")


def difference_table(reps: int, level: float, seed: int, min_gold: int) -> None:
    print(f"\npaired difference, rates 0.5 -> 0.6 on shared tasks, N = {BIG_N}, {reps} reps")
    print("kind       n    e     paired cov wid   unpaired cov wid")
    rng = np.random.default_rng(seed + 1)
    truth = 0.1
    for kind in ("symmetric", "biased"):
        for n in (20, 50, 100):
            if n < min_gold:
                continue
            for e in (0.05, 0.20):
                base = rng.random((reps, n + BIG_N))
                yc = (base < 0.5).astype(float)
                yt = (base < 0.6).astype(float)  # treatment succeeds wherever control does
                fc = _judge(yc, e, kind, rng)
                ft = _judge(yt, e, kind, rng)
                out = []
                for paired in (True, False):
                    hit = wid = 0.0
                    for r in range(reps):
                        res = ps.ppi_difference(
                            yc[r, :n],
                            fc[r, :n],
                            fc[r, n:],
                            yt[r, :n],
                            ft[r, :n],
                            ft[r, n:],
                            paired=paired,
                            level=level,
                            min_gold=min_gold,
                        )
                        hit += res.low <= truth <= res.high
                        wid += res.high - res.low
                    cov = hit / reps
                    out.append(f"{cov:.3f} {_verdict(cov, level, reps):<5} {wid / reps:.3f}")
                print(f"{kind:<10} {n:<4} {e:<5} {'   '.join(out)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=4000)
    parser.add_argument("--level", type=float, default=0.95)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--min-gold", type=int, default=20)
    args = parser.parse_args()
    start = time.perf_counter()
    mean_table(args.reps, args.level, args.seed, args.min_gold)
    difference_table(args.reps, args.level, args.seed, args.min_gold)
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
