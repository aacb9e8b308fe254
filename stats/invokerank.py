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
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prereg.stats._scipy import optimize
from prereg.stats._scipy import special as spsp
from prereg.stats._scipy import stats as sps
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

FloatArray = NDArray[np.float64]


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
    a, b = mu * kappa, (1.0 - mu) * kappa
    coef = spsp.gammaln(n + 1.0) - spsp.gammaln(y + 1.0) - spsp.gammaln(n - y + 1.0)
    return float(np.sum(coef + spsp.betaln(y + a, n - y + b) - spsp.betaln(a, b)))


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

    def objective(theta: FloatArray) -> float:
        mu = float(spsp.expit(theta[0]))
        if not 0.0 < mu < 1.0:
            return math.inf
        value = -betabinom_loglik(mu, float(np.exp(theta[1])), y, n)
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
        v = np.where(a <= 0, 0.0, np.where(b <= 0, 1.0, sps.beta.ppf(q, safe_a, safe_b)))
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
