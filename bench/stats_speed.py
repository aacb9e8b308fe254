"""Speed of prereg.stats: the two-level paired bootstrap against scipy.stats.bootstrap.

Times a 10,000-draw paired prompt-and-run bootstrap on 1,000 prompts x 3 runs x 2 arms
next to ``scipy.stats.bootstrap`` (paired, percentile) on the prompt-level differences,
in the same process, and prints the ratio (target: prereg's two-level bootstrap no
slower than scipy's one-level one). Also prints a few other timings. No assertions:
figures only.

    python bench/stats_speed.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy
from scipy import stats as sps

import prereg.stats as ps


def _time(fn: Callable[[], Any], repeats: int) -> tuple[float, float]:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def _time_interleaved(
    fns: list[Callable[[], Any]],
    repeats: int,
) -> list[tuple[float, float]]:
    """Median and min time of each function, run round-robin so load hits all alike."""
    for fn in fns:
        fn()  # warm-up
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - start)
    return [(statistics.median(t), min(t)) for t in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--draws", type=int, default=10_000)
    args = parser.parse_args()

    rng = np.random.default_rng(20261129)
    n_prompts, n_runs, draws = 1000, 3, args.draws
    p = rng.beta(0.6, 0.6, n_prompts)
    prompts = np.repeat(np.arange(n_prompts), n_runs)
    runs = np.tile(np.arange(n_runs), n_prompts)
    control = (rng.random(prompts.size) < p[prompts]).astype(float)
    treatment = (rng.random(prompts.size) < np.clip(p[prompts] + 0.03, 0, 1)).astype(float)
    mean_c = control.reshape(n_prompts, n_runs).mean(axis=1)
    mean_t = treatment.reshape(n_prompts, n_runs).mean(axis=1)

    def two_level() -> Any:
        return ps.paired_bootstrap(control, treatment, prompts, runs, runs, draws=draws, seed=1)

    def two_level_raw() -> Any:
        return ps.paired_bootstrap(
            control, treatment, prompts, runs, runs, draws=draws, seed=1, run_resampling="raw"
        )

    def prompt_only() -> Any:
        return ps.paired_bootstrap(control, treatment, prompts, draws=draws, seed=1)

    diff = mean_t - mean_c

    def scipy_diff() -> Any:
        # the prompt-level differences as one sample: scipy's fastest form of the paired
        # percentile bootstrap, and the baseline of the ratio
        return sps.bootstrap(
            (diff,),
            np.mean,
            vectorized=True,
            method="percentile",
            n_resamples=draws,
            random_state=np.random.default_rng(1),
        )

    def scipy_paired() -> Any:
        return sps.bootstrap(
            (mean_c, mean_t),
            lambda c, t, axis: np.mean(t - c, axis=axis),
            paired=True,
            vectorized=True,
            method="percentile",
            n_resamples=draws,
            random_state=np.random.default_rng(1),
        )

    print(
        f"numpy {np.__version__}, scipy {scipy.__version__}; median and min of "
        f"{args.repeats} interleaved repeats"
    )
    print(f"data: {n_prompts} prompts x {n_runs} runs x 2 arms, {draws} draws\n")
    named = [
        ("scipy.stats.bootstrap, percentile, on prompt differences", scipy_diff),
        ("scipy.stats.bootstrap, paired=True, percentile (two samples)", scipy_paired),
        ("prereg paired_bootstrap, prompts + runs (corrected, default)", two_level),
        ("prereg paired_bootstrap, prompts + runs (raw pigeonhole)", two_level_raw),
        ("prereg paired_bootstrap, prompts only", prompt_only),
    ]
    timed = _time_interleaved([fn for _, fn in named], args.repeats)
    rows = [(name, med, mn) for (name, _), (med, mn) in zip(named, timed, strict=True)]
    ref_med, ref_min = rows[0][1], rows[0][2]
    width = max(len(r[0]) for r in rows)
    print(f"{'method':<{width}}  {'median s':>9}  {'min s':>7}  {'ratio':>6}  {'(min)':>6}")
    for name, med, mn in rows:
        print(f"{name:<{width}}  {med:9.4f}  {mn:7.4f}  {med / ref_med:6.2f}  {mn / ref_min:6.2f}")
    res, ref = two_level(), scipy_diff()
    print(
        f"\nprereg two-level 95% interval {res.low:+.4f} to {res.high:+.4f} "
        f"(se {res.se:.4f}); scipy prompt-level {ref.confidence_interval.low:+.4f} to "
        f"{ref.confidence_interval.high:+.4f}"
    )
    print(
        f"ratio prereg two-level (default) / scipy one-level: {rows[2][1] / ref_med:.2f} "
        f"(medians), {rows[2][2] / ref_min:.2f} (minima)"
    )

    print("\nother functions")
    d40 = rng.normal(0.2, 1.0, 40)
    binary = rng.choice([-1.0, 0.0, 1.0], size=1000, p=[0.1, 0.75, 0.15])
    others = [
        ("sign_flip_test, 40 continuous differences (exact, 2^40)", lambda: ps.sign_flip_test(d40)),
        (
            "sign_flip_test, 1000 paired binary differences (exact lattice)",
            lambda: ps.sign_flip_test(binary),
        ),
        (
            "exact_permutation_test, 10 + 10 (184,756 relabelings)",
            lambda: ps.exact_permutation_test(d40[:10], d40[10:20]),
        ),
        (
            "simulate_sequential_monitor, 10,000 streams x 500 prompts",
            lambda: ps.simulate_sequential_monitor(0.1, 0.1, 500, sims=10_000),
        ),
        ("tost_paired, 1000 binary differences (Tango)", lambda: ps.tost_paired(binary, 0.05)),
    ]
    width = max(len(r[0]) for r in others)
    for name, fn in others:
        med, mn = _time(fn, max(3, args.repeats // 2))
        print(f"{name:<{width}}  {med:9.4f}  {mn:7.4f}")


if __name__ == "__main__":
    main()
