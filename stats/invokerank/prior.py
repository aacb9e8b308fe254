"""The shared Beta prior of one funnel stage (4.1, steps 4 and 5).

The beta-binomial marginal likelihood, the method of moments, the marginal maximum
likelihood fit with its fallbacks, and capPrior. The readings where the seed is silent
(the method of moments, a boundary stage) are stated in the package docstring.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from prereg.stats._scipy import optimize
from prereg.stats._scipy import special as spsp
from prereg.stats._validate import array, positive, probability, same_length
from prereg.stats.invokerank.model import FloatArray
from prereg.stats.results import BetaPrior

KAPPA_BOUNDS: tuple[float, float] = (1.0, 10_000.0)


def _pair(y: Any, n: Any) -> tuple[FloatArray, FloatArray]:
    """Per-cell (possibly deflated, so real-valued) successes and trials, or ValueError
    naming the argument: NaN, infinite or negative counts, no cells, lengths that
    differ, successes above their trials."""
    ya = array(y, "successes", low=0.0).ravel()
    na = array(n, "trials", low=0.0).ravel()
    same_length(ya, "successes", na, "trials")
    if np.any(ya > na + 1e-12):
        i = int(np.argmax(ya > na + 1e-12))
        raise ValueError(f"successes: {ya[i]:g} exceeds its trials ({na[i]:g}) in cell {i}")
    return ya, na


def betabinom_loglik(mu: float, kappa: float, successes: Any, trials: Any) -> float:
    """Beta-binomial marginal log-likelihood summed over cells (real-valued counts allowed).

        sum_c [ln C(n_c, y_c) + ln B(y_c + mu kappa, n_c - y_c + (1 - mu) kappa)
               - ln B(mu kappa, (1 - mu) kappa)]

    with the binomial coefficient through the gamma function, so that deflated
    (non-integer) counts are accepted; on integers it is the sum of
    ``scipy.stats.betabinom.logpmf``. ValueError naming the argument for ``mu`` outside
    (0, 1), ``kappa`` not finite and positive, and bad counts (see :func:`_pair`).
    """
    mu = probability(mu, "mu")
    kappa = positive(kappa, "kappa")
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
    """(mu, kappa) by the method of moments over the cells with trials (package docstring).

    ValueError naming the argument for bad counts (as :func:`fit_beta_prior`) and when no
    cell has trials."""
    y, n = _pair(successes, trials)
    keep = n > 0
    y, n = y[keep], n[keep]
    if y.size == 0:
        raise ValueError("trials: no cell has trials")
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
    see the package docstring). ValueError naming the argument for NaN, infinite or
    negative counts, no cells, lengths that differ and successes above their trials.
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
    prior is not capped. ValueError naming the argument for a prior whose mu is outside
    [0, 1] (a boundary stage's is 0 or 1) or whose kappa is not finite and positive, and
    bad counts (see :func:`_pair`).
    """
    if not isinstance(prior, BetaPrior):
        raise ValueError(f"prior must be a BetaPrior, got {type(prior).__name__}")
    probability(prior.mu, "prior.mu", low_open=False, high_open=False)
    positive(prior.kappa, "prior.kappa")
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
