"""Coverage of InvokeRank's intervals by simulation (InvokeRank 7.5; issues 17 and 39).

    python bench/invokerank_coverage.py [--reps 400] [--level 0.90] [--quick]
    python bench/invokerank_coverage.py --minimum [--reps 400]   # the small-sample grid

Designs like the seed's section 7.5, each simulated from prompt-level heterogeneity
(every prompt has its own Surfaced and Selected probabilities, Beta-distributed around
its intent's rates, so repeats of a prompt are correlated as in the seed's 7.4):

1. centre: eight intents with different rates (the Claude API baseline's Figure 3 scores
   split into r_D and r_S), 25 prompts per intent, K = 2, rho about .87 (D) and .8 (S);
2. centre, 8 prompts: the same with 8 prompts per intent;
3. identical: three intents with identical rates (the published test's design: kappa 3,
   30 prompts, K = 3), where capPrior makes every intent nearly the pooled one;
4. sessions: the centre design run as three sessions of one repeat each, with a session
   effect on the logit of Selected whose SD makes the population roll-up score vary by
   2.5 or 5 points (SD) from session to session (the logit SD is solved for; the
   prompts' Selected rates are U-shaped, so a logit shift of 0.11 moves the roll-up by
   only 0.3 points).

Methods: the published path (capPrior); the calibrated interval before issue 39
(``bootstrap_score(method="v1")``: no small-sample correction, sessions resampled crossed
with prompts, centred on the plug-in score); and after (the default: prompt part scaled
by sqrt(P / (P - 1)), the roll-up at a Satterthwaite t, the session part from rescaled
session effects times t_{S-1} / z, every interval containing the displayed score, the
published path's exact E[Q]). ``--recentred`` adds the after method shifted onto the
displayed score (the reading docs/invokerank.md shows under-covers). The estimand is the
population score: per intent E[d s] over the prompt population (and the session effects),
rolled up with equal weights.

Prints nominal vs achieved coverage with Monte Carlo standard errors, for the roll-up and
averaged over intents (its MC SE treats the intents of a replication as independent),
the lowest intent's coverage, and the mean roll-up width in points; no assertions. The
small-sample rule is off here (``min_prompts=0``), so that its grid (``--minimum``: the
centre design at 3 to 8 prompts per intent, and 2 and 3 sessions) shows where coverage
holds.
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, replace
from typing import Any

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
    session_sd: float  # on the logit of Selected


def centre(prompts: int = 25) -> Design:
    mu_d = np.minimum(0.95, CENTRE_Q**0.45)
    name = "centre" if prompts == 25 else f"centre, {prompts} prompts"
    return Design(name, mu_d, CENTRE_Q / mu_d, 0.15, 0.25, prompts, 2, 1, 0.0)


def identical() -> Design:
    return Design("identical", np.full(3, 0.7), np.full(3, 0.6), 3.0, 3.0, 30, 3, 1, 0.0)


def sessions(points: float, count: int = 3, prompts: int = 25) -> Design:
    """The centre design as ``count`` sessions of one repeat, the session effect's logit
    SD solved so that the population roll-up's SD across sessions is ``points``."""
    d = replace(centre(prompts), repeats=1, sessions=count)
    return replace(
        d,
        name=f"sessions: {count} x K 1, session SD {points:g} points"
        + ("" if prompts == 25 else f", {prompts} prompts"),
        session_sd=_logit_sd(d, points / 100.0),
    )


def _logit_sd(d: Design, target: float) -> float:
    """The logit SD whose session shifts move the population roll-up by ``target`` (SD),
    by bisection on a fixed simulation (common random numbers)."""
    rng = np.random.default_rng(11)
    dp = np.stack([rng.beta(m * d.kappa_d, (1 - m) * d.kappa_d, 20_000) for m in d.mu_d])
    sp = np.stack([rng.beta(m * d.kappa_s, (1 - m) * d.kappa_s, 20_000) for m in d.mu_s])
    sp = logit(np.clip(sp, 1e-12, 1 - 1e-12))
    z = rng.standard_normal(100)

    def spread(tau: float) -> float:
        roll = [float(np.mean(dp * expit(sp + tau * x))) for x in z]
        return float(np.std(roll))

    low, high = 0.0, 8.0
    for _ in range(20):
        mid = (low + high) / 2
        low, high = (mid, high) if spread(mid) < target else (low, mid)
    return (low + high) / 2


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
    prompts, index = np.unique(study["prompt"], return_inverse=True)
    runs = np.bincount(index, weights=study["runs"]).astype(int)
    reached = np.stack(
        [np.bincount(index, weights=study[k]).astype(int) for k in ("d", "s")], axis=1
    )
    cell = np.zeros(prompts.size, int)
    cell[index] = study["cell"]
    return runs, reached, cell


PUBLISHED, BEFORE, AFTER, RECENTRED = (
    "published (capPrior)",
    "calibrated, before (v1)",
    "calibrated, after",
    "after, recentred (shift)",
)


def _bounds(
    study: dict[str, np.ndarray], rep: int, resamples: int, **options: Any
) -> tuple[np.ndarray, np.ndarray, float, float]:
    b = bootstrap_score(
        study["runs"],
        study["s"],
        study["cell"],
        prompt=study["prompt"],
        session=study["session"],
        resamples=resamples,
        seed=rep,
        levels=(LEVEL,),
        min_prompts=0,
        min_sessions=0,
        **options,
    )
    return b.q_low[LEVEL], b.q_high[LEVEL], b.rollup_low[LEVEL], b.rollup_high[LEVEL]


def run_design(
    d: Design, reps: int, draws: int, resamples: int, recentred: bool = False
) -> list[tuple[str, str, float, float, float, float, float, float]]:
    """Coverage of every method on one design; prints and returns the table's rows."""
    rng = np.random.default_rng(7)
    q_true = truth(d, rng)
    roll_true = float(q_true.mean())
    methods = [PUBLISHED, BEFORE, AFTER] + ([RECENTRED] if recentred else [])
    roll_hits: dict[str, list[bool]] = {m: [] for m in methods}
    intent_hits: dict[str, list[np.ndarray]] = {m: [] for m in methods}
    widths: dict[str, list[float]] = {m: [] for m in methods}
    start = time.perf_counter()
    for rep in range(reps):
        study = simulate(d, rng)
        runs, reached, cell = _per_prompt(study)
        r = invokerank(
            runs,
            reached,
            cell,
            stages=("surfaced", "selected"),
            draws=draws,
            seed=rep,
            levels=(LEVEL,),
        )
        shown = np.asarray(r.q_exact)
        shown_roll = float(r.weights @ shown)
        got = {
            PUBLISHED: (r.q_low[LEVEL], r.q_high[LEVEL], r.rollup_low[LEVEL], r.rollup_high[LEVEL]),
            BEFORE: _bounds(study, rep, resamples, method="v1"),
            AFTER: _bounds(study, rep, resamples, centre=shown, rollup_centre=shown_roll),
        }
        if recentred:
            lo, hi, rlo, rhi = _bounds(study, rep, resamples)
            plug = study_plug_in(study)
            got[RECENTRED] = (
                lo + shown - plug,
                hi + shown - plug,
                rlo + shown_roll - float(plug.mean()),
                rhi + shown_roll - float(plug.mean()),
            )
        for m, (lo, hi, rlo, rhi) in got.items():
            roll_hits[m].append(bool(rlo <= roll_true <= rhi))
            intent_hits[m].append((lo <= q_true) & (q_true <= hi))
            widths[m].append(rhi - rlo)
    seconds = time.perf_counter() - start
    print(
        f"\n{d.name}: {d.mu_d.size} intents x {d.prompts} prompts, K = {d.repeats} x "
        f"{d.sessions} session(s) (logit SD {d.session_sd:.2f}); true roll-up "
        f"{100 * roll_true:.1f}; {reps} replications in {seconds:.0f} s"
    )
    print(
        f"{'method':<26} {'roll-up cover':>14} {'MC SE':>6} {'per-intent':>11} {'MC SE':>6} "
        f"{'lowest':>7} {'width':>7}"
    )
    rows = []
    for m in methods:
        cover = float(np.mean(roll_hits[m]))
        se = math.sqrt(cover * (1 - cover) / reps)
        per = np.asarray(intent_hits[m])  # (reps, intents)
        mean = float(per.mean())
        se_i = math.sqrt(mean * (1 - mean) / per.size)
        lowest = float(per.mean(axis=0).min())
        width = float(np.mean(widths[m]))
        print(
            f"{m:<26} {100 * cover:>13.1f}% {100 * se:>5.1f} {100 * mean:>10.1f}% "
            f"{100 * se_i:>5.1f} {100 * lowest:>6.1f}% {100 * width:>7.1f}"
        )
        rows.append((d.name, m, cover, se, mean, se_i, lowest, width))
    return rows


def study_plug_in(study: dict[str, np.ndarray]) -> np.ndarray:
    """The plug-in score per intent (runs selected over runs)."""
    cells = int(study["cell"].max()) + 1
    y = np.bincount(study["cell"], weights=study["s"], minlength=cells)
    n = np.bincount(study["cell"], weights=study["runs"], minlength=cells)
    return np.asarray(y / n)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--reps", type=int, default=400)
    parser.add_argument("--draws", type=int, default=4000, help="published path's draws")
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--quick", action="store_true", help="60 replications, fewer draws")
    parser.add_argument("--level", type=float, default=0.90, help="nominal level")
    parser.add_argument("--minimum", action="store_true", help="the small-sample grid")
    parser.add_argument("--recentred", action="store_true", help="add the shifted reading")
    parser.add_argument("--design", action="append", default=None, help="only these (names)")
    args = parser.parse_args()
    global LEVEL
    LEVEL = args.level
    reps, draws, resamples = args.reps, args.draws, args.resamples
    if args.quick:
        reps, draws, resamples = 60, 1000, 400
    print(f"Nominal {LEVEL:.0%} intervals; coverage of the population score (points).")
    if args.minimum:
        designs = [centre(p) for p in (3, 4, 5, 6, 8)] + [sessions(5.0, s) for s in (2, 3)]
    else:
        designs = [centre(), centre(8), identical(), sessions(2.5), sessions(5.0)]
    names = {d.name for d in designs}
    for design in designs:
        # --design NAME: that design (exactly), or every design whose name contains NAME
        if args.design and not any(
            n == design.name if n in names else n in design.name for n in args.design
        ):
            continue
        run_design(design, reps, draws, resamples, args.recentred)


if __name__ == "__main__":
    main()
