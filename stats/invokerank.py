"""The InvokeRank score: the published empirical-Bayes funnel estimator (method v1.0, 4.1).

For one integration on one surface (one arm), the positive runs of every intent cell
``c`` are reduced to per-prompt counts: how many runs of prompt ``p`` reached each stage
of the nested funnel (Surfaced, Selected, Invoked, Executed, Completed). For each stage
``k`` the published path then does, exactly as section 4.1 states it:

1. sequential counts (y_ck, n_ck): runs reaching ``k`` among the runs reaching its parent;
2. the intra-prompt correlation rho_ck by the one-way ANOVA estimator for binary data,
   truncated to [0, 1], prompts as groups (:func:`prereg.stats.icc_binary`); if the cell
   cannot estimate it (fewer than two prompts with data, no replication, no variation)
   the estimate pooled over all the integration's prompts (every prompt of every intent
   one group, so between-intent differences are included, as in the seed's 7.4); failing
   that the stage default (rho_D = 0.6, rho_S = 0.8, rho_I = rho_E = rho_C = 0.6);
3. Kish's design effect DEFF = 1 + (Kbar - 1) rho over the prompts' run counts in the
   stage's denominator, and deflated counts (y / DEFF, n / DEFF);
4. a shared prior Beta(mu kappa, (1 - mu) kappa) across the cells, fitted to the deflated
   counts by beta-binomial marginal maximum likelihood (Nelder-Mead on logit mu and
   log kappa, started from the method of moments, kappa bounded to [1, 10 000]); the
   method of moments if the fit does not converge; Jeffreys Beta(1/2, 1/2) when fewer
   than two cells have trials;
5. the prior cap (capPrior): kappa is capped, cell by cell, at the deflated trials of the
   *other* cells; where the cap binds, mu becomes their pooled rate;
6. the conjugate posterior Beta(y + mu kappa, n - y + (1 - mu) kappa); a cell whose
   parent stage never fired has n = 0, so its posterior is the prior (no epsilon floor);
7. 4,000 seeded draws per stage and cell, multiplied into draws of Q, equal-tailed
   intervals (90% for monitoring, 95% for ship decisions);
8. (display) single-stage rates with Jeffreys intervals on the deflated counts;
9. the roll-up sum_c w_c Q_c with stated weights (equal by default), draws combined index
   by index (intents assumed independent);
10. the display rule: overlapping 90% intervals are "intervals overlap, reported as tied"
    (:func:`intervals_overlap`), which is not an equivalence test.

Readings where the seed is silent, chosen and stated here:

- Method of moments (start and fallback): mu is the unweighted mean of the cells'
  deflated proportions, and with s^2 their sample variance (ddof 1) and h the mean of
  1 / n_c, the beta-binomial variance Var(p_c) = mu (1 - mu) [1/n_c + (1 - 1/n_c) /
  (kappa + 1)] is solved for kappa: 1 / (kappa + 1) = (s^2 / (mu (1 - mu)) - h) / (1 - h),
  then clipped to [1, 10 000] (no excess variance: 10 000; more than binomial at every
  n, or h >= 1: 1).
- A boundary stage: when no cell has a success, or no cell a failure (Invoked equal to
  Selected in every run, or Surfaced on a host that loads every tool), the marginal
  likelihood has no interior maximum (logit mu runs to -inf or +inf), the fit cannot
  converge and the published rule applies literally: the method of moments, mu = 0 or
  1 and kappa at its bound. The posterior is then the point mass at 0 or 1 (no epsilon
  floor, as the seed states): the stage contributes no loss and no width, which is what
  the seed reports ("r_I = 1 empirically"). The displayed Jeffreys interval of the stage
  (step 8) still shows its uncertainty; a calibrated path should not inherit this.
- The cap does not apply to a Jeffreys prior (nothing was fitted to borrow from).
- The score is the mean of the Q draws (the published path's 100 E[Q] by simulation);
  under the independent stage posteriors it estimates the product of the posterior means,
  which :class:`InvokeRankResult` also carries (``q_exact``).

References: InvokeRank method v1.0, 4.1 and 4.2; Kish (1965); Rao and Scott (1992);
Fleiss, Levin and Paik (2003); Ridout, Demetrio and Firth (1999); Robbins (1956);
Efron and Morris (1975); Kass and Steffey (1989); Jeffreys (1946); Brown, Cai and
DasGupta (2001).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, get_args

import numpy as np
from numpy.typing import NDArray

from prereg.stats._dist import beta_ppf, norm_cdf, t_ppf
from prereg.stats._scipy import LazyModule, optimize
from prereg.stats._scipy import special as spsp
from prereg.stats.clustering import design_effect, icc_binary
from prereg.stats.funnel import loss_shares
from prereg.stats.intervals import jeffreys_interval
from prereg.stats.results import (
    BetaPrior,
    FunnelStage,
    InvokeRankResult,
    ProportionInterval,
)

__all__ = [
    "FUNNEL_STAGES",
    "RHO_DEFAULTS",
    "KAPPA_BOUNDS",
    "betabinom_loglik",
    "betabinom_moments",
    "fit_beta_prior",
    "cap_prior",
    "grouped_icc",
    "equal_tailed",
    "beta_interval",
    "intervals_overlap",
    "invokerank",
    "funnel_lever",
    "false_invoke_rate",
    "rating_from_beta",
    "choice_loglik",
    "fit_choice_logit",
    "invoke_rating",
    "InvokeRatingResult",
    "choice_shares",
    "ShareResult",
    "competitor_lever",
    "TERMINAL_CLASSES",
    "SPLIT_CLASSES",
    "terminal_counts",
    "split_class",
    "resolution_split",
    "ResolutionSplit",
    "bootstrap_score",
    "BootstrapScore",
    "replicate_variance",
    "ReplicateVariance",
    "ScoreInterval",
    "SCORE_INTERVALS",
    "prompt_rate",
]

FUNNEL_STAGES: tuple[str, ...] = ("surfaced", "selected", "invoked", "executed", "completed")
#: The published path's default intra-prompt correlations per stage (4.1, step 2).
RHO_DEFAULTS: dict[str, float] = {
    "surfaced": 0.6,
    "selected": 0.8,
    "invoked": 0.6,
    "executed": 0.6,
    "completed": 0.6,
}
KAPPA_BOUNDS: tuple[float, float] = (1.0, 10_000.0)
DRAWS = 4000
LEVELS: tuple[float, ...] = (0.90, 0.95)
#: The score's interval methods a registration may choose (``invokerank: {interval: ...}``;
#: the schema derives from this table): the one chosen is the score's interval, the other
#: is shown beside it, labelled.
ScoreInterval = Literal["published", "calibrated"]
SCORE_INTERVALS: dict[str, str] = {
    "published": "the published path's equal-tailed interval of the Q draws (4.1)",
    "calibrated": "expanded percentile bootstrap of the plug-in score over prompts within "
    "intents (and sessions when there are two or more; 7.5)",
}
assert tuple(SCORE_INTERVALS) == get_args(ScoreInterval)

FloatArray = NDArray[np.float64]
sparse = LazyModule("scipy.sparse")


def _pair(y: Any, n: Any) -> tuple[FloatArray, FloatArray]:
    ya = np.asarray(y, dtype=np.float64).ravel()
    na = np.asarray(n, dtype=np.float64).ravel()
    if ya.shape != na.shape:
        raise ValueError(f"successes and trials differ in length: {ya.size} vs {na.size}")
    if not (np.all(np.isfinite(ya)) and np.all(np.isfinite(na))):
        raise ValueError("successes and trials must be finite")
    if np.any(ya < 0) or np.any(ya > na + 1e-12):
        raise ValueError("need 0 <= successes <= trials")
    return ya, na


def betabinom_loglik(mu: float, kappa: float, successes: Any, trials: Any) -> float:
    """Beta-binomial marginal log-likelihood summed over cells (real-valued counts allowed).

        sum_c [ln C(n_c, y_c) + ln B(y_c + mu kappa, n_c - y_c + (1 - mu) kappa)
               - ln B(mu kappa, (1 - mu) kappa)]

    with the binomial coefficient through the gamma function, so that deflated
    (non-integer) counts are accepted; on integers it is the sum of
    ``scipy.stats.betabinom.logpmf``.
    """
    y, n = _pair(successes, trials)
    return _betabinom_terms(y, n)(mu, kappa)


def _betabinom_terms(y: FloatArray, n: FloatArray) -> Callable[[float, float], float]:
    """:func:`betabinom_loglik` of validated counts as a function of (mu, kappa), the
    binomial coefficients computed once (an optimiser evaluates it hundreds of times)."""
    coef = spsp.gammaln(n + 1.0) - spsp.gammaln(y + 1.0) - spsp.gammaln(n - y + 1.0)
    failures = n - y

    def loglik(mu: float, kappa: float) -> float:
        a, b = mu * kappa, (1.0 - mu) * kappa
        return float(np.sum(coef + spsp.betaln(y + a, failures + b) - spsp.betaln(a, b)))

    return loglik


def betabinom_moments(successes: Any, trials: Any) -> tuple[float, float]:
    """(mu, kappa) by the method of moments over the cells with trials (module docstring)."""
    y, n = _pair(successes, trials)
    keep = n > 0
    y, n = y[keep], n[keep]
    if y.size == 0:
        raise ValueError("no cell has trials")
    p = y / n
    mu = float(np.mean(p))
    lo, hi = KAPPA_BOUNDS
    if y.size < 2 or mu <= 0.0 or mu >= 1.0:
        return mu, hi
    s2 = float(np.var(p, ddof=1))
    h = float(np.mean(1.0 / n))
    if h >= 1.0:
        return mu, lo
    rho = (s2 / (mu * (1.0 - mu)) - h) / (1.0 - h)
    if rho <= 0.0:
        return mu, hi
    if rho >= 1.0:
        return mu, lo
    return mu, float(min(hi, max(lo, 1.0 / rho - 1.0)))


def _jeffreys(method: str, cells: int) -> BetaPrior:
    return BetaPrior(
        mu=0.5, kappa=1.0, method=method, converged=True, loglik=math.nan, cells_with_trials=cells
    )


def fit_beta_prior(successes: Any, trials: Any) -> BetaPrior:
    """The shared Beta(mu kappa, (1 - mu) kappa) prior of one stage (4.1, step 4).

    Marginal maximum likelihood by Nelder-Mead on (logit mu, log kappa), log kappa
    bounded to [0, ln 10 000], started from :func:`betabinom_moments`; the moments when
    the optimiser reports no convergence; Jeffreys when fewer than two cells have
    trials, or when the stage sits on a boundary (no success or no failure in any cell,
    see the module docstring).
    """
    y, n = _pair(successes, trials)
    cells = int(np.sum(n > 0))
    if cells < 2:
        return _jeffreys("jeffreys (fewer than two cells with trials)", cells)
    if np.sum(y) <= 0.0 or np.sum(n - y) <= 0.0:
        mu, kappa = betabinom_moments(y, n)
        return BetaPrior(
            mu=mu,
            kappa=kappa,
            method="method of moments (boundary: every cell at 0 or every cell at 1; "
            "the marginal likelihood has no interior maximum)",
            converged=False,
            loglik=betabinom_loglik(mu, kappa, y, n) if 0.0 < mu < 1.0 else 0.0,
            cells_with_trials=cells,
        )
    mu0, kappa0 = betabinom_moments(y, n)
    mu0 = min(max(mu0, 1e-6), 1.0 - 1e-6)
    lo, hi = np.log(KAPPA_BOUNDS[0]), np.log(KAPPA_BOUNDS[1])
    loglik = _betabinom_terms(y, n)

    def objective(theta: FloatArray) -> float:
        mu = float(spsp.expit(theta[0]))
        if not 0.0 < mu < 1.0:
            return math.inf
        value = -loglik(mu, float(np.exp(theta[1])))
        return value if math.isfinite(value) else math.inf

    start = np.array([spsp.logit(mu0), min(hi, max(lo, math.log(kappa0)))])
    fit = optimize.minimize(
        objective,
        start,
        method="Nelder-Mead",
        bounds=[(None, None), (lo, hi)],
        options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000},
    )
    if bool(fit.success) and np.all(np.isfinite(fit.x)):
        mu, kappa = float(spsp.expit(fit.x[0])), float(np.exp(fit.x[1]))
        if 0.0 < mu < 1.0:
            kappa = min(KAPPA_BOUNDS[1], max(KAPPA_BOUNDS[0], kappa))
            return BetaPrior(
                mu=mu,
                kappa=kappa,
                method="beta-binomial marginal ML (Nelder-Mead)",
                converged=True,
                loglik=betabinom_loglik(mu, kappa, y, n),
                cells_with_trials=cells,
            )
    mu, kappa = betabinom_moments(y, n)
    return BetaPrior(
        mu=mu,
        kappa=kappa,
        method="method of moments (the ML fit did not converge)",
        converged=False,
        loglik=betabinom_loglik(mu, kappa, y, n),
        cells_with_trials=cells,
    )


def cap_prior(
    prior: BetaPrior, successes: Any, trials: Any
) -> tuple[FloatArray, FloatArray, NDArray[np.bool_]]:
    """Per-cell prior (alpha, beta, capped) after capPrior (4.1, step 5).

    kappa_c = min(kappa, N_-c) with N_-c the deflated trials of the other cells; where
    the cap binds (kappa > N_-c), mu_c = Y_-c / N_-c, their pooled rate. A Jeffreys
    prior is not capped.
    """
    y, n = _pair(successes, trials)
    if prior.method.startswith("jeffreys"):
        half = np.full(y.shape, 0.5)
        return half, half.copy(), np.zeros(y.shape, dtype=bool)
    others_n = float(np.sum(n)) - n
    others_y = float(np.sum(y)) - y
    capped = (prior.kappa > others_n) & (others_n > 0)
    kappa = np.where(capped, others_n, prior.kappa)
    with np.errstate(invalid="ignore", divide="ignore"):
        mu = np.where(capped, others_y / np.where(others_n > 0, others_n, 1.0), prior.mu)
    return mu * kappa, (1.0 - mu) * kappa, capped


def grouped_icc(successes: Any, trials: Any) -> float:
    """:func:`prereg.stats.icc_binary` from per-group counts (nan when not estimable)."""
    y = np.asarray(successes, dtype=np.int64).ravel()
    n = np.asarray(trials, dtype=np.int64).ravel()
    keep = n > 0
    y, n = y[keep], n[keep]
    if y.size == 0:
        return math.nan
    groups = np.repeat(np.arange(y.size), n)
    starts = np.repeat(np.cumsum(n) - n, n)
    outcomes = (np.arange(int(n.sum())) - starts) < np.repeat(y, n)
    return icc_binary(outcomes.astype(np.float64), groups)


def equal_tailed(draws: Any, level: float) -> tuple[Any, Any]:
    """Equal-tailed interval of draws along the last axis."""
    d = np.asarray(draws, dtype=np.float64)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(d, [tail, 1.0 - tail], axis=-1)
    return low, high


def beta_interval(alpha: Any, beta: Any, level: float) -> tuple[Any, Any]:
    """Equal-tailed interval of Beta(alpha, beta) (a stage posterior), exactly.

    A zero shape parameter is the limiting point mass (alpha = 0: at 0; beta = 0: at 1).
    """
    a = np.asarray(alpha, dtype=np.float64)
    b = np.asarray(beta, dtype=np.float64)
    tail = (1.0 - level) / 2.0
    safe_a, safe_b = np.where(a > 0, a, 1.0), np.where(b > 0, b, 1.0)
    out = []
    for q in (tail, 1.0 - tail):
        v = np.where(a <= 0, 0.0, np.where(b <= 0, 1.0, beta_ppf(q, safe_a, safe_b)))
        out.append(v if v.ndim else float(v))
    return out[0], out[1]


def intervals_overlap(lows: Any, highs: Any) -> NDArray[np.bool_]:
    """Pairwise overlap of intervals: the display rule "intervals overlap, reported as tied".

    A display rule, not an equivalence test (4.1, step 10). Closed intervals; the
    diagonal is True.
    """
    lo = np.asarray(lows, dtype=np.float64).ravel()
    hi = np.asarray(highs, dtype=np.float64).ravel()
    return np.asarray((lo[:, None] <= hi[None, :]) & (lo[None, :] <= hi[:, None]))


def _beta_draws(
    rng: np.random.Generator, alpha: FloatArray, beta: FloatArray, size: int
) -> FloatArray:
    """Beta draws per cell (rows); a zero shape parameter is the limiting point mass."""
    a = np.where(alpha > 0, alpha, 1.0)[:, None]
    b = np.where(beta > 0, beta, 1.0)[:, None]
    out: FloatArray = rng.beta(a, b, size=(alpha.size, size))
    out = np.where((alpha <= 0)[:, None], 0.0, out)
    return np.where(((beta <= 0) & (alpha > 0))[:, None], 1.0, out)


def _validate_counts(
    runs: Any, reached: Any, cell: Any
) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]]:
    m = np.asarray(runs, dtype=np.int64).ravel()
    r = np.asarray(reached, dtype=np.int64)
    c = np.asarray(cell, dtype=np.int64).ravel()
    if r.ndim != 2 or r.shape[0] != m.size or c.size != m.size:
        raise ValueError("reached must be prompts x stages, with runs and cell per prompt")
    if r.shape[1] == 0 or r.shape[1] > len(FUNNEL_STAGES):
        raise ValueError("between one and five funnel stages")
    if np.any(m < 0) or np.any(r < 0) or np.any(c < 0):
        raise ValueError("counts and cell indices must be non-negative")
    chain = np.concatenate([m[:, None], r], axis=1)
    if np.any(np.diff(chain, axis=1) > 0):
        raise ValueError(
            "funnel counts must be nested (a prompt cannot reach a stage more often than "
            "its parent): a recording error"
        )
    return m, r, c


def _rho(
    y: NDArray[np.int64], n: NDArray[np.int64], pooled: float, default: float
) -> tuple[float, str]:
    own = grouped_icc(y, n)
    if not math.isnan(own):
        return own, "cell"
    if not math.isnan(pooled):
        return pooled, "pooled"
    return default, "default"


def _stage(
    stage: str,
    y_p: NDArray[np.int64],
    n_p: NDArray[np.int64],
    cell: NDArray[np.int64],
    cells: int,
    cap: bool,
) -> FunnelStage:
    pooled = grouped_icc(y_p, n_p)
    y = np.bincount(cell, weights=y_p, minlength=cells)
    n = np.bincount(cell, weights=n_p, minlength=cells)
    rho = np.empty(cells)
    source: list[str] = []
    deff = np.ones(cells)
    for c in range(cells):
        mine = cell == c
        rho[c], src = _rho(y_p[mine], n_p[mine], pooled, RHO_DEFAULTS[stage])
        source.append(src)
        if n[c] > 0:
            deff[c] = float(design_effect(n_p[mine], rho[c]))
    ye, ne = y / deff, n / deff
    prior = fit_beta_prior(ye, ne)
    if cap:
        alpha0, beta0, capped = cap_prior(prior, ye, ne)
    else:
        alpha0, beta0, capped = _uncapped(prior, ye.size)
    return FunnelStage(
        stage=stage,
        successes=y.astype(np.int64),
        trials=n.astype(np.int64),
        rho=rho,
        rho_source=tuple(source),
        pooled_rho=pooled,
        deff=deff,
        effective_successes=ye,
        effective_trials=ne,
        prior=prior,
        prior_alpha=alpha0,
        prior_beta=beta0,
        capped=capped,
        posterior_alpha=ye + alpha0,
        posterior_beta=ne - ye + beta0,
    )


def _uncapped(prior: BetaPrior, size: int) -> tuple[FloatArray, FloatArray, NDArray[np.bool_]]:
    alpha = np.full(size, prior.mu * prior.kappa)
    beta = np.full(size, (1.0 - prior.mu) * prior.kappa)
    return alpha, beta, np.zeros(size, dtype=bool)


def _weights(weights: Any, cells: int) -> FloatArray:
    if weights is None:
        return np.full(cells, 1.0 / cells)
    w = np.asarray(weights, dtype=np.float64).ravel()
    if w.size != cells or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
        raise ValueError(f"weights must be {cells} non-negative numbers with a positive sum")
    return np.asarray(w / w.sum())


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
    """The published scoring path of one arm (module docstring, steps 1 to 9).

    ``runs[p]`` is the number of positive runs of prompt ``p``, ``reached[p, k]`` how
    many of them reached stage ``stages[k]`` (stages in funnel order from Surfaced; two
    stages, Surfaced and Selected, give the Selection-level IR_DS), and ``cell[p]`` the
    prompt's intent cell (0 .. C-1; every cell needs a prompt). ``weights`` are the
    roll-up weights per cell (normalised; equal by default). ``cap=False`` gives plain
    plug-in empirical Bayes (for comparison only; the published path caps).
    """
    m, r, c = _validate_counts(runs, reached, cell)
    names = tuple(stages)
    if names != FUNNEL_STAGES[: len(names)] or len(names) != r.shape[1]:
        raise ValueError(f"stages must be a prefix of {FUNNEL_STAGES} matching reached")
    cells = int(c.max()) + 1 if c.size else 0
    if cells == 0 or np.bincount(c, minlength=cells).min() == 0:
        raise ValueError("every cell 0 .. C-1 needs at least one prompt")
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


def funnel_lever(posterior_means: Any, reference: Any = None) -> FloatArray:
    """Lever_k = Q (r_ref_k / r_k - 1)^+ per cell and stage (4.2, Lever).

    ``posterior_means`` is cells x stages; Q is their product per cell. The reference
    is the median over cells (the intent median) unless ``reference`` (one rate per
    stage, e.g. the best competitor's) is given. nan where r_k = 0 (unbounded).
    """
    r = np.asarray(posterior_means, dtype=np.float64)
    if r.ndim != 2:
        raise ValueError("posterior_means must be cells x stages")
    ref = np.median(r, axis=0) if reference is None else np.asarray(reference, dtype=float)
    q = np.prod(r, axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        lever = q * np.clip(ref[None, :] / r - 1.0, 0.0, None)
    return np.asarray(np.where(r > 0, lever, np.nan))


def false_invoke_rate(calls: Any, runs: Any, rho: float, level: float = 0.90) -> ProportionInterval:
    """Calls on negative runs with a Jeffreys interval deflated at the pooled rho_S.

    ``calls[p]`` and ``runs[p]`` are per negative prompt; the design effect is Kish's
    over the prompts' run counts at ``rho`` (4.2, False-Invoke Rate). Use it for focal
    calls (the published False-Invoke Rate) and, separately, for any external call.
    """
    x = np.asarray(calls, dtype=np.float64).ravel()
    n = np.asarray(runs, dtype=np.float64).ravel()
    if n.sum() <= 0:
        raise ValueError("no negative runs")
    deff = float(design_effect(n, rho))
    return jeffreys_interval(float(x.sum()), float(n.sum()), level=level, deff=deff)


# --- Invoke Rating: conditional logit over first choice (4.2) ---------------------------
#
# Readings where the seed is silent (stated here and in docs/invokerank.md):
#
# - Choice set: every alternative available to the run (the integrations it listed) plus
#   the outside option "no tool" at utility 0. A run whose first call went to nothing
#   listed is the caller's to drop (it cannot be placed in the choice set).
# - Position term gamma: linear in the listing position (0 = listed first), one
#   coefficient shared by every alternative. Branded term lambda: an indicator that the
#   prompt names the alternative. Either term is dropped (and reported null) when it does
#   not vary within choice sets, where it is not identified.
# - Partial pooling: intent effects u_jc are deviations from the integration's beta_j
#   with a Gaussian prior N(0, prior_sd^2), i.e. a ridge penalty sum u^2 / (2 prior_sd^2)
#   on them only (beta, gamma and lambda are unpenalised). prior_sd is fixed, 1 on the
#   logit scale by default: the seed gives no value and no rule for estimating it.
# - Fit: the penalised log-likelihood is maximised by a trust-region Newton method
#   (scipy's trust-exact, exact gradient and Hessian), the seed's "penalised batch
#   Newton-Raphson" through a maintained optimiser. Unpenalised, the estimates and their
#   standard errors (inverse observed information) are statsmodels' ConditionalLogit's.
# - Boundaries: an alternative never chosen has beta = -inf (its rating is unbounded
#   below) and is fitted out of the choice sets (its limiting likelihood); when the
#   outside option is never chosen the ratings are not identified (nan). In a bootstrap
#   resample the same rules apply, so a percentile bound may be -inf (shown as null).
#   A resample whose fit is not identified (no run chose no tool, or the optimiser finds
#   no finite maximum) is left out; when more than 10% are, no interval is given.
# - Interval: percentile intervals of R from a bootstrap over prompts (200 resamples by
#   default), resampling prompts within intents so that every intent stays represented.

RATING_ORIGIN = 1000.0
RATING_SCALE = 400.0 / math.log(10.0)
RATING_RESAMPLES = 200
#: More unidentified resamples than this share and the rating's interval is not shown.
UNIDENTIFIED_SHARE = 0.10


def rating_from_beta(beta: Any) -> Any:
    """R = 1000 + 400 beta / ln 10: 1000 is "as likely to be chosen as no tool at all"."""
    return RATING_ORIGIN + RATING_SCALE * np.asarray(beta, dtype=np.float64)


@dataclass(frozen=True)
class ChoiceDesign:
    """Choice sets as arrays: run t, alternative a (0 is the outside option), parameter p."""

    x: FloatArray  # (T, A, P) covariates; row a = 0 is all zeros (utility 0)
    available: NDArray[np.bool_]  # (T, A); column 0 always True
    chosen: NDArray[np.int64]  # (T,) in 0 .. A-1
    penalty: FloatArray  # (P,) ridge weights 1 / prior_sd^2 (0: unpenalised)

    @cached_property
    def flat(self) -> Any:
        """x as a sparse (T A) x P matrix: the design is mostly indicators, and sparse
        products avoid multithreaded BLAS, which thrashes on a loaded machine."""
        t, a, p = self.x.shape
        return sparse.csr_matrix(self.x.reshape(t * a, p))


@dataclass(frozen=True)
class LogitFit:
    """A (penalised) conditional-logit maximum: estimates, covariance, log-likelihood."""

    params: FloatArray
    cov: FloatArray
    loglik: float
    converged: bool


def _choice_probabilities(design: ChoiceDesign, theta: FloatArray) -> FloatArray:
    utility = np.asarray(design.flat @ theta).reshape(design.available.shape)
    utility = np.where(design.available, utility, -np.inf)
    utility = utility - utility.max(axis=1, keepdims=True)
    expu = np.exp(utility)
    out: FloatArray = expu / expu.sum(axis=1, keepdims=True)
    return out


def choice_loglik(design: ChoiceDesign, theta: Any) -> float:
    """Penalised conditional-logit log-likelihood (the penalty only where weights > 0)."""
    th = np.asarray(theta, dtype=np.float64)
    probs = _choice_probabilities(design, th)
    picked = probs[np.arange(design.chosen.size), design.chosen]
    return float(np.sum(np.log(picked)) - 0.5 * np.sum(design.penalty * th**2))


def _gradient_hessian(design: ChoiceDesign, theta: FloatArray) -> tuple[FloatArray, FloatArray]:
    probs = _choice_probabilities(design, theta)
    t, a, p = design.x.shape
    weighted = design.flat.multiply(probs.reshape(-1, 1)).tocsr()
    mean_x = np.asarray(weighted.toarray()).reshape(t, a, p).sum(axis=1)
    picked_x = design.x[np.arange(design.chosen.size), design.chosen]
    grad = (picked_x - mean_x).sum(axis=0) - design.penalty * theta
    second = np.asarray((weighted.T @ design.flat).toarray())
    outer = np.einsum("tp,tq->pq", mean_x, mean_x)  # einsum's own loops, not BLAS
    hess = -(second - outer) - np.diag(design.penalty)
    return np.asarray(grad), np.asarray(hess)


def fit_choice_logit(design: ChoiceDesign, start: Any = None) -> LogitFit:
    """Maximise :func:`choice_loglik` by trust-region Newton (scipy ``trust-exact``)."""
    p = design.x.shape[2]
    theta0 = np.zeros(p) if start is None else np.asarray(start, dtype=np.float64)

    def negative(theta: FloatArray) -> float:
        return -choice_loglik(design, theta)

    last: dict[bytes, tuple[FloatArray, FloatArray]] = {}

    def derivatives(theta: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Gradient and Hessian together, kept for the optimiser's next call at theta."""
        key = theta.tobytes()
        if key not in last:
            last.clear()
            last[key] = _gradient_hessian(design, theta)
        return last[key]

    def jac(theta: FloatArray) -> FloatArray:
        return -derivatives(theta)[0]

    def hess(theta: FloatArray) -> FloatArray:
        return -derivatives(theta)[1]

    fit = optimize.minimize(
        negative, theta0, jac=jac, hess=hess, method="trust-exact", options={"gtol": 1e-9}
    )
    theta = np.asarray(fit.x, dtype=np.float64)
    grad, hessian = _gradient_hessian(design, theta)
    try:
        cov = np.asarray(np.linalg.inv(-hessian), dtype=np.float64)
    except np.linalg.LinAlgError:
        cov = np.full((p, p), np.nan)
    # converged when the Newton decrement (the log-likelihood still to gain, to second
    # order) is negligible; one Newton step then polishes the optimiser's last iterate
    decrement = float(grad @ cov @ grad) if np.all(np.isfinite(cov)) else math.inf
    converged = 0.0 <= decrement < 1e-8
    if converged:
        theta = theta + cov @ grad
    return LogitFit(params=theta, cov=cov, loglik=choice_loglik(design, theta), converged=converged)


@dataclass(frozen=True)
class ChoiceRuns:
    """First choices of runs, validated (see :func:`invoke_rating`)."""

    chosen: NDArray[np.int64]  # (T,) -1: the outside option
    available: NDArray[np.bool_]  # (T, J)
    intent: NDArray[np.int64]  # (T,)
    prompt: NDArray[np.int64]  # (T,)
    position: FloatArray | None  # (T, J)
    branded: FloatArray | None  # (T, J)

    def take(self, index: NDArray[np.int64]) -> ChoiceRuns:
        def sub(a: FloatArray | None) -> FloatArray | None:
            return None if a is None else a[index]

        return ChoiceRuns(
            chosen=self.chosen[index],
            available=self.available[index],
            intent=self.intent[index],
            prompt=self.prompt[index],
            position=sub(self.position),
            branded=sub(self.branded),
        )


def _choice_runs(
    chosen: Any, available: Any, intent: Any, prompt: Any, position: Any, branded: Any
) -> ChoiceRuns:
    c = np.asarray(chosen, dtype=np.int64).ravel()
    av = np.asarray(available, dtype=bool)
    if av.ndim != 2 or av.shape[0] != c.size or c.size == 0:
        raise ValueError("available must be runs x alternatives, one row per chosen")
    if np.any(c < -1) or np.any(c >= av.shape[1]):
        raise ValueError("chosen must be -1 (no tool) or an alternative index")
    if np.any((c >= 0) & ~av[np.arange(c.size), np.maximum(c, 0)]):
        raise ValueError("a run chose an alternative that was not available to it")
    cells = np.zeros(c.size, np.int64) if intent is None else np.asarray(intent, np.int64).ravel()
    units = np.arange(c.size) if prompt is None else np.asarray(prompt, np.int64).ravel()
    if cells.size != c.size or units.size != c.size or np.any(cells < 0):
        raise ValueError("intent and prompt need one non-negative entry per run")

    def matrix(a: Any, name: str) -> FloatArray | None:
        if a is None:
            return None
        m = np.asarray(a, dtype=np.float64)
        if m.shape != av.shape or not np.all(np.isfinite(m[av])):
            raise ValueError(f"{name} must be runs x alternatives, finite where available")
        return np.where(av, m, 0.0)

    return ChoiceRuns(c, av, cells, units, matrix(position, "position"), matrix(branded, "branded"))


def _varies(values: FloatArray | None, available: NDArray[np.bool_]) -> bool:
    """Whether a covariate varies within some choice set (the outside option counts as 0)."""
    if values is None:
        return False
    with_outside = np.concatenate([np.zeros((values.shape[0], 1)), values], axis=1)
    mask = np.concatenate([np.ones((values.shape[0], 1), bool), available], axis=1)
    lo = np.where(mask, with_outside, np.inf).min(axis=1)
    hi = np.where(mask, with_outside, -np.inf).max(axis=1)
    return bool(np.any(hi > lo))


@dataclass(frozen=True)
class RatingTerms:
    """Which parameters a fit carries, in order: beta (kept alternatives), u, gamma, lambda."""

    kept: NDArray[np.int64]  # alternatives in the fit (chosen at least once)
    cells: int  # intent cells with effects (0: none)
    position: bool
    branded: bool


def _design(runs: ChoiceRuns, terms: RatingTerms, prior_sd: float | None) -> ChoiceDesign:
    t, k = runs.chosen.size, terms.kept.size
    cols = k + k * terms.cells + int(terms.position) + int(terms.branded)
    x = np.zeros((t, k + 1, cols))
    x[:, 1:, :k] = np.eye(k)[None, :, :]
    if terms.cells:
        for j in range(k):
            x[np.arange(t), 1 + j, k + j * terms.cells + runs.intent] = 1.0
    col = k + k * terms.cells
    if terms.position and runs.position is not None:
        x[:, 1:, col] = runs.position[:, terms.kept]
        col += 1
    if terms.branded and runs.branded is not None:
        x[:, 1:, col] = runs.branded[:, terms.kept]
    available = np.concatenate([np.ones((t, 1), bool), runs.available[:, terms.kept]], axis=1)
    lookup = np.full(runs.available.shape[1] + 1, 0, np.int64)
    lookup[1 + terms.kept] = np.arange(1, k + 1)
    penalty = np.zeros(cols)
    if terms.cells and prior_sd is not None and math.isfinite(prior_sd):
        penalty[k : k + k * terms.cells] = 1.0 / prior_sd**2
    return ChoiceDesign(x=x, available=available, chosen=lookup[runs.chosen + 1], penalty=penalty)


def _terms(runs: ChoiceRuns, prior_sd: float | None) -> RatingTerms:
    counts = np.bincount(runs.chosen + 1, minlength=runs.available.shape[1] + 1)
    kept = np.flatnonzero(counts[1:] > 0).astype(np.int64)
    cells = int(runs.intent.max()) + 1
    return RatingTerms(
        kept=kept,
        cells=cells if prior_sd is not None and cells > 1 else 0,
        position=_varies(runs.position, runs.available),
        branded=_varies(runs.branded, runs.available),
    )


def _betas(runs: ChoiceRuns, prior_sd: float | None, start: Any = None) -> FloatArray:
    """beta per alternative for one (re)sample: -inf never chosen, nan not identified."""
    j = runs.available.shape[1]
    out = np.full(j, -np.inf)
    if not np.any(runs.chosen == -1):
        return np.full(j, np.nan)
    terms = _terms(runs, prior_sd)
    if terms.kept.size == 0:
        return out
    fit = fit_choice_logit(_design(runs, terms, prior_sd), start)
    out[terms.kept] = fit.params[: terms.kept.size] if fit.converged else np.nan
    return out


@dataclass(frozen=True)
class InvokeRatingResult:
    """Invoke Rating per alternative (4.2): beta, R = 1000 + 400 beta / ln 10, intervals."""

    beta: FloatArray  # (J,) -inf: never chosen; nan: not identified
    se: FloatArray  # (J,) inverse observed information (penalised)
    rating: FloatArray  # (J,)
    rating_low: dict[float, FloatArray]  # prompt-bootstrap percentile bounds per level
    rating_high: dict[float, FloatArray]
    position: float | None  # gamma per listing position (None: not identified)
    position_se: float | None
    branded: float | None  # lambda (None: not identified)
    branded_se: float | None
    intent_effects: FloatArray | None  # (J, C) u_jc, partially pooled (None: none fitted)
    chosen: NDArray[np.int64]  # (J + 1,) runs choosing no tool, then each alternative
    runs: int
    prompts: int
    prior_sd: float | None
    resamples: int
    unidentified_resamples: int
    converged: bool
    loglik: float
    method: str


def invoke_rating(
    chosen: Any,
    available: Any,
    *,
    intent: Any = None,
    prompt: Any = None,
    position: Any = None,
    branded: Any = None,
    prior_sd: float | None = 1.0,
    resamples: int = RATING_RESAMPLES,
    seed: int | None = 0,
    levels: Sequence[float] = LEVELS,
) -> InvokeRatingResult:
    """The Invoke Rating: a conditional logit over first choice with an outside option.

    ``chosen[t]`` is the alternative run ``t`` called first (-1: no external call),
    ``available[t, j]`` whether alternative ``j`` was listed to the run, ``intent[t]``
    its intent cell (for partially pooled intent effects; ``prior_sd=None`` fits none),
    ``prompt[t]`` its prompt (the bootstrap unit; default: every run its own),
    ``position[t, j]`` the listing position (0 = first) and ``branded[t, j]`` whether
    the prompt names the alternative. Readings of the seed: the comment block above.
    """
    data = _choice_runs(chosen, available, intent, prompt, position, branded)
    if prior_sd is not None and not prior_sd > 0:
        raise ValueError("prior_sd must be positive (or None: no intent effects)")
    j = data.available.shape[1]
    counts = np.bincount(data.chosen + 1, minlength=j + 1).astype(np.int64)
    terms = _terms(data, prior_sd)
    beta, se = np.full(j, -np.inf), np.full(j, np.nan)
    fit: LogitFit | None = None
    if counts[0] == 0:
        beta[:] = np.nan
    elif terms.kept.size:
        fit = fit_choice_logit(_design(data, terms, prior_sd))
        k = terms.kept.size
        if fit.converged:
            beta[terms.kept] = fit.params[:k]
            variance = np.diag(fit.cov)[:k]
            se[terms.kept] = np.sqrt(np.where(variance > 0, variance, np.nan))
        else:  # a flat or separated likelihood: not identified
            beta[:], fit = np.nan, None
    boot, unidentified = _rating_bootstrap(data, prior_sd, resamples, seed, fit, terms)
    if unidentified > UNIDENTIFIED_SHARE * resamples:
        boot = boot[:0]  # a percentile over the few identified resamples would mislead
    rating = rating_from_beta(beta)
    with np.errstate(invalid="ignore"):  # a bound at -inf (never chosen in a resample)
        lows = {lv: np.quantile(boot, (1 - lv) / 2, axis=0) for lv in levels} if boot.size else {}
        highs = {lv: np.quantile(boot, (1 + lv) / 2, axis=0) for lv in levels} if boot.size else {}
    nan_j = np.full(j, np.nan)
    return InvokeRatingResult(
        beta=beta,
        se=se,
        rating=rating,
        rating_low={lv: lows.get(lv, nan_j) for lv in levels},
        rating_high={lv: highs.get(lv, nan_j) for lv in levels},
        **_nuisance(fit if fit is not None and fit.converged else None, terms, j),
        chosen=counts,
        runs=int(data.chosen.size),
        prompts=int(np.unique(data.prompt).size),
        prior_sd=prior_sd,
        resamples=int(resamples),
        unidentified_resamples=unidentified,
        converged=fit is not None and fit.converged,
        loglik=math.nan if fit is None else fit.loglik,
        method=(
            "conditional logit over first choice with the outside option 'no tool' at "
            "utility 0, linear position term, branded-prompt term, intent effects with a "
            f"N(0, {prior_sd}^2) prior (trust-region Newton); percentile interval from "
            f"{int(resamples)} resamples of prompts within intents"
        ),
    )


def _nuisance(fit: LogitFit | None, terms: RatingTerms, alternatives: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "position": None,
        "position_se": None,
        "branded": None,
        "branded_se": None,
        "intent_effects": None,
    }
    if fit is None:
        return out
    k = terms.kept.size
    col = k + k * terms.cells
    if terms.cells:
        effects = np.full((alternatives, terms.cells), np.nan)
        effects[terms.kept] = fit.params[k:col].reshape(k, terms.cells)
        out["intent_effects"] = effects
    for name, present in (("position", terms.position), ("branded", terms.branded)):
        if present:
            out[name] = float(fit.params[col])
            out[f"{name}_se"] = float(math.sqrt(max(fit.cov[col, col], 0.0)))
            col += 1
    return out


def _rating_bootstrap(
    data: ChoiceRuns,
    prior_sd: float | None,
    resamples: int,
    seed: int | None,
    fit: LogitFit | None,
    terms: RatingTerms,
) -> tuple[FloatArray, int]:
    """R over resamples of prompts within intents (rows: resamples with an identified fit).

    A resample is the original runs with multiplicity weights, so every resample is
    refitted at once by :class:`_Batch` (weighted Newton from the point estimate on the
    design built once); a resample whose terms differ otherwise from the point fit's, or
    whose Newton iterations do not converge, is refitted alone as before.
    """
    j = data.available.shape[1]
    if resamples <= 0 or fit is None:
        return np.empty((0, j)), 0
    rng = np.random.default_rng(seed)
    weights = _run_weights(rng, data.prompt, data.intent, int(resamples))
    batch = _Batch.build(data, terms, prior_sd)
    beta, alone = batch.betas(weights, fit.params)
    for b in np.flatnonzero(alone):
        index = np.repeat(np.arange(data.chosen.size), weights[b].astype(np.int64))
        beta[b] = _betas(data.take(index), prior_sd)
    identified = ~np.any(np.isnan(beta), axis=1)
    return rating_from_beta(beta[identified]), int(np.sum(~identified))


#: Newton iterations of a batched bootstrap refit before the resample is refitted alone
NEWTON_STEPS = 40
#: a refit has converged when the Newton decrement after its last step is below this
NEWTON_DECREMENT = 1e-14


@dataclass(frozen=True)
class _Batch:
    """The point fit's choice design in per-intent local coordinates, collapsed to its
    distinct choice situations, for refitting all bootstrap resamples at once (why: 200
    trust-region fits, each on a rebuilt design, cost seconds per arm, and every analyse
    of a registration with offers pays it).

    The likelihood depends on the runs only through their choice situations (intent,
    listed alternatives, covariates, the alternative chosen) and how often each occurs:
    runs in one situation are collapsed into one row (``members`` maps runs to rows), and
    a resample's run multiplicities become row weights by summing over each row's runs
    (exact: integer counts). A prompt's repeats share their alternatives, so S rows are
    far fewer than T runs. A run of intent c touches only D = k (beta) + k (u_.c) +
    position + branded of the P parameters, so the utilities and the Hessian's m m' term
    are computed in those coordinates (``index[c]``: their global columns) and scattered
    per intent; the Hessian's first term sum_a p x x' goes through the precomputed sparse
    products of each row's covariates (``pairs``).
    """

    runs: ChoiceRuns
    terms: RatingTerms
    design: ChoiceDesign  # of the runs (T rows): penalty and shape
    members: Any  # sparse (T, S): run t is in row s
    local: FloatArray  # (S, A, D)
    available: NDArray[np.bool_]  # (S, A)
    chosen: NDArray[np.int64]  # (S,) in 0 .. A-1
    index: NDArray[np.int64]  # (C, D) global column of each local coordinate per intent
    cell: NDArray[np.int64]  # (S,) the row's intent (0 when there are no intent effects)
    picked: FloatArray  # (S, D) local covariates of the chosen alternative
    pairs: Any  # sparse (P P) x (S A): x_sa,i x_sa,j of each row (s, a)

    @classmethod
    def build(cls, runs: ChoiceRuns, terms: RatingTerms, prior_sd: float | None) -> _Batch:
        design = _design(runs, terms, prior_sd)
        t, a, p = design.x.shape
        k = terms.kept.size
        cells = max(terms.cells, 1)
        cell = runs.intent if terms.cells else np.zeros(t, np.int64)
        tail = np.arange(k + k * terms.cells, p)  # position, branded
        index = np.stack(
            [
                np.concatenate(
                    [np.arange(k), k + np.arange(k) * terms.cells + c if terms.cells else [], tail]
                ).astype(np.int64)
                for c in range(cells)
            ]
        )
        local = design.x[
            np.arange(t)[:, None, None], np.arange(a)[None, :, None], index[cell][:, None, :]
        ]
        situation = np.concatenate(
            [
                np.stack([cell, design.chosen], axis=1).astype(np.float64),
                design.available.astype(np.float64),
                local.reshape(t, -1),
            ],
            axis=1,
        )
        _, first, group = np.unique(situation, axis=0, return_index=True, return_inverse=True)
        group = np.asarray(group, np.int64).ravel()
        members = sparse.csr_matrix((np.ones(t), (np.arange(t), group)), shape=(t, first.size))
        x = design.x[first]
        return cls(
            runs=runs,
            terms=terms,
            design=design,
            members=members,
            local=local[first],
            available=design.available[first],
            chosen=design.chosen[first],
            index=index,
            cell=cell[first],
            picked=local[first, design.chosen[first]],
            pairs=_pair_products(x.reshape(-1, p)),
        )

    def collapse(self, weights: FloatArray) -> FloatArray:
        """Row weights (R, S) of run multiplicities (R, T): each row's runs summed."""
        return np.asarray((self.members.T @ weights.T).T, dtype=np.float64)

    def betas(self, weights: FloatArray, start: FloatArray) -> tuple[FloatArray, NDArray[np.bool_]]:
        """beta per resample (rows of ``weights``, the runs' multiplicities) and
        alternative, by the rules of :func:`_betas`, and which resamples to refit alone."""
        theta, active, alone = self.refit(weights, start)
        k = self.terms.kept.size
        beta = np.full((weights.shape[0], self.runs.available.shape[1]), -np.inf)
        beta[:, self.terms.kept] = np.where(active[:, 1:], theta[:, :k], -np.inf)
        beta[~active[:, 0]] = np.nan  # no run chose no tool: not identified
        return beta, alone

    def refit(
        self, weights: FloatArray, start: FloatArray
    ) -> tuple[FloatArray, NDArray[np.bool_], NDArray[np.bool_]]:
        """(theta (B, P), active (B, k + 1), alone (B,)): the penalised maximum of each
        resample by :meth:`_newton` (an alternative never chosen in it fitted out, its
        columns 0), which alternatives it chose (column 0: no tool), and the resamples
        this cannot refit: other terms than the point fit's, or no convergence (theta
        nan there and where no run chose no tool)."""
        rows_weights = self.collapse(weights)
        onehot = self.chosen[:, None] == np.arange(self.terms.kept.size + 1)[None, :]
        active = (rows_weights @ onehot) > 0
        theta = np.full((weights.shape[0], start.size), np.nan)
        same = self._same_terms(weights)
        some = active[:, 1:].any(axis=1)  # none chosen: every beta -inf, nothing to fit
        theta[active[:, 0] & ~some] = 0.0
        rows = np.flatnonzero(active[:, 0] & some & same)
        alone = active[:, 0] & some & ~same
        if rows.size:
            got, ok = self._newton(rows_weights[rows], active[rows], start)
            theta[rows[ok]] = got[ok]
            alone[rows[~ok]] = True
        return theta, active, alone

    def _same_terms(self, weights: FloatArray) -> NDArray[np.bool_]:
        """Whether each resample keeps the point fit's position and branded terms (as
        :func:`_terms` decides them: over the runs' listed alternatives)."""
        same = np.ones(weights.shape[0], bool)
        for values, present in (
            (self.runs.position, self.terms.position),
            (self.runs.branded, self.terms.branded),
        ):
            if present and values is not None:
                with_outside = np.concatenate([np.zeros((values.shape[0], 1)), values], axis=1)
                mask = np.concatenate(
                    [np.ones((values.shape[0], 1), bool), self.runs.available], axis=1
                )
                lo = np.where(mask, with_outside, np.inf).min(axis=1)
                hi = np.where(mask, with_outside, -np.inf).max(axis=1)
                same &= np.any((weights > 0) & (hi > lo)[None, :], axis=1)
        return same

    def _free(self, active: NDArray[np.bool_]) -> NDArray[np.bool_]:
        """(R, P): the parameters each resample fits (an alternative it never chose is
        fitted out, with its beta and intent effects)."""
        k, cells = self.terms.kept.size, self.terms.cells
        p = self.design.x.shape[2]
        free = np.ones((active.shape[0], p), bool)
        free[:, :k] = active[:, 1:]
        if cells:
            free[:, k : k + k * cells] = np.repeat(active[:, 1:], cells, axis=1)
        return free

    def _loglik(
        self, theta: FloatArray, weights: FloatArray, active: NDArray[np.bool_]
    ) -> tuple[FloatArray, FloatArray]:
        """Penalised log-likelihood per resample and the choice probabilities (R, S, A);
        ``weights``: the rows' (R, S)."""
        local_theta = theta[:, self.index][:, self.cell]  # (R, T, D)
        utility = np.matmul(self.local, local_theta.transpose(1, 2, 0)).transpose(2, 0, 1)
        mask = self.available[None, :, :] & active[:, None, :]
        utility = np.where(mask, utility, -np.inf)
        utility = utility - utility.max(axis=2, keepdims=True)
        expu = np.exp(utility)
        total = expu.sum(axis=2)
        t = np.arange(self.cell.size)
        with np.errstate(invalid="ignore"):
            logp = utility[:, t, self.chosen] - np.log(total)
        logp = np.where(weights > 0, logp, 0.0)
        penalty = 0.5 * (self.design.penalty[None, :] * theta**2).sum(axis=1)
        return (weights * logp).sum(axis=1) - penalty, expu / total[:, :, None]

    def _derivatives(
        self, theta: FloatArray, weights: FloatArray, probs: FloatArray, free: NDArray[np.bool_]
    ) -> tuple[FloatArray, FloatArray]:
        """Gradient (R, P) and Hessian (R, P, P) of the penalised log-likelihood."""
        r, p = theta.shape
        t, a, _ = self.local.shape
        mean = np.matmul(probs.transpose(1, 0, 2), self.local).transpose(1, 0, 2)  # (R, S, D)
        contrib = weights[:, :, None] * (self.picked[None, :, :] - mean)
        first = self.pairs @ (weights[:, :, None] * probs).reshape(r, t * a).T
        hess = np.ascontiguousarray(first.T).reshape(r, p, p)
        grad = np.zeros((r, p))
        for c, cols in enumerate(self.index):
            mine = self.cell == c
            grad[:, cols] += contrib[:, mine].sum(axis=1)
            m = mean[:, mine]
            hess[:, cols[:, None], cols[None, :]] -= np.matmul(
                (m * weights[:, mine, None]).transpose(0, 2, 1), m
            )
        grad -= self.design.penalty[None, :] * theta
        hess = -hess - np.diag(self.design.penalty)[None, :, :]
        fixed = ~free
        grad[fixed] = 0.0
        hess[fixed[:, :, None] | fixed[:, None, :]] = 0.0
        rows, cols = np.nonzero(fixed)
        hess[rows, cols, cols] = -1.0
        return grad, hess

    def _newton(
        self, weights: FloatArray, active: NDArray[np.bool_], start: FloatArray
    ) -> tuple[FloatArray, NDArray[np.bool_]]:
        """Damped Newton for every resample (row weights (R, S)) at once, from the point
        estimate."""
        free = self._free(active)
        theta = np.where(free, start[None, :], 0.0)
        loglik, probs = self._loglik(theta, weights, active)
        done = np.zeros(theta.shape[0], bool)
        ok = np.zeros(theta.shape[0], bool)
        for _ in range(NEWTON_STEPS):
            todo = np.flatnonzero(~done)
            if not todo.size:
                break
            grad, hess = self._derivatives(theta[todo], weights[todo], probs[todo], free[todo])
            step, solved = _solve_each(-hess, grad)
            decrement = np.einsum("rp,rp->r", grad, step)
            scale = np.ones(todo.size)
            for _ in range(30):  # halve the step where the likelihood would fall
                trial = theta[todo] + scale[:, None] * step
                new, new_probs = self._loglik(trial, weights[todo], active[todo])
                worse = ~(new >= loglik[todo] - 1e-12 * (1.0 + np.abs(loglik[todo])))
                if not np.any(worse & solved):
                    break
                scale[worse] *= 0.5
            theta[todo], loglik[todo], probs[todo] = trial, new, new_probs
            finished = solved & (decrement < NEWTON_DECREMENT)
            ok[todo[finished]] = True
            done[todo[finished | ~solved]] = True
        return theta, ok


def _pair_products(flat: FloatArray) -> Any:
    """Sparse (P P) x N: the products x_n,i x_n,j of each row n of ``flat`` (N, P), from
    its non-zeros only (the design is mostly indicators)."""
    n, p = flat.shape
    rows, cols = np.nonzero(flat)  # row-major: a row's non-zeros are consecutive
    width = np.bincount(rows, minlength=n)
    slot = np.arange(rows.size) - (np.cumsum(width) - width)[rows]
    padded = np.full((n, max(int(width.max(initial=0)), 1)), -1, np.int64)
    padded[rows, slot] = cols
    row3 = np.broadcast_to(np.arange(n)[:, None, None], padded.shape + padded.shape[1:])
    first = np.broadcast_to(padded[:, :, None], row3.shape)
    second = np.broadcast_to(padded[:, None, :], row3.shape)
    keep = (first >= 0) & (second >= 0)
    r_, i_, j_ = row3[keep], first[keep], second[keep]
    return sparse.csc_matrix((flat[r_, i_] * flat[r_, j_], (i_ * p + j_, r_)), shape=(p * p, n))


def _solve_each(matrix: FloatArray, vector: FloatArray) -> tuple[FloatArray, NDArray[np.bool_]]:
    """matrix[r]^-1 vector[r] for each r; a singular one gives zeros and False."""
    try:
        out = np.asarray(np.linalg.solve(matrix, vector[:, :, None])[:, :, 0], np.float64)
        return out, np.ones(len(vector), bool)
    except np.linalg.LinAlgError:
        out, solved = np.zeros_like(vector), np.zeros(len(vector), bool)  # one by one
        for r in range(len(vector)):
            try:
                out[r] = np.linalg.solve(matrix[r], vector[r])
                solved[r] = True
            except np.linalg.LinAlgError:
                pass
        return out, solved


# --- Invoke Share and Selection Share (4.2) ---------------------------------------------
#
# IS_ic = Q_ic / sum_{j in E_c} Q_jc over a contested intent (two or more eligible
# integrations). Every integration is scored on the same runs of the intent, so Q_jc is
# estimated by the share of those runs that reached the scored level through j (first
# choice j for the Selection Share, D x S; completed through j for the Invoke Share) and
# the runs cancel: the share is a ratio of counts. Plug-in, not the per-integration EB
# posterior, because separate posteriors would not keep the shares' compositional
# dependence (within a run first choices exclude each other), which the seed names as the
# flaw of independent draws. The interval is a percentile bootstrap over prompts within
# intents, which keeps that dependence and the repeat clustering.

SHARE_RESAMPLES = 2000


@dataclass(frozen=True)
class ShareResult:
    """Shares per intent and integration, the roll-up, and their percentile intervals."""

    share: FloatArray  # (C, J) nan: not eligible, not contested, or no eligible hit
    low: dict[float, FloatArray]
    high: dict[float, FloatArray]
    hits: NDArray[np.int64]  # (C, J)
    contested: NDArray[np.bool_]  # (C,)
    rollup: FloatArray  # (J,) weighted mean over contested intents where j is eligible
    rollup_low: dict[float, FloatArray]
    rollup_high: dict[float, FloatArray]
    weights: FloatArray  # (C,) as given (normalised over the intents each roll-up uses)
    resamples: int


def _share_table(run_weights: FloatArray, design: FloatArray, eligible: NDArray[np.bool_]) -> Any:
    """Shares (..., C, J) from the runs' weights (..., T) (resamples as leading axes):
    ``design`` is (T, C J), run t's hits placed at its intent's row."""
    cells, alternatives = eligible.shape
    per = (run_weights @ design).reshape(run_weights.shape[:-1] + (cells, alternatives))
    per = np.where(eligible, per, 0.0)
    total = per.sum(axis=-1, keepdims=True)
    contested = eligible.sum(axis=1) >= 2
    with np.errstate(invalid="ignore", divide="ignore"):
        share = per / total
    return np.where(eligible & contested[:, None] & (total > 0), share, np.nan)


def _share_rollup(share: FloatArray, weights: FloatArray) -> Any:
    w = np.where(np.isfinite(share), weights[:, None], 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nansum(share * w, axis=-2) / w.sum(axis=-2)


def _run_weights(
    rng: np.random.Generator, units: NDArray[np.int64], cell: NDArray[np.int64], resamples: int
) -> FloatArray:
    """Each run's multiplicity (B, T) in B resamples of prompts within intents: intent c's
    prompts are drawn with replacement, as many as it has, and a run counts as often as
    its prompt was drawn (the same resamples as indexing the drawn prompts' runs, without
    building them)."""
    counts, unit_index = _unit_counts(rng, units, cell, resamples)
    return counts[:, unit_index]


def _unit_counts(
    rng: np.random.Generator, units: NDArray[np.int64], cell: NDArray[np.int64], resamples: int
) -> tuple[FloatArray, NDArray[np.int64]]:
    """How often each prompt is drawn (B, U) in the resamples of :func:`_run_weights`, and
    each run's prompt (T,): a statistic linear in the runs' weights can sum its runs per
    prompt first (exactly, when they are counts) instead of weighting a (B, T) matrix."""
    ids, unit_index = np.unique(units, return_inverse=True)
    counts = np.zeros((resamples, ids.size))
    rows = np.arange(resamples)[:, None]
    for c in np.unique(cell):
        members = np.unique(unit_index[cell == c])
        picks = rng.integers(0, members.size, size=(resamples, members.size))
        drawn = np.bincount(
            (rows * members.size + picks).ravel(), minlength=resamples * members.size
        )
        counts[:, members] += drawn.reshape(resamples, members.size)
    return counts, np.asarray(unit_index, np.int64).ravel()


def choice_shares(
    hits: Any,
    intent: Any,
    eligible: Any,
    *,
    prompt: Any = None,
    weights: Any = None,
    resamples: int = SHARE_RESAMPLES,
    seed: int | None = 0,
    levels: Sequence[float] = LEVELS,
) -> ShareResult:
    """Invoke (or Selection) Share per contested intent and its roll-up (comment above).

    ``hits[t, j]`` is 1 when run ``t`` reached the scored level through integration
    ``j``; ``intent[t]`` its intent cell; ``eligible[c, j]`` the eligible set of each
    intent; ``prompt[t]`` the bootstrap unit; ``weights`` the intents' roll-up weights.
    """
    h = np.asarray(hits, dtype=np.float64)
    cell = np.asarray(intent, dtype=np.int64).ravel()
    el = np.asarray(eligible, dtype=bool)
    if h.ndim != 2 or h.shape[0] != cell.size or el.ndim != 2 or el.shape[1] != h.shape[1]:
        raise ValueError("hits is runs x integrations, eligible intents x integrations")
    if np.any((h != 0) & (h != 1)) or np.any(cell < 0) or np.any(cell >= el.shape[0]):
        raise ValueError("hits must be 0/1 and intents index the rows of eligible")
    if np.any(h.sum(axis=1) > 1):
        raise ValueError("a run reaches the scored level through at most one integration")
    units = np.arange(cell.size) if prompt is None else np.asarray(prompt, np.int64).ravel()
    w = _weights(weights, el.shape[0])
    design = ((cell[:, None] == np.arange(el.shape[0]))[:, :, None] * h[:, None, :]).reshape(
        cell.size, -1
    )
    share = np.asarray(_share_table(np.ones(cell.size), design, el))
    rollup = np.asarray(_share_rollup(share, w))
    rng = np.random.default_rng(seed)
    drawn, unit_index = _unit_counts(rng, units, cell, int(resamples))
    per_unit = np.zeros((drawn.shape[1], design.shape[1]))
    np.add.at(per_unit, unit_index, design)  # 0/1 hits summed per prompt: exact
    bs = np.asarray(_share_table(drawn, per_unit, el))
    br = np.asarray(_share_rollup(bs, w))

    def bound(draws: FloatArray, q: float, point: FloatArray) -> FloatArray:
        if not draws.size:
            return np.full(point.shape, np.nan)
        with warnings.catch_warnings():  # an intent with no eligible hit in any resample
            warnings.simplefilter("ignore", RuntimeWarning)
            out = np.nanquantile(draws, q, axis=0) if np.any(np.isfinite(draws)) else point
        return np.asarray(np.where(np.isfinite(point), out, np.nan))

    counts = np.stack(
        [np.bincount(cell, weights=h[:, j], minlength=el.shape[0]) for j in range(h.shape[1])],
        axis=1,
    )
    return ShareResult(
        share=share,
        low={lv: bound(bs, (1 - lv) / 2, share) for lv in levels},
        high={lv: bound(bs, (1 + lv) / 2, share) for lv in levels},
        hits=counts.astype(np.int64),
        contested=np.asarray(el.sum(axis=1) >= 2),
        rollup=rollup,
        rollup_low={lv: bound(br, (1 - lv) / 2, rollup) for lv in levels},
        rollup_high={lv: bound(br, (1 + lv) / 2, rollup) for lv in levels},
        weights=w,
        resamples=int(resamples),
    )


def competitor_lever(focal: Any, competitors: Any) -> tuple[FloatArray, NDArray[np.int64]]:
    """Lever per cell and stage against the best competitor (4.2, Lever).

    ``focal`` is cells x stages (the focal integration's posterior means),
    ``competitors`` competitors x cells x stages (their rates on the same stages; nan
    where not measured). The best competitor of a cell is the one with the highest
    product of its stage rates (its Q); its rates are the reference of
    :func:`funnel_lever`. Returns (lever, best index per cell; -1 when no competitor of
    the cell has a finite Q, where the lever is nan).
    """
    f = np.asarray(focal, dtype=np.float64)
    comp = np.asarray(competitors, dtype=np.float64)
    if f.ndim != 2 or comp.ndim != 3 or comp.shape[1:] != f.shape:
        raise ValueError("focal is cells x stages, competitors competitors x cells x stages")
    lever = np.full(f.shape, np.nan)
    best = np.full(f.shape[0], -1, dtype=np.int64)
    if comp.shape[0] == 0:
        return lever, best
    q = np.prod(comp, axis=2)
    for c in range(f.shape[0]):
        if not np.any(np.isfinite(q[:, c])):
            continue
        best[c] = int(np.nanargmax(q[:, c]))
        lever[c] = funnel_lever(f[c : c + 1], comp[best[c], c])[0]
    return lever, best


# --- Terminal classes and the Agent Resolution Split (3.3, 6.3) -------------------------
#
# Recorded terminal classes (search behaviour, no judge): where the first external call
# went (focal, competitor, other_external), or, with none, whether the host answered
# without searching, searched then declined, or gave no answer (unresolved).
# The published split's classes need the native judge for runs with no external call.
# Reading (the seed's Table 1 is not in the text): a no-tool run whose answer the judge
# found to meet the need is native self-service; one judged not to meet it is
# "searched then declined" when the host searched and "unresolved" otherwise; a run with
# no final answer is unresolved without a judge. A no-tool run with an answer and no
# verdict is "unjudged": it stays in the denominator as its own class (never silently
# dropped), and the Host Self-Serve Rate and No-tool Decline Rate are unknown (None)
# while any run is unjudged; the published split that drops them ("degenerate split",
# 6.3) is not shown.

TERMINAL_CLASSES: tuple[str, ...] = (
    "focal",
    "competitor",
    "other_external",
    "answered_without_search",
    "searched_then_declined",
    "unresolved",
)
SPLIT_CLASSES: tuple[str, ...] = (
    "focal",
    "competitor",
    "other_external",
    "native_self_service",
    "searched_then_declined",
    "unresolved",
    "unjudged",
)
_EXTERNAL = frozenset({"focal", "competitor", "other_external"})


def terminal_counts(classes: Sequence[str], intent: Any, cells: int) -> NDArray[np.int64]:
    """Counts per intent cell (rows) and recorded terminal class (:data:`TERMINAL_CLASSES`)."""
    cell = np.asarray(intent, dtype=np.int64).ravel()
    if cell.size != len(classes) or np.any(cell < 0) or np.any(cell >= cells):
        raise ValueError("one intent cell in 0 .. cells-1 per run")
    unknown = sorted(set(classes) - set(TERMINAL_CLASSES))
    if unknown:
        raise ValueError(f"unknown terminal class(es): {', '.join(unknown)}")
    out = np.zeros((cells, len(TERMINAL_CLASSES)), dtype=np.int64)
    for c, name in zip(cell, classes, strict=True):
        out[c, TERMINAL_CLASSES.index(name)] += 1
    return out


def split_class(terminal: str, native_met: bool | None) -> str:
    """The Agent Resolution Split class of one positive run (reading above)."""
    if terminal in _EXTERNAL or terminal == "unresolved":
        return terminal
    if terminal not in TERMINAL_CLASSES:
        raise ValueError(f"unknown terminal class: {terminal}")
    if native_met is None:
        return "unjudged"
    if native_met:
        return "native_self_service"
    return "searched_then_declined" if terminal == "searched_then_declined" else "unresolved"


@dataclass(frozen=True)
class ResolutionSplit:
    """The Agent Resolution Split over eligible positive runs (3.3)."""

    counts: NDArray[np.int64]  # (C, len(SPLIT_CLASSES))
    shares: FloatArray  # (len(SPLIT_CLASSES),) pooled over runs, unjudged kept
    weighted_shares: FloatArray  # intent-weighted mean of the per-intent shares
    unjudged: int
    degenerate: bool  # some no-tool run is unjudged: the published split would drop it
    host_self_serve: ProportionInterval | None  # None while any run is unjudged
    no_tool_decline: ProportionInterval | None


def resolution_split(
    terminal: Sequence[str],
    native_met: Sequence[bool | None],
    intent: Any,
    prompt: Any,
    cells: int,
    *,
    weights: Any = None,
    level: float = 0.90,
) -> ResolutionSplit:
    """Classes, shares and the two rates of the split (reading above).

    The rates carry Jeffreys intervals on counts deflated at the indicator's own
    one-way ANOVA rho over prompts (4.1, step 8; the stage default 0.6 when it cannot be
    estimated), like every single rate the published path displays.
    """
    if len(native_met) != len(terminal):
        raise ValueError("one native verdict (or None) per run")
    split = [split_class(t, v) for t, v in zip(terminal, native_met, strict=True)]
    cell = np.asarray(intent, dtype=np.int64).ravel()
    units = np.asarray(prompt, dtype=np.int64).ravel()
    if cell.size != len(split) or units.size != len(split) or not split:
        raise ValueError("one intent cell and prompt per run, and at least one run")
    counts = np.zeros((cells, len(SPLIT_CLASSES)), dtype=np.int64)
    for c, name in zip(cell, split, strict=True):
        counts[c, SPLIT_CLASSES.index(name)] += 1
    total = counts.sum(axis=1)
    w = _weights(weights, cells)
    used = total > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        per_intent = counts / total[:, None]
    weighted = (w[used, None] * per_intent[used]).sum(axis=0) / w[used].sum()
    unjudged = int(counts[:, SPLIT_CLASSES.index("unjudged")].sum())
    rates: list[ProportionInterval | None] = [None, None]
    if unjudged == 0:
        for i, name in enumerate(("native_self_service", "searched_then_declined")):
            hit = np.array([s == name for s in split], dtype=np.float64)
            rates[i] = _prompt_rate(hit, units, level)
    return ResolutionSplit(
        counts=counts,
        shares=counts.sum(axis=0) / counts.sum(),
        weighted_shares=np.asarray(weighted),
        unjudged=unjudged,
        degenerate=unjudged > 0,
        host_self_serve=rates[0],
        no_tool_decline=rates[1],
    )


def prompt_rate(hit: Any, prompt: Any, level: float = 0.90) -> ProportionInterval:
    """The share of runs with ``hit`` (0/1 per run), with a Jeffreys interval on counts
    deflated at the indicator's own one-way ANOVA rho over ``prompt`` (the stage default
    0.6 when it cannot be estimated): how the published path displays a single rate
    (4.1, step 8), for rates outside the funnel (the split's, a server's stages)."""
    h = np.asarray(hit, dtype=np.float64).ravel()
    p = np.asarray(prompt, dtype=np.int64).ravel()
    if h.size != p.size or h.size == 0 or not np.all((h == 0) | (h == 1)):
        raise ValueError("one 0/1 hit and one prompt per run, and at least one run")
    return _prompt_rate(h, p, level)


def _prompt_rate(hit: FloatArray, prompt: NDArray[np.int64], level: float) -> ProportionInterval:
    ids, index = np.unique(prompt, return_inverse=True)
    y = np.bincount(index, weights=hit, minlength=ids.size)
    n = np.bincount(index, minlength=ids.size)
    rho = grouped_icc(y.astype(np.int64), n)
    if math.isnan(rho):
        rho = RHO_DEFAULTS["surfaced"]
    deff = float(design_effect(n, rho))
    return jeffreys_interval(float(y.sum()), float(n.sum()), level=level, deff=deff)


# --- A calibrated interval: the prompt-and-run bootstrap of the plug-in score (7.5) -----
#
# The seed's 7.5 finds the published intervals under-cover (most of all when intents
# look alike, where capPrior makes every intent's posterior nearly the pooled one and the
# roll-up still treats them as independent, and with a between-run component), while a
# bootstrap over prompts (and runs) restores nominal roll-up coverage. This is that
# bootstrap over the whole plug-in scoring path: Q_c = (runs of intent c reaching the last
# scored stage) / (its positive runs), the product of its pooled sequential stage rates by
# the chain rule, and the weighted roll-up; each resample draws sessions (runs of the
# arm; only when there are two or more) with replacement, then prompts with replacement
# within each intent, and recomputes every Q_c from the weighted counts. Percentile
# intervals, expanded for the small number of prompts per intent (Hesterberg 2015: the
# tail is Phi(sqrt(n / (n - 1)) t_{n-1}(tail)) with n the intent's prompts, all prompts
# for the roll-up). bench/invokerank_coverage.py measures its coverage against the
# published path's on designs like 7.5's.

BOOTSTRAP_RESAMPLES = 2000


@dataclass(frozen=True)
class BootstrapScore:
    """The plug-in score per intent and rolled up, with the calibrated intervals: per
    intent Jeffreys on the bootstrap's effective counts, the roll-up expanded percentile."""

    q: FloatArray  # (C,)
    q_low: dict[float, FloatArray]
    q_high: dict[float, FloatArray]
    rollup: float
    rollup_low: dict[float, float]
    rollup_high: dict[float, float]
    sessions: int
    resamples: int
    method: str  # the roll-up's interval
    effective_runs: FloatArray  # (C,) n_eff per intent (runs / the bootstrap design effect)
    intent_method: str = ""  # the per-intent interval


def bootstrap_score(
    runs: Any,
    reached: Any,
    cell: Any,
    *,
    prompt: Any = None,
    session: Any = None,
    weights: Any = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int | None = 0,
    levels: Sequence[float] = LEVELS,
) -> BootstrapScore:
    """The calibrated alternative interval of the score (comment above).

    One row per prompt and session: ``runs`` its positive runs, ``reached`` how many
    reached the last scored stage, ``cell`` its intent, ``prompt`` the prompt (default:
    each row its own), ``session`` the run/session it belongs to (default: one).
    """
    n = np.asarray(runs, dtype=np.float64).ravel()
    y = np.asarray(reached, dtype=np.float64).ravel()
    c = np.asarray(cell, dtype=np.int64).ravel()
    if not (n.size == y.size == c.size) or n.size == 0:
        raise ValueError("runs, reached and cell need one entry per row")
    if np.any(y < 0) or np.any(y > n) or np.any(c < 0):
        raise ValueError("need 0 <= reached <= runs and non-negative cells")
    p = np.arange(n.size) if prompt is None else np.asarray(prompt, np.int64).ravel()
    s = np.zeros(n.size, np.int64) if session is None else np.asarray(session, np.int64).ravel()
    cells = int(c.max()) + 1
    w = _weights(weights, cells)
    _, p_index = np.unique(p, return_inverse=True)
    s_ids, s_index = np.unique(s, return_inverse=True)
    prompt_cell = np.zeros(int(p_index.max()) + 1, np.int64)
    prompt_cell[p_index] = c
    rng = np.random.default_rng(seed)
    b = int(resamples)
    # prompt multiplicities, drawn within intents: (B, prompts)
    prompt_w = np.zeros((b, prompt_cell.size))
    for k in range(cells):
        members = np.flatnonzero(prompt_cell == k)
        if members.size:
            picks = rng.integers(0, members.size, size=(b, members.size))
            prompt_w[:, members] = _row_counts(picks, members.size)
    session_w = np.ones((b, s_ids.size))
    if s_ids.size > 1:
        session_w = _row_counts(rng.integers(0, s_ids.size, size=(b, s_ids.size)), s_ids.size)
    row_w = prompt_w[:, p_index] * session_w[:, s_index]  # (B, rows)

    def per_cell(weight: FloatArray) -> FloatArray:
        num = np.stack([weight[..., c == k] @ y[c == k] for k in range(cells)], axis=-1)
        den = np.stack([weight[..., c == k] @ n[c == k] for k in range(cells)], axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.asarray(num / den)

    q = per_cell(np.ones(n.size))
    boot = per_cell(row_w)  # (B, C); nan where a resample drew no run of the intent
    roll = np.nansum(boot * w, axis=1) / np.sum(np.where(np.isfinite(boot), w, 0.0), axis=1)
    if s_ids.size > 1:
        boot, roll = _uncross(boot, roll, q, w, _interaction(n, y, c, p_index, s_index, q))
    sizes = np.bincount(prompt_cell, minlength=cells)
    trials = np.bincount(c, weights=n, minlength=cells).astype(np.float64)
    effective = _effective_runs(q, boot, trials, sizes.astype(np.float64))
    scored = (trials > 0) & (effective > 0)  # a cell index with no runs gets no interval
    deff = np.where(scored, trials / np.where(scored, effective, 1.0), 1.0)
    jeffreys = {
        lv: jeffreys_interval(np.where(scored, q * trials, 0.0), trials, level=lv, deff=deff)
        for lv in levels
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        r_bounds = {
            lv: tuple(
                float(np.nanquantile(roll, _expanded(lv, int(sizes.sum()), hi)))
                for hi in (False, True)
            )
            for lv in levels
        }
    return BootstrapScore(
        q=q,
        q_low={lv: np.where(scored, v.low, np.nan) for lv, v in jeffreys.items()},
        q_high={lv: np.where(scored, v.high, np.nan) for lv, v in jeffreys.items()},
        rollup=float(np.sum(w * q)),
        rollup_low={lv: v[0] for lv, v in r_bounds.items()},
        rollup_high={lv: v[1] for lv, v in r_bounds.items()},
        sessions=int(s_ids.size),
        resamples=b,
        method=(
            f"expanded percentile bootstrap of the plug-in score, {b} resamples of "
            + ("sessions, then " if s_ids.size > 1 else "")
            + "prompts within intents"
        ),
        effective_runs=effective,
        intent_method=(
            "Jeffreys on effective counts of the plug-in score (design effect by a "
            f"bootstrap of {b} resamples of "
            + ("sessions, then " if s_ids.size > 1 else "")
            + "prompts within intents)"
        ),
    )


def _interaction(
    n: FloatArray,
    y: FloatArray,
    c: NDArray[np.int64],
    prompt: NDArray[np.int64],
    session: NDArray[np.int64],
    q: FloatArray,
) -> FloatArray:
    """Per intent, the prompt x session interaction term of the two-way bootstrap's
    variance of the plug-in score: sum of the squared double-centred residuals of
    z = y - q n over the intent's prompts x sessions, over (its runs)^2 (linearised)."""
    out = np.zeros(q.size)
    sessions = int(session.max()) + 1
    for k in range(q.size):
        mine = c == k
        if not mine.any() or not np.isfinite(q[k]):
            continue
        _, rows = np.unique(prompt[mine], return_inverse=True)
        z = np.zeros((int(rows.max()) + 1, sessions))
        np.add.at(z, (rows, session[mine]), y[mine] - q[k] * n[mine])
        e = z - z.mean(axis=1, keepdims=True) - z.mean(axis=0, keepdims=True) + z.mean()
        out[k] = float(np.sum(e**2)) / float(np.sum(n[mine])) ** 2
    return out


def _uncross(
    boot: FloatArray, roll: FloatArray, q: FloatArray, w: FloatArray, interaction: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Shrink the two-way bootstrap's draws about the estimate so that their variance is
    the bootstrap's minus twice the prompt x session interaction term. With prompts and
    sessions crossed (the same prompts in every session), resampling both (the pigeonhole
    bootstrap, Owen 2007) counts the run-level noise of a prompt in a session about
    1 + 2 (S - 1) / S times instead of once, and the interaction term's expectation is
    (S - 1) / S of it (a linear statistic's exact bootstrap variance is the prompt, the
    session and this interaction term)."""

    def shrink(draws: FloatArray, centre: Any, extra: Any) -> FloatArray:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            var = np.nanvar(draws, axis=0, ddof=1)
            factor = np.sqrt(np.clip(1.0 - 2.0 * extra / np.where(var > 0, var, 1.0), 0.0, 1.0))
        return np.asarray(centre + (draws - centre) * np.where(var > 0, factor, 1.0))

    roll_centre = float(np.sum(w * q))
    return shrink(boot, q, interaction), shrink(roll, roll_centre, np.sum(w**2 * interaction))


def _effective_runs(
    q: FloatArray, boot: FloatArray, trials: FloatArray, prompts: FloatArray
) -> FloatArray:
    """n_eff = q (1 - q) / Var*(q) per intent (Korn and Graubard 1998), at most the runs
    (a design effect below 1 is not credited); each prompt counted once (rho = 1) where
    the bootstrap variance says nothing (q at 0 or 1, or no variation)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        variance = np.nanvar(boot, axis=0, ddof=1)
        n_eff = q * (1.0 - q) / variance
    usable = (q > 0) & (q < 1) & (variance > 0) & np.isfinite(n_eff)
    return np.asarray(np.where(usable, np.minimum(n_eff, trials), prompts), dtype=np.float64)


def _row_counts(picks: NDArray[np.int64], size: int) -> FloatArray:
    """How often each of 0 .. size-1 occurs in each row of ``picks`` (one bincount)."""
    rows = picks.shape[0]
    flat = (np.arange(rows)[:, None] * size + picks).ravel()
    return np.bincount(flat, minlength=rows * size).reshape(rows, size).astype(np.float64)


def _expanded(level: float, units: int, upper: bool) -> float:
    """The expanded percentile's tail (Hesterberg 2015): the percentile bootstrap is too
    narrow by about sqrt((n - 1) / n) and a normal instead of a t quantile at n
    resampled units; the tail is Phi(sqrt(n / (n - 1)) t_{n-1}(tail))."""
    tail = (1.0 - level) / 2.0
    if units < 2:
        return 1.0 - tail if upper else tail
    z = math.sqrt(units / (units - 1.0)) * float(t_ppf(tail, units - 1))
    low = float(norm_cdf(z))
    return 1.0 - low if upper else low


# --- Between-run variance from replicate runs (7.3) -------------------------------------
#
# Each replicate run (a registration of the same design) has N prompts x K repeats. With
# the prompts fixed, run r's rate is pbar_r = mean over its N K trials. If every prompt's
# trials are exchangeable across runs, Var(pbar_r) = W = sum_i p_i (1 - p_i) / (N^2 K);
# W_hat uses v_i, the sample variance (ddof 1) of prompt i's R K trials. Method of moments
# as in reports.pilot (to which it reduces at K = 1): s^2 = sample variance (ddof 1) of the
# run rates, sigma_run^2 = max(0, (s^2 - W_hat) / (1 - 1/N)). The test permutes each
# prompt's R K trials across the runs' slots (exact under exchangeability; Monte Carlo
# p = (1 + #{s^2* >= s^2}) / (1 + B)).

REPLICATE_PERMUTATIONS = 4999


@dataclass(frozen=True)
class ReplicateVariance:
    """Between-run SD of replicate runs and the within-prompt permutation test."""

    runs: int
    prompts: int
    repeats: int
    run_rates: FloatArray
    observed_sd: float
    within_sd: float
    variance_ratio: float
    sigma_run: float
    pvalue: float
    permutations: int


def replicate_variance(
    outcomes: Any, permutations: int = REPLICATE_PERMUTATIONS, seed: int | None = 0
) -> ReplicateVariance:
    """``outcomes[i, r, k]``: 0/1 outcome of prompt i in run r, repeat k (comment above)."""
    y = np.asarray(outcomes, dtype=np.float64)
    if y.ndim != 3 or y.shape[0] < 2 or y.shape[1] < 2 or y.shape[2] < 1:
        raise ValueError("outcomes must be prompts x runs x repeats, two prompts and runs at least")
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("outcomes must be 0 or 1 (complete: every prompt in every run)")
    if int(permutations) < 1:
        raise ValueError("permutations must be >= 1")
    n, r, k = y.shape
    rates = y.mean(axis=(0, 2))
    s2 = float(np.var(rates, ddof=1))
    flat = y.reshape(n, r * k)
    w = float(np.sum(np.var(flat, axis=1, ddof=1)) / (n * n * k))
    excess = (s2 - w) / (1.0 - 1.0 / n)
    rng = np.random.default_rng(seed)
    stats_b = np.empty(int(permutations))
    chunk = max(1, 2_000_000 // (n * r * k))
    for start in range(0, int(permutations), chunk):
        stop = min(int(permutations), start + chunk)
        order = np.argsort(rng.random((stop - start, n, r * k)), axis=-1)
        perm = np.take_along_axis(np.broadcast_to(flat, order.shape), order, axis=-1)
        perm_rates = perm.reshape(stop - start, n, r, k).mean(axis=(1, 3))
        stats_b[start:stop] = np.var(perm_rates, axis=1, ddof=1)
    p = float((1 + np.sum(stats_b >= s2 - 1e-12)) / (1 + int(permutations)))
    return ReplicateVariance(
        runs=r,
        prompts=n,
        repeats=k,
        run_rates=rates,
        observed_sd=math.sqrt(s2),
        within_sd=math.sqrt(w),
        variance_ratio=s2 / w if w > 0 else math.nan,
        sigma_run=math.sqrt(max(0.0, excess)),
        pvalue=p,
        permutations=int(permutations),
    )
