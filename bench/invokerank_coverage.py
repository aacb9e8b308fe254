"""Coverage of InvokeRank's 90% intervals by simulation (InvokeRank 7.5; issue 17, item 6).

    python bench/invokerank_coverage.py [--reps 400] [--level 0.90] [--quick]

Three designs like the seed's section 7.5, each simulated from prompt-level heterogeneity
(every prompt has its own Surfaced and Selected probabilities, Beta-distributed around
its intent's rates, so repeats of a prompt are correlated as in the seed's 7.4):

1. centre: eight intents with different rates (the Claude API baseline's Figure 3 scores
   split into r_D and r_S), 25 prompts per intent, K = 2, rho about .87 (D) and .8 (S);
2. identical: three intents with identical rates (the published test's design: kappa 3,
   30 prompts, K = 3), where capPrior makes every intent nearly the pooled one;
3. between-run: the centre design run as two sessions of one repeat each, with a
   session effect on the logit of Selected of SD 0.11 (about 2.5 points, the ChatGPT API
   first pool's between-run SD).

Methods: the published path (capPrior), plug-in empirical Bayes (no cap), and the
calibrated path (prompt bootstrap of the plug-in score, sessions too when there are two;
per intent a Jeffreys interval on the bootstrap's effective counts, the roll-up an
expanded percentile interval). The estimand is the population score: per intent E[d s]
over the prompt population (and the session effects), rolled up with equal weights.
Prints nominal vs achieved coverage with Monte Carlo standard errors, for the roll-up and
averaged over intents (its MC SE treats the intents of a replication as independent),
the lowest intent's coverage, and the mean roll-up width; no assertions.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logit

from prereg.stats.invokerank import bootstrap_score, invokerank

LEVEL = 0.90  # set by --level
#: the Claude API baseline's intent scores (seed Figure 3), as proportions
CENTRE_Q = np.array([0.759, 0.565, 0.449, 0.527, 0.455, 0.323, 0.177, 0.062])


@dataclass(frozen=True)
class Design:
    name: str
    mu_d: np.ndarray
    mu_s: np.ndarray
    kappa_d: float
    kappa_s: float
    prompts: int
    repeats: int
    sessions: int
    session_sd: float


def centre(sessions: int = 1, session_sd: float = 0.0) -> Design:
    mu_d = np.minimum(0.95, CENTRE_Q**0.45)
    return Design(
        "between-run" if sessions > 1 else "centre",
        mu_d,
        CENTRE_Q / mu_d,
        0.15,
        0.25,
        25,
        2 // sessions,
        sessions,
        session_sd,
    )


def identical() -> Design:
    return Design("identical", np.full(3, 0.7), np.full(3, 0.6), 3.0, 3.0, 30, 3, 1, 0.0)


def truth(d: Design, rng: np.random.Generator) -> np.ndarray:
    """E[d s] per intent over prompts (and session effects), by a large simulation."""
    out = []
    for md, ms in zip(d.mu_d, d.mu_s, strict=True):
        dp = rng.beta(md * d.kappa_d, (1 - md) * d.kappa_d, 400_000)
        sp = rng.beta(ms * d.kappa_s, (1 - ms) * d.kappa_s, 400_000)
        if d.session_sd > 0:
            shift = rng.normal(0, d.session_sd, 400_000)
            sp = expit(logit(np.clip(sp, 1e-12, 1 - 1e-12)) + shift)
        out.append(float(np.mean(dp * sp)))
    return np.asarray(out)


def simulate(d: Design, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One study: rows per prompt and session (runs, surfaced, selected, cell, ...)."""
    cells = d.mu_d.size
    rows: dict[str, list[int]] = {k: [] for k in ("runs", "d", "s", "cell", "prompt", "session")}
    shifts = rng.normal(0, d.session_sd, d.sessions) if d.session_sd > 0 else np.zeros(d.sessions)
    for c in range(cells):
        dp = rng.beta(d.mu_d[c] * d.kappa_d, (1 - d.mu_d[c]) * d.kappa_d, d.prompts)
        sp = rng.beta(d.mu_s[c] * d.kappa_s, (1 - d.mu_s[c]) * d.kappa_s, d.prompts)
        for p in range(d.prompts):
            for k, shift in enumerate(shifts):
                s_rate = expit(logit(np.clip(sp[p], 1e-12, 1 - 1e-12)) + shift)
                surfaced = rng.random(d.repeats) < dp[p]
                selected = surfaced & (rng.random(d.repeats) < s_rate)
                for key, value in (
                    ("runs", d.repeats),
                    ("d", int(surfaced.sum())),
                    ("s", int(selected.sum())),
                    ("cell", c),
                    ("prompt", c * d.prompts + p),
                    ("session", k),
                ):
                    rows[key].append(value)
    return {k: np.asarray(v) for k, v in rows.items()}


def _per_prompt(study: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sessions merged per prompt, for the published path (it has no session level)."""
    prompts = np.unique(study["prompt"])
    runs = np.array([study["runs"][study["prompt"] == p].sum() for p in prompts])
    reached = np.array(
        [[study[k][study["prompt"] == p].sum() for k in ("d", "s")] for p in prompts]
    )
    cell = np.array([study["cell"][study["prompt"] == p][0] for p in prompts])
    return runs, reached, cell


def run_design(d: Design, reps: int, draws: int, resamples: int) -> None:
    rng = np.random.default_rng(7)
    q_true = truth(d, rng)
    roll_true = float(q_true.mean())
    methods = ("published (capPrior)", "plug-in EB (no cap)", "calibrated (bootstrap)")
    roll_hits = {m: [] for m in methods}
    intent_hits = {m: [] for m in methods}
    widths = {m: [] for m in methods}
    start = time.perf_counter()
    for rep in range(reps):
        study = simulate(d, rng)
        runs, reached, cell = _per_prompt(study)
        for m, cap in ((methods[0], True), (methods[1], False)):
            r = invokerank(
                runs,
                reached,
                cell,
                stages=("surfaced", "selected"),
                draws=draws,
                seed=rep,
                levels=(LEVEL,),
                cap=cap,
            )
            lo, hi = r.rollup_low[LEVEL], r.rollup_high[LEVEL]
            roll_hits[m].append(lo <= roll_true <= hi)
            intent_hits[m].append((r.q_low[LEVEL] <= q_true) & (q_true <= r.q_high[LEVEL]))
            widths[m].append(hi - lo)
        b = bootstrap_score(
            study["runs"],
            study["s"],
            study["cell"],
            prompt=study["prompt"],
            session=study["session"],
            resamples=resamples,
            seed=rep,
            levels=(LEVEL,),
        )
        lo, hi = b.rollup_low[LEVEL], b.rollup_high[LEVEL]
        roll_hits[methods[2]].append(lo <= roll_true <= hi)
        intent_hits[methods[2]].append((b.q_low[LEVEL] <= q_true) & (q_true <= b.q_high[LEVEL]))
        widths[methods[2]].append(hi - lo)
    seconds = time.perf_counter() - start
    print(
        f"\n{d.name}: {d.mu_d.size} intents x {d.prompts} prompts, K = {d.repeats} x "
        f"{d.sessions} session(s); true roll-up {100 * roll_true:.1f}; {reps} replications "
        f"in {seconds:.0f} s"
    )
    print(
        f"{'method':<26} {'roll-up cover':>14} {'MC SE':>6} {'per-intent':>11} {'MC SE':>6} "
        f"{'lowest':>7} {'width':>7}"
    )
    for m in methods:
        cover = float(np.mean(roll_hits[m]))
        se = float(np.sqrt(cover * (1 - cover) / reps))
        per = np.asarray(intent_hits[m])  # (reps, intents)
        mean = float(per.mean())
        se_i = float(np.sqrt(mean * (1 - mean) / per.size))
        print(
            f"{m:<26} {100 * cover:>13.1f}% {100 * se:>5.1f} {100 * mean:>10.1f}% "
            f"{100 * se_i:>5.1f} {100 * per.mean(axis=0).min():>6.1f}% "
            f"{100 * np.mean(widths[m]):>7.1f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--draws", type=int, default=4000, help="published path's draws")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--quick", action="store_true", help="60 replications, fewer draws")
    parser.add_argument("--level", type=float, default=0.90, help="nominal level")
    args = parser.parse_args()
    global LEVEL
    LEVEL = args.level
    reps, draws, resamples = args.reps, args.draws, args.resamples
    if args.quick:
        reps, draws, resamples = 60, 1000, 400
    print(f"Nominal {LEVEL:.0%} intervals; coverage of the population score (points).")
    for design in (centre(), identical(), centre(sessions=2, session_sd=0.11)):
        run_design(design, reps, draws, resamples)


if __name__ == "__main__":
    main()
