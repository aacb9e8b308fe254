"""One funnel stage's posteriors per intent cell, and draws from them (4.1, steps 2-7).

A stage's fit: rho per cell, Kish's design effect and the deflated counts, the shared
prior (capped or not) and the conjugate Beta posterior; then seeded Beta draws, a zero
shape parameter being the limiting point mass (no epsilon floor).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from prereg.stats.clustering import design_effect
from prereg.stats.invokerank.model import FloatArray
from prereg.stats.invokerank.prior import cap_prior, fit_beta_prior
from prereg.stats.invokerank.rho import RHO_DEFAULTS, _rho, grouped_icc
from prereg.stats.results import BetaPrior, FunnelStage


def _beta_draws(
    rng: np.random.Generator, alpha: FloatArray, beta: FloatArray, size: int
) -> FloatArray:
    """Beta draws per cell (rows); a zero shape parameter is the limiting point mass."""
    a = np.where(alpha > 0, alpha, 1.0)[:, None]
    b = np.where(beta > 0, beta, 1.0)[:, None]
    out: FloatArray = rng.beta(a, b, size=(alpha.size, size))
    out = np.where((alpha <= 0)[:, None], 0.0, out)
    return np.where(((beta <= 0) & (alpha > 0))[:, None], 1.0, out)


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
