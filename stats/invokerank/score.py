"""The published scoring path of one arm, :func:`invokerank` (4.1, steps 1 to 9).

Sequential counts per stage in funnel order, each stage's posterior draws multiplied into
draws of Q per intent cell, the weighted roll-up, and their equal-tailed intervals.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from prereg.stats._validate import at_least
from prereg.stats._validate import levels as _levels
from prereg.stats.funnel import loss_shares
from prereg.stats.invokerank.intervals import equal_tailed
from prereg.stats.invokerank.model import FUNNEL_STAGES, LEVELS, _validate_counts, _weights
from prereg.stats.invokerank.posterior import _beta_draws, _stage
from prereg.stats.results import InvokeRankResult

DRAWS = 4000


def invokerank(
    runs: Any,
    reached: Any,
    cell: Any,
    *,
    stages: Sequence[str] = FUNNEL_STAGES,
    weights: Any = None,
    draws: int = DRAWS,
    seed: int | None = 0,
    levels: Sequence[float] = LEVELS,
    cap: bool = True,
) -> InvokeRankResult:
    """The published scoring path of one arm (package docstring, steps 1 to 9).

    ``runs[p]`` is the number of positive runs of prompt ``p``, ``reached[p, k]`` how
    many of them reached stage ``stages[k]`` (stages in funnel order from Surfaced; two
    stages, Surfaced and Selected, give the Selection-level IR_DS), and ``cell[p]`` the
    prompt's intent cell (0 .. C-1; every cell needs a prompt). ``weights`` are the
    roll-up weights per cell (normalised; equal by default). ``cap=False`` gives plain
    plug-in empirical Bayes (for comparison only; the published path caps).
    ValueError naming the argument for NaN, infinite, negative or fractional counts, no
    prompts, lengths that differ, counts that are not nested, a cell without a prompt,
    bad weights, ``draws`` below 1 and a level outside (0, 1).
    """
    m, r, c = _validate_counts(runs, reached, cell)
    draws = at_least(draws, "draws", 1)
    levels = _levels(levels)
    names = tuple(stages)
    if names != FUNNEL_STAGES[: len(names)] or len(names) != r.shape[1]:
        raise ValueError(f"stages must be a prefix of {FUNNEL_STAGES} matching reached")
    cells = int(c.max()) + 1
    if np.bincount(c, minlength=cells).min() == 0:
        raise ValueError("cell: every cell 0 .. C-1 needs at least one prompt")
    w = _weights(weights, cells)
    rng = np.random.default_rng(seed)
    chain = np.concatenate([m[:, None], r], axis=1)
    fits = []
    q = np.ones((cells, int(draws)))
    for k, stage in enumerate(names):
        fit = _stage(stage, chain[:, k + 1], chain[:, k], c, cells, cap)
        fits.append(fit)
        q = q * _beta_draws(rng, fit.posterior_alpha, fit.posterior_beta, int(draws))
    rollup = w @ q
    intervals = {lv: equal_tailed(q, lv) for lv in levels}
    roll_iv = {lv: equal_tailed(rollup, lv) for lv in levels}
    means = np.stack([f.posterior_mean for f in fits], axis=1)
    return InvokeRankResult(
        stages=names,
        cells=cells,
        weights=w,
        q=np.asarray(q.mean(axis=1)),
        q_exact=np.asarray(np.prod(means, axis=1)),
        q_low={lv: np.asarray(iv[0]) for lv, iv in intervals.items()},
        q_high={lv: np.asarray(iv[1]) for lv, iv in intervals.items()},
        rollup=float(rollup.mean()),
        rollup_low={lv: float(iv[0]) for lv, iv in roll_iv.items()},
        rollup_high={lv: float(iv[1]) for lv, iv in roll_iv.items()},
        posterior_means=means,
        loss_shares=np.asarray(loss_shares(means)),
        fits=tuple(fits),
        draws=int(draws),
        seed=seed,
        capped_prior=cap,
        method=(
            "InvokeRank v1.0 published path: ANOVA rho per cell (pooled, then stage "
            "defaults), Kish DEFF, beta-binomial EB prior"
            + (" with capPrior" if cap else " (plug-in, no cap)")
            + f", conjugate posteriors, {int(draws)} seeded draws per stage, Q = product"
        ),
        q_draws=q,
        rollup_draws=rollup,
    )
